//! Logs are JSON lines with the Lambda request id (from the runtime's span). The level comes from
//! `AWS_LAMBDA_LOG_LEVEL` or `RUST_LOG` (default `info`). E-mail addresses and tokens are never
//! logged: no handler logs a claim, a body or a header.

use tracing_subscriber::{EnvFilter, fmt::MakeWriter};

pub fn init() {
    let level = crate::settings::AWS_LAMBDA_LOG_LEVEL
        .optional()
        .or_else(|| crate::settings::RUST_LOG.optional())
        .unwrap_or_else(|| "info".into())
        .to_lowercase();
    let _ = tracing::subscriber::set_global_default(subscriber(&level, std::io::stdout));
}

/// The functions' log format (JSON lines, the current span, no colours) at `level`, written to
/// `writer`: stdout in a function, a buffer in the test that reads a whole sale's logs.
pub fn subscriber<W>(level: &str, writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info")))
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .with_writer(writer)
        .finish()
}
