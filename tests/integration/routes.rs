//! Each route through its handler, with HTTP API events built from `events/*.json`: the success
//! reply, 401 without claims, 403 for non-admins, 400 on bad input, and each error code.

use redis::AsyncCommands;
use serde_json::{Value, json};
use shared::{
    config::GrabPolicy,
    domain::{UserId, event::epoch_ms},
    gate::keys,
    http::routes::Function,
};
use time::{Duration, OffsetDateTime};

use crate::helpers::*;

fn assert_problem(reply: &Reply, status: u16, code: &str) {
    assert_eq!((reply.status, reply.code()), (status, code), "{:#}", reply.body);
    assert_eq!(reply.content_type, "application/problem+json");
    assert_eq!(reply.cache_control, "no-store");
    for field in ["type", "title", "status", "detail", "code"] {
        assert!(reply.body.get(field).is_some(), "problem without {field}: {}", reply.body);
    }
}

fn release_body(id: &str) -> Value {
    let now = OffsetDateTime::now_utc();
    json!({
        "id": id, "title": "Rust on Lambda", "capacity": 100,
        "sale_start": shared::domain::event::rfc3339(now),
        "sale_end": shared::domain::event::rfc3339(now + Duration::hours(1)),
        "venue": "Hall A",
    })
}

#[tokio::test]
async fn every_function_refuses_a_request_without_claims() {
    let app = TestApp::new().await;
    for (function, file) in [
        (Function::Release, "release-http.json"),
        (Function::Query, "query-events.json"),
        (Function::Query, "query-event.json"),
        (Function::Query, "query-order.json"),
        (Function::Query, "query-attendees.json"),
        (Function::VerifyHash, "verify-hash-no-claims.json"),
        (Function::Grab, "grab.json"),
    ] {
        let reply = app.call(function, without_claims(fixture(file))).await;
        assert_problem(&reply, 401, "UNAUTHORIZED");
    }
}

#[tokio::test]
async fn admin_routes_refuse_other_users() {
    let app = TestApp::new().await;
    let id = fresh_event_id();
    let reply = app
        .call(Function::Release, for_user(with_body(fixture("release-http.json"), &release_body(id.as_str())), "u1"))
        .await;
    assert_problem(&reply, 403, "FORBIDDEN");
    let reply = app.call(Function::Query, for_event(fixture("query-event.json"), &id)).await;
    assert_problem(&reply, 404, "EVENT_NOT_FOUND");
    let reply = app.call(Function::Query, for_user(fixture("query-attendees.json"), "u1")).await;
    assert_problem(&reply, 403, "FORBIDDEN");
}

#[tokio::test]
async fn release_stores_the_event_warms_the_cache_and_refuses_a_taken_id() {
    let app = TestApp::new().await;
    let id = fresh_event_id();
    let event = with_body(fixture("release-http.json"), &release_body(id.as_str()));
    let reply = app.call(Function::Release, event.clone()).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.cache_control, "no-store");
    assert_eq!(reply.body["id"], id.as_str());
    assert_eq!(reply.body["remaining"], 100);
    let stored = app.functions.store.get_event(&id).await.unwrap().expect("in DynamoDB");
    assert_eq!(stored.event.capacity, 100);
    assert_eq!(app.functions.gate.stock(&id).await.unwrap(), Some(100));

    let mut changed = release_body(id.as_str());
    changed["capacity"] = json!(5);
    let reply = app.call(Function::Release, with_body(fixture("release-http.json"), &changed)).await;
    assert_problem(&reply, 409, "EVENT_EXISTS");
    assert_eq!(app.functions.store.get_event(&id).await.unwrap().unwrap().event.capacity, 100, "nothing overwritten");
    assert_eq!(app.functions.gate.stock(&id).await.unwrap(), Some(100));
}

