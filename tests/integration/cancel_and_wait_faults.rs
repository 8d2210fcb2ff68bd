//! Faults after the sale's rush, while cancellations and the waitlist move numbers: the cache lost
//! with a waitlist, promotions and give-backs in flight; a failover during a promotion. Each row
//! of the fault matrix counts the promised that were lost (a holder's or a promoted user's ticket,
//! a waiting user's place), the numbers given twice, and the mails sent twice.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use redis::AsyncCommands;
use shared::{
    domain::{EventId, UserId},
    gate::keys,
    http::routes::Function,
};
use time::OffsetDateTime;

use crate::{failover::Pair, faults::*, helpers::*};

/// Runs the consumer and reconcile until nothing is on its way: the cache is there, every
/// give-back ran, the outbox and the queue are empty.
async fn settle(app: &Arc<TestApp>, event: &EventId) -> Duration {
    let started = Instant::now();
    let poller = app.poller();
    let queue = shared::queue::OrderQueue::new(app.sqs.clone(), app.queue_url.clone());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "did not settle within 120 s");
        while poller.poll_once().await.unwrap_or(1) > 0 && Instant::now() < deadline {}
        let run = app.functions.reconcile.run().await;
        let cached = app.functions.gate.window(event).await.is_ok_and(|w| w.is_some());
        let due = app.functions.store.give_backs_due(event).await.map(|d| d.len()).unwrap_or(1);
        let mut r = app.redis.clone();
        let outbox: u64 = r.hlen(keys::outbox(event)).await.unwrap_or(u64::MAX);
        if run.failures == 0 && cached && due == 0 && outbox == 0 && queue.in_flight().await.is_ok_and(|n| n == 0) {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the users hold and where the waiting stand, against what they were promised: `keep` must
/// hold their tickets, `promoted` must have been given one, `waiting` must wait in this order.
struct Outcome {
    lost: usize,
    twice: usize,
    double_mail: usize,
    places_lost: usize,
    confirmed: usize,
}

async fn outcome(
    app: &Arc<TestApp>,
    event: &EventId,
    keep: &[String],
    promoted: &[String],
    waiting: &[String],
) -> Outcome {
    let store = &app.functions.store;
    let mut lost = 0;
    for user in keep.iter().chain(promoted) {
        let order = store.get_order_now(event, &UserId::parse(user).unwrap()).await.unwrap();
        if !order.is_some_and(|o| o.status == shared::domain::OrderStatus::Confirmed) {
            lost += 1;
        }
    }
    let rows = store.all_orders(event).await.unwrap();
    let confirmed: Vec<u32> =
        rows.iter().filter(|r| r.status == shared::domain::OrderStatus::Confirmed).map(|r| r.ticket_no.get()).collect();
    let distinct: HashSet<u32> = confirmed.iter().copied().collect();
    let mut r = app.redis.clone();
    let seats: Vec<u32> = r.lrange(keys::seats(event), 0, -1).await.unwrap();
    let twice = confirmed.len() - distinct.len() + seats.iter().filter(|n| distinct.contains(n)).count();
    let mut places_lost = 0;
    for (i, user) in waiting.iter().enumerate() {
        let place = app.waitlist(event, user).await;
        if place.body["position"].as_u64() != Some(i as u64 + 1) {
            places_lost += 1;
        }
    }
    let mut mails: HashMap<String, usize> = HashMap::new();
    for m in app.sent_mail().await {
        for to in m.to {
            *mails.entry(to).or_default() += 1;
        }
    }
    let double_mail = mails.values().map(|n| n.saturating_sub(1)).sum();
    Outcome { lost, twice, double_mail, places_lost, confirmed: confirmed.len() }
}

fn named(tag: &str, event: &EventId, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{tag}{i:02}-{}", own_tail(event))).collect()
}

/// 20 tickets sold, 30 users waiting. Five holders cancel (their promotions are on the queue, not
/// yet stored), ten more cancel in DynamoDB only (a crash before each give-back), and the cache is
/// lost (FLUSHALL). The rebuild restores the waitlist from DynamoDB in order, keeps the ten numbers
/// with their cancelled orders until reconcile gives them back, and the next ten waiting users get
/// them: 15 promoted, 15 still waiting in their order, nothing given twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cache_lost_with_a_waitlist_and_returns_in_flight() {
    let redis = PrivateRedis::start().await;
    let app = app_on_private_redis(&redis).await;
    let event = app.open_event(20).await;
    let holders = named("h", &event, 20);
    let waiters = named("w", &event, 30);
    for user in &holders {
        assert_eq!(app.grab(&event, user).await.status, 202);
    }
    for (i, user) in waiters.iter().enumerate() {
        let joined = app.join_waitlist(&event, user).await;
        assert_eq!(joined.body["position"].as_u64(), Some(i as u64 + 1), "{}", joined.body);
    }
    settle(&app, &event).await;
    for user in &holders[..5] {
        assert_eq!(app.cancel(&event, user).await.status, 200);
    }
    let store = &app.functions.store;
    for user in &holders[5..15] {
        let user = UserId::parse(user).unwrap();
        let order = store.get_order_now(&event, &user).await.unwrap().unwrap();
        store.cancel_order(&event, &user, &order, OffsetDateTime::now_utc()).await.unwrap();
    }
    assert_eq!(store.give_backs_due(&event).await.unwrap().len(), 10);
    let mut r = app.redis.clone();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut r).await.unwrap();
    let lost_at = Instant::now();

    // The waiting users ask meanwhile: busy while the rebuild waits, never "not waiting".
    let asked = app.waitlist(&event, &waiters[20]).await;
    assert!(matches!(asked.code(), "BUSY" | ""), "{} {}", asked.status, asked.body);
    settle(&app, &event).await;
    let recover = lost_at.elapsed();
    let got = outcome(&app, &event, &holders[15..], &waiters[..15], &waiters[15..]).await;
    let report = app.report(&event, None).await;
    assert_eq!(report.body["passed"], true, "{:#}", report.body["checks"]);
    assert_eq!(got.confirmed, 20);
    record_cancel_and_wait(
        "cache lost (FLUSHALL) with 30 waiting, 5 promotions on the queue and 10 give-backs not yet run",
        &format!("{} places lost of 15 still waiting; audit passed", got.places_lost),
        &format!("{} confirmed, 15 promoted", got.confirmed),
        got.lost + got.places_lost,
        got.twice,
        got.double_mail,
        recover,
    );
}

