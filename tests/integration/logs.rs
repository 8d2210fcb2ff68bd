//! No personal data in logs: a whole sale through the HTTP runner, the mail consumer and reconcile,
//! with the attacks of docs/SECURITY.md among it, every log line the functions write captured (in
//! their production format and level), then searched for e-mail addresses, tokens and hashes.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use local_runner::authorizer::{Authorizer, DevClaims};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::{
    helpers::*,
    runner::{start_runner, verify_hash_over_http},
};

/// Everything the functions log, in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

// The process-wide subscriber (a thread-local one missed events whose callsites other threads had
// cached first): it also takes the lines of the tests running beside this one, which must hold
// the same rule.
#[tokio::test(flavor = "current_thread")]
async fn a_whole_sale_and_its_attacks_log_no_address_token_or_hash() {
    let logs = Captured::default();
    tracing::subscriber::set_global_default(shared::telemetry::subscriber("info", logs.clone()))
        .expect("no other test installs a subscriber");
    let app = TestApp::for_mail(1).await;
    let (base, _stop) = start_runner(&app).await;
    let http = local_runner::client::new();
    let auth = Authorizer::new(&app.settings.jwt_secret);
    let hour = Duration::from_secs(3600);
    let run = uuid::Uuid::now_v7().simple().to_string();
    let mut secrets: Vec<String> = Vec::new();

    let admin = auth.mint(&format!("organiser-{run}"), Some("organiser@example.org"), true, hour).unwrap();
    secrets.push(admin.clone());
    let id = format!("logs-{run}");
    let now = OffsetDateTime::now_utc();
    let created = http
        .post(format!("{base}/admin/events"))
        .bearer_auth(&admin)
        .json(&json!({
            "id": id, "title": "Logs", "capacity": 5,
            "sale_start": shared::domain::event::rfc3339(now - time::Duration::minutes(1)),
            "sale_end": shared::domain::event::rfc3339(now + time::Duration::hours(1)),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    // Eight users for five tickets: winners, sold-outs, retries.
    let mut tokens = Vec::new();
    for i in 0..8 {
        let user = format!("s{i}-{run}");
        let token = auth.mint(&user, Some(&format!("{user}@example.org")), false, hour).unwrap();
        let hash = verify_hash_over_http(&http, &base, &id, &token).await;
        for _ in 0..2 {
            let grabbed =
                http.post(format!("{base}/events/{id}/grab")).bearer_auth(&token).json(&json!({ "hash": hash })).send();
            assert!(matches!(grabbed.await.unwrap().status().as_u16(), 200 | 202 | 409));
        }
        secrets.extend([token.clone(), hash]);
        tokens.push(token);
    }

    // The attacks: another user's hash, a garbage body, an unverified address, an expired token, a
    // user on an admin route, a flood of verify-hash, a forged order on the queue.
    let foreign = &secrets[2];
    let refused = [
        http.post(format!("{base}/events/{id}/grab")).bearer_auth(&tokens[1]).json(&json!({ "hash": foreign })),
        http.post(format!("{base}/events/{id}/grab")).bearer_auth(&tokens[1]).body("{not json"),
        http.get(format!("{base}/admin/events/{id}/orders")).bearer_auth(&tokens[1]),
    ];
    for request in refused {
        assert!(request.send().await.unwrap().status().is_client_error());
    }
    let stamp = OffsetDateTime::now_utc().unix_timestamp() as u64;
    let unverified = auth
        .sign(&DevClaims {
            sub: format!("u-{run}"),
            email: Some("victim@example.org".into()),
            email_verified: Some(false),
            exp: stamp + 600,
            iat: stamp,
            groups: vec![],
        })
        .unwrap();
    let expired = auth
        .sign(&DevClaims {
            sub: format!("x-{run}"),
            email: Some("late@example.org".into()),
            email_verified: Some(true),
            exp: stamp - 600,
            iat: stamp - 1200,
            groups: vec![],
        })
        .unwrap();
    for token in [&unverified, &expired] {
        let reply = http.post(format!("{base}/events/{id}/grab")).bearer_auth(token).json(&json!({ "hash": foreign }));
        assert!(reply.send().await.unwrap().status().is_client_error());
    }
    secrets.extend([unverified, expired]);
    for _ in 0..(app.settings.user_limits.of("verify-hash").unwrap().requests + 5) {
        http.get(format!("{base}/events/{id}/verify-hash")).bearer_auth(&tokens[7]).send().await.unwrap();
    }
    let forged = json!({
        "v": 1, "order_id": shared::domain::OrderId::generate(), "event_id": id, "user_id": "forger",
        "email": "victim@example.org", "created_at": "2026-11-23T10:00:00Z", "ticket_no": 99_999,
    });
    app.sqs.send_message().queue_url(&app.queue_url).message_body(forged.to_string()).send().await.unwrap();

    // The consumer and reconcile, until the five orders are mailed.
    let poller = app.poller();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while app.sent_mail().await.len() < 5 {
        assert!(tokio::time::Instant::now() < deadline, "the five orders were not mailed");
        let _ = poller.poll_once().await; // a timed-out poll is tried again until the deadline
    }
    app.functions.reconcile.run().await;

    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 30, "the sale was logged ({} lines)", lines.len());
    assert!(lines.iter().all(|l| serde_json::from_str::<Value>(l).is_ok()), "every line is JSON");
    assert!(text.contains("RATE_LIMITED") && text.contains("BAD_HASH"), "the attacks were logged");
    for line in &lines {
        assert!(!line.contains('@'), "an address in the logs: {line}");
        assert!(!line.contains("eyJ"), "a token in the logs: {line}");
        for secret in &secrets {
            assert!(!line.contains(secret.as_str()), "a token or hash in the logs: {line}");
        }
    }
}
