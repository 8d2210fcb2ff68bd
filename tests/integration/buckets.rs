//! One event over several Redis buckets (docs/DESIGN.md section 6, "Buckets"), on the local
//! three-master Redis Cluster: each user's field lives in their home bucket, and a home with no
//! number left has numbers moved to it from a sibling (out of the sibling with a record, in at
//! home once, the record removed), then decides the grab itself. The sale stays exact: every number
//! sold once, one per user, every order in the outbox and then in DynamoDB and mailed once. A move
//! is stopped between its steps (as a process killed there would leave it) and finished by
//! reconcile, and a move begun before a rebuild moves nothing after it.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use redis::AsyncCommands;
use shared::{
    domain::{EventId, UserId},
    gate::{MOVE_OUT_SOURCE, keys},
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
    let mut event =
        test_event(spread_event_id(), capacity, now - time::Duration::minutes(1), now + time::Duration::hours(1));
    event.buckets = buckets;
    adjust(&mut event);
    app.functions.store.put_event(&event).await.expect("put event");
    app.functions.gate.warm(&event).await.expect("warm event");
    (event.id.clone(), keys::Buckets::of(&event.id, buckets))
}

/// An id whose slot is not within `SPREAD` of the end of a master's run of slots (one in a
/// thousand is): its buckets then sit on as many of the three masters as they are.
pub(crate) fn spread_event_id() -> EventId {
    std::iter::repeat_with(fresh_event_id)
        .find(|id| {
            (keys::SPREAD..16_384 / 3 - keys::SPREAD).contains(&(u32::from(keys::slot(id.as_str())) % (16_384 / 3)))
        })
        .expect("an id")
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
        assert!(cache.moving.is_empty(), "no move left under way: {:?}", cache.moving);
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
    println!("three buckets: {from_siblings} of 150 numbers were sold away from the bucket they were laid in");

    assert_eq!(app.deliver_all().await, 150);
    let report = app.functions.reconcile.run().await;
    assert_eq!((report.drift, report.moves_finished, report.failures), (0, 0, 0));
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
/// empty: exactly those numbers sell, each once, all moved home from the siblings.
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
        assert_ne!(buckets.shelf_of(shared::domain::TicketNo::new(*n)).index(), 2, "moved from a sibling");
    }
    // Home recorded each move that arrived; no move is left on its way.
    let mut r = app.redis.clone();
    let moved: HashMap<String, String> = r.hgetall(keys::moved(buckets.get(2).unwrap())).await.unwrap();
    assert!(!moved.is_empty() && moved.len() <= 20, "{} moves brought twenty numbers home", moved.len());
    println!("the last twenty numbers reached the crowd's home in {} moves", moved.len());
    // A refused user's retry is refused again; a winner's retry gets their order back.
    let (winner, n) = &granted[0];
    let again = app.grab(&event, winner).await;
    assert_eq!((again.status, again.body["ticket_no"].as_u64()), (200, Some(u64::from(*n))));
}