/// A promotion whose send fails (the queue unreachable) is on one server only until a replica
/// holds it, and its give-back marker stays until then. ann's give-back is acknowledged by the
/// replica (marker gone); ada's is not (the replication link held: marker kept). The primary dies,
/// the replica is promoted without ada's promotion: the rebuild keeps ada's number with her
/// cancelled order, reconcile gives it back again to the same waiting user, and ann's promotion,
/// kept by the replica, is delivered from the outbox. 0 lost, 0 given twice, 0 places lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failover_during_a_promotion() {
    logs_when_asked();
    let mut pair = Pair::start().await;
    let app = app_on_redis(pair.endpoint.url()).await;
    let event = app.open_event(2).await;
    let (ann, ada) = (format!("ann-{}", own_tail(&event)), format!("ada-{}", own_tail(&event)));
    let waiters = named("w", &event, 3);
    for user in [&ann, &ada] {
        assert_eq!(app.grab(&event, user).await.status, 202);
    }
    for user in &waiters {
        assert_eq!(app.join_waitlist(&event, user).await.status, 201);
    }
    settle(&app, &event).await;
    let mut settings = app.settings.clone();
    settings.aws_endpoint = "http://127.0.0.1:1".into();
    let dead_queue = local_runner::Functions::build(&settings, &app.queue_url).await.unwrap().queue;
    // The cancellation itself needs DynamoDB: only the promotion's send goes to the dead queue.
    let s = &app.settings;
    let grab = shared::handlers::grab::Grab::new(
        app.functions.gate.clone(),
        dead_queue,
        s.seal_keys(),
        app.functions.store.clone(),
        s.hash.clone(),
        s.policy,
        s.rebuild,
        s.user_limits.clone(),
    );
    let cut_off = local_runner::Functions { grab, ..app.functions.clone() };
    let cancel = |user: &str| for_user(for_event(fixture("cancel.json"), &event), user);

    pair.caught_up().await;
    assert_eq!(call_with(&cut_off, Function::Grab, cancel(&ann)).await.status, 200);
    let store = &app.functions.store;
    assert!(store.give_backs_due(&event).await.unwrap().is_empty(), "on a replica: the marker goes");
    pair.caught_up().await;
    pair.link.hold();
    assert_eq!(call_with(&cut_off, Function::Grab, cancel(&ada)).await.status, 200);
    assert_eq!(store.give_backs_due(&event).await.unwrap().len(), 1, "on the primary alone: the marker stays");
    let killed = Instant::now();
    pair.fail_over().await;

    settle(&app, &event).await;
    let recover = killed.elapsed();
    let got = outcome(&app, &event, &[], &waiters[..2], &waiters[2..]).await;
    let report = app.report(&event, None).await;
    assert_eq!(report.body["passed"], true, "{:#}", report.body["checks"]);
    record_cancel_and_wait(
        "Redis failover during promotions: one acknowledged by the replica, one on the primary alone (link held)",
        &format!("{} places lost; audit passed", got.places_lost),
        &format!("{} confirmed, 2 promoted", got.confirmed),
        got.lost + got.places_lost,
        got.twice,
        got.double_mail,
        recover,
    );
}

