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
    start_runner_with(app, Default::default()).await
}

/// A runner whose mail-consumer route switches `mail_consumer`.
pub async fn start_runner_with(
    app: &TestApp,
    mail_consumer: local_runner::esm::Switch,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    start_runner_patient(app, mail_consumer, 1).await
}

/// A runner that lets each function run `patience` times its Lambda timeout (`Front::patience`).
pub async fn start_runner_patient(
    app: &TestApp,
    mail_consumer: local_runner::esm::Switch,
    patience: u32,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let front = Arc::new(Front {
        functions: app.functions.clone(),
        authorizer: Authorizer::new(&app.settings.jwt_secret),
        mail_consumer,
        rush: Default::default(),
        pages: pages::Pages::default(),
        patience,
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server::serve(listener, front, async move {
        let _ = stopped.await;
    }));
    (base, stop)
}

/// A user's verify hash, asked of a runner over HTTP as a client would: a `503` (a dependency slow
/// under the machine's load) is asked again after its `Retry-After`, for up to a minute.
pub async fn verify_hash_over_http(http: &reqwest::Client, base: &str, event: &str, token: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let reply = http.get(format!("{base}/events/{event}/verify-hash")).bearer_auth(token).send().await.unwrap();
        let (status, wait) = (reply.status().as_u16(), retry_after(&reply));
        let body: Value = reply.json().await.unwrap();
        match body["hash"].as_str() {
            Some(hash) => return hash.to_owned(),
            None if status == 503 && std::time::Instant::now() < deadline => tokio::time::sleep(wait).await,
            None => panic!("no hash: {status} {body}"),
        }
    }
}

/// A reply's `Retry-After`, or a fifth of a second.
pub fn retry_after(reply: &reqwest::Response) -> std::time::Duration {
    let seconds = reply.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    seconds.map_or(std::time::Duration::from_millis(200), std::time::Duration::from_secs)
}

