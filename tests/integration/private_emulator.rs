//! A MiniStack of one test's own, for a test whose load would stall the stack's: the emulator is
//! one Python process, and a test that writes 200,000 items and scans them holds it for tens of
//! seconds, while the tests beside it wait past their SDK timeouts.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::faults::free_port;

pub struct PrivateEmulator {
    pub url: String,
    child: Child,
    dir: std::path::PathBuf,
}

impl PrivateEmulator {
    /// A fresh, empty MiniStack (the stack's install, `scripts/stack install`), answering once this
    /// returns.
    pub async fn start() -> Self {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("tg-ministack-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).expect("a directory for the private MiniStack");
        let program = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/ministack");
        // As scripts/stack starts the stack's own, on a port of its own.
        let child = Command::new(program)
            .current_dir(&dir)
            .env("BIND_HOST", "127.0.0.1")
            .env("GATEWAY_PORT", port.to_string())
            .env("IOT_MTLS_ENABLED", "0")
            .env("SFTP_ENABLED", "0")
            .env("STATE_DIR", dir.join("state"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("MiniStack is installed in .venv (scripts/stack install)");
        let url = format!("http://127.0.0.1:{port}");
        let health = format!("{url}/_ministack/health");
        let http = local_runner::client::new();
        let up = crate::helpers::eventually(Duration::from_secs(60), || {
            let (http, health) = (http.clone(), health.clone());
            async move { http.get(&health).send().await.is_ok_and(|r| r.status().is_success()) }
        })
        .await;
        let emulator = Self { url, child, dir };
        assert!(up, "the private MiniStack did not answer within a minute");
        emulator
    }
}

impl Drop for PrivateEmulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
