//! The grab script alone, against a real redis-server: each outcome, in the design's order, the
//! clock rule near the sale's boundaries, and what a refusal writes (its counter, nothing else).

use std::{collections::HashSet, time::Duration};

use redis::AsyncCommands;
use shared::{
    config::GrabPolicy,
    domain::{Email, EventId, Holding, OrderId, TicketNo, UserId, event::epoch_ms, order::MessageHead},
    gate::{GrabAttempt, GrabOutcome, keys},
    http::routes::Function,
};
use time::OffsetDateTime;

use crate::helpers::{TestApp, fixture, for_event, for_user, fresh_event_id, test_event};

const POLICY: GrabPolicy = GrabPolicy { rate_limit: 1_000, rate_window: Duration::from_secs(1) };

fn now_ms() -> i64 {
    epoch_ms(OffsetDateTime::now_utc())
}

/// A grab whose caller's clock reads `clock_ms`.
async fn grab_at(app: &TestApp, event: &EventId, user: &str, policy: GrabPolicy, clock_ms: i64) -> GrabOutcome {
    let user = UserId::parse(user).unwrap();
    let order_id = OrderId::generate();
    let email = Email::parse("x@example.com").unwrap();
    let head = MessageHead::new(&order_id, event, &user, &email, "2026-11-22T10:00:00Z");
    let attempt = GrabAttempt { event, user: &user, order_id: &order_id, head: &head, clock_ms };
    app.functions.gate.grab(&attempt, policy).await.expect("script runs").outcome
}

async fn grab_with(app: &TestApp, event: &EventId, user: &str, policy: GrabPolicy) -> GrabOutcome {
    grab_at(app, event, user, policy, now_ms()).await
}

async fn grab(app: &TestApp, event: &EventId, user: &str) -> GrabOutcome {
    grab_with(app, event, user, POLICY).await
}

#[tokio::test]
async fn a_grab_pops_a_number_records_the_holding_and_writes_the_outbox() {
    let app = TestApp::new().await;
    let event = app.open_event(3).await;
    let GrabOutcome::Granted { holding: Holding { order: order_id, ticket_no }, message, .. } =
        grab(&app, &event, "u1").await
    else {
        panic!("expected OK");
    };
    assert_eq!(ticket_no, TicketNo::new(1));
    let cache = app.cache(&event).await;
    assert_eq!(cache.seats, [2, 3]);
    assert_eq!(cache.holdings.into_iter().collect::<Vec<_>>(), [("u1".to_owned(), (order_id.to_string(), 1))]);
    assert!(cache.counters.is_empty(), "an OK grab leaves no counter");
    assert_eq!(
        cache.outbox.into_iter().collect::<Vec<_>>(),
        [(order_id.to_string(), message.clone())],
        "the outbox holds exactly the message grab sends, under its order id"
    );
    let message: serde_json::Value = serde_json::from_str(&message).unwrap();
    assert_eq!(message["ticket_no"], 1);
    assert_eq!(message["order_id"], order_id.as_str());
    assert_eq!(message["event_id"], event.as_str());
    assert_eq!(message["v"], 1);
}

#[tokio::test]
async fn already_returns_the_first_order_changes_nothing_and_is_never_rate_limited() {
    let app = TestApp::new().await;
    let event = app.open_event(5).await;
    let policy = GrabPolicy { rate_limit: 2, rate_window: Duration::from_secs(60) };
    let GrabOutcome::Granted { holding: Holding { order: order_id, ticket_no }, .. } =
        grab_with(&app, &event, "u1", policy).await
    else {
        panic!()
    };
    let before = app.cache(&event).await;
    for _ in 0..5 {
        let again = grab_with(&app, &event, "u1", policy).await;
        assert_eq!(again, GrabOutcome::Already(Holding { order: order_id.clone(), ticket_no }));
    }
    assert_eq!(app.cache(&event).await, before, "a retry writes nothing, not even a counter");
}

