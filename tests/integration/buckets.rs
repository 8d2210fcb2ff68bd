//! One event over several Redis buckets (docs/DESIGN.md section 6, "Buckets"), on the local
//! three-master Redis Cluster: each user's field lives in their home bucket, and a grab whose home
//! has no number left takes one from a sibling in three steps (mark at home, take at the sibling,
//! settle at home). The sale stays exact: every number sold once, one per user, every order in the
//! outbox and then in DynamoDB and mailed once. The steps are stopped between (as a process killed
//! there would leave them) and finished by the user's retry or by reconcile.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use redis::AsyncCommands;
use shared::{
    config::GrabPolicy,
    domain::{Email, EventId, OrderId, UserId, order::MessageHead},
    gate::{GRAB_SOURCE, GrabAttempt, TAKE_SOURCE, keys},
};
use time::OffsetDateTime;

use crate::helpers::*;

fn cluster_url() -> String {
    std::env::var("REDIS_CLUSTER_URL").unwrap_or_else(|_| "redis://127.0.0.1:16381".into())
}

/// The functions on the stack's three-master cluster, with their own queue and mailbox.
async fn on_cluster() -> Arc<TestApp> {
    on_cluster_with(|_| {}).await
}

pub(crate) async fn on_cluster_with(adjust: impl FnOnce(&mut local_runner::LocalSettings)) -> Arc<TestApp> {
    let url = cluster_url();
    Arc::new(
        TestApp::for_mail_with(60, |s| {
            s.gate.redis_url = url;
            s.gate.cluster = true;
            adjust(s);
        })
        .await,
    )
}

/// A sharded first-come event whose sale is open now, without a waitlist: stored and warmed as
/// release would.
pub(crate) async fn open_sharded(app: &TestApp, capacity: u32, buckets: u16) -> (EventId, keys::Buckets) {
    open_sharded_with(app, capacity, buckets, |e| e.waitlist_size = 0).await
}

/// The same, the event changed by `adjust` first (a waitlist, a sale ending soon).
pub(crate) async fn open_sharded_with(
    app: &TestApp,
    capacity: u32,
    buckets: u16,
    adjust: impl FnOnce(&mut shared::domain::Event),
) -> (EventId, keys::Buckets) {
    let now = OffsetDateTime::now_utc();
    // An id whose slot is not within `SPREAD` of the end of a master's run of slots (one in a
    // thousand is): its buckets then sit on as many of the three masters as they are.
    let id = std::iter::repeat_with(fresh_event_id)
        .find(|id| {
            (keys::SPREAD..16_384 / 3 - keys::SPREAD).contains(&(u32::from(keys::slot(id.as_str())) % (16_384 / 3)))
        })
        .expect("an id");
    let mut event = test_event(id, capacity, now - time::Duration::minutes(1), now + time::Duration::hours(1));
    event.buckets = buckets;
    adjust(&mut event);
    app.functions.store.put_event(&event).await.expect("put event");
    app.functions.gate.warm(&event).await.expect("warm event");
    (event.id.clone(), keys::Buckets::of(&event.id, buckets))
}

/// `count` users (named `<prefix>-<i>`) whose home is `bucket`.
pub(crate) fn homed_at(buckets: &keys::Buckets, bucket: u16, prefix: &str, count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|u| buckets.home(&UserId::parse(u).unwrap()).index() == bucket)
        .take(count)
        .collect()
}

/// Every bucket's cache, bucket 0 first.
pub(crate) async fn caches(app: &TestApp, buckets: &keys::Buckets) -> Vec<Cache> {
    let mut all = Vec::new();
    for b in buckets.iter() {
        all.push(Cache::read(&app.redis, b).await);
    }
    all
}

/// The exactness of the cache over all buckets: every user's holding in their home bucket and
/// their order in its outbox; every number either free in one bucket or held by one user.
pub(crate) fn assert_exact(all: &[Cache], buckets: &keys::Buckets, capacity: u32) -> HashMap<String, (String, u32)> {
    let mut holdings = HashMap::new();
    let mut numbers = Vec::new();
    for (b, cache) in buckets.iter().zip(all) {
        for (user, held) in &cache.holdings {
            assert_eq!(buckets.home(&UserId::parse(user).unwrap()), b, "{user}'s field lives at home");
            assert!(holdings.insert(user.clone(), held.clone()).is_none(), "{user} holds once");
            numbers.push(held.1);
        }
        numbers.extend(&cache.seats);
        assert!(cache.taking.is_empty(), "no take left under way: {:?}", cache.taking);
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=capacity).collect::<Vec<_>>(), "every number once: free or held");
    holdings
}

