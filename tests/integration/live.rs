//! The organiser's live view and the door's offline check-ins, against the real stack: the view's
//! figures are the cache's and the audit's, its rates are the grabs' outcomes as the grab
//! environment tallied them, and its refusals are problems; an offline check-in is stored at the
//! time the door let the pass in, a retried sync is no conflict, and a pass another door had
//! checked in first is one conflict on its order, counted by the audit; a door cannot backdate a
//! check-in or grow its conflicts; the door's figures and its lookup by ticket or order.

use serde_json::{Value, json};
use shared::{domain::EventId, http::routes::Function};
use time::{Duration, OffsetDateTime, format_description::well_known::Rfc3339};

use crate::{cancel_and_wait::as_member, helpers::*};

fn as_admin(mut event: Value) -> Value {
    event["requestContext"]["authorizer"]["jwt"]["claims"] = json!({
        "sub": "organiser", "email": "organiser@example.com", "email_verified": "true", "cognito:groups": "[admin]",
    });
    event
}

impl TestApp {
    async fn live(&self, event: &EventId, query: &[(&str, &str)]) -> Reply {
        self.call(Function::Query, as_admin(with_query(for_event(fixture("live.json"), event), query))).await
    }

    async fn check_in_offline(&self, event: &EventId, pass: &str, at: &str) -> Reply {
        let body = json!({ "pass": pass, "admitted_offline_at": at });
        self.call(Function::Door, as_admin(with_body(for_event(fixture("check-in.json"), event), &body))).await
    }

    /// The door's figures (and a holder, with `?ticket=` or `?order=`), asked by a staff member.
    async fn door_desk(&self, event: &EventId, query: &[(&str, &str)], groups: &str) -> Reply {
        let req = with_query(for_event(fixture("door-desk.json"), event), query);
        self.call(Function::Door, as_member(req, "door-1", groups)).await
    }

    async fn check_in_body(&self, event: &EventId, body: &Value) -> Reply {
        let req = with_body(for_event(fixture("check-in.json"), event), body);
        self.call(Function::Door, as_member(req, "door-1", "[staff]")).await
    }
}

/// Every outcome the live view tallied in its window.
fn tallied(view: &Value) -> std::collections::BTreeMap<String, u64> {
    let mut outcomes = std::collections::BTreeMap::<String, u64>::new();
    for second in view["grabs"]["per_second"].as_array().unwrap() {
        for (code, n) in second["outcomes"].as_object().unwrap() {
            *outcomes.entry(code.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    outcomes
}

fn check<'a>(view: &'a Value, name: &str) -> &'a Value {
    view["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {view}"))
}

