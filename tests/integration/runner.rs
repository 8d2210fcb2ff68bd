//! The local runner end to end over HTTP: its authorizer, its routes and the real handlers.

use std::sync::Arc;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use local_runner::{
    authorizer::{Authorizer, DevClaims, parse_ttl},
    server::{self, Front},
};
use serde_json::{Value, json};
use shared::domain::event::rfc3339;
use time::{Duration, OffsetDateTime};

use crate::helpers::*;

pub async fn start_runner(app: &TestApp) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let front =
        Arc::new(Front { functions: app.functions.clone(), authorizer: Authorizer::new(&app.settings.jwt_secret) });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server::serve(listener, front, async move {
        let _ = stopped.await;
    }));
    (base, stop)
}

/// A user's verify hash, asked of a runner over HTTP as a client would.
pub async fn verify_hash_over_http(http: &reqwest::Client, base: &str, event: &str, token: &str) -> String {
    let reply: Value = http
        .get(format!("{base}/events/{event}/verify-hash"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    reply["hash"].as_str().expect("a hash").to_owned()
}

#[tokio::test]
async fn token_release_verify_hash_grab_and_order_over_http() {
    let app = TestApp::new().await;
    let (base, _stop) = start_runner(&app).await;
    let http = local_runner::client::new();
    let auth = Authorizer::new(&app.settings.jwt_secret);
    let admin = auth.mint("organiser-1", Some("organiser@example.com"), true, parse_ttl("1h").unwrap()).unwrap();
    let user = auth.mint("student-1", Some("student-1@example.com"), false, parse_ttl("1h").unwrap()).unwrap();

    let id = fresh_event_id();
    let now = OffsetDateTime::now_utc();
    let created = http
        .post(format!("{base}/admin/events"))
        .bearer_auth(&admin)
        .json(&json!({ "id": id, "title": "Runner lecture", "capacity": 5, "sale_start": rfc3339(now), "sale_end": rfc3339(now + Duration::hours(1)) }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    assert_eq!(created.headers()["cache-control"], "no-store");

    let hash = verify_hash_over_http(&http, &base, id.as_str(), &user).await;
    let grabbed = http
        .post(format!("{base}/events/{id}/grab"))
        .bearer_auth(&user)
        .json(&json!({ "hash": hash }))
        .send()
        .await
        .unwrap();
    assert_eq!(grabbed.status(), 202);
    let grabbed: Value = grabbed.json().await.unwrap();

    let order: Value =
        http.get(format!("{base}/events/{id}/order")).bearer_auth(&user).send().await.unwrap().json().await.unwrap();
    assert_eq!(order["status"], "PENDING");
    assert_eq!(order["order_id"], grabbed["order_id"]);

    let event: Value =
        http.get(format!("{base}/events/{id}")).bearer_auth(&user).send().await.unwrap().json().await.unwrap();
    assert_eq!(event["remaining"], 4);
}

#[tokio::test]
async fn the_runner_authorizer_refuses_before_any_handler_runs() {
    let app = TestApp::new().await;
    let (base, _stop) = start_runner(&app).await;
    let http = local_runner::client::new();
    let auth = Authorizer::new(&app.settings.jwt_secret);
    let an_hour_ago = OffsetDateTime::now_utc().unix_timestamp() as u64 - 3600;
    let expired = auth
        .sign(&DevClaims {
            sub: "u1".into(),
            email: Some("u1@example.com".into()),
            email_verified: Some(true),
            exp: an_hour_ago,
            iat: an_hour_ago - 60,
            groups: vec!["admin".into()],
        })
        .unwrap();
    let foreign =
        Authorizer::new("some-other-secret-entirely").mint("u1", None, true, parse_ttl("1h").unwrap()).unwrap();
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(r#"{"sub":"u1","exp":9999999999,"cognito:groups":["admin"]}"#)
    );
    let id = fresh_event_id();
    let now = OffsetDateTime::now_utc();
    let body = json!({ "id": id, "title": "x", "capacity": 1, "sale_start": rfc3339(now), "sale_end": rfc3339(now + Duration::hours(1)) });
    for token in [None, Some(expired), Some(foreign), Some(unsigned), Some("garbage".to_owned())] {
        let mut req = http.post(format!("{base}/admin/events")).json(&body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let reply = req.send().await.unwrap();
        assert_eq!(reply.status(), 401);
        assert_eq!(reply.headers()["content-type"], "application/problem+json");
    }
    assert!(app.functions.store.get_event(&id).await.unwrap().is_none(), "no handler ran");

    let user = auth.mint("u1", None, false, parse_ttl("1h").unwrap()).unwrap();
    let reply = http.get(format!("{base}/no/such/route")).bearer_auth(&user).send().await.unwrap();
    assert_eq!(reply.status(), 404);
    let reply: Value = reply.json().await.unwrap();
    assert_eq!(reply["code"], "NOT_FOUND");
}