/// Which master holds each bucket (asked for the slot of its meta key).
async fn masters_of(app: &TestApp, buckets: &keys::Buckets) -> BTreeSet<String> {
    let mut conn = app.redis.clone();
    let slots: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut conn).await.unwrap();
    let redis::Value::Array(ranges) = slots else { panic!("CLUSTER SLOTS") };
    let ranges: Vec<(u16, u16, i64)> = ranges
        .iter()
        .map(|r| {
            let redis::Value::Array(r) = r else { panic!("a slot range") };
            let int = |v: &redis::Value| match v {
                redis::Value::Int(i) => *i,
                _ => panic!("an int"),
            };
            let redis::Value::Array(master) = &r[2] else { panic!("a master") };
            (int(&r[0]) as u16, int(&r[1]) as u16, int(&master[1]))
        })
        .collect();
    buckets
        .iter()
        .map(|b| {
            let slot = keys::slot(&b.to_string());
            let port = ranges.iter().find(|(from, to, _)| (*from..=*to).contains(&slot)).unwrap().2;
            format!("port {port}")
        })
        .collect()
}

/// 900 users race for 150 numbers split over three buckets on three masters: 150 orders, each
/// number once, one per user, the ones whose home ran out served by siblings; every order stored
/// and mailed once; reconcile finds nothing to settle, return or call drift; the audit passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sale_over_three_buckets_on_three_masters_sells_each_number_once() {
    let app = on_cluster().await;
    let (event, buckets) = open_sharded(&app, 150, 3).await;
    assert_eq!(masters_of(&app, &buckets).await.len(), 3, "the three buckets on three masters");

    let users: Vec<String> = (0..900).map(|i| format!("fan-{i:03}")).collect();
    let grabs = users.iter().map(|u| {
        let app = app.clone();
        let (event, u) = (event.clone(), u.clone());
        tokio::spawn(async move { (u.clone(), app.grab(&event, &u).await) })
    });
    let mut granted = HashMap::new();
    let mut sold_out = 0;
    for grab in grabs {
        let (user, reply) = grab.await.unwrap();
        match (reply.status, reply.code()) {
            (202, _) => {
                granted.insert(user, reply.body["ticket_no"].as_u64().unwrap() as u32);
            }
            (409, "SOLD_OUT") => sold_out += 1,
            other => panic!("{user}: {other:?} {}", reply.body),
        }
    }
    assert_eq!((granted.len(), sold_out), (150, 750));
    let numbers: BTreeSet<u32> = granted.values().copied().collect();
    assert_eq!(numbers, (1..=150).collect(), "150 distinct numbers");

    let all = caches(&app, &buckets).await;
    let holdings = assert_exact(&all, &buckets, 150);
    assert_eq!(holdings.len(), 150);
    for (user, n) in &granted {
        assert_eq!(holdings[user].1, *n, "{user} holds what they were told");
    }
    let outboxed: usize = all.iter().map(|c| c.outbox.len()).sum();
    assert_eq!(outboxed, 150, "one outbox entry per order, at its user's home");
    let from_siblings = granted
        .iter()
        .filter(|(u, n)| {
            buckets.shelf_of(shared::domain::TicketNo::new(**n)) != buckets.home(&UserId::parse(u).unwrap())
        })
        .count();
    println!("three buckets: {from_siblings} of 150 numbers were taken from a sibling bucket");

    assert_eq!(app.deliver_all().await, 150);
    let report = app.functions.reconcile.run().await;
    assert_eq!((report.drift, report.takes_settled, report.takes_returned, report.failures), (0, 0, 0, 0));
    assert_eq!(app.functions.gate.outbox_len(&event).await.unwrap(), 0, "every order stored");
    let mails: HashSet<String> = app.sent_mail().await.into_iter().flat_map(|m| m.to).collect();
    let winners: HashSet<String> = granted.keys().map(|u| format!("{u}@example.com")).collect();
    assert!(winners.is_subset(&mails), "each winner mailed");
    let audit = app.report(&event, None).await;
    assert_eq!(audit.body["confirmed"], 150);
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
    // query's stock is the buckets' together.
    assert_eq!(app.functions.gate.stock(&event).await.unwrap(), Some(0));
}