#[tokio::test]
async fn the_live_view_shows_the_cache_the_tallied_outcomes_and_the_audit() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    for user in ["ada", "bob", "cy", "dee", "eve"] {
        app.grab(&event, user).await;
    }
    assert_eq!(app.grab(&event, "ada").await.status, 200, "a retry: ALREADY");
    // Refused before the gate: a bad hash (counted, for an event the gate answered for here), a
    // bad hash for an event nobody released, and a grab of that event. Neither of the last two
    // may make a key.
    let forged = with_body(app.grab_event(&event, "fay"), &json!({ "hash": "v1.1.AAAA" }));
    assert_eq!(app.call(Function::Grab, forged).await.code(), "BAD_HASH");
    let made_up = fresh_event_id();
    let forged = with_body(app.grab_event(&made_up, "fay"), &json!({ "hash": "v1.1.AAAA" }));
    assert_eq!(app.call(Function::Grab, forged).await.code(), "BAD_HASH");
    assert_eq!(app.grab(&made_up, "fay").await.code(), "EVENT_NOT_FOUND");
    app.functions.grab.tally().flush().await;
    let mut redis = app.redis.clone();
    let made_up_keys: Vec<String> =
        redis::AsyncCommands::keys(&mut redis, format!("tally:{{tally:{made_up}:*")).await.unwrap();
    assert!(made_up_keys.is_empty(), "{made_up_keys:?}");

    let live = app.live(&event, &[]).await;
    assert_eq!(live.status, 200, "{}", live.body);
    let v = &live.body;
    assert_eq!(
        (v["cache"].as_str(), v["remaining"].as_u64(), v["capacity"].as_u64()),
        (Some("live"), Some(0), Some(3))
    );
    assert_eq!(v["in_flight"].as_u64(), Some(3), "three orders in the outbox, none stored yet");
    assert_eq!(v["waiting"].as_u64(), Some(0));
    let want = [("ALREADY", 1), ("BAD_HASH", 1), ("OK", 3), ("SOLD_OUT", 2)]
        .map(|(c, n)| (c.to_owned(), n))
        .into_iter()
        .collect();
    assert_eq!(tallied(v), want, "every grab tallied once, by its outcome");
    assert_eq!(v["blocked"], json!({"BAD_HASH": 1, "RATE_LIMITED": 0, "NOT_ADMITTED": 0, "BALLOT_ONLY": 0}));
    // Sold out, at the second of the last grant; the oldest order on its way is seconds old.
    assert_eq!(v["state"], "SOLD_OUT");
    let last_grant = v["grabs"]["per_second"].as_array().unwrap().iter().rev().find(|s| s["outcomes"]["OK"].is_u64());
    let second = last_grant.unwrap()["second"].as_i64().unwrap();
    let sold_out_at = OffsetDateTime::parse(v["sold_out_at"].as_str().unwrap(), &Rfc3339).unwrap();
    assert_eq!(sold_out_at.unix_timestamp(), second);
    let age = v["oldest_unconfirmed"]["age_s"].as_u64().expect("an order on its way");
    assert!(age < v["order_late_after_s"].as_u64().unwrap(), "{age}");
    assert_eq!((v["order_late_after_s"].as_u64(), v["order_stuck_after_s"].as_u64()), (Some(10), Some(60)));
    assert!(v["entries"].is_null(), "a first-come sale has no entries");
    assert_eq!(check(&v["audit"], "orders_stored_in_time")["passed"], true);
    assert_eq!(v["grabs"]["until"].as_i64().unwrap() - v["grabs"]["from"].as_i64().unwrap(), 5 * 60 - 1);
    assert_eq!((v["audit"]["confirmed"].as_u64(), v["audit"]["passed"].as_bool()), (Some(0), Some(true)));
    assert!(v["audit"]["as_of"].is_string());

    // Once the orders are stored, the queue is empty and (an audit later) they are confirmed.
    app.deliver_all().await;
    let drained = app.live(&event, &[("minutes", "1")]).await;
    assert_eq!(drained.body["in_flight"].as_u64(), Some(0));
    assert!(drained.body["oldest_unconfirmed"].is_null(), "{}", drained.body);
    assert_eq!(drained.body["grabs"]["until"].as_i64().unwrap() - drained.body["grabs"]["from"].as_i64().unwrap(), 59);
    let confirmed = eventually(std::time::Duration::from_secs(12), || async {
        app.live(&event, &[]).await.body["audit"]["confirmed"].as_u64() == Some(3)
    })
    .await;
    assert!(confirmed, "the audit is at most five seconds old");
    let report = app.report(&event, None).await.body;
    let audit = app.live(&event, &[]).await.body["audit"].clone();
    for field in ["confirmed", "mails_sent", "checked_in", "check_in_conflicts", "cancelled", "passed"] {
        assert_eq!(audit[field], report[field], "{field}: the live view's audit is the report's");
    }

    // Refusals: problems, and nothing read.
    for bad in ["0", "16", "01", "+1", "x", ""] {
        let r = app.live(&event, &[("minutes", bad)]).await;
        assert_eq!((r.status, r.code()), (400, "BAD_REQUEST"), "minutes={bad}");
    }
    assert_eq!(app.live(&fresh_event_id(), &[]).await.code(), "EVENT_NOT_FOUND");
    let student = app.call(Function::Query, for_user(for_event(fixture("live.json"), &event), "ada")).await;
    assert_eq!(student.code(), "FORBIDDEN");
}

