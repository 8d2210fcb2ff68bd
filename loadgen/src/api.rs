//! The product's HTTP API as a client sees it: one method per route the load generator uses, each
//! answer with its status, body, `Retry-After` and latency.

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

/// One answer, or a transport failure (status 0) such as a refused connection.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub retry_after: Option<Duration>,
    pub latency: Duration,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    /// `202`, `409 SOLD_OUT`, `0 TRANSPORT`: how outcomes are counted in the report.
    pub fn outcome(&self) -> String {
        match (self.status, self.code()) {
            (0, _) => "0 TRANSPORT".into(),
            (s, "") => s.to_string(),
            (s, code) => format!("{s} {code}"),
        }
    }

    /// Worth asking again: the service said so (503, 429), or the sale opens in a moment.
    pub fn retryable(&self) -> bool {
        matches!(self.status, 0 | 429 | 503) || self.code() == "SALE_NOT_STARTED"
    }
}

/// A line of the attendee list (`GET /admin/events/{id}/orders`).
#[derive(Debug, Clone, Deserialize)]
pub struct Attendee {
    pub ticket_no: u32,
    pub order_id: String,
    pub user_id: String,
    pub status: String,
    #[serde(default)]
    pub confirmed_at: Option<String>,
    #[serde(default)]
    pub mail_status: Option<String>,
    #[serde(default)]
    pub mailed_at: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("{what} answered {status}: {body}")]
pub struct Unexpected {
    pub what: &'static str,
    pub status: u16,
    pub body: String,
}

