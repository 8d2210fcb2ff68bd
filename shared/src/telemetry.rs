//! Logs are JSON lines with the Lambda request id (from the runtime's span). The level comes from
//! `AWS_LAMBDA_LOG_LEVEL` or `RUST_LOG` (default `info`). E-mail addresses and tokens are never
//! logged: no handler logs a claim, a body or a header.

use tracing_subscriber::EnvFilter;

pub fn init() {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".into())
        .to_lowercase();
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(EnvFilter::try_new(&level).unwrap_or_else(|_| EnvFilter::new("info")))
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .try_init();
}