#[tokio::test]
async fn an_offline_check_in_keeps_its_time_and_two_doors_are_one_conflict() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    for user in ["ada", "bob"] {
        assert_eq!(app.grab(&event, user).await.status, 202);
    }
    app.deliver_all().await;
    let (ada, bob) = (app.pass_of("ada").await, app.pass_of("bob").await);

    // Ada was let in offline a minute ago; the sync stores that time, and a retried sync (its
    // reply lost) finds its own time: no conflict.
    let at = (OffsetDateTime::now_utc() - Duration::seconds(30)).format(&Rfc3339).unwrap();
    let synced = app.check_in_offline(&event, &ada, &at).await;
    assert_eq!(synced.status, 200, "{}", synced.body);
    assert_eq!(synced.body["checked_in_at"], at);
    let again = app.check_in_offline(&event, &ada, &at).await;
    assert_eq!((again.status, again.code()), (409, "ALREADY_CHECKED_IN"));
    assert_eq!(app.report(&event, None).await.body["check_in_conflicts"], 0);

    // Bob was checked in online at one door, and let in offline at another: one conflict, however
    // often the second door retries.
    assert_eq!(app.check_in(&event, &bob, "[staff]").await.status, 200);
    let later = OffsetDateTime::now_utc().format(&Rfc3339).unwrap();
    for _ in 0..2 {
        let second = app.check_in_offline(&event, &bob, &later).await;
        assert_eq!((second.status, second.code()), (409, "ALREADY_CHECKED_IN"));
    }
    let report = app.report(&event, None).await.body;
    assert_eq!((report["checked_in"].as_u64(), report["check_in_conflicts"].as_u64()), (Some(2), Some(1)));
    assert!(report["passed"].as_bool().unwrap(), "a conflict is counted, not a failed invariant");
    let orders = app.call(Function::Query, as_admin(for_event(fixture("query-attendees.json"), &event))).await;
    let conflicts: Vec<u64> =
        orders.body["orders"].as_array().unwrap().iter().map(|o| o["check_in_conflicts"].as_u64().unwrap()).collect();
    assert_eq!(conflicts.iter().sum::<u64>(), 1, "{conflicts:?}");

    // An offline time that is not one, or in the future, is refused and changes nothing.
    let future = (OffsetDateTime::now_utc() + Duration::minutes(5)).format(&Rfc3339).unwrap();
    for bad in ["yesterday", "2026-13-01T00:00:00Z", future.as_str()] {
        let r = app.check_in_offline(&event, &ada, bad).await;
        assert_eq!((r.status, r.code()), (400, "BAD_REQUEST"), "{bad}");
    }
    assert_eq!(app.report(&event, None).await.body["check_in_conflicts"], 1);
}

#[tokio::test]
async fn a_door_cannot_backdate_or_inflate_its_check_ins() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    for user in ["ada", "bob"] {
        assert_eq!(app.grab(&event, user).await.status, 202);
    }
    app.deliver_all().await;
    let (ada, bob) = (app.pass_of("ada").await, app.pass_of("bob").await);

    // "Let in offline" ten minutes ago: before Ada's order existed. Refused, nothing written.
    let before = (OffsetDateTime::now_utc() - Duration::minutes(10)).format(&Rfc3339).unwrap();
    let r = app.check_in_offline(&event, &ada, &before).await;
    assert_eq!((r.status, r.code()), (409, "OFFLINE_TIME_REFUSED"), "{}", r.body);
    // Before the door's window opened (the sale's start, for an event without `starts_at`).
    let long_ago = "2020-01-01T00:00:00Z";
    let r = app.check_in_offline(&event, &ada, long_ago).await;
    assert_eq!((r.status, r.code()), (409, "OFFLINE_TIME_REFUSED"), "{}", r.body);
    assert_eq!(app.report(&event, None).await.body["checked_in"], 0, "nothing recorded");

    // Bob checked in online; a door then syncs him "let in offline" forty times, each time with a
    // new time: one conflict, and at most `CONFLICT_TIMES_KEPT` times kept on his order.
    assert_eq!(app.check_in(&event, &bob, "[staff]").await.status, 200);
    let now = OffsetDateTime::now_utc();
    for i in 0..40 {
        let at = (now - Duration::milliseconds(i * 100)).format(&Rfc3339).unwrap();
        let r = app.check_in_offline(&event, &bob, &at).await;
        assert_eq!((r.status, r.code()), (409, "ALREADY_CHECKED_IN"));
    }
    assert_eq!(app.report(&event, None).await.body["check_in_conflicts"], 1);
    let orders = app.call(Function::Query, as_admin(for_event(fixture("query-attendees.json"), &event))).await;
    let kept: Vec<u64> =
        orders.body["orders"].as_array().unwrap().iter().map(|o| o["check_in_conflicts"].as_u64().unwrap()).collect();
    assert_eq!(kept.iter().max(), Some(&(shared::store::check_in::CONFLICT_TIMES_KEPT as u64)), "{kept:?}");

    // The check-in route is limited per user: a burst past the limit (the route table's, a window)
    // is refused with the wait, before anything is read (the bodies here are not even JSON).
    let limit = app.settings.user_limits.of("check-in").expect("the check-in limit").requests as usize;
    let burst = (0..limit + 20).map(|_| {
        let req = with_raw_body(for_event(fixture("check-in.json"), &event), "not json");
        app.call(Function::Door, as_member(req, "door-burst", "[staff]"))
    });
    let replies = futures::future::join_all(burst).await;
    let limited = replies.iter().filter(|r| r.code() == "RATE_LIMITED").count();
    assert!(
        limited >= 10,
        "{limited} of {} limited: {:?}",
        limit + 20,
        replies.iter().map(|r| r.code()).collect::<Vec<_>>()
    );
    assert!(replies.iter().all(|r| matches!(r.code(), "RATE_LIMITED" | "BAD_REQUEST")));
}