#[tokio::test]
async fn sold_out_when_no_number_is_left_and_only_the_counter_is_written() {
    let app = TestApp::new().await;
    let event = app.open_event(1).await;
    assert_eq!(grab(&app, &event, "u1").await.code(), "OK");
    let before = app.cache(&event).await;
    assert_eq!(grab(&app, &event, "u2").await, GrabOutcome::SoldOut);
    let after = app.cache(&event).await;
    assert_eq!(after.clone().without_counters(), before);
    assert_eq!(after.counters.keys().collect::<Vec<_>>(), ["u2"]);
    assert!(after.counters["u2"].ends_with(":1"), "one refusal counted: {}", after.counters["u2"]);
}

#[tokio::test]
async fn far_from_its_boundaries_the_window_is_checked_without_writing_more_than_the_counter() {
    let app = TestApp::new().await;
    let now = OffsetDateTime::now_utc();
    let hour = time::Duration::hours(1);
    let future = app.put_event(5, now + hour, now + 2 * hour).await;
    let past = app.put_event(5, now - 2 * hour, now - hour).await;
    let before = (app.cache(&future).await, app.cache(&past).await);
    assert_eq!(grab(&app, &future, "u1").await, GrabOutcome::NotStarted);
    assert_eq!(grab(&app, &past, "u1").await, GrabOutcome::Ended);
    let after = (app.cache(&future).await, app.cache(&past).await);
    assert_eq!((after.0.clone().without_counters(), after.1.clone().without_counters()), before);
    assert_eq!((after.0.counters.len(), after.1.counters.len()), (1, 1), "each refusal wrote its counter");
}

/// Near the opening or closing second the caller's clock is not trusted: a caller whose clock is
/// off by seconds still gets the verdict of Redis's own clock (the same machine's, here).
#[tokio::test]
async fn near_a_boundary_redis_time_decides_whatever_the_callers_clock_says() {
    let app = TestApp::new().await;
    let now = OffsetDateTime::now_utc();
    let (ms, hour) = (now_ms(), time::Duration::hours(1));
    let secs = time::Duration::seconds;
    let opens_soon = app.put_event(5, now + secs(5), now + hour).await;
    let just_opened = app.put_event(5, now - secs(5), now + hour).await;
    let closes_soon = app.put_event(5, now - hour, now + secs(5)).await;
    let just_closed = app.put_event(5, now - hour, now - secs(5)).await;
    // A clock 8 s fast believes the sale opened 3 s ago, and that it closed 3 s ago.
    assert_eq!(grab_at(&app, &opens_soon, "u1", POLICY, ms + 8_000).await, GrabOutcome::NotStarted);
    assert_eq!(grab_at(&app, &closes_soon, "u1", POLICY, ms + 8_000).await.code(), "OK");
    // A clock 8 s slow believes the sale opens in 3 s, and that it is still open.
    assert_eq!(grab_at(&app, &just_opened, "u1", POLICY, ms - 8_000).await.code(), "OK");
    assert_eq!(grab_at(&app, &just_closed, "u1", POLICY, ms - 8_000).await, GrabOutcome::Ended);
}

#[tokio::test]
async fn an_unknown_event_is_not_found_and_leaves_no_keys() {
    let app = TestApp::new().await;
    let event = fresh_event_id();
    assert_eq!(grab(&app, &event, "u1").await, GrabOutcome::NotFound);
    let mut r = app.redis.clone();
    let n: u32 = r.exists(&keys::cache(&event)).await.unwrap();
    assert_eq!(n, 0);
}