/// The last numbers sit in two buckets and every user racing is homed in the third, already
/// empty: exactly those numbers sell, each once, all through takes from the siblings.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_last_numbers_in_other_buckets_than_the_crowds_home_sell_once() {
    let app = on_cluster().await;
    let (event, buckets) = open_sharded(&app, 30, 3).await;
    // Bucket 2's own ten numbers go to users homed there first (each found at home).
    for user in homed_at(&buckets, 2, "early", 10) {
        assert_eq!(app.grab(&event, &user).await.status, 202);
    }
    let all = caches(&app, &buckets).await;
    assert_eq!(all.iter().map(|c| c.seats.len()).collect::<Vec<_>>(), [10, 10, 0]);

    let crowd = homed_at(&buckets, 2, "late", 200);
    let grabs = crowd.iter().map(|u| {
        let app = app.clone();
        let (event, u) = (event.clone(), u.clone());
        tokio::spawn(async move { (u.clone(), app.grab(&event, &u).await) })
    });
    let mut granted = Vec::new();
    for grab in grabs {
        let (user, reply) = grab.await.unwrap();
        match (reply.status, reply.code()) {
            (202, _) => granted.push((user, reply.body["ticket_no"].as_u64().unwrap() as u32)),
            (409, "SOLD_OUT") => {}
            other => panic!("{user}: {other:?} {}", reply.body),
        }
    }
    assert_eq!(granted.len(), 20, "the twenty numbers left, no more");
    let all = caches(&app, &buckets).await;
    let holdings = assert_exact(&all, &buckets, 30);
    assert_eq!(holdings.len(), 30);
    for (user, n) in &granted {
        assert_eq!(holdings[user].1, *n);
        assert_ne!(buckets.shelf_of(shared::domain::TicketNo::new(*n)).index(), 2, "taken from a sibling");
    }
    // Each sibling recorded the numbers it gave, and to whom.
    let mut r = app.redis.clone();
    for b in buckets.iter().take(2) {
        let taken: HashMap<String, String> = r.hgetall(keys::taken(b)).await.unwrap();
        assert_eq!(taken.values().filter(|v| !v.starts_with('-')).count(), 10, "bucket {} gave ten", b.index());
    }
    // A refused user's retry is refused again; a winner's retry gets their order back.
    let (winner, n) = &granted[0];
    let again = app.grab(&event, winner).await;
    assert_eq!((again.status, again.body["ticket_no"].as_u64()), (200, Some(u64::from(*n))));
}