#[tokio::test]
async fn a_scan_whose_reply_was_lost_is_the_same_check_in_when_the_door_sends_it_again() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(2).await;
    assert_eq!(app.grab(&event, "ada").await.status, 202);
    app.deliver_all().await;
    let ada = app.pass_of("ada").await;
    // The door's scan reached the server, its reply did not: the door kept it and sends it again
    // at its own (earlier) time, with the same scan id.
    let first = app.check_in_body(&event, &json!({ "pass": ada, "scan": "scan-0001" })).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let earlier = (OffsetDateTime::now_utc() - Duration::seconds(2)).format(&Rfc3339).unwrap();
    let again =
        app.check_in_body(&event, &json!({ "pass": ada, "scan": "scan-0001", "admitted_offline_at": earlier })).await;
    assert_eq!((again.status, &again.body["checked_in_at"]), (200, &first.body["checked_in_at"]), "{}", again.body);
    // Another scan of the same pass is another door's: refused, and (offline) a conflict.
    let other =
        app.check_in_body(&event, &json!({ "pass": ada, "scan": "scan-0002", "admitted_offline_at": earlier })).await;
    assert_eq!(other.code(), "ALREADY_CHECKED_IN");
    let report = app.report(&event, None).await.body;
    assert_eq!((report["checked_in"].as_u64(), report["check_in_conflicts"].as_u64()), (Some(1), Some(1)));
    let bad = app.check_in_body(&event, &json!({ "pass": ada, "scan": "not a scan id!" })).await;
    assert_eq!(bad.code(), "BAD_REQUEST");
}

