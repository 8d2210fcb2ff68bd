//! SES behind a slow network, for the mail faults: every request is forwarded to the emulator at
//! once, so the mail is accepted and recorded there, and the answer is held back before it reaches
//! the caller: late (after the consumer's patience, within its send timeout), or never.

use std::time::Duration;

use axum::{
    Router,
    body::{Body, to_bytes},
    extract::{Request, State},
    response::Response,
};

/// The proxy, listening on loopback until dropped.
pub struct LateSes {
    pub url: String,
    server: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Upstream {
    url: String,
    client: reqwest::Client,
    /// How long a send's answer is held back; `None`: it never comes.
    late: Option<Duration>,
}

impl LateSes {
    /// Sends reach `upstream` at once; their answers come `late` after it answered.
    pub async fn start(upstream: &str, late: Duration) -> Self {
        Self::serve(upstream, Some(late)).await
    }

    /// Sends reach `upstream` (which accepts them) and no answer ever comes back.
    pub async fn silent(upstream: &str) -> Self {
        Self::serve(upstream, None).await
    }

    async fn serve(upstream: &str, late: Option<Duration>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state =
            Upstream { url: upstream.trim_end_matches('/').to_owned(), client: local_runner::client::new(), late };
        let app = Router::new().fallback(forward).with_state(state);
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the proxy serves");
        });
        Self { url, server }
    }
}

impl Drop for LateSes {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn forward(State(up): State<Upstream>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = to_bytes(body, 16 * 1024 * 1024).await.expect("a request body");
    let path = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let sends_mail = path.starts_with("/v2/email/outbound-emails");
    let mut out = up.client.request(parts.method.clone(), format!("{}{path}", up.url)).body(body.to_vec());
    for (name, value) in &parts.headers {
        if name != http::header::HOST && name != http::header::CONTENT_LENGTH {
            out = out.header(name, value);
        }
    }
    let answer = out.send().await.expect("the emulator answers");
    let status = answer.status();
    let headers = answer.headers().clone();
    let bytes = answer.bytes().await.expect("the emulator's answer");
    if sends_mail {
        match up.late {
            Some(late) => tokio::time::sleep(late).await,
            None => std::future::pending::<()>().await,
        }
    }
    let mut reply = Response::builder().status(status);
    for (name, value) in &headers {
        if name != http::header::CONTENT_LENGTH && name != http::header::TRANSFER_ENCODING {
            reply = reply.header(name, value);
        }
    }
    reply.body(Body::from(bytes)).expect("a reply")
}