/// A user's grab with their verify hash, sent to a runner over HTTP as a client would.
pub async fn grab_over_http(
    http: &reqwest::Client,
    base: &str,
    event: &str,
    token: &str,
    hash: &str,
) -> reqwest::Response {
    http.post(format!("{base}/events/{event}/grab"))
        .bearer_auth(token)
        .json(&json!({ "hash": hash }))
        .send()
        .await
        .unwrap()
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
    let grabbed = grab_over_http(&http, &base, id.as_str(), &user, &hash).await;
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

/// `loadgen --hold-mail` relies on it: once the runner's switch answers `enabled: false`, no batch
/// is in hand and what grab sends stays on the queue; switched on, it is delivered and mailed once.
/// Only an admin may switch it, and a bad body changes nothing.
#[tokio::test]
async fn a_held_mail_consumer_leaves_orders_on_the_queue_until_it_is_resumed() {
    use aws_sdk_sqs::types::QueueAttributeName;
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(5).await;
    let switch = local_runner::esm::Switch::new(true);
    let (base, _stop) = start_runner_with(&app, switch.clone()).await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let polling = tokio::spawn(app.poller().run(2, switch.clone(), stop_rx));
    let http = local_runner::client::new();
    let auth = Authorizer::new(&app.settings.jwt_secret);
    let hour = parse_ttl("1h").unwrap();
    let admin = auth.mint("organiser-1", Some("organiser@example.com"), true, hour).unwrap();
    let user = auth.mint("held-1", Some("held-1@example.com"), false, hour).unwrap();
    let url = format!("{base}{}", server::MAIL_CONSUMER_PATH);
    let put = |token: &str, body: &str| {
        http.put(&url).bearer_auth(token).header("content-type", "application/json").body(body.to_owned()).send()
    };

    let refused = put(&user, r#"{"enabled": false}"#).await.unwrap();
    assert_eq!(refused.status(), 403);
    let bad = put(&admin, r#"{"enabled": "no"}"#).await.unwrap();
    assert_eq!(bad.status(), 400);
    assert_eq!(bad.headers()["content-type"], "application/problem+json");
    assert!(switch.enabled(), "neither changed the switch");

    let held = put(&admin, r#"{"enabled": false}"#).await.unwrap();
    assert_eq!(held.status(), 200);
    assert_eq!(held.json::<Value>().await.unwrap(), json!({ "enabled": false }));
    let asked: Value = http.get(&url).bearer_auth(&admin).send().await.unwrap().json().await.unwrap();
    assert_eq!(asked, json!({ "enabled": false }));

    let hash = verify_hash_over_http(&http, &base, event.as_str(), &user).await;
    let grabbed = grab_over_http(&http, &base, event.as_str(), &user, &hash).await;
    assert_eq!(grabbed.status(), 202);
    // A negative needs a while: longer than two of the pollers' one-second long polls, in which a
    // running consumer would have received the order.
    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    let queue = app
        .sqs
        .get_queue_attributes()
        .queue_url(&app.queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap();
    let count = |name: QueueAttributeName| queue.attributes().and_then(|a| a.get(&name)).cloned();
    assert_eq!(
        (
            count(QueueAttributeName::ApproximateNumberOfMessages),
            count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        ),
        (Some("1".to_owned()), Some("0".to_owned())),
        "the order waits on the queue, received by no poller"
    );
    assert!(app.sent_mail().await.is_empty());

    let resumed = put(&admin, r#"{"enabled": true}"#).await.unwrap();
    assert_eq!(resumed.json::<Value>().await.unwrap(), json!({ "enabled": true }));
    let mailed = crate::helpers::eventually(std::time::Duration::from_secs(30), || async {
        app.sent_mail().await.iter().any(|m| m.to.iter().any(|t| t == "held-1@example.com"))
    })
    .await;
    let _ = stop_tx.send(true);
    polling.await.unwrap();
    assert!(mailed, "resumed, the consumer confirmed and mailed the order");
    let order: Value =
        http.get(format!("{base}/events/{event}/order")).bearer_auth(&user).send().await.unwrap().json().await.unwrap();
    assert_eq!(order["status"], "CONFIRMED");
    assert_eq!(app.sent_mail().await.len(), 1);
}

/// The runner refuses what Lambda and API Gateway refuse: a request body over Lambda's 6 MB is
/// `413` before any handler runs, in API Gateway's words.
#[tokio::test]
async fn a_request_over_lambdas_payload_limit_is_refused_before_the_function() {
    let app = TestApp::new().await;
    let (base, _stop) = start_runner(&app).await;
    let http = local_runner::client::new();
    let admin = Authorizer::new(&app.settings.jwt_secret).mint("org", None, true, parse_ttl("1h").unwrap()).unwrap();
    let id = fresh_event_id();
    let big = "x".repeat(shared::http::routes::LAMBDA_PAYLOAD_BYTES + 1);
    let reply = http
        .post(format!("{base}/admin/events"))
        .bearer_auth(&admin)
        .header("content-type", "application/json")
        .body(format!(r#"{{"id":"{id}","title":"{big}"}}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 413);
    assert_eq!(reply.json::<Value>().await.unwrap(), json!({ "message": "Request Entity Too Large" }));
    assert!(app.functions.store.get_event(&id).await.unwrap().is_none(), "no handler ran");
}

/// The CSV attendee list of a 50,000-ticket event (over 7 MB), through the runner (which answers 500 for a
/// reply over Lambda's 6 MB, as AWS does): in pages, each far under the limit, the next page in a
/// `Link` header, every ticket once and in order. The whole list (over 6 MB) could not be one reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_csv_report_of_a_50_000_ticket_event_comes_in_pages_under_the_response_limit() {
    const TICKETS: u32 = 50_000;
    // An emulator of its own: writing 200,000 items and scanning them holds the stack's one
    // MiniStack process for tens of seconds, past the SDK timeouts of the tests beside this one.
    // The emulator reads a page of this table in over Lambda's 10 s (it scans where DynamoDB
    // seeks; each of a page's 16 queries near the SDK's 2 s attempt timeout on a loaded machine);
    // what is tested here is the reply's size, so the store and the runner wait for it.
    const PATIENCE: u32 = 6;
    let emulator = crate::private_emulator::PrivateEmulator::start().await;
    let app = TestApp::on_emulator(&emulator.url, PATIENCE).await;
    let now = OffsetDateTime::now_utc();
    let event = test_event(
        fresh_event_id(),
        TICKETS,
        now - Duration::hours(2),
        now - Duration::hours(1) + Duration::minutes(5),
    );
    app.functions.store.put_event(&event).await.unwrap();
    let orders: Vec<shared::domain::OrderMessage> = (1..=TICKETS)
        .map(|n| shared::domain::OrderMessage {
            v: 1,
            order_id: shared::domain::OrderId::generate(),
            event_id: event.id.clone(),
            user_id: shared::domain::UserId::parse(&format!("attendee-{n:06}")).unwrap(),
            email: shared::domain::Email::parse(&format!("attendee-{n:06}@example.com")).unwrap(),
            ticket_no: shared::domain::TicketNo::new(n),
            created_at: rfc3339(now),
            promoted: false,
        })
        .collect();
    app.functions.store.load_confirmed(&orders, now).await.unwrap();

    let (base, _stop) = start_runner_patient(&app, Default::default(), PATIENCE).await;
    let http = local_runner::client::new();
    let admin = Authorizer::new(&app.settings.jwt_secret).mint("org", None, true, parse_ttl("1h").unwrap()).unwrap();
    let mut next = Some(format!("/admin/events/{}/report?format=csv", event.id));
    let (mut seen, mut pages, mut total_bytes) = (Vec::with_capacity(TICKETS as usize), 0, 0);
    while let Some(path) = next.take() {
        // A client asks a page again when the connection itself failed (a GET changes nothing);
        // twice on a loaded machine, never on an answer.
        let mut tries = 0;
        let reply = loop {
            match http.get(format!("{base}{path}")).bearer_auth(&admin).send().await {
                Ok(reply) => break reply,
                Err(e) if tries < 2 => {
                    eprintln!("page {pages}: asked again after {e:?}");
                    tries += 1;
                }
                Err(e) => panic!("page {pages}: {e:?}"),
            }
        };
        assert_eq!(reply.status(), 200, "page {pages}: {:?}", reply.text().await);
        next = reply.headers().get("link").map(|l| {
            let l = l.to_str().unwrap();
            assert!(l.ends_with(r#">; rel="next""#), "{l}");
            l[1..l.find('>').unwrap()].to_owned()
        });
        let text = reply.text().await.unwrap();
        assert!(text.len() <= shared::handlers::query::CSV_PAGE_BYTES + 2048, "a page of {} bytes", text.len());
        total_bytes += text.len();
        let mut lines = text.lines();
        assert!(lines.next().unwrap().starts_with("ticket_no,order_id"), "each page has its header");
        seen.extend(lines.map(|l| l.split(',').next().unwrap().parse::<u32>().unwrap()));
        pages += 1;
    }
    assert_eq!(seen, (1..=TICKETS).collect::<Vec<_>>(), "every ticket once, in order");
    assert!(total_bytes > shared::http::routes::LAMBDA_PAYLOAD_BYTES, "one reply could not have held it");
    assert_eq!(pages, (TICKETS as usize).div_ceil(shared::handlers::query::CSV_PAGE));
}

/// The sale's state is for anyone: asked without a token it is answered (every other route wants
/// one), cacheable for a second, and follows the sale: not started, open, sold out once the last
/// number goes (read each time, never kept: a number given back opens it again).
#[tokio::test]
async fn the_sales_state_is_public_cacheable_and_follows_the_sale() {
    let app = TestApp::new().await;
    let (base, _stop) = start_runner(&app).await;
    let http = local_runner::client::new();
    let state = |event: String| {
        let (http, base) = (&http, &base);
        async move {
            let reply = http.get(format!("{base}/events/{event}/state")).send().await.unwrap();
            let status = reply.status().as_u16();
            let cache = reply.headers().get("cache-control").map(|v| v.to_str().unwrap().to_owned());
            (status, cache, reply.json::<Value>().await.unwrap())
        }
    };
    let now = OffsetDateTime::now_utc();
    let later = app.put_event(1, now + Duration::hours(1), now + Duration::hours(2)).await;
    let (status, cache, body) = state(later.to_string()).await;
    assert_eq!((status, body["state"].as_str()), (200, Some("NOT_STARTED")), "{body}");
    assert_eq!(cache.as_deref(), Some(shared::handlers::query::STATE_CACHE_CONTROL));
    assert_eq!(
        body["sale_start"],
        rfc3339(app.functions.store.get_event(&later).await.unwrap().unwrap().event.sale_start)
    );

    let open = app.open_event(1).await;
    assert_eq!(state(open.to_string()).await.2["state"], "OPEN");
    assert_eq!(app.grab(&open, "only-one").await.status, 202);
    assert_eq!(state(open.to_string()).await.2["state"], "SOLD_OUT");

    let (status, _, body) = state(fresh_event_id().to_string()).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("EVENT_NOT_FOUND")), "{body}");
    let (status, ..) = state("not an id".replace(' ', "%20")).await;
    assert_eq!(status, 400);
    // Every other route still asks for a token.
    let reply = http.get(format!("{base}/events/{open}")).send().await.unwrap();
    assert_eq!(reply.status(), 401);
}