#[tokio::test]
async fn refusals_are_rate_limited_per_user_and_a_new_window_lets_the_user_through() {
    let app = TestApp::new().await;
    let now = OffsetDateTime::now_utc();
    // The sale opens in a minute: far enough that the caller's clock decides the window.
    let event = app.put_event(5, now + time::Duration::minutes(1), now + time::Duration::hours(1)).await;
    let policy = GrabPolicy { rate_limit: 2, rate_window: Duration::from_millis(300) };
    let t0 = now_ms();
    assert_eq!(grab_at(&app, &event, "u1", policy, t0).await, GrabOutcome::NotStarted);
    assert_eq!(grab_at(&app, &event, "u1", policy, t0 + 100).await, GrabOutcome::NotStarted);
    let before = app.cache(&event).await;
    assert_eq!(before.counters["u1"], format!("#{:015}:2", t0 + 300), "two refusals in the window ending at t0 + 300");
    assert_eq!(
        grab_at(&app, &event, "u1", policy, t0 + 200).await,
        GrabOutcome::RateLimited { retry_after_ms: 100 },
        "limited until the window ends"
    );
    assert_eq!(app.cache(&event).await, before, "a limited request writes nothing");
    // Another user has a counter of their own.
    assert_eq!(grab_at(&app, &event, "u2", policy, t0 + 200).await, GrabOutcome::NotStarted);
    // When the window is over the count starts again.
    assert_eq!(grab_at(&app, &event, "u1", policy, t0 + 300).await, GrabOutcome::NotStarted);
    assert_eq!(app.cache(&event).await.counters["u1"], format!("#{:015}:1", t0 + 600));
}

#[tokio::test]
async fn an_ok_grab_replaces_the_users_counter_with_the_holding() {
    let app = TestApp::new().await;
    let now = OffsetDateTime::now_utc();
    let event = app.put_event(5, now - time::Duration::minutes(1), now + time::Duration::hours(1)).await;
    // The user tried early, with a clock that says the sale was still a minute away.
    let early = now_ms() - 120_000;
    assert_eq!(grab_at(&app, &event, "u1", POLICY, early).await, GrabOutcome::NotStarted);
    assert_eq!(app.cache(&event).await.counters.len(), 1);
    let GrabOutcome::Granted { holding: Holding { order: order_id, .. }, .. } = grab(&app, &event, "u1").await else {
        panic!()
    };
    let cache = app.cache(&event).await;
    assert!(cache.counters.is_empty());
    assert_eq!(cache.holdings["u1"], (order_id.to_string(), 1));
}