/// A move stopped between its steps, as a process killed there leaves it, the raw first step
/// playing what it ran: its numbers are in no bucket's seats, only in the sibling's record. A grab
/// at the empty home moves numbers from elsewhere meanwhile; reconcile finishes the stopped move
/// (its numbers on sale at home, once, however often it is finished); a move begun before a
/// rebuild finishes as nothing. Every number stays in one place, and the audit passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_stopped_between_its_steps_is_finished_once_by_reconcile() {
    let app = on_cluster_with(|s| {
        s.rebuild.settle = Duration::ZERO;
        s.rebuild.max_wait = Duration::from_secs(3);
    })
    .await;
    let (event, buckets) = open_sharded(&app, 9, 3).await;
    let tail = own_tail(&event).to_owned();
    // Bucket 0's three numbers sell at home.
    for user in homed_at(&buckets, 0, &format!("first-{tail}"), 3) {
        assert_eq!(app.grab(&event, &user).await.status, 202);
    }
    // A move from bucket 1 to bucket 0 stopped after its first step: two numbers on their way.
    let record = move_out(&app, buckets.get(1).unwrap(), "stopped-move", 0).await;
    let on_their_way: Vec<u32> = record.split('|').nth(3).unwrap().split(',').map(|n| n.parse().unwrap()).collect();
    assert_eq!(on_their_way.len(), 2, "half of bucket 1's three: {record}");
    let all = caches(&app, &buckets).await;
    assert_eq!(all.iter().map(|c| c.seats.len()).collect::<Vec<_>>(), [0, 1, 3]);
    assert_eq!(all[1].moving.len(), 1, "the sibling's record of the move");

    // A grab homed at bucket 0 meanwhile: its own move brings numbers home; it holds one of them.
    let ada = homed_at(&buckets, 0, &format!("ada-{tail}"), 1).remove(0);
    let reply = app.grab(&event, &ada).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert!(!on_their_way.contains(&(reply.body["ticket_no"].as_u64().unwrap() as u32)), "not a number on its way");

    // Reconcile finishes the stopped move: its numbers on sale at home, once.
    assert_eq!(app.functions.gate.tidy_moves(&event, Duration::ZERO).await.unwrap(), 1);
    assert_eq!(app.functions.gate.tidy_moves(&event, Duration::ZERO).await.unwrap(), 0, "done once");
    let all = caches(&app, &buckets).await;
    for n in &on_their_way {
        assert!(all[0].seats.contains(n), "{n} on sale at home");
    }
    // Its second step asked again (a driver that read the record before it went) adds nothing.
    assert_eq!(move_in(&app, buckets.get(0).unwrap(), "stopped-move", &record).await, "ARRIVED");
    assert_eq!(caches(&app, &buckets).await, all, "nothing added twice");
    let holdings = assert_exact(&all, &buckets, 9);
    assert_eq!(holdings.len(), 4);

    // A move stopped after its first step, then the event rebuilt: finished after the rebuild, it
    // moves nothing (the rebuild laid every number down afresh, that move's among them).
    let stale = move_out(&app, buckets.get(2).unwrap(), "before-the-rebuild", 0).await;
    let mut r = app.redis.clone();
    let _: () = r.del(&keys::cache(buckets.get(1).unwrap())).await.unwrap();
    let stored = app.functions.rebuilder.event(&event).await.unwrap().unwrap();
    let rebuilt = eventually(Duration::from_secs(20), || async {
        app.functions.rebuilder.rebuild(&stored).await.unwrap() == shared::recovery::Rebuild::Done
    })
    .await;
    assert!(rebuilt, "the rebuild never finished");
    let all = caches(&app, &buckets).await;
    assert_eq!(move_in(&app, buckets.get(0).unwrap(), "before-the-rebuild", &stale).await, "GONE");
    assert_eq!(caches(&app, &buckets).await, all, "nothing moved after the rebuild");
    assert_exact(&all, &buckets, 9);

    assert_eq!(app.deliver_all().await, 4);
    let audit = app.report(&event, None).await;
    assert_eq!(audit.body["confirmed"], 4, "{}", audit.body);
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// A move's first step, run alone at `from` (`move_out.lua`): its record.
async fn move_out(app: &TestApp, from: &keys::Bucket, id: &str, to: u16) -> String {
    let reply: String = redis::Script::new(MOVE_OUT_SOURCE)
        .key(keys::meta(from))
        .key(keys::seats(from))
        .key(keys::moving(from))
        .arg(keys::opening_prefix())
        .arg(id)
        .arg(to)
        .arg(shared::gate::MOVE_MOST)
        .arg("")
        .arg("")
        .invoke_async(&mut app.redis.clone())
        .await
        .unwrap();
    reply.strip_prefix("MOVING:").unwrap_or_else(|| panic!("{reply}")).to_owned()
}

/// A move's second step, run alone at `to` with the record `move_out` returned: its answer.
async fn move_in(app: &TestApp, to: &keys::Bucket, id: &str, record: &str) -> String {
    let mut parts = record.split('|');
    let generation = parts.next().unwrap();
    let numbers = parts.nth(2).unwrap();
    redis::Script::new(shared::gate::MOVE_IN_SOURCE)
        .key(keys::meta(to))
        .key(keys::seats(to))
        .key(keys::moved(to))
        .arg(keys::opening_prefix())
        .arg(id)
        .arg(generation)
        .arg(numbers)
        .invoke_async(&mut app.redis.clone())
        .await
        .unwrap()
}

/// One bucket's keys lost mid-sale (its master's data gone) while the others live on, one of
/// them holding numbers its users took from the lost one: the grabs pause, the whole event is
/// rebuilt from DynamoDB, every earlier holder keeps their number, and the sale goes on to sell
/// each number once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bucket_lost_mid_sale_is_rebuilt_with_the_whole_event_exactly() {
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
    // Every bucket's sent record held what was on its way: the rebuild waited for no queue.
    assert_eq!(paused, 0, "the sale paused for the rebuild");
    println!("a bucket lost: the sale went on at once ({:?})", started.elapsed());
    assert_eq!(after.len(), 15, "the fifteen numbers left, once each");
    let all = caches(&app, &buckets).await;
    let holdings = assert_exact(&all, &buckets, 30);
    for (user, n) in told.iter().chain(&after) {
        assert_eq!(holdings[user].1, *n, "{user} holds what they were told");
    }
    assert_eq!(app.deliver_all().await, 15);
    let report = app.functions.reconcile.run().await;
    assert_eq!((report.drift, report.failures), (0, 0));
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
    // The rebuild that left both orders out stopped waiting for the queue with them on it (a bucket
    // lost with its sent record): the one way the design knows an order ends REJECTED, which the
    // audit names, and fails the sale on (its user may have been told 202).
    tokio::time::sleep(Duration::from_millis(2)).await;
    app.functions.store.record_rebuild(&event, "test", OffsetDateTime::now_utc(), Some(2), 0).await.unwrap();
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
    // The claim's move is done: nothing left for reconcile to finish.
    assert_eq!(app.functions.gate.tidy_moves(&event, Duration::ZERO).await.unwrap(), 0);
    let audit = app.report(&event, None).await;
    crate::partial_loss::assert_audit_fails_only_on_the_rejection(&audit);
}