#[tokio::test]
async fn the_door_counts_its_tickets_finds_a_holder_and_lets_one_in_by_number() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    let mut numbers = std::collections::BTreeMap::new();
    for user in ["ada", "bob"] {
        let r = app.grab(&event, user).await;
        assert_eq!(r.status, 202);
        numbers.insert(user, (r.body["ticket_no"].as_u64().unwrap(), r.body["order_id"].as_str().unwrap().to_owned()));
    }
    app.deliver_all().await;
    let ada = app.pass_of("ada").await;
    assert_eq!(app.check_in(&event, &ada, "[staff]").await.status, 200);

    // Set-up asks this first: a fan is refused, another event's staff too; this event's staff see
    // the event and its figures.
    let fan = app.door_desk(&event, &[], "[]").await;
    assert_eq!((fan.status, fan.code()), (403, "FORBIDDEN"));
    assert_eq!(app.door_desk(&event, &[], "[staff-another-event]").await.code(), "FORBIDDEN");
    let desk = app.door_desk(&event, &[], &format!("[staff-{event}]")).await;
    assert_eq!(desk.status, 200, "{}", desk.body);
    assert_eq!((desk.body["tickets"].as_u64(), desk.body["checked_in"].as_u64()), (Some(2), Some(1)));
    assert!(desk.body["title"].is_string() && desk.body["check_in_from"].is_string() && desk.body["as_of"].is_string());
    assert!(desk.body["holder"].is_null());

    // Bob's phone died: found by his ticket number and by his order id, his address masked.
    let (bob_no, bob_order) = numbers["bob"].clone();
    let by_number = app.door_desk(&event, &[("ticket", &bob_no.to_string())], "[staff]").await;
    assert_eq!(by_number.status, 200, "{}", by_number.body);
    let holder = &by_number.body["holder"];
    assert_eq!((holder["order_id"].as_str(), holder["status"].as_str()), (Some(bob_order.as_str()), Some("CONFIRMED")));
    assert_eq!(holder["email"], "b\u{2022}\u{2022}\u{2022}@example.com");
    assert!(holder["checked_in_at"].is_null());
    let by_order = app.door_desk(&event, &[("order", &bob_order)], "[staff]").await;
    assert_eq!(by_order.body["holder"]["ticket_no"].as_u64(), Some(bob_no), "{}", by_order.body);
    // Let in by number, once, at a door that gave its name: the figures count check-ins by door.
    let manual = app.check_in_body(&event, &json!({ "ticket_no": bob_no, "door": "Gate A" })).await;
    assert_eq!(manual.status, 200, "{}", manual.body);
    let report = app.report(&event, None).await.body;
    assert_eq!(report["check_ins_by_door"], json!({"(no door named)": 1, "Gate A": 1}));
    let again = app.check_in_body(&event, &json!({ "ticket_no": bob_no })).await;
    assert_eq!((again.status, again.code()), (409, "ALREADY_CHECKED_IN"));
    let held = app.door_desk(&event, &[("ticket", &bob_no.to_string())], "[staff]").await;
    assert!(held.body["holder"]["checked_in_at"].is_string());

    // What is not there, or not asked right, is a problem; nothing written.
    let free = (1..=3u64).find(|n| *n != bob_no && *n != numbers["ada"].0).unwrap();
    for (query, code) in [
        (vec![("ticket", free.to_string())], "TICKET_NOT_FOUND"),
        (vec![("order", "0193a000-0000-7000-8000-000000000000".to_owned())], "TICKET_NOT_FOUND"),
        (vec![("ticket", "0".to_owned())], "BAD_REQUEST"),
        (vec![("ticket", "x".to_owned())], "BAD_REQUEST"),
        (vec![("order", "not-an-order".to_owned())], "BAD_REQUEST"),
        (vec![("ticket", bob_no.to_string()), ("order", bob_order.clone())], "BAD_REQUEST"),
    ] {
        let query: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(app.door_desk(&event, &query, "[staff]").await.code(), code, "{query:?}");
    }
    for (body, code) in [
        (json!({ "ticket_no": free }), "TICKET_NOT_FOUND"),
        (json!({ "ticket_no": bob_no, "admitted_offline_at": "2026-01-01T00:00:00Z" }), "BAD_REQUEST"),
        (json!({ "ticket_no": bob_no, "pass": ada }), "BAD_REQUEST"),
        (json!({ "ticket_no": free, "door": "Gate <A>" }), "BAD_REQUEST"),
        (json!({ "ticket_no": free, "door": "   " }), "BAD_REQUEST"),
        (json!({}), "BAD_REQUEST"),
    ] {
        assert_eq!(app.check_in_body(&event, &body).await.code(), code, "{body}");
    }
    let report = app.report(&event, None).await.body;
    assert_eq!((report["checked_in"].as_u64(), report["confirmed"].as_u64()), (Some(2), Some(2)));
}

#[tokio::test]
async fn the_doors_lookup_says_a_ticket_was_cancelled() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    let grabbed = app.grab(&event, "cy").await;
    let (number, order) =
        (grabbed.body["ticket_no"].as_u64().unwrap(), grabbed.body["order_id"].as_str().unwrap().to_owned());
    app.deliver_all().await;
    assert_eq!(app.cancel(&event, "cy").await.status, 200);
    for query in [("ticket", number.to_string()), ("order", order.clone())] {
        let found = app.door_desk(&event, &[(query.0, query.1.as_str())], "[staff]").await;
        assert_eq!(found.status, 200, "{query:?}: {}", found.body);
        let holder = &found.body["holder"];
        assert_eq!(
            (holder["status"].as_str(), holder["order_id"].as_str()),
            (Some("CANCELLED"), Some(order.as_str())),
            "{query:?}"
        );
    }
}

