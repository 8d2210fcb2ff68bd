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
