//! The grab script alone, against a real redis-server: each outcome, in the design's order, and
//! nothing written on a refusal.

use std::{collections::HashSet, time::Duration};

use redis::AsyncCommands;
use serde_json::json;
use shared::{
    config::GrabPolicy,
    domain::{EventId, OrderId, UserId},
    gate::{GrabAttempt, GrabOutcome, keys},
};
use time::OffsetDateTime;

use crate::helpers::{TestApp, eventually, fresh_event_id};

const POLICY: GrabPolicy = GrabPolicy { rate_limit: 1_000, rate_window: Duration::from_secs(1) };

async fn grab_with(app: &TestApp, event: &EventId, user: &str, policy: GrabPolicy) -> GrabOutcome {
    let user = UserId::parse(user).unwrap();
    let order_id = OrderId::generate();
    let message = json!({ "v": 1, "order_id": order_id, "event_id": event, "user_id": user, "email": "x@example.com", "created_at": "2026-11-22T10:00:00Z" }).to_string();
    let attempt = GrabAttempt { event, user: &user, order_id: &order_id, message_without_ticket: &message };
    app.functions.gate.grab(&attempt, policy).await.expect("script runs")
}

async fn grab(app: &TestApp, event: &EventId, user: &str) -> GrabOutcome {
    grab_with(app, event, user, POLICY).await
}

/// Everything a grab could change, except the rate-limit counter.
async fn state(app: &TestApp, event: &EventId) -> (Vec<u32>, Vec<(String, String)>, Vec<String>) {
    let mut r = app.redis.clone();
    let seats: Vec<u32> = r.lrange(keys::seats(event), 0, -1).await.unwrap();
    let mut buyers: Vec<(String, String)> = r.hgetall(keys::buyers(event)).await.unwrap();
    buyers.sort();
    let outbox: Vec<String> = r.zrange(keys::outbox(event), 0, -1).await.unwrap();
    (seats, buyers, outbox)
}

#[tokio::test]
async fn a_grab_pops_a_number_records_the_buyer_and_writes_the_outbox() {
    let app = TestApp::new().await;
    let event = app.open_event(3).await;
    let GrabOutcome::Granted { order_id, ticket_no, stock_left, message } = grab(&app, &event, "u1").await else {
        panic!("expected OK");
    };
    assert_eq!((ticket_no, stock_left), (1, 2));
    let (seats, buyers, outbox) = state(&app, &event).await;
    assert_eq!(seats, [2, 3]);
    assert_eq!(buyers, [("u1".to_owned(), format!("{order_id}:1"))]);
    assert_eq!(outbox, std::slice::from_ref(&message), "the outbox holds exactly the message grab sends");
    let message: serde_json::Value = serde_json::from_str(&message).unwrap();
    assert_eq!(message["ticket_no"], 1);
    assert_eq!(message["order_id"], order_id.as_str());
    assert_eq!(message["event_id"], event.as_str());
    assert_eq!(message["v"], 1);
}

#[tokio::test]
async fn already_returns_the_first_order_and_changes_nothing() {
    let app = TestApp::new().await;
    let event = app.open_event(5).await;
    let GrabOutcome::Granted { order_id, ticket_no, .. } = grab(&app, &event, "u1").await else { panic!() };
    let before = state(&app, &event).await;
    assert_eq!(grab(&app, &event, "u1").await, GrabOutcome::Already { order_id, ticket_no });
    assert_eq!(state(&app, &event).await, before);
}

#[tokio::test]
async fn sold_out_when_no_number_is_left_and_nothing_changes() {
    let app = TestApp::new().await;
    let event = app.open_event(1).await;
    assert_eq!(grab(&app, &event, "u1").await.code(), "OK");
    let before = state(&app, &event).await;
    assert_eq!(grab(&app, &event, "u2").await, GrabOutcome::SoldOut);
    assert_eq!(state(&app, &event).await, before);
}

#[tokio::test]
async fn the_window_is_checked_on_the_server_clock() {
    let app = TestApp::new().await;
    let now = OffsetDateTime::now_utc();
    let hour = time::Duration::hours(1);
    let future = app.put_event(5, now + hour, now + 2 * hour).await;
    let past = app.put_event(5, now - 2 * hour, now - hour).await;
    let before = (state(&app, &future).await, state(&app, &past).await);
    assert_eq!(grab(&app, &future, "u1").await, GrabOutcome::NotStarted);
    assert_eq!(grab(&app, &past, "u1").await, GrabOutcome::Ended);
    assert_eq!((state(&app, &future).await, state(&app, &past).await), before, "a refused grab writes nothing");
}