/// A line that lost a durable place while the rest of the cache is there (its key gone, or laid
/// down by a rebuild that read the waitlist before the place was durable): the user asking for
/// their place finds it again (the line is repaired from DynamoDB), and a give-back reaches them.
#[tokio::test]
async fn a_durable_place_the_line_lost_is_found_again_and_promoted() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(1).await;
    assert_eq!(app.grab(&event, "ada").await.status, 202);
    app.deliver_all().await;
    for user in ["bob", "cy"] {
        assert_eq!(app.join_waitlist(&event, user).await.status, 201);
    }
    let mut r = app.redis.clone();
    let _: () = redis::pipe()
        .zrem(keys::wait(&event), "bob")
        .hdel(keys::waiting(&event), "bob")
        .query_async(&mut r)
        .await
        .unwrap();
    let bob = app.waitlist(&event, "bob").await;
    assert_eq!((bob.status, bob.body["position"].as_u64()), (200, Some(1)), "{}", bob.body);
    // Someone who never joined is told so, and costs no repair.
    assert_eq!(app.waitlist(&event, "zed").await.code(), "NOT_WAITING");
    assert_eq!(app.cancel(&event, "ada").await.status, 200);
    let bob = app.waitlist(&event, "bob").await;
    assert_eq!(bob.body["status"], "HOLDS_ORDER", "{}", bob.body);
    assert_eq!(app.waitlist(&event, "cy").await.body["position"], 1);
}

