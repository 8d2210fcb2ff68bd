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
    /// Sends answered `429 TooManyRequestsException` (SES's rate per second) before any is
    /// forwarded: this many, counted down.
    throttles: std::sync::Arc<std::sync::atomic::AtomicU32>,
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

    /// The first `n` sends are answered as SES answers an account past its rate per second (429,
    /// nothing sent); the rest reach `upstream` and are answered at once.
    pub async fn throttling(upstream: &str, n: u32) -> Self {
        Self::serve_with(upstream, Some(Duration::ZERO), n).await
    }

    async fn serve(upstream: &str, late: Option<Duration>) -> Self {
        Self::serve_with(upstream, late, 0).await
    }

    async fn serve_with(upstream: &str, late: Option<Duration>, throttles: u32) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Upstream {
            url: upstream.trim_end_matches('/').to_owned(),
            client: local_runner::client::new(),
            late,
            throttles: std::sync::Arc::new(std::sync::atomic::AtomicU32::new(throttles)),
        };
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
    let throttled = sends_mail
        && up
            .throttles
            .fetch_update(std::sync::atomic::Ordering::SeqCst, std::sync::atomic::Ordering::SeqCst, |n| {
                n.checked_sub(1)
            })
            .is_ok();
    if throttled {
        return Response::builder()
            .status(429)
            .header("content-type", "application/json")
            .header("x-amzn-errortype", "TooManyRequestsException")
            .body(Body::from(r#"{"message":"Maximum sending rate exceeded."}"#))
            .expect("a reply");
    }
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