#[tokio::test]
async fn an_order_stuck_on_its_way_fails_the_audit() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    assert_eq!(app.grab(&event, "ada").await.status, 202);
    // An order decided two minutes ago and never stored (a consumer down that long): planted in
    // the outbox as the script writes it, under a UUIDv7 of that time.
    let then = OffsetDateTime::now_utc() - Duration::minutes(2);
    let id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(uuid::NoContext, then.unix_timestamp() as u64, 0));
    let mut redis = app.redis.clone();
    let _: () =
        redis::AsyncCommands::hset(&mut redis, shared::gate::keys::outbox(&event), id.to_string(), "{}").await.unwrap();
    let live = app.live(&event, &[]).await.body;
    let age = live["oldest_unconfirmed"]["age_s"].as_u64().unwrap();
    assert!((120..130).contains(&age), "{}", live["oldest_unconfirmed"]);
    let stuck = check(&live["audit"], "orders_stored_in_time");
    assert_eq!(stuck["passed"], false, "{stuck}");
    assert_eq!(live["audit"]["passed"], false, "the audit is not green while an order is stuck");
    assert_eq!(live["oldest_unconfirmed"]["stuck"], true);
    // Once orders are stored again (the consumer back), the old order's wait is a drain that
    // moves, not a stop: the check passes, and says so.
    app.deliver_all().await;
    let report = app.report(&event, None).await.body;
    let moving = check(&report, "orders_stored_in_time");
    assert_eq!(moving["passed"], true, "{moving}");
    assert!(moving["detail"].as_str().unwrap().contains("being stored"), "{moving}");
    let _: () =
        redis::AsyncCommands::hdel(&mut redis, shared::gate::keys::outbox(&event), id.to_string()).await.unwrap();
}

/// Another sale's orders ahead on the shared queue: this event's oldest order waits past the
/// stuck time while the consumer stores theirs. That is a queue, not a stop: the audit passes and
/// says so, the live view says it waits behind other sales and gives the queue's depth. Once the
/// consumer has stored nothing for as long either, it is stuck.
#[tokio::test]
async fn an_order_behind_other_sales_orders_is_not_called_stuck() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    let other = app.open_event(3).await;
    let then = OffsetDateTime::now_utc() - Duration::minutes(2);
    let id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(uuid::NoContext, then.unix_timestamp() as u64, 0));
    let mut redis = app.redis.clone();
    let _: () =
        redis::AsyncCommands::hset(&mut redis, shared::gate::keys::outbox(&event), id.to_string(), "{}").await.unwrap();
    // The consumer (as the event source mapping runs it) stores the other sale's orders meanwhile.
    assert_eq!(app.grab(&other, "bob").await.status, 202);
    let poller = app.poller();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while app.report(&other, None).await.body["confirmed"] != 1 && std::time::Instant::now() < deadline {
        let _ = poller.poll_once().await;
    }
    let live = app.live(&event, &[]).await.body;
    let oldest = &live["oldest_unconfirmed"];
    assert_eq!(
        (oldest["stuck"].as_bool(), oldest["behind_other_sales"].as_bool()),
        (Some(false), Some(true)),
        "{oldest}"
    );
    let queued = check(&live["audit"], "orders_stored_in_time");
    assert_eq!(queued["passed"], true, "{queued}");
    assert!(queued["detail"].as_str().unwrap().contains("behind other sales"), "{queued}");
    assert!(live["queue_depth"].is_u64(), "the shared queue's depth: {}", live["queue_depth"]);
    // The consumer's last store three minutes ago: nothing moves, the order is stuck.
    let queue = app.queue_url.rsplit('/').next().unwrap().to_owned();
    let long_ago = shared::domain::event::epoch_ms(OffsetDateTime::now_utc() - Duration::minutes(3));
    let _: () =
        redis::AsyncCommands::set(&mut redis, shared::gate::keys::consumer_stored(&queue), long_ago).await.unwrap();
    let report = app.report(&event, None).await.body;
    assert_eq!(check(&report, "orders_stored_in_time")["passed"], false, "{report}");
    let _: () =
        redis::AsyncCommands::hdel(&mut redis, shared::gate::keys::outbox(&event), id.to_string()).await.unwrap();
}