/// Joins racing rebuilds: every join whose place is written to the line, then to DynamoDB, may
/// meet a rebuild that read the waitlist between the two and laid the line down without it. The
/// joins go over a slow network to AWS (each request held back longer than a rebuild waits for
/// DynamoDB's index), so the race is met, not hoped for. Every user told `201` (or `200 WAITING`)
/// must be in the line and in DynamoDB when the rebuilds stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn joins_racing_rebuilds_keep_every_place_they_were_told_of() {
    let app = Arc::new(TestApp::for_mail(30).await);
    let mut far = app.settings.clone();
    far.aws_endpoint =
        local_runner::network::slow_network(&far.aws_endpoint, far.rebuild.index_lag + Duration::from_millis(500))
            .await
            .expect("a slow network");
    let slow = Arc::new(local_runner::Functions::build(&far, &app.queue_url).await.expect("functions"));
    let event = app.open_event(1).await;
    assert_eq!(app.grab(&event, "holder").await.status, 202);
    app.deliver_all().await;
    let stored = app.functions.store.get_event(&event).await.unwrap().unwrap().event;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rebuilds = {
        let (app, event, stop) = (app.clone(), event.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0;
            // The rebuilds stop while joins are still on their way: the last one may have read the
            // waitlist before their places were durable, and no rebuild after it lays them again.
            let until = Instant::now() + Duration::from_millis(1_500);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < until {
                // A failover's mark: the cache reads as written in another history, and is rebuilt.
                let opening = app.functions.gate.opening(&event).await.unwrap();
                let mut r = app.redis.clone();
                let _: () = r.hdel(keys::meta(&event), &opening).await.unwrap();
                if app.functions.rebuilder.rebuild(&stored).await.unwrap() == shared::recovery::Rebuild::Done {
                    n += 1;
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            n
        })
    };
    let joins: Vec<_> = (0..40)
        .map(|i| {
            let (app, event, slow) = (app.clone(), event.clone(), slow.clone());
            tokio::spawn(async move {
                let user = format!("w{i}");
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    let body = serde_json::json!({ "hash": app.hash_for(&event, &user) });
                    let join = for_user(with_body(for_event(fixture("waitlist-join.json"), &event), &body), &user);
                    let reply = call_with(&slow, Function::Grab, join).await;
                    match reply.status {
                        200 | 201 => return user,
                        503 if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
                        // The join's per-user limit: asked again when it says.
                        429 if Instant::now() < deadline => {
                            let wait = reply.retry_after.as_deref().and_then(|s| s.parse().ok()).unwrap_or(1);
                            tokio::time::sleep(Duration::from_secs(wait)).await
                        }
                        _ => panic!("{user}: {} {}", reply.status, reply.body),
                    }
                }
            })
        })
        .collect();
    let mut told = Vec::new();
    for join in joins {
        told.push(join.await.unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rebuilt = rebuilds.await.unwrap();
    assert!(rebuilt >= 1, "the joins met rebuilds ({rebuilt})");
    let mut r = app.redis.clone();
    let line: Vec<String> = r.zrange(keys::wait(&event), 0, -1).await.unwrap();
    let missing: Vec<&String> = told.iter().filter(|u| !line.contains(u)).collect();
    assert!(missing.is_empty(), "{} users told they wait are not in the line: {missing:?}", missing.len());
    for user in &told {
        let waiting = app.functions.store.is_waiting(&event, &UserId::parse(user).unwrap()).await.unwrap();
        assert!(waiting, "{user} has no durable place");
    }
    println!("40 joins met {rebuilt} rebuilds; every place kept");
}

/// A join's two steps with a rebuild between them, played apart: the place written to the line,
/// then the rebuild (which reads the waitlist from DynamoDB, where the place is not yet, and lays
/// the line down without it), then the place made durable. The line has lost a place its user is
/// about to be told of; the join's check after its durable write finds it out and repairs the line.
#[tokio::test]
async fn a_place_a_rebuild_laid_down_without_is_in_the_line_before_its_user_is_told() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(1).await;
    assert_eq!(app.grab(&event, "ada").await.status, 202);
    app.deliver_all().await;
    let (gate, store) = (&app.functions.gate, &app.functions.store);
    let user = UserId::parse("bob").unwrap();
    let email = shared::domain::Email::parse("bob@example.com").unwrap();
    let head = shared::domain::order::WaitHead::new(&event, &user, &email);
    let promotion = shared::domain::OrderId::generate();
    let now = OffsetDateTime::now_utc();
    let created = shared::domain::event::rfc3339(now);
    let join = shared::gate::Join {
        event: &event,
        user: &user,
        head: &head,
        clock_ms: shared::domain::event::epoch_ms(now),
        promotion: &promotion,
        now: &created,
    };
    // 1. The line.
    let (joined, _) = gate.join_waitlist(&join).await.unwrap();
    let shared::gate::Waitlisted::Joined { place, .. } = joined else { panic!("{joined:?}") };
    // 2. A rebuild (a failover's mark) reads the waitlist before the place is durable.
    let opening = gate.opening(&event).await.unwrap();
    let mut r = app.redis.clone();
    let _: () = r.hdel(keys::meta(&event), &opening).await.unwrap();
    let stored = store.get_event(&event).await.unwrap().unwrap().event;
    assert_eq!(app.functions.rebuilder.rebuild(&stored).await.unwrap(), shared::recovery::Rebuild::Done);
    // 3. Durable.
    store.add_waiter(&event, &shared::domain::Waiter { user: user.clone(), email, place }, now).await.unwrap();
    assert_eq!(gate.in_line(&event, &user).await.unwrap(), shared::gate::InLine::Out, "the line lost the place");
    // The join's check, before its user is told.
    app.functions.grab.waitlist().place_kept(&event, &user).await.expect("the place kept");
    assert_eq!(gate.in_line(&event, &user).await.unwrap(), shared::gate::InLine::In);
    assert_eq!(app.waitlist(&event, "bob").await.body["position"], 1);
    assert_eq!(app.cancel(&event, "ada").await.status, 200);
    assert_eq!(app.waitlist(&event, "bob").await.body["status"], "HOLDS_ORDER");
}