#[tokio::test]
async fn a_script_error_writes_nothing_not_even_the_counter() {
    let app = TestApp::new().await;
    let event = app.open_event(2).await;
    let before = app.cache(&event).await;
    let script = redis::Script::new(shared::gate::GRAB_SOURCE);
    let mut r = app.redis.clone();
    let now = format!("{:015}", now_ms());
    let opening = app.functions.gate.opening(&event).await.unwrap();
    // A caller that forgets an argument (here the opening field), or sends times in another
    // format, is refused before anything is read.
    for args in [
        vec!["=u1", OrderId::generate().as_str(), r#"{"v":1"#, "5", &now, &now],
        vec!["=u1", OrderId::generate().as_str(), r#"{"v":1"#, "5", &now, "soon", &opening],
        vec!["=u1", OrderId::generate().as_str(), r#"{"v":1"#, "5", &now, "1763900000000", &opening],
    ] {
        let mut call = script.key(keys::meta(&event));
        call.key(keys::seats(&event)).key(keys::outbox(&event));
        for arg in &args {
            call.arg(*arg);
        }
        let result: redis::RedisResult<String> = call.invoke_async(&mut r).await;
        assert!(result.is_err(), "{args:?}: {result:?}");
    }
    assert_eq!(app.cache(&event).await, before);
}

#[tokio::test]
async fn a_cache_written_in_another_history_decides_nothing_and_writes_nothing() {
    let app = TestApp::new().await;
    let event = app.open_event(2).await;
    let GrabOutcome::Granted { .. } = grab(&app, &event, "u1").await else { panic!() };
    // What a promoted replica holds: the event as the old primary wrote it, under the old
    // primary's replication id (12 hex digits of it).
    let opening = app.functions.gate.opening(&event).await.unwrap();
    let old = keys::opening(&"0".repeat(12));
    let mut r = app.redis.clone();
    let opens: String = r.hget(keys::meta(&event), &opening).await.unwrap();
    let _: () = redis::pipe()
        .hdel(keys::meta(&event), &opening)
        .hset(keys::meta(&event), &old, opens)
        .query_async(&mut r)
        .await
        .unwrap();
    let before = app.cache(&event).await;
    for user in ["u1", "u2", "u3"] {
        assert_eq!(grab(&app, &event, user).await, GrabOutcome::Stale, "{user}");
    }
    assert_eq!(app.cache(&event).await, before, "a stale cache is not written to, not even a counter");
    // Everything that reads the cache sees it as lost, and a user's order it cannot vouch for
    // (their grab may be among the writes it lacks) is "busy", not "no order".
    assert_eq!(app.functions.gate.stock(&event).await.unwrap(), None);
    assert_eq!(app.functions.gate.window(&event).await.unwrap(), None);
    // With the sent record lost as well, nothing says which orders are on the queue until it drains.
    let buckets = app.functions.gate.buckets(&event).await.unwrap();
    let _: () = r.del(keys::sent(buckets.get(0).unwrap())).await.unwrap();
    let order = app.call(Function::Query, for_user(for_event(fixture("query-order.json"), &event), "u2")).await;
    assert_eq!((order.status, order.code()), (503, "BUSY"), "{}", order.body);
}

/// A cache written in another history whose sent record is there: the record holds every order
/// that may be on the queue, so the rebuild runs at once, whatever the queue holds, and the users'
/// orders read as they are.
#[tokio::test]
async fn a_cache_from_another_history_is_rebuilt_at_once_from_its_sent_record() {
    let app = TestApp::new().await;
    let event = app.open_event(2).await;
    let grabbed = app.grab(&event, "u1").await;
    assert_eq!(grabbed.status, 202, "{}", grabbed.body);
    let opening = app.functions.gate.opening(&event).await.unwrap();
    let mut r = app.redis.clone();
    // A failover that lost the order's outbox entry and holding: only its sent record has it.
    let _: () = redis::pipe()
        .hdel(keys::meta(&event), &[opening.as_str(), "=u1"])
        .del(keys::outbox(&event))
        .query_async(&mut r)
        .await
        .unwrap();
    let mine = app.call(Function::Query, for_user(for_event(fixture("query-order.json"), &event), "u1")).await;
    assert_eq!((mine.status, mine.body["status"].as_str()), (200, Some("PENDING")), "{}", mine.body);
    assert_eq!(mine.body["order_id"], grabbed.body["order_id"]);
    let other = app.call(Function::Query, for_user(for_event(fixture("query-order.json"), &event), "u2")).await;
    assert_eq!((other.status, other.code()), (404, "NO_ORDER"), "{}", other.body);
    let cache = app.cache(&event).await;
    assert_eq!(cache.seats.len(), 1, "the order's number stays held");
    assert_eq!(cache.outbox.len(), 1, "the order is back in the outbox, which reconcile re-drives");
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
    // Read in pages: one `LRANGE` of 100,000 numbers can outlast the connection's command timeout
    // on a loaded machine (CI's did), and the test is about the numbers, not that read.
    async fn seats(r: &mut shared::gate::Connection, event: &EventId) -> Vec<u32> {
        let mut all = Vec::new();
        loop {
            let from = all.len() as isize;
            let page: Vec<u32> = r.lrange(keys::seats(event), from, from + 9_999).await.unwrap();
            if page.is_empty() {
                return all;
            }
            all.extend(page);
        }
    }
    let all = seats(&mut r, &event).await;
    assert_eq!(all, (1..=100_000).collect::<Vec<_>>(), "every number 1..capacity, once");

    let grabs = (0..2_000).map(|i| {
        let app = &app;
        let event = &event;
        async move { grab(app, event, &format!("user-{i}")).await }
    });
    let mut popped = HashSet::new();
    for outcome in futures::future::join_all(grabs).await {
        let GrabOutcome::Granted { holding: Holding { ticket_no, .. }, .. } = outcome else { panic!("{outcome:?}") };
        assert!(popped.insert(ticket_no.get()), "ticket {ticket_no} handed out twice");
    }
    let left = seats(&mut r, &event).await;
    assert_eq!(left.len(), 98_000);
    assert!(left.iter().all(|n| !popped.contains(n)));
    let mut union: Vec<u32> = left.into_iter().chain(popped).collect();
    assert_eq!(app.cache(&event).await.holdings.len(), 2_000);
    union.sort_unstable();
    assert_eq!(union, (1..=100_000).collect::<Vec<_>>(), "free + sold = 1..capacity");
}

/// `give_back.lua` alone: acts once, only for the exact holding; serves the waitlist in order and
/// skips whoever meanwhile holds or cancelled an order; frees the number when nobody waits; leaves
/// a cache it cannot trust alone.
#[tokio::test]
async fn the_give_back_script_acts_once_in_waitlist_order() {
    use shared::{
        domain::order::WaitHead,
        gate::{GaveBack, GiveBack},
    };
    let app = TestApp::new().await;
    let event = app.open_event(2).await;
    let gate = &app.functions.gate;
    let (GrabOutcome::Granted { holding: Holding { order: order_id, ticket_no }, .. }, GrabOutcome::Granted { .. }) =
        (grab(&app, &event, "ada").await, grab(&app, &event, "bob").await)
    else {
        panic!("two grants");
    };
    let email = Email::parse("x@example.com").unwrap();
    for user in ["bob", "cy", "dee"] {
        let user = UserId::parse(user).unwrap();
        let head = WaitHead::new(&event, &user, &email);
        let promotion = OrderId::generate();
        let join = shared::gate::Join {
            event: &event,
            user: &user,
            head: &head,
            clock_ms: now_ms(),
            promotion: &promotion,
            now: "2026-11-24T10:00:00Z",
        };
        gate.join_waitlist(&join).await.unwrap();
    }
    let ada = UserId::parse("ada").unwrap();
    let promotion = OrderId::generate();
    fn give<'a>(
        event: &'a EventId,
        user: &'a UserId,
        holding: &'a OrderId,
        n: TicketNo,
        promotion: &'a OrderId,
    ) -> GiveBack<'a> {
        // Cancelled during the sale (before its end): a number nobody waits for goes back on sale.
        GiveBack {
            event,
            user,
            order_id: holding,
            ticket_no: n,
            cancelled_ms: 0,
            promotion,
            now: "2026-11-24T10:00:00Z",
        }
    }
    let give = |holding| give(&event, &ada, holding, ticket_no, &promotion);
    let gave = |g| async move { gate.give_back(&g).await.unwrap().0 };
    // Not ada's holding (a wrong order id): nothing happens.
    let wrong = OrderId::parse("0199a0b0-0000-7000-8000-000000000009").unwrap();
    assert_eq!(gave(give(&wrong)).await, GaveBack::Gone);
    let holding = &order_id;
    let GaveBack::Promoted { user, message, .. } = gave(give(holding)).await else {
        panic!("a promotion");
    };
    // bob already holds an order: skipped (and off the list); cy is next.
    assert_eq!(user.as_str(), "cy");
    let message: serde_json::Value = serde_json::from_str(&message).unwrap();
    assert_eq!(
        (message["ticket_no"].as_u64(), message["promoted"].as_bool()),
        (Some(u64::from(ticket_no.get())), Some(true))
    );
    let cache = app.cache(&event).await;
    assert_eq!(cache.cancelled.get("ada"), Some(&order_id.to_string()));
    assert_eq!(cache.holdings["cy"], (promotion.to_string(), ticket_no.get()));
    assert!(cache.outbox.contains_key(promotion.as_str()));
    assert!(cache.seats.is_empty());
    // Again: gone; ada grabbing again is told she cancelled.
    assert_eq!(gave(give(holding)).await, GaveBack::Gone);
    assert_eq!(grab(&app, &event, "ada").await, GrabOutcome::Cancelled(order_id.clone()));
    let mut r = app.redis.clone();
    let waiting: Vec<String> = r.zrange(keys::wait(&event), 0, -1).await.unwrap();
    assert_eq!(waiting, ["dee"]);

    // A cache written in another history is not trusted: nothing written.
    let other = app.open_event(1).await;
    let _: () = r.hdel(keys::meta(&other), app.functions.gate.opening(&other).await.unwrap()).await.unwrap();
    let before = app.cache(&other).await;
    let lost = GiveBack { event: &other, ..give(holding) };
    assert_eq!(gave(lost).await, GaveBack::NotCached);
    assert_eq!(app.cache(&other).await, before);
}

/// `wait.lua` alone: the window (not before the sale, not after the cancellation window), and the
/// one place per user.
#[tokio::test]
async fn the_wait_script_keeps_one_place_per_user_within_the_window() {
    use shared::{domain::order::WaitHead, gate::Waitlisted};
    let app = TestApp::new().await;
    // Cancellation (and the waitlist) open an hour past the sale's end.
    let now = time::OffsetDateTime::now_utc();
    let mut opened = test_event(fresh_event_id(), 1, now - time::Duration::minutes(1), now + time::Duration::hours(1));
    opened.cancel_until = opened.sale_end + time::Duration::hours(1);
    app.functions.store.put_event(&opened).await.unwrap();
    app.functions.gate.warm(&opened).await.unwrap();
    let event = opened.id;
    let gate = &app.functions.gate;
    assert!(matches!(grab(&app, &event, "ada").await, GrabOutcome::Granted { .. }));
    let bob = UserId::parse("bob").unwrap();
    let head = WaitHead::new(&event, &bob, &Email::parse("bob@example.com").unwrap());
    let meta = app.cache(&event).await.meta;
    let (start, end, until): (i64, i64, i64) =
        (meta["start"].parse().unwrap(), meta["end"].parse().unwrap(), meta["cancel_until"].parse().unwrap());
    let promotion = OrderId::generate();
    let join = |user, head, clock_ms| {
        let j = shared::gate::Join {
            event: &event,
            user,
            head,
            clock_ms,
            promotion: &promotion,
            now: "2026-11-24T10:00:00Z",
        };
        async move { gate.join_waitlist(&j).await.unwrap().0 }
    };
    assert_eq!(join(&bob, &head, start - 1).await, Waitlisted::NotStarted);
    assert_eq!(join(&bob, &head, until).await, Waitlisted::Closed);
    assert_eq!(join(&bob, &head, now_ms()).await, Waitlisted::Joined { position: 1, place: 1 });
    assert_eq!(join(&bob, &head, now_ms()).await, Waitlisted::Waiting { position: 1, place: 1 });
    let mut r = app.redis.clone();
    let stored: String = r.hget(keys::waiting(&event), "bob").await.unwrap();
    assert_eq!(stored, head.as_str());
    assert!(r.pttl::<_, i64>(keys::wait(&event)).await.unwrap() > 0, "forgotten with the event's cache");

    // After the sale's end a number returned while nobody waited is the next joiner's at once,
    // but not while someone waits before them.
    let _: () = r.rpush(keys::returned(&event), 1).await.unwrap();
    let cy = UserId::parse("cy").unwrap();
    let cy_head = WaitHead::new(&event, &cy, &Email::parse("cy@example.com").unwrap());
    assert_eq!(join(&cy, &cy_head, end).await, Waitlisted::Joined { position: 2, place: 2 });
    let _: () = r.del(keys::wait(&event)).await.unwrap();
    let dee = UserId::parse("dee").unwrap();
    let dee_head = WaitHead::new(&event, &dee, &Email::parse("dee@example.com").unwrap());
    assert_eq!(join(&dee, &dee_head, end).await, Waitlisted::Promoted { ticket_no: TicketNo::new(1) });
    let cache = app.cache(&event).await;
    assert_eq!(cache.holdings["dee"], (promotion.to_string(), 1));
    let message = shared::domain::OrderMessage::parse(&cache.outbox[promotion.as_str()]).unwrap();
    assert_eq!((message.user_id, message.ticket_no, message.promoted), (dee, TicketNo::new(1), true));
    assert_eq!(r.llen::<_, u64>(keys::returned(&event)).await.unwrap(), 0);
}

/// The consumer's check before it stores an order: what the cache counts is stored; an order it
/// never counted is taken in when its user holds nothing and its number is free, rejected when the
/// number went to someone else, dropped when its user holds another order; a cache of another
/// history (or none) cannot say.
#[tokio::test]
async fn the_admit_script_counts_what_the_cache_holds_and_takes_in_only_a_free_number() {
    use shared::{domain::OrderMessage, gate::Admitted};
    let app = TestApp::new().await;
    let event = app.open_event(3).await;
    let gate = &app.functions.gate;
    let GrabOutcome::Granted { holding: Holding { order: order_id, ticket_no }, .. } = grab(&app, &event, "ada").await
    else {
        panic!("granted")
    };
    let order = |user: &str, order_id: &OrderId, ticket_no: TicketNo| OrderMessage {
        v: 1,
        order_id: order_id.clone(),
        event_id: event.clone(),
        user_id: UserId::parse(user).unwrap(),
        email: Email::parse("x@example.com").unwrap(),
        ticket_no,
        created_at: "2026-11-24T10:00:00Z".into(),
        promoted: false,
    };
    let ada = order("ada", &order_id, ticket_no);
    let before = app.cache(&event).await;
    assert_eq!(gate.admit(&ada).await.unwrap(), Admitted::Counted);
    // Another order of ada's, even on a free number: she holds one already.
    assert_eq!(gate.admit(&order("ada", &OrderId::generate(), TicketNo::new(3))).await.unwrap(), Admitted::Uncounted);
    assert_eq!(app.cache(&event).await, before, "a second order writes nothing");
    // bob, holding nothing, with ada's number: to be rejected, and bob's field names that order.
    let bob = order("bob", &OrderId::generate(), ticket_no);
    assert_eq!(gate.admit(&bob).await.unwrap(), Admitted::Taken);
    let taken = app.cache(&event).await;
    assert_eq!(taken.holdings["bob"], (bob.order_id.to_string(), ticket_no.get()));
    assert_eq!(taken.seats, before.seats, "no number moved");
    assert_eq!(gate.admit(&bob).await.unwrap(), Admitted::Counted, "its redelivery finds it stored");

    // cy has only a rate counter and a free number: taken in, off sale, counted from then on.
    let mut r = app.redis.clone();
    let _: () = r.hset(keys::meta(&event), "=cy", format!("#{:015}:1", now_ms() + 1_000)).await.unwrap();
    let free = before.seats[1];
    let cy = order("cy", &OrderId::generate(), TicketNo::new(free));
    assert_eq!(gate.admit(&cy).await.unwrap(), Admitted::Adopted);
    let after = app.cache(&event).await;
    assert_eq!(after.holdings["cy"], (cy.order_id.to_string(), free));
    assert_eq!(after.seats, [before.seats[0]]);
    assert_eq!(gate.admit(&cy).await.unwrap(), Admitted::Counted, "a redelivery is counted");
    // A cancelled order stays counted (its redelivery must find it stored as it is).
    let _: () = r.hset(keys::meta(&event), "=ada", format!("!{order_id}")).await.unwrap();
    assert_eq!(gate.admit(&ada).await.unwrap(), Admitted::Counted);

    // Another history's cache, or none: no answer, nothing written.
    let _: () = r.hdel(keys::meta(&event), gate.opening(&event).await.unwrap()).await.unwrap();
    let stale = app.cache(&event).await;
    let dee = order("dee", &OrderId::generate(), TicketNo::new(before.seats[0]));
    assert_eq!(gate.admit(&dee).await.unwrap(), Admitted::NotCached);
    assert_eq!(app.cache(&event).await, stale);
    let gone = order("dee", &OrderId::generate(), TicketNo::new(1));
    assert_eq!(gate.admit(&OrderMessage { event_id: fresh_event_id(), ..gone }).await.unwrap(), Admitted::NotCached);
}