/// A grab stopped between its steps, as a process killed there leaves it, raw scripts playing the
/// steps it ran. After the mark alone: the user's retry finishes it (their first order, not a
/// second). After the take: reconcile settles it into the outbox and re-drives it. After the take
/// with the mark lost (the home rebuilt): reconcile puts the number back. Nothing is sold twice
/// or lost, and the audit passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grab_stopped_between_its_steps_is_finished_by_the_retry_or_by_reconcile() {
    // Reconcile re-drives any order in the outbox at once.
    let app = on_cluster_with(|s| s.reconcile.outbox_age = Duration::ZERO).await;
    let (event, buckets) = open_sharded(&app, 6, 3).await;
    // Bucket 0's two numbers held, so its users take from a sibling.
    for user in homed_at(&buckets, 0, "first", 2) {
        assert_eq!(app.grab(&event, &user).await.status, 202);
    }
    let [ada, bob, cy]: [String; 3] = homed_at(&buckets, 0, "stopped", 3).try_into().unwrap();
    let mut r = app.redis.clone();

    // Ada's grab stopped after the mark: her retry finishes that very order.
    let ada_order = mark(&app, &event, &ada, 1).await;
    let cache = Cache::read(&app.redis, buckets.get(0).unwrap()).await;
    assert_eq!(cache.taking[&ada], format!("@1:{ada_order}"));
    let retry = app.grab(&event, &ada).await;
    assert_eq!((retry.status, retry.body["order_id"].as_str()), (200, Some(ada_order.as_str())), "{}", retry.body);

    // Bob's stopped after the take: reconcile (every age due) settles it, and the re-drive sends it.
    let bob_order = mark(&app, &event, &bob, 2).await;
    let bob_n = take(&app, buckets.get(2).unwrap(), &bob_order, &bob).await;
    let tidied = app.functions.gate.tidy_takes(&event, Duration::ZERO, Duration::ZERO).await.unwrap();
    assert_eq!((tidied.settled, tidied.returned), (1, 0));
    let home = Cache::read(&app.redis, buckets.get(0).unwrap()).await;
    assert_eq!(home.holdings[&bob], (bob_order.to_string(), bob_n));
    assert!(home.outbox.contains_key(bob_order.as_str()));

    // Cy's stopped after the take, and then his home lost the mark (as a rebuild of it would):
    // nothing can settle that take any more, so reconcile puts the number back on sale.
    let cy_order = mark(&app, &event, &cy, 1).await;
    let cy_n = take(&app, buckets.get(1).unwrap(), &cy_order, &cy).await;
    let home = buckets.get(0).unwrap();
    let _: () = r.hdel(keys::meta(home), keys::user_field(&UserId::parse(&cy).unwrap())).await.unwrap();
    let _: () = r.hdel(keys::taking(home), cy_order.as_str()).await.unwrap();
    let seats: Vec<u32> = r.lrange(keys::seats(buckets.get(1).unwrap()), 0, -1).await.unwrap();
    assert!(!seats.contains(&cy_n));
    let tidied = app.functions.gate.tidy_takes(&event, Duration::ZERO, Duration::ZERO).await.unwrap();
    assert_eq!((tidied.settled, tidied.returned), (0, 1));
    let seats: Vec<u32> = r.lrange(keys::seats(buckets.get(1).unwrap()), 0, -1).await.unwrap();
    assert!(seats.contains(&cy_n), "the number is on sale again");
    // Done once: asked again, reconcile finds nothing.
    let tidied = app.functions.gate.tidy_takes(&event, Duration::ZERO, Duration::ZERO).await.unwrap();
    assert_eq!((tidied.settled, tidied.returned), (0, 0));

    let all = caches(&app, &buckets).await;
    let holdings = assert_exact(&all, &buckets, 6);
    assert_eq!(holdings.len(), 4, "the first two, ada and bob");
    // The orders reach DynamoDB: ada's and bob's through reconcile's re-drive of the outbox.
    assert_eq!(app.deliver_all().await, 2, "the first two grabs' orders");
    let report = app.functions.reconcile.run().await;
    assert_eq!((report.redriven, report.failures), (2, 0));
    assert_eq!(app.deliver_all().await, 2, "ada's and bob's, re-driven");
    let audit = app.report(&event, None).await;
    assert_eq!(audit.body["confirmed"], 4, "{}", audit.body);
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// A grab's first step, run alone: the grab script at `user`'s home with the sibling to mark for,
/// on a home with no number left. Returns the order id it marked.
pub(crate) async fn mark(app: &TestApp, event: &EventId, user: &str, sibling: u16) -> OrderId {
    let buckets = app.functions.gate.buckets(event).await.unwrap();
    let user_id = UserId::parse(user).unwrap();
    let home = buckets.home(&user_id);
    let order = OrderId::generate();
    let email = Email::parse(&format!("{user}@example.com")).unwrap();
    let now = OffsetDateTime::now_utc();
    let head = MessageHead::new(&order, event, &user_id, &email, &shared::domain::event::rfc3339(now));
    let attempt = GrabAttempt {
        event,
        user: &user_id,
        order_id: &order,
        head: &head,
        clock_ms: shared::domain::event::epoch_ms(now),
    };
    let script = redis::Script::new(GRAB_SOURCE);
    let mut call = script.key(keys::meta(home));
    call.key(keys::seats(home)).key(keys::outbox(home)).key(keys::taking(home));
    for arg in attempt.script_args(GrabPolicy::default(), &keys::opening_prefix()) {
        call.arg(arg);
    }
    let reply: String = call.arg(sibling).invoke_async(&mut app.redis.clone()).await.unwrap();
    assert!(reply.starts_with(&format!("TAKE:{sibling}:#")), "{reply}");
    order
}

/// A take's second step, run alone at the sibling: the number it gave.
async fn take(app: &TestApp, sibling: &keys::Bucket, order: &OrderId, user: &str) -> u32 {
    let reply: String = redis::Script::new(TAKE_SOURCE)
        .key(keys::meta(sibling))
        .key(keys::seats(sibling))
        .key(keys::taken(sibling))
        .arg(order.as_str())
        .arg(user)
        .arg(keys::opening_prefix())
        .invoke_async(&mut app.redis.clone())
        .await
        .unwrap();
    reply.strip_prefix("TAKEN:").unwrap().parse().expect("a number")
}

