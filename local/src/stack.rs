//! The local stack from the runner's side: is it up, and if not, start it with `scripts/stack`
//! (which installs what is missing) and remember to stop it on exit.

use std::{path::PathBuf, process::Command, time::Duration};

use crate::settings::LocalSettings;

pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/stack")
}

/// Both servers answer: Redis to `PING`, MiniStack on its health route.
pub async fn is_up(settings: &LocalSettings) -> bool {
    let redis_ok = async {
        let info = shared::gate::with_token(&settings.gate.redis_url, settings.gate.auth_token.as_deref()).ok()?;
        let client = redis::Client::open(info).ok()?;
        let mut conn =
            tokio::time::timeout(Duration::from_secs(1), client.get_multiplexed_async_connection()).await.ok()?.ok()?;
        redis::cmd("PING").query_async::<String>(&mut conn).await.ok()
    };
    let aws_ok = async {
        let addr = settings.aws_endpoint.trim_start_matches("http://").trim_end_matches('/').to_owned();
        tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr)).await.ok()?.ok()
    };
    let (r, a) = tokio::join!(redis_ok, aws_ok);
    r.is_some() && a.is_some()
}

pub fn run(command: &str) -> std::io::Result<()> {
    let status = Command::new("bash").arg(script()).arg(command).status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("scripts/stack {command} failed: {status}")))
    }
}