/// An entry's body: the proof of work's nonce, when the event asks for one.
fn with_work(req: reqwest::RequestBuilder, work: Option<&str>) -> reqwest::RequestBuilder {
    match work {
        Some(nonce) => req.json(&serde_json::json!({ "proof_of_work": nonce })),
        None => req,
    }
}

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    /// A client keeping up to `connections` connections open, as that many browsers would.
    pub fn new(base: &str, connections: usize) -> Result<Self, reqwest::Error> {
        let http = local_runner::client::builder()
            .pool_max_idle_per_host(connections)
            .tcp_nodelay(true)
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Self { http, base: base.trim_end_matches('/').to_owned() })
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Answer {
        let started = Instant::now();
        let Ok(res) = req.send().await else {
            return Answer { status: 0, body: Value::Null, retry_after: None, latency: started.elapsed() };
        };
        let status = res.status().as_u16();
        let retry_after = res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = res.json::<Value>().await.unwrap_or(Value::Null);
        Answer { status, body, retry_after, latency: started.elapsed() }
    }

    pub async fn release(&self, admin: &str, body: &Value) -> Answer {
        self.send(self.http.post(format!("{}/admin/events", self.base)).bearer_auth(admin).json(body)).await
    }

    pub async fn event(&self, token: &str, event: &str) -> Answer {
        self.send(self.http.get(format!("{}/events/{event}", self.base)).bearer_auth(token)).await
    }

    pub async fn verify_hash(&self, token: &str, event: &str) -> Answer {
        self.send(self.http.get(format!("{}/events/{event}/verify-hash", self.base)).bearer_auth(token)).await
    }

    pub async fn grab(&self, token: &str, event: &str, hash: &str) -> Answer {
        let body = serde_json::json!({ "hash": hash });
        self.send(self.http.post(format!("{}/events/{event}/grab", self.base)).bearer_auth(token).json(&body)).await
    }

    pub async fn order(&self, token: &str, event: &str) -> Answer {
        self.send(self.http.get(format!("{}/events/{event}/order", self.base)).bearer_auth(token)).await
    }

    /// A fair open's verify hash, with the caller's admission token.
    pub async fn verify_hash_admitted(&self, token: &str, event: &str, admission: &str) -> Answer {
        let url = format!("{}/events/{event}/verify-hash", self.base);
        self.send(self.http.get(url).query(&[("admission", admission)]).bearer_auth(token)).await
    }

    /// `POST /events/{id}/queue`: join a fair open's queue, with the work it asks for if any.
    pub async fn join_queue(&self, token: &str, event: &str, work: Option<&str>) -> Answer {
        let req = self.http.post(format!("{}/events/{event}/queue", self.base)).bearer_auth(token);
        self.send(with_work(req, work)).await
    }

    /// `GET /events/{id}/queue`: one's place, and once admitted the admission token.
    pub async fn queue_place(&self, token: &str, event: &str) -> Answer {
        self.send(self.http.get(format!("{}/events/{event}/queue", self.base)).bearer_auth(token)).await
    }

    /// `POST /events/{id}/entry`: enter a ballot, with the work it asks for if any.
    pub async fn enter(&self, token: &str, event: &str, work: Option<&str>) -> Answer {
        let req = self.http.post(format!("{}/events/{event}/entry", self.base)).bearer_auth(token);
        self.send(with_work(req, work)).await
    }

    /// `GET /events/{id}/entry`: one's entry, and after the draw its position and proof.
    pub async fn entry(&self, token: &str, event: &str) -> Answer {
        self.send(self.http.get(format!("{}/events/{event}/entry", self.base)).bearer_auth(token)).await
    }

    /// `POST /admin/events/{id}/draw`: the organiser reveals the secret and draws, asking again
    /// while the draw answers `202` (not finished by one ask).
    pub async fn draw(&self, admin: &str, event: &str, secret: &str) -> Answer {
        let body = serde_json::json!({ "secret": secret });
        loop {
            let answer = self
                .send(self.http.post(format!("{}/admin/events/{event}/draw", self.base)).bearer_auth(admin).json(&body))
                .await;
            if answer.status != 202 {
                return answer;
            }
        }
    }

    /// `GET /events/{id}/draw?from=`: the page of the published draw from place `from` (an index
    /// from 0; a `ticket-draw/v1` draw is one document whatever it is asked).
    pub async fn published_draw(&self, token: &str, event: &str, from: u64) -> Answer {
        let url = format!("{}/events/{event}/draw", self.base);
        self.send(self.http.get(url).query(&[("from", from)]).bearer_auth(token)).await
    }

    /// `GET /events/{id}/receipt-key`: the public keys that check the event's entry receipts.
    pub async fn receipt_key(&self, token: &str, event: &str) -> Answer {
        self.send(self.http.get(format!("{}/events/{event}/receipt-key", self.base)).bearer_auth(token)).await
    }

    /// `GET /events/{id}/waitlist`: one's place.
    pub async fn waitlist(&self, token: &str, event: &str) -> Answer {
        self.send(self.http.get(format!("{}/events/{event}/waitlist", self.base)).bearer_auth(token)).await
    }

    /// Holds (`false`) or resumes (`true`) the local runner's mail consumer: its own route, not
    /// the product's (`local_runner::server::MAIL_CONSUMER_PATH`).
    pub async fn switch_mail_consumer(&self, admin: &str, enabled: bool) -> Answer {
        let url = format!("{}{}", self.base, local_runner::server::MAIL_CONSUMER_PATH);
        self.send(self.http.put(url).bearer_auth(admin).json(&serde_json::json!({ "enabled": enabled }))).await
    }

    /// The whole attendee list, page by page.
    pub async fn attendees(&self, admin: &str, event: &str) -> Result<Vec<Attendee>, Unexpected> {
        let mut rows = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{}/admin/events/{event}/orders?limit=500", self.base);
            if let Some(c) = &cursor {
                url.push_str("&cursor=");
                url.push_str(c);
            }
            let mut answer = self.send(self.http.get(&url).bearer_auth(admin)).await;
            // The read routes limit each user's requests per second: a long list waits its turn.
            // A 5xx (an emulator too slow for the function's timeout, a dependency busy) is tried
            // again, as a client does.
            for _ in 0..10 {
                if !matches!(answer.status, 429 | 500 | 503) {
                    break;
                }
                tokio::time::sleep(answer.retry_after.unwrap_or(Duration::from_secs(1))).await;
                answer = self.send(self.http.get(&url).bearer_auth(admin)).await;
            }
            if answer.status != 200 {
                return Err(Unexpected {
                    what: "the attendee list",
                    status: answer.status,
                    body: answer.body.to_string(),
                });
            }
            let page: Vec<Attendee> = serde_json::from_value(answer.body["orders"].clone())
                .map_err(|e| Unexpected { what: "the attendee list", status: 200, body: e.to_string() })?;
            rows.extend(page);
            match answer.body["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return Ok(rows),
            }
        }
    }

    /// The live stock `GET /events/{id}` reports.
    pub async fn remaining(&self, token: &str, event: &str) -> Result<u64, Unexpected> {
        let answer = self.event(token, event).await;
        answer.body["remaining"].as_u64().ok_or(Unexpected {
            what: "the event",
            status: answer.status,
            body: answer.body.to_string(),
        })
    }
}