#[tokio::test]
async fn an_unknown_event_is_not_found_and_leaves_no_keys() {
    let app = TestApp::new().await;
    let event = fresh_event_id();
    assert_eq!(grab(&app, &event, "u1").await, GrabOutcome::NotFound);
    let mut r = app.redis.clone();
    let n: u32 =
        r.exists(&[keys::meta(&event), keys::seats(&event), keys::buyers(&event), keys::outbox(&event)]).await.unwrap();
    assert_eq!(n, 0);
}

#[tokio::test]
async fn the_rate_limit_comes_first_and_resets_with_its_window() {
    let app = TestApp::new().await;
    let event = app.open_event(5).await;
    let policy = GrabPolicy { rate_limit: 2, rate_window: Duration::from_millis(300) };
    assert_eq!(grab_with(&app, &event, "u1", policy).await.code(), "OK");
    assert_eq!(grab_with(&app, &event, "u1", policy).await.code(), "ALREADY");
    let before = state(&app, &event).await;
    let GrabOutcome::RateLimited { retry_after_ms } = grab_with(&app, &event, "u1", policy).await else {
        panic!("expected RATE_LIMITED")
    };
    assert!((1..=300).contains(&retry_after_ms), "retry after {retry_after_ms} ms");
    assert_eq!(state(&app, &event).await, before);
    // Another user has a counter of their own.
    assert_eq!(grab_with(&app, &event, "u2", policy).await.code(), "OK");
    // Once the window's counter expires in Redis, the user is let through again.
    let rl = keys::rate(&event, &UserId::parse("u1").unwrap());
    let mut r = app.redis.clone();
    assert!(
        eventually(Duration::from_secs(3), || {
            let mut r = r.clone();
            let rl = rl.clone();
            async move { !r.exists::<_, bool>(&rl).await.unwrap() }
        })
        .await
    );
    assert_eq!(grab_with(&app, &event, "u1", policy).await.code(), "ALREADY");
    let ttl: i64 = r.pttl(&rl).await.unwrap();
    assert!((1..=300).contains(&ttl), "a new window starts: pttl {ttl}");
}

#[tokio::test]
async fn a_script_error_writes_nothing_not_even_the_rate_counter() {
    let app = TestApp::new().await;
    let event = app.open_event(2).await;
    let user = UserId::parse("u1").unwrap();
    let order_id = OrderId::generate();
    let before = state(&app, &event).await;
    // Refused by the gate's caller before Redis, and by the script itself (a head that still ends
    // in a brace would splice into invalid JSON).
    for message in ["not json", r#"{"v":1}}"#] {
        let attempt = GrabAttempt { event: &event, user: &user, order_id: &order_id, message_without_ticket: message };
        assert!(app.functions.gate.grab(&attempt, POLICY).await.is_err(), "{message}");
    }
    assert_eq!(state(&app, &event).await, before);
    let mut r = app.redis.clone();
    assert!(!r.exists::<_, bool>(keys::rate(&event, &user)).await.unwrap());
}

#[tokio::test]
async fn a_flushed_script_cache_is_reloaded() {
    let app = TestApp::new().await;
    let event = app.open_event(2).await;
    let mut r = app.redis.clone();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut r).await.unwrap();
    assert_eq!(grab(&app, &event, "u1").await.code(), "OK");
}

#[tokio::test]
async fn a_100k_ticket_event_is_warmed_whole_and_pops_distinct_numbers() {
    let app = TestApp::new().await;
    let event = app.open_event(100_000).await;
    let mut r = app.redis.clone();
    let all: Vec<u32> = r.lrange(keys::seats(&event), 0, -1).await.unwrap();
    assert_eq!(all, (1..=100_000).collect::<Vec<_>>(), "every number 1..capacity, once");

    let grabs = (0..2_000).map(|i| {
        let app = &app;
        let event = &event;
        async move { grab(app, event, &format!("user-{i}")).await }
    });
    let mut popped = HashSet::new();
    for outcome in futures::future::join_all(grabs).await {
        let GrabOutcome::Granted { ticket_no, .. } = outcome else { panic!("{outcome:?}") };
        assert!(popped.insert(ticket_no), "ticket {ticket_no} handed out twice");
    }
    let left: Vec<u32> = r.lrange(keys::seats(&event), 0, -1).await.unwrap();
    assert_eq!(left.len(), 98_000);
    assert!(left.iter().all(|n| !popped.contains(n)));
    let mut union: Vec<u32> = left.into_iter().chain(popped).collect();
    union.sort_unstable();
    assert_eq!(union, (1..=100_000).collect::<Vec<_>>(), "free + sold = 1..capacity");
}