/// Calls release as an admin does: a `503 BUSY` (a rebuild waiting for orders that may still be on
/// their way, at least `REBUILD_SETTLE_MS` after the loss is seen) is retried, for up to 10 s.
async fn release_retried(app: &TestApp, event: &Value) -> Reply {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let reply = app.call(Function::Release, event.clone()).await;
        if reply.status != 503 || std::time::Instant::now() > deadline {
            return reply;
        }
        assert_eq!(reply.retry_after.as_deref(), Some("1"));
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn a_retried_release_whose_cache_was_lost_warms_it_again() {
    let app = TestApp::for_mail(30).await;
    let id = fresh_event_id();
    let event = with_body(fixture("release-http.json"), &release_body(id.as_str()));
    assert_eq!(app.call(Function::Release, event.clone()).await.status, 201);
    let mut r = app.redis.clone();
    let _: () = r.del(&[keys::meta(&id), keys::seats(&id)]).await.unwrap();
    let reply = release_retried(&app, &event).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(app.functions.gate.stock(&id).await.unwrap(), Some(100));
}

/// A release retried after the cache was lost mid-sale (here meta and the free numbers, as an
/// eviction would; the outbox survived) is the exact rebuild, not a fresh warm: the stored order
/// and the order only in the outbox keep their users and numbers, and the outbox is kept.
#[tokio::test]
async fn a_release_retried_mid_sale_keeps_every_holding_and_the_outbox() {
    let app = TestApp::for_mail(30).await;
    let id = fresh_event_id();
    let mut body = release_body(id.as_str());
    body["capacity"] = json!(5);
    let release = with_body(fixture("release-http.json"), &body);
    assert_eq!(app.call(Function::Release, release.clone()).await.status, 201);
    // u1's order is stored; u2's send was lost: it is only in the outbox.
    let u1 = app.grab(&id, "u1").await;
    let stored = app.drain_queue_raw().await;
    assert!(
        app.functions
            .mail
            .handle_batch(app.sqs_batch(&[("m1", stored[0].as_str())]))
            .await
            .batch_item_failures
            .is_empty()
    );
    let u2 = app.grab(&id, "u2").await;
    assert_eq!(app.drain_queue_raw().await.len(), 1, "u2's message, lost");
    let outbox_before = app.cache(&id).await.outbox;
    assert_eq!(outbox_before.len(), 1);

    let mut r = app.redis.clone();
    let _: () = r.del(&[keys::meta(&id), keys::seats(&id)]).await.unwrap();
    let reply = release_retried(&app, &release).await;
    assert_eq!(reply.status, 201, "{}", reply.body);

    let cache = app.cache(&id).await;
    let held = |reply: &Reply| {
        (reply.body["order_id"].as_str().unwrap().to_owned(), reply.body["ticket_no"].as_u64().unwrap() as u32)
    };
    assert_eq!(cache.holdings.get("u1"), Some(&held(&u1)));
    assert_eq!(cache.holdings.get("u2"), Some(&held(&u2)));
    assert_eq!(cache.outbox, outbox_before, "the outbox is kept");
    assert_eq!(cache.seats.len(), 3);
    assert!(!cache.seats.contains(&held(&u1).1) && !cache.seats.contains(&held(&u2).1), "no held number is free again");
    assert_eq!(app.grab(&id, "u2").await.body["order_id"], u2.body["order_id"], "u2 still holds their order");
}

#[tokio::test]
async fn release_names_every_wrong_field_and_changes_nothing() {
    let app = TestApp::new().await;
    let reply = app.call(Function::Release, fixture("release-http-bad.json")).await;
    assert_problem(&reply, 400, "INVALID_EVENT");
    let fields: Vec<&str> =
        reply.body["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["title", "capacity", "sale_start", "sale_end"]);

    let id = fresh_event_id();
    let mut body = release_body(id.as_str());
    body["sale_end"] = body["sale_start"].clone();
    let reply = app.call(Function::Release, with_body(fixture("release-http.json"), &body)).await;
    assert_problem(&reply, 400, "INVALID_EVENT");
    assert!(app.functions.store.get_event(&id).await.unwrap().is_none());
    assert_eq!(app.functions.gate.stock(&id).await.unwrap(), None);

    let reply = app.call(Function::Release, with_raw_body(fixture("release-http.json"), "{not json")).await;
    assert_problem(&reply, 400, "BAD_REQUEST");
    let reply = app.call(Function::Release, with_raw_body(fixture("release-http.json"), &"x".repeat(20_000))).await;
    assert_problem(&reply, 413, "PAYLOAD_TOO_LARGE");
}

#[tokio::test]
async fn release_by_direct_invocation() {
    let app = TestApp::new().await;
    let id = fresh_event_id();
    let mut payload = fixture("release-direct.json");
    let now = OffsetDateTime::now_utc();
    payload["id"] = json!(id);
    payload["sale_start"] = json!(shared::domain::event::rfc3339(now));
    payload["sale_end"] = json!(shared::domain::event::rfc3339(now + Duration::hours(1)));
    let reply = app.functions.release.handle_invocation(payload.clone()).await.expect("released");
    assert_eq!(reply["id"], id.as_str());
    assert_eq!(app.functions.gate.stock(&id).await.unwrap(), Some(100));
    let again = app.functions.release.handle_invocation(payload).await.unwrap_err();
    assert!(again.to_string().starts_with("EVENT_EXISTS"), "{again}");

    let bad =
        app.functions.release.handle_invocation(fixture("release-direct-bad.json")).await.unwrap_err().to_string();
    for field in ["capcity", "capacity", "sale_start", "sale_end"] {
        assert!(bad.contains(&format!("{field}:")), "{field} not named in {bad}");
    }
    // An HTTP API event by direct invocation is answered as API Gateway expects.
    let mut event = with_body(fixture("release-http.json"), &release_body(fresh_event_id().as_str()));
    event = for_user(event, "u1");
    let reply = app.functions.release.handle_invocation(event).await.unwrap();
    assert_eq!(reply["statusCode"], 403);
}

#[tokio::test]
async fn query_serves_events_with_live_stock() {
    let app = TestApp::new().await;
    let id = app.open_event(10).await;
    assert_eq!(app.grab(&id, "u1").await.status, 202);

    let reply = app.call(Function::Query, for_event(fixture("query-event.json"), &id)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!((reply.body["remaining"].as_u64(), reply.body["remaining_source"].as_str()), (Some(9), Some("live")));
    assert_eq!(reply.body["capacity"], 10);

    // The list pages through every event, latest sale first; ours is on one of the pages.
    let mut cursor: Option<String> = None;
    let mut found = false;
    for _ in 0..1000 {
        let event = match &cursor {
            Some(c) => with_query(fixture("query-events.json"), &[("limit", "50"), ("cursor", c)]),
            None => with_query(fixture("query-events.json"), &[("limit", "50")]),
        };
        let page = app.call(Function::Query, event).await;
        assert_eq!(page.status, 200, "{}", page.body);
        found |= page.body["events"].as_array().unwrap().iter().any(|e| e["id"] == id.as_str() && e["remaining"] == 9);
        match page.body["next_cursor"].as_str() {
            Some(c) if !found => cursor = Some(c.to_owned()),
            _ => break,
        }
    }
    assert!(found, "the new event is listed with its live stock");

    for bad in [("cursor", "forged!"), ("cursor", "Zm9v"), ("limit", "0"), ("limit", "501"), ("limit", "ten")] {
        let reply = app.call(Function::Query, with_query(fixture("query-events.json"), &[bad])).await;
        assert_problem(&reply, 400, "BAD_REQUEST");
    }
    assert_problem(
        &app.call(Function::Query, for_event(fixture("query-event.json"), &fresh_event_id())).await,
        404,
        "EVENT_NOT_FOUND",
    );
    assert_problem(&app.call(Function::Query, fixture("query-bad-id.json")).await, 400, "BAD_REQUEST");
}

#[tokio::test]
async fn query_falls_back_to_the_snapshot_when_redis_is_unreachable() {
    let app = TestApp::new().await;
    let id = app.open_event(7).await;
    let mut settings = app.settings.clone();
    settings.gate.redis_url = "redis://127.0.0.1:1".into();
    let offline = local_runner::Functions::build(&settings, &app.queue_url).await.unwrap();
    let reply = call_with(&offline, Function::Query, for_event(fixture("query-event.json"), &id)).await;
    assert_eq!(reply.status, 200);
    let body = &reply.body;
    assert_eq!((body["remaining"].as_u64(), body["remaining_source"].as_str()), (Some(7), Some("snapshot")));
}

#[tokio::test]
async fn the_order_route_shows_pending_then_nothing_for_others() {
    let app = TestApp::new().await;
    let id = app.open_event(10).await;
    let reply = app.call(Function::Query, for_user(for_event(fixture("query-order.json"), &id), "u1")).await;
    assert_problem(&reply, 404, "NO_ORDER");
    let grabbed = app.grab(&id, "u1").await;
    let reply = app.call(Function::Query, for_user(for_event(fixture("query-order.json"), &id), "u1")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["status"], "PENDING");
    assert_eq!(reply.body["order_id"], grabbed.body["order_id"]);
    assert_eq!(reply.body["ticket_no"], grabbed.body["ticket_no"]);
    let reply = app.call(Function::Query, for_user(for_event(fixture("query-order.json"), &id), "u2")).await;
    assert_problem(&reply, 404, "NO_ORDER");
}

#[tokio::test]
async fn the_attendee_list_is_for_admins_and_known_events() {
    let app = TestApp::new().await;
    let id = app.open_event(10).await;
    let reply = app.call(Function::Query, for_event(fixture("query-attendees.json"), &id)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["orders"], json!([]), "no order is durable before the mail consumer stores it");
    assert_eq!(reply.body["capacity"], 10);
    let reply = app.call(Function::Query, for_event(fixture("query-attendees.json"), &fresh_event_id())).await;
    assert_problem(&reply, 404, "EVENT_NOT_FOUND");
}

/// verify-hash reads no cache: its one Redis round trip is the per-user limit on the user's own
/// key, and nothing lands on the event's buckets (whose masters a rush loads with grabs).
/// Counted by the server itself (`INFO commandstats`) on a redis-server of the test's own.
#[tokio::test]
async fn verify_hash_calls_redis_for_the_per_user_limit_alone() {
    let redis = crate::faults::PrivateRedis::start().await;
    let app = crate::faults::app_on_redis_with(redis.url(), 8, |s| s.gate.cluster = false).await;
    let (event, _) = crate::buckets::open_sharded(&app, 30, 3).await;
    let mut conn = redis::Client::open(crate::faults::redis_info(&redis.url()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut conn).await.unwrap();
    const CALLS: u64 = 12;
    for i in 0..CALLS {
        let reply = app
            .call(Function::VerifyHash, for_user(for_event(fixture("verify-hash.json"), &event), &format!("u{i}")))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let stats: String = redis::cmd("INFO").arg("commandstats").query_async(&mut conn).await.unwrap();
    let commands: std::collections::BTreeMap<String, u64> = stats
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|kv| kv.strip_prefix("calls="))?.parse().ok()?;
            // The test's own `CONFIG RESETSTAT` aside (its `INFO` is counted once it has answered).
            (name != "config|resetstat").then(|| (name.to_owned(), calls))
        })
        .collect();
    let limiter = [("incrby", CALLS), ("pexpire", CALLS), ("pttl", CALLS)].map(|(c, n)| (c.to_owned(), n));
    assert_eq!(commands, limiter.into(), "{CALLS} verify-hash calls: the limiter's three commands each, nothing else");
}

#[tokio::test]
async fn verify_hash_follows_the_sale_window() {
    let app = TestApp::new().await;
    let open = app.open_event(10).await;
    let reply = app.call(Function::VerifyHash, for_user(for_event(fixture("verify-hash.json"), &open), "u1")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.cache_control, "no-store");
    let hash = reply.body["hash"].as_str().unwrap();
    let expires = OffsetDateTime::parse(
        reply.body["expires_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert!(expires > OffsetDateTime::now_utc());
    app.settings
        .hash
        .keys
        .last()
        .expect("the hash keys")
        .current
        .verify(hash, &open, &UserId::parse("u1").unwrap(), epoch_ms(OffsetDateTime::now_utc()))
        .expect("a hash for u1 on this event");

    let now = OffsetDateTime::now_utc();
    let later = app.put_event(10, now + Duration::hours(1), now + Duration::hours(2)).await;
    assert_problem(
        &app.call(Function::VerifyHash, for_event(fixture("verify-hash.json"), &later)).await,
        403,
        "SALE_NOT_STARTED",
    );
    // Within the margin before the start the hash can be had.
    let soon = app.put_event(10, now + Duration::seconds(2), now + Duration::hours(2)).await;
    assert_eq!(app.call(Function::VerifyHash, for_event(fixture("verify-hash.json"), &soon)).await.status, 200);
    let over = app.put_event(10, now - Duration::hours(2), now - Duration::hours(1)).await;
    assert_problem(
        &app.call(Function::VerifyHash, for_event(fixture("verify-hash.json"), &over)).await,
        410,
        "SALE_ENDED",
    );
    assert_problem(
        &app.call(Function::VerifyHash, for_event(fixture("verify-hash.json"), &fresh_event_id())).await,
        404,
        "EVENT_NOT_FOUND",
    );
    assert_problem(&app.call(Function::VerifyHash, fixture("query-bad-id.json")).await, 400, "BAD_REQUEST");
}

#[tokio::test]
async fn grab_accepts_once_and_answers_a_retry_with_the_same_order() {
    let app = TestApp::new().await;
    let id = app.open_event(10).await;
    let hash =
        app.call(Function::VerifyHash, for_user(for_event(fixture("verify-hash.json"), &id), "u1")).await.body["hash"]
            .clone();
    let event = for_user(with_body(for_event(fixture("grab.json"), &id), &json!({ "hash": hash })), "u1");
    let first = app.call(Function::Grab, event.clone()).await;
    assert_eq!(first.status, 202, "{}", first.body);
    assert_eq!(first.body["status"], "PENDING");
    assert_eq!(first.cache_control, "no-store");
    let again = app.call(Function::Grab, event).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(
        (&again.body["order_id"], &again.body["ticket_no"]),
        (&first.body["order_id"], &first.body["ticket_no"])
    );
}

#[tokio::test]
async fn grab_refuses_bad_hashes_before_touching_redis() {
    let app = TestApp::new().await;
    let id = app.open_event(10).await;
    let other = app.open_event(10).await;
    let expired = app.settings.hash.keys.last().expect("the hash keys").current.issue(
        &id,
        &UserId::parse("u1").unwrap(),
        epoch_ms(OffsetDateTime::now_utc()) - 1,
    );
    let before = app.cache(&id).await;
    let real = app.hash_for(&id, "u1");
    for hash in [
        "".to_owned(),
        "v1.1.AAAA".to_owned(),
        real[..real.len() - 4].to_owned(), // truncated
        app.hash_for(&id, "u2"),           // another user's
        app.hash_for(&other, "u1"),        // another event's
        expired,
    ] {
        let reply = app
            .call(
                Function::Grab,
                for_user(with_body(for_event(fixture("grab.json"), &id), &json!({ "hash": hash })), "u1"),
            )
            .await;
        assert_problem(&reply, 403, "BAD_HASH");
    }
    assert_eq!(app.cache(&id).await, before, "Redis was not touched, not even a rate counter");
}

/// The confirmation (and the ticket) go to the token's address: one the identity provider has not
/// verified could be anyone's, so grab refuses it before Redis is touched.
#[tokio::test]
async fn grab_refuses_an_unverified_or_missing_email_and_writes_nothing() {
    let app = TestApp::new().await;
    let id = app.open_event(10).await;
    let before = app.cache(&id).await;
    let grab = with_body(for_event(fixture("grab.json"), &id), &json!({ "hash": app.hash_for(&id, "u1") }));
    for (verified, status, code) in [
        (Some("false"), 403, "EMAIL_NOT_VERIFIED"),
        (None, 403, "EMAIL_NOT_VERIFIED"),
        (Some("yes"), 403, "EMAIL_NOT_VERIFIED"),
    ] {
        let mut event = for_user(grab.clone(), "u1");
        let claims = &mut event["requestContext"]["authorizer"]["jwt"]["claims"];
        match verified {
            Some(v) => claims["email_verified"] = json!(v),
            None => _ = claims.as_object_mut().unwrap().remove("email_verified"),
        }
        assert_problem(&app.call(Function::Grab, event).await, status, code);
    }
    let mut no_email = for_user(grab.clone(), "u1");
    no_email["requestContext"]["authorizer"]["jwt"]["claims"].as_object_mut().unwrap().remove("email");
    assert_problem(&app.call(Function::Grab, no_email).await, 401, "UNAUTHORIZED");
    assert_eq!(app.cache(&id).await, before, "Redis was not touched");
    assert_eq!(app.call(Function::Grab, for_user(grab, "u1")).await.status, 202, "a verified address is served");
}

/// One valid token flooding any route a user calls is refused in Redis (429 with Retry-After) once
/// over that route's own budget, and nobody else is: another user is served at once.
#[tokio::test]
async fn a_flood_from_one_user_on_every_route_is_limited_and_others_are_served() {
    let app = TestApp::build(GrabPolicy::default(), false).await;
    let id = app.open_event(10).await;
    let flooder = format!("flood-{}", uuid::Uuid::now_v7().simple());
    let on = |name: &str| for_event(fixture(name), &id);
    let join = |user: &str| with_body(on("waitlist-join.json"), &json!({ "hash": app.hash_for(&id, user) }));
    type Request<'a> = &'a dyn Fn(&str) -> Value;
    let requests: [(&str, Function, Request); 9] = [
        ("events", Function::Query, &|u| for_user(fixture("query-events.json"), u)),
        ("event", Function::Query, &|u| for_user(on("query-event.json"), u)),
        ("verify-hash", Function::VerifyHash, &|u| for_user(on("verify-hash.json"), u)),
        ("order", Function::Query, &|u| for_user(on("query-order.json"), u)),
        ("pass-key", Function::Query, &|u| for_user(on("pass-key.json"), u)),
        ("cancel", Function::Grab, &|u| for_user(on("cancel.json"), u)),
        ("join", Function::Grab, &|u| for_user(join(u), u)),
        ("waitlist", Function::Grab, &|u| for_user(on("waitlist.json"), u)),
        ("receipt-key", Function::Grab, &|u| for_user(on("receipt-key.json"), u)),
    ];
    for (name, function, request) in requests {
        let limit = app.settings.user_limits.of(name).expect("every user route has a limit");
        assert_eq!(limit.window, std::time::Duration::from_secs(1), "this test counts within the default window");
        let replies =
            futures::future::join_all((0..limit.requests * 3).map(|_| app.call(function, request(&flooder)))).await;
        let limited: Vec<&Reply> = replies.iter().filter(|r| r.status == 429).collect();
        let served = replies.len() - limited.len();
        // A window may turn over during the burst: at most two windows' worth get through.
        assert!(served >= limit.requests as usize && served <= 2 * limit.requests as usize, "{name}: {served} served");
        assert!(limited.iter().all(|r| r.code() == "RATE_LIMITED" && r.retry_after.is_some()), "{name}");
        let other = app.call(function, request(&format!("calm-{}", uuid::Uuid::now_v7().simple()))).await;
        assert_ne!(other.status, 429, "{name}: another user is served during the flood");
        assert_ne!(other.status / 100, 5, "{name}: {}", other.body);
    }
}

/// Requests naming an event nobody released cost one DynamoDB read per environment and short
/// while, not one each: the miss is remembered briefly (a release becomes visible after it).
#[tokio::test]
async fn an_unknown_event_is_looked_up_once_then_remembered_briefly() {
    let app = TestApp::new().await;
    let unknown = fresh_event_id();
    let rebuilder = app.functions.rebuilder();
    assert!(rebuilder.event(&unknown).await.unwrap().is_none());
    // Released meanwhile: the remembered miss still answers, without a read ...
    app.functions
        .store
        .put_event(&test_event(
            unknown.clone(),
            1,
            time::OffsetDateTime::now_utc(),
            time::OffsetDateTime::now_utc() + time::Duration::hours(1),
        ))
        .await
        .unwrap();
    assert!(rebuilder.event(&unknown).await.unwrap().is_none(), "the miss was remembered");
    // ... until it expires.
    tokio::time::sleep(shared::recovery::MISS_KEPT + std::time::Duration::from_millis(50)).await;
    assert!(rebuilder.event(&unknown).await.unwrap().is_some());
}

/// Claims without a usable `sub`, and event ids no route accepts (a hash tag's braces, a key
/// separator, a path climb, spaces, non-ASCII, 10 KB): refused before any I/O.
#[tokio::test]
async fn a_token_without_a_subject_and_hostile_ids_are_refused_before_any_io() {
    let app = TestApp::new().await;
    let id = app.open_event(10).await;
    let before = app.cache(&id).await;
    for claims in [
        json!({ "email": "u1@example.com", "email_verified": "true" }),
        json!({ "sub": "a b", "email": "x@y.z" }),
        json!({ "sub": "" }),
    ] {
        let mut grab = app.grab_event(&id, "u1");
        grab["requestContext"]["authorizer"]["jwt"]["claims"] = claims;
        assert_problem(&app.call(Function::Grab, grab).await, 401, "UNAUTHORIZED");
    }
    for bad in ["{ev}", "a:b", "..", "a b", "événement", &"x".repeat(10_240), "a#b"] {
        let mut event = for_user(fixture("verify-hash.json"), "u1");
        event["pathParameters"]["id"] = json!(bad);
        event["rawPath"] = json!(format!("/events/{bad}/verify-hash"));
        assert_problem(&app.call(Function::VerifyHash, event).await, 400, "BAD_REQUEST");
    }
    assert_eq!(app.cache(&id).await, before);
}

#[tokio::test]
async fn grab_refuses_malformed_bodies() {
    let app = TestApp::new().await;
    let id = app.open_event(10).await;
    assert_problem(&app.call(Function::Grab, fixture("grab-bad-body.json")).await, 400, "BAD_REQUEST");
    let event = for_event(fixture("grab.json"), &id);
    assert_problem(
        &app.call(Function::Grab, with_body(event.clone(), &json!({ "hash": 5 }))).await,
        400,
        "BAD_REQUEST",
    );
    assert_problem(
        &app.call(Function::Grab, with_body(event.clone(), &json!({ "hsh": "x" }))).await,
        400,
        "BAD_REQUEST",
    );
    let mut no_body = event.clone();
    no_body.as_object_mut().unwrap().remove("body");
    assert_problem(&app.call(Function::Grab, no_body).await, 400, "BAD_REQUEST");
    assert_problem(
        &app.call(Function::Grab, with_raw_body(event, &"x".repeat(20_000))).await,
        413,
        "PAYLOAD_TOO_LARGE",
    );
    assert_eq!(app.functions.gate.stock(&id).await.unwrap(), Some(10));
}

#[tokio::test]
async fn grab_maps_every_refusal_of_the_script() {
    let policy = GrabPolicy { rate_limit: 3, rate_window: std::time::Duration::from_secs(60) };
    // Every grab through the script: without the sold-out memory (below, with it).
    let app = TestApp::for_mail_with(30, |s| {
        s.policy = policy;
        s.gate.sold_out_memory = std::time::Duration::ZERO;
    })
    .await;
    let now = OffsetDateTime::now_utc();
    let later = app.put_event(10, now + Duration::hours(1), now + Duration::hours(2)).await;
    assert_problem(&app.grab(&later, "u1").await, 403, "SALE_NOT_STARTED");
    let over = app.put_event(10, now - Duration::hours(2), now - Duration::hours(1)).await;
    assert_problem(&app.grab(&over, "u1").await, 410, "SALE_ENDED");
    assert_problem(&app.grab(&fresh_event_id(), "u1").await, 404, "EVENT_NOT_FOUND");

    let one = app.open_event(1).await;
    assert_eq!(app.grab(&one, "u1").await.status, 202);
    // A holder's retries are answered with the order, never limited.
    for _ in 0..5 {
        assert_eq!(app.grab(&one, "u1").await.status, 200);
    }
    // Refusals are counted: the fourth in the window is limited.
    for _ in 0..3 {
        assert_problem(&app.grab(&one, "u2").await, 409, "SOLD_OUT");
    }
    let limited = app.grab(&one, "u2").await;
    assert_problem(&limited, 429, "RATE_LIMITED");
    let retry: u64 = limited.retry_after.as_deref().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");

    // With the memory (the default), a sold-out event's refusals run no script and write nothing
    // per user in Redis (docs/DESIGN.md section 6); the environment counts them itself, against the
    // same limit: the fourth is limited too, and the holder's retries still are not.
    let remembering = TestApp::build(policy, false).await;
    let one = remembering.open_event(1).await;
    let (holder, fan) = (format!("u1-{}", own_tail(&one)), format!("u2-{}", own_tail(&one)));
    assert_eq!(remembering.grab(&one, &holder).await.status, 202);
    assert_problem(&remembering.grab(&one, "u3").await, 409, "SOLD_OUT");
    let fields = remembering.cache(&one).await;
    for _ in 0..3 {
        assert_problem(&remembering.grab(&one, &fan).await, 409, "SOLD_OUT");
    }
    let limited = remembering.grab(&one, &fan).await;
    assert_problem(&limited, 429, "RATE_LIMITED");
    assert!(limited.retry_after.is_some());
    assert_eq!(remembering.cache(&one).await, fields, "counted in the environment: nothing written in Redis");
    for _ in 0..5 {
        assert_eq!(remembering.grab(&one, &holder).await.status, 200);
    }
}

/// Per-user limits hold when Redis cannot count: every user route of a function built against an
/// unreachable Redis is still limited, by the environment's own count (docs/DESIGN.md section 3),
/// with the route table's budget; a user over it is refused before any other dependency is asked.
#[tokio::test]
async fn per_user_limits_hold_when_redis_cannot_count() {
    let app = TestApp::new().await;
    let id = app.open_event(7).await;
    let mut settings = app.settings.clone();
    settings.gate.redis_url = "redis://127.0.0.1:1".into();
    // A window long enough that this machine's pace cannot end it mid-test.
    settings.user_limits.window = std::time::Duration::from_secs(60);
    let budget = settings.user_limits.of("event").unwrap().requests;
    let offline = local_runner::Functions::build(&settings, &app.queue_url).await.unwrap();
    let user = format!("limited-{}", own_tail(&id));
    // GET /events/{id} with Redis down: answered from the snapshot, and counted here.
    let mut answered = 0;
    loop {
        let reply =
            call_with(&offline, Function::Query, for_user(for_event(fixture("query-event.json"), &id), &user)).await;
        match reply.status {
            200 => answered += 1,
            429 => {
                assert_problem(&reply, 429, "RATE_LIMITED");
                assert!(reply.retry_after.is_some());
                break;
            }
            other => panic!("{other}: {}", reply.body),
        }
        assert!(answered <= budget, "more than {budget} requests answered: the route went unlimited");
    }
    assert_eq!(answered, budget, "the route table's budget, counted by the environment");
    // Another user has a budget of their own.
    let other =
        call_with(&offline, Function::Query, for_user(for_event(fixture("query-event.json"), &id), "someone-else"))
            .await;
    assert_eq!(other.status, 200);
}

#[tokio::test]
async fn grab_answers_busy_fast_when_redis_is_unreachable() {
    let app = TestApp::new().await;
    let id = app.open_event(10).await;
    let mut settings = app.settings.clone();
    settings.gate.redis_url = "redis://127.0.0.1:1".into();
    let offline = local_runner::Functions::build(&settings, &app.queue_url).await.unwrap();
    // Fast: within the Redis timeouts' budget of a healthy answer on this machine as loaded now.
    let started = std::time::Instant::now();
    assert_eq!(app.call(Function::Query, for_event(fixture("query-event.json"), &id)).await.status, 200);
    let baseline = started.elapsed();
    let started = std::time::Instant::now();
    let reply = call_with(&offline, Function::Grab, app.grab_event(&id, "u1")).await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.content_type, "application/problem+json");
    let body = &reply.body;
    assert_eq!(body["code"], "BUSY");
    assert!(!body.to_string().contains("127.0.0.1"), "no internal detail in a 5xx body: {body}");
    let took = started.elapsed();
    assert!(took < baseline + std::time::Duration::from_millis(2_500), "took {took:?} (healthy: {baseline:?})");
    assert_eq!(app.functions.gate.stock(&id).await.unwrap(), Some(10), "nothing changed");
}

/// A `202` promises the order is durable somewhere. When the send fails and the cache has no
/// replica (the local stack's), the order is only in one server's outbox: the user is told
/// `503 BUSY`, the outbox keeps the order for reconcile, and the retry is told that same order.
#[tokio::test]
async fn a_failed_queue_send_without_a_replica_is_busy_and_so_is_the_retry_until_it_is_sent() {
    let app = TestApp::for_mail(30).await;
    let id = app.open_event(10).await;
    let unreachable_queue =
        format!("{}/000000000000/no-such-queue-{}", app.settings.aws_endpoint, uuid::Uuid::now_v7().simple());
    let broken = local_runner::Functions::build(&app.settings, &unreachable_queue).await.unwrap();
    let reply = call_with(&broken, Function::Grab, app.grab_event(&id, "u1")).await;
    assert_problem(&reply, 503, "BUSY");
    assert_eq!(reply.retry_after.as_deref(), Some("1"));
    let outbox = app.cache(&id).await.outbox;
    assert_eq!(outbox.len(), 1);
    let (order_id, entry) = outbox.first_key_value().unwrap();
    let entry: Value = serde_json::from_str(entry).unwrap();
    assert_eq!(entry["order_id"], order_id.as_str());
    assert_eq!(entry["email"], "u1@example.com");

    // The retry's 200 would be a promise too: while the queue is unreachable and no replica holds
    // the order, it is busy as well, and takes no second ticket.
    let retry = call_with(&broken, Function::Grab, app.grab_event(&id, "u1")).await;
    assert_problem(&retry, 503, "BUSY");
    assert_eq!(app.cache(&id).await.outbox.len(), 1, "the retry took no second ticket");
    // With the queue back, the retry sends the same order and is told of it.
    let retry = app.call(Function::Grab, app.grab_event(&id, "u1")).await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.body["order_id"], order_id.as_str());
    assert_eq!(retry.body["ticket_no"], entry["ticket_no"]);
    assert_eq!(app.cache(&id).await.outbox.len(), 1, "the retry took no second ticket");
    let sent = app.drain_queue().await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["order_id"], order_id.as_str());
}

/// The cache requires its AUTH token, locally as deployed: a client without it is refused on every
/// command, and a function given a wrong one answers `503 BUSY`, touching nothing.
#[tokio::test]
async fn the_cache_refuses_a_client_without_its_token() {
    let settings = local_runner::LocalSettings::from_env().unwrap();
    let bare = redis::Client::open(settings.gate.redis_url.as_str()).unwrap();
    let refused = match bare.get_multiplexed_async_connection().await {
        Ok(mut conn) => redis::cmd("GET").arg("anything").query_async::<Option<String>>(&mut conn).await.err(),
        Err(e) => Some(e),
    };
    let refused = refused.expect("refused without the token");
    assert!(refused.to_string().contains("NOAUTH") || refused.code() == Some("NOAUTH"), "{refused}");

    let app = TestApp::new().await;
    let id = app.open_event(3).await;
    let before = app.cache(&id).await;
    let mut wrong = app.settings.clone();
    wrong.gate.auth_token = Some("not-the-token".into());
    let intruder = local_runner::Functions::build(&wrong, &app.queue_url).await.unwrap();
    let reply = call_with(&intruder, Function::Grab, app.grab_event(&id, "u1")).await;
    assert_problem(&reply, 503, "BUSY");
    assert_eq!(app.cache(&id).await, before, "nothing written");
}