/// One bucket's keys lost mid-sale (its master's data gone) while the others live on, one of
/// them holding numbers its users took from the lost one: the grabs pause, the whole event is
/// rebuilt from DynamoDB, every earlier holder keeps their number, and the sale goes on to sell
/// each number once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bucket_lost_mid_sale_is_rebuilt_with_the_whole_event_exactly() {
    // Past the settle (2 s), the rebuild waits at most 3 s for the queue (empty here).
    let app = on_cluster_with(|s| s.rebuild.max_wait = Duration::from_secs(3)).await;
    let (event, buckets) = open_sharded(&app, 30, 3).await;
    // Bucket 0's users take its ten numbers and five from its siblings.
    let mut told = HashMap::new();
    for user in homed_at(&buckets, 0, "before", 15) {
        let reply = app.grab(&event, &user).await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        told.insert(user, reply.body["ticket_no"].as_u64().unwrap() as u32);
    }
    assert_eq!(app.deliver_all().await, 15);
    let lost = buckets.get(1).unwrap();
    let mut r = app.redis.clone();
    let _: () = r.del(&keys::cache(lost)).await.unwrap();

    // Clients retry a 503 while the event is rebuilt.
    let crowd: Vec<String> = (0..40).map(|i| format!("after-{i}")).collect();
    let started = std::time::Instant::now();
    let (mut after, mut paused) = (HashMap::new(), 0);
    for user in &crowd {
        loop {
            let reply = app.grab(&event, user).await;
            match (reply.status, reply.code()) {
                (202, _) => {
                    after.insert(user.clone(), reply.body["ticket_no"].as_u64().unwrap() as u32);
                    break;
                }
                (409, "SOLD_OUT") => break,
                (503, _) if started.elapsed() < Duration::from_secs(60) => {
                    paused += 1;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                other => panic!("{user}: {other:?} {}", reply.body),
            }
        }
    }
    assert!(paused > 0, "the sale paused for the rebuild");
    println!("a bucket lost: the sale resumed after {paused} x 503 ({:?})", started.elapsed());
    assert_eq!(after.len(), 15, "the fifteen numbers left, once each");
    let all = caches(&app, &buckets).await;
    let holdings = assert_exact(&all, &buckets, 30);
    for (user, n) in told.iter().chain(&after) {
        assert_eq!(holdings[user].1, *n, "{user} holds what they were told");
    }
    assert_eq!(app.deliver_all().await, 15);
    let report = app.functions.reconcile.run().await;
    assert_eq!((report.drift, report.takes_returned, report.failures), (0, 0, 0));
    let audit = app.report(&event, None).await;
    assert_eq!(audit.body["confirmed"], 30);
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// A late order (its send landed after a rebuild that had stopped waiting for it) whose user is
/// homed in one bucket and whose number lies free in another: the consumer's check claims the
/// number there, the order is stored CONFIRMED, and the number is held once, by its user at home.
/// A late order whose number was sold again meanwhile is stored REJECTED, as unsharded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_order_whose_number_is_free_in_another_bucket_is_adopted() {
    let app = on_cluster().await;
    let (event, buckets) = open_sharded(&app, 6, 3).await;
    let late = homed_at(&buckets, 1, "late", 1).remove(0);
    assert_eq!(buckets.shelf_of(shared::domain::TicketNo::new(3)).index(), 2, "number 3 lies in bucket 2");
    app.send_order(&crate::cancel_and_wait::sold(&event, &late, 3)).await;
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(&event, &late).await.body["status"], "CONFIRMED");
    let all = caches(&app, &buckets).await;
    assert_eq!(assert_exact(&all, &buckets, 6)[&late].1, 3, "held at the user's home");
    assert_eq!(all[2].seats, [6], "no longer free in bucket 2");

    // Bucket 2's other number sells to a user homed there; a late order for it is rejected.
    let holder = homed_at(&buckets, 2, "holder", 1).remove(0);
    assert_eq!(app.grab(&event, &holder).await.body["ticket_no"], 6);
    let second = homed_at(&buckets, 0, "late", 1).remove(0);
    app.send_order(&crate::cancel_and_wait::sold(&event, &second, 6)).await;
    // The rebuild that left both orders out stopped waiting for the queue with them on it: the
    // documented way an order ends REJECTED, which the audit asks for.
    tokio::time::sleep(Duration::from_millis(2)).await;
    app.functions.store.record_rebuild(&event, "test", OffsetDateTime::now_utc(), Some(2)).await.unwrap();
    assert_eq!(app.deliver_all().await, 2);
    assert_eq!(app.order_of(&event, &holder).await.body["status"], "CONFIRMED");
    let rejected = app.order_of(&event, &second).await;
    assert_eq!(rejected.body["status"], "REJECTED");
    // The rejected user's field names their order (so a retry is told of it), as unsharded; every
    // number else is free once or held once.
    let mut all = caches(&app, &buckets).await;
    let named = all[0].holdings.remove(&second).expect("the rejected order named at home");
    assert_eq!(named, (rejected.body["order_id"].as_str().unwrap().to_owned(), 6));
    assert_exact(&all, &buckets, 6);
    // The claim's record is kept: its user holds the number, so reconcile puts nothing back.
    let tidied = app.functions.gate.tidy_takes(&event, Duration::ZERO, Duration::ZERO).await.unwrap();
    assert_eq!((tidied.settled, tidied.returned), (0, 0));
    let audit = app.report(&event, None).await;
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}
