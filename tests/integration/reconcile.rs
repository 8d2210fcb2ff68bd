//! reconcile and the cache rebuild against the real stack: a lost cache comes back exactly as
//! DynamoDB says, concurrent rebuilds and grabs double nothing, a rebuild waits for orders still on
//! the queue, the outbox re-drive sends only what is not durable, and query serves the `remaining`
//! snapshot while Redis is unreachable.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use redis::AsyncCommands;
use shared::{
    domain::EventId,
    gate::keys,
    http::routes::Function,
    recovery::{Rebuild, Rebuilder},
};

use crate::helpers::*;

/// How much longer than a healthy answer a `503 BUSY` may take: the runner's Redis connect
/// timeout (500 ms) twice (one reconnect) and its retry delay, with room to spare.
const BUSY_BUDGET: Duration = Duration::from_millis(2_500);

/// A consumer test whose reconcile re-drives at once and whose rebuild waits at most 5 s (and
/// starts at once: these tests send nothing while the cache is lost).
async fn app() -> Arc<TestApp> {
    Arc::new(
        TestApp::for_mail_with(1, |s| {
            s.reconcile.outbox_age = Duration::ZERO;
            s.rebuild.max_wait = Duration::from_secs(5);
            s.rebuild.settle = Duration::ZERO;
        })
        .await,
    )
}

/// Runs the mail consumer until the queue is empty (a poll the loaded emulator times out is tried
/// again, for up to a minute).
async fn consume(app: &TestApp) {
    let poller = app.poller();
    let deadline = Instant::now() + Duration::from_secs(60);
    while poller.poll_once().await.unwrap_or(1) > 0 && Instant::now() < deadline {}
}

/// The cache of one event as it is: holdings (user -> "order:ticket") and the free numbers.
async fn cache(app: &TestApp, event: &EventId) -> (HashMap<String, String>, HashSet<u32>) {
    let cache = app.cache(event).await;
    let holdings =
        cache.holdings.into_iter().map(|(user, (order, ticket))| (user, format!("{order}:{ticket}"))).collect();
    let distinct: HashSet<u32> = cache.seats.iter().copied().collect();
    assert_eq!(distinct.len(), cache.seats.len(), "a free number listed twice: {:?}", cache.seats);
    (holdings, distinct)
}

/// The cache of one event lost, as after a failover or a `FLUSHALL` (the outbox goes too).
async fn lose_cache(app: &TestApp, event: &EventId) {
    let mut r = app.redis.clone();
    let _: () = r.del(&keys::cache(event)).await.unwrap();
}

/// An open event of `capacity` tickets where users `<prefix>0..<prefix>n` hold stored orders.
async fn with_stored_orders(app: &TestApp, capacity: u32, prefix: &str, n: u32) -> EventId {
    let event = app.open_event(capacity).await;
    for i in 0..n {
        assert_eq!(app.grab(&event, &format!("{prefix}{i}")).await.status, 202);
    }
    consume(app).await;
    event
}

fn rebuilder(app: &TestApp) -> Rebuilder {
    Rebuilder::new(
        app.functions.store.clone(),
        app.functions.gate.clone(),
        app.functions.queue.clone(),
        app.settings.rebuild,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_cache_is_rebuilt_exactly_as_dynamodb_holds_it() {
    let app = app().await;
    let event = with_stored_orders(&app, 20, "u", 8).await;
    let before = cache(&app, &event).await;
    assert_eq!((before.0.len(), before.1.len()), (8, 12));

    lose_cache(&app, &event).await;
    let report = app.functions.reconcile.run().await;
    assert_eq!((report.events, report.rebuilt, report.failures), (1, 1, 0), "{report:?}");
    assert_eq!(cache(&app, &event).await, before, "same buyers, same free numbers");

    // The sale goes on: a buyer of before gets the same order, a newcomer a free number.
    let again = app.grab(&event, "u3").await;
    assert_eq!(again.status, 200);
    assert_eq!(format!("{}:{}", again.body["order_id"].as_str().unwrap(), again.body["ticket_no"]), before.0["u3"]);
    let fresh = app.grab(&event, "newcomer").await;
    assert_eq!(fresh.status, 202);
    assert!(before.1.contains(&(fresh.body["ticket_no"].as_u64().unwrap() as u32)));
    // A second run finds nothing to rebuild.
    assert_eq!(app.functions.reconcile.run().await.rebuilt, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_rebuilds_and_grabs_never_hand_out_a_number_twice() {
    let app = app().await;
    let event = with_stored_orders(&app, 50, "early", 10).await;
    let held: HashSet<u32> =
        cache(&app, &event).await.0.values().map(|v| v.split(':').nth(1).unwrap().parse().unwrap()).collect();
    lose_cache(&app, &event).await;

    let stored = app.functions.store.get_event(&event).await.unwrap().unwrap().event;
    let rebuild_eight = || {
        (0..8)
            .map(|_| {
                let (rebuilder, stored) = (rebuilder(&app), stored.clone());
                tokio::spawn(async move { rebuilder.rebuild(&stored).await.unwrap() })
            })
            .collect::<Vec<_>>()
    };
    let done = |outcomes: Vec<Rebuild>| outcomes.iter().filter(|r| **r == Rebuild::Done).count();

    // Eight rebuilds at once: exactly one writes, the others find the lock or the keys.
    let mut outcomes = Vec::new();
    for r in rebuild_eight() {
        outcomes.push(r.await.unwrap());
    }
    assert_eq!(done(outcomes), 1, "exactly one of eight concurrent rebuilds wrote the cache");
    let (buyers, free) = cache(&app, &event).await;
    assert_eq!((buyers.len(), free.len()), (10, 40));

    // Lost again, and this time forty grabs race eight rebuilds (a grab that finds no event
    // starts a rebuild of its own, so at most one of these eight is the writer).
    lose_cache(&app, &event).await;
    let rebuilds = rebuild_eight();
    let grabs: Vec<_> = (0..40)
        .map(|i| {
            let app = app.clone();
            let event = event.clone();
            tokio::spawn(async move {
                let user = format!("late{i}");
                // A grab that met the rebuild under way is told 503 BUSY and retries, as a client does.
                for _ in 0..100 {
                    let reply = app.grab(&event, &user).await;
                    if reply.status != 503 {
                        return reply;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                panic!("{user} was never answered");
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for r in rebuilds {
        outcomes.push(r.await.unwrap());
    }
    assert!(done(outcomes) <= 1, "two rebuilds wrote the cache");
    let mut granted = HashSet::new();
    for g in grabs {
        let reply = g.await.unwrap();
        assert_eq!(reply.status, 202, "{:?}", reply.body);
        let ticket = reply.body["ticket_no"].as_u64().unwrap() as u32;
        assert!(!held.contains(&ticket), "ticket {ticket} was already held before the loss");
        assert!(granted.insert(ticket), "ticket {ticket} handed out twice");
    }
    let (buyers, free) = cache(&app, &event).await;
    assert_eq!(buyers.len() + free.len(), 50, "free numbers + buyers = capacity");
    assert!(free.is_disjoint(&granted) && free.is_disjoint(&held));

    consume(&app).await;
    let list = app
        .call(Function::Query, with_query(for_event(fixture("query-attendees.json"), &event), &[("limit", "100")]))
        .await;
    let tickets: HashSet<u64> =
        list.body["orders"].as_array().unwrap().iter().map(|o| o["ticket_no"].as_u64().unwrap()).collect();
    assert_eq!(tickets.len(), 50, "every order confirmed, each with its own number");
}

/// Nobody can make the system rebuild the cache of a sale that is over: verify-hash, query, grab
/// and reconcile leave it absent. And a warmed cache expires by itself a day after the sale.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ended_sale_is_never_rebuilt_and_its_cache_expires_after_the_sale() {
    let app = app().await;
    let now = time::OffsetDateTime::now_utc();
    let event = app.put_event(10, now - time::Duration::hours(2), now - time::Duration::hours(1)).await;
    let mut r = app.redis.clone();
    let expires_at: i64 = redis::cmd("PEXPIRETIME").arg(keys::meta(&event)).query_async(&mut r).await.unwrap();
    let end_ms = shared::domain::event::epoch_ms(now - time::Duration::hours(1));
    assert_eq!(
        expires_at,
        end_ms + shared::gate::CACHE_AFTER_END.as_millis() as i64,
        "meta expires a day after the end"
    );

    lose_cache(&app, &event).await;
    let verify = app.call(Function::VerifyHash, for_user(for_event(fixture("verify-hash.json"), &event), "u1")).await;
    assert_eq!((verify.status, verify.code()), (410, "SALE_ENDED"));
    let shown = app.call(Function::Query, for_event(fixture("query-event.json"), &event)).await;
    assert_eq!((shown.status, shown.body["remaining_source"].as_str()), (200, Some("snapshot")));
    // (A hash from verify-hash would have expired with the sale; this one was made to last.)
    let grab = app.grab(&event, "u1").await;
    assert_eq!((grab.status, grab.code()), (410, "SALE_ENDED"));
    let stored = app.functions.store.get_event(&event).await.unwrap().unwrap().event;
    assert_eq!(rebuilder(&app).rebuild(&stored).await.unwrap(), Rebuild::Ended);
    app.functions.reconcile.run().await;
    let left: u32 = r
        .exists(&[keys::meta(&event), keys::seats(&event), keys::lost_since(&event), keys::rebuild_lock(&event)])
        .await
        .unwrap();
    assert_eq!(left, 0, "no key of the ended event was written again");
}

/// A cache lost with its sent record (a one-node cache restarted empty): nothing says which orders
/// are on the queue, so the rebuild waits for it to drain, answering busy meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rebuild_without_its_sent_record_waits_for_orders_still_on_the_queue_then_includes_them() {
    let app = app().await;
    let event = app.open_event(10).await;
    let granted = app.grab(&event, "in-flight").await;
    assert_eq!(granted.status, 202);
    lose_cache(&app, &event).await;
    let bucket = keys::Buckets::of(&event, 1);
    let mut r = app.redis.clone();
    let _: () = r.del(keys::sent(bucket.get(0).unwrap())).await.unwrap();

    let stored = app.functions.store.get_event(&event).await.unwrap().unwrap().event;
    assert_eq!(rebuilder(&app).rebuild(&stored).await.unwrap(), Rebuild::Busy, "the order is not in DynamoDB yet");
    let reply = app.grab(&event, "someone").await;
    assert_eq!((reply.status, reply.code()), (503, "BUSY"), "no grab is answered from a half-known cache");

    consume(&app).await;
    assert_eq!(rebuilder(&app).rebuild(&stored).await.unwrap(), Rebuild::Done);
    let (buyers, free) = cache(&app, &event).await;
    let ticket = granted.body["ticket_no"].as_u64().unwrap() as u32;
    assert_eq!(buyers["in-flight"], format!("{}:{ticket}", granted.body["order_id"].as_str().unwrap()));
    assert!(!free.contains(&ticket));
    assert_eq!(free.len(), 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_redrive_sends_only_orders_not_yet_durable_and_clears_the_others() {
    let app = app().await;
    let event = app.open_event(10).await;
    // u1's order is durable, but its outbox entry stayed (the consumer's best-effort removal failed).
    assert_eq!(app.grab(&event, "u1").await.status, 202);
    let durable = app.drain_queue_raw().await.pop().unwrap();
    let durable_id =
        serde_json::from_str::<serde_json::Value>(&durable).unwrap()["order_id"].as_str().unwrap().to_owned();
    app.functions.mail.handle_batch(app.sqs_batch(&[("m1", durable.as_str())])).await;
    let mut r = app.redis.clone();
    let _: () = r.hset(keys::outbox(&event), &durable_id, &durable).await.unwrap();
    // u2's send was lost between the script and SQS.
    assert_eq!(app.grab(&event, "u2").await.status, 202);
    let lost = app.drain_queue_raw().await.pop().unwrap();

    let report = app.functions.reconcile.run().await;
    assert_eq!((report.redriven, report.cleared, report.outbox_left), (1, 1, 1), "{report:?}");
    assert_eq!(app.drain_queue_raw().await, std::slice::from_ref(&lost), "exactly the lost order, byte for byte");
    let left: Vec<String> = app.cache(&event).await.outbox.into_values().collect();
    assert_eq!(left, std::slice::from_ref(&lost), "a re-driven entry stays until its order is durable");

    app.functions.mail.handle_batch(app.sqs_batch(&[("m2", lost.as_str())])).await;
    let report = app.functions.reconcile.run().await;
    assert_eq!((report.redriven, report.outbox_left), (0, 0), "{report:?}");
    assert_eq!(app.sent_mail().await.len(), 2, "one mail per order");
}

/// While the queue still holds messages, a young outbox entry is most likely one of them: reconcile
/// waits (up to its maximum) instead of sending a copy that would only lengthen the drain; once
/// the queue is empty, every entry whose order is not durable is sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_redrive_waits_while_the_queue_is_draining() {
    let app = app().await;
    let event = app.open_event(10).await;
    // u1's message is lost (taken off the queue, never consumed); u2's still waits on the queue.
    assert_eq!(app.grab(&event, "u1").await.status, 202);
    assert_eq!(app.drain_queue_raw().await.len(), 1);
    assert_eq!(app.grab(&event, "u2").await.status, 202);
    let report = app.functions.reconcile.run().await;
    assert_eq!((report.redriven, report.outbox_left), (0, 2), "the queue is not empty: {report:?}");
    // The queue drained (u2's message taken off and lost too): both are sent again.
    assert_eq!(app.drain_queue_raw().await.len(), 1);
    let report = app.functions.reconcile.run().await;
    assert_eq!(report.redriven, 2, "{report:?}");
    assert_eq!(app.drain_queue_raw().await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn query_serves_the_snapshot_and_verify_hash_the_hash_while_redis_is_down_and_grab_answers_busy_fast() {
    let app = app().await;
    let event = with_stored_orders(&app, 10, "u", 3).await;
    let report = app.functions.reconcile.run().await;
    assert_eq!(report.snapshots, 1, "{report:?}");

    let mut broken = app.settings.clone();
    broken.gate.redis_url = "redis://127.0.0.1:1".into();
    let down = local_runner::Functions::build(&broken, &app.queue_url).await.unwrap();
    let shown = call_with(&down, Function::Query, for_event(fixture("query-event.json"), &event)).await;
    assert_eq!(shown.status, 200, "{:?}", shown.body);
    assert_eq!(
        (shown.body["remaining"].as_u64(), shown.body["remaining_source"].as_str()),
        (Some(7), Some("snapshot"))
    );

    // verify-hash needs no cache (its limit counts in the environment meanwhile): it still issues
    // the hash; the grab, which cannot decide without the script, is a fast 503.
    for (function, request) in [
        (Function::VerifyHash, for_user(for_event(fixture("verify-hash.json"), &event), "u9")),
        (Function::Grab, app.grab_event(&event, "u9")),
    ] {
        // "Fast" is measured against the same request answered by a healthy stack on this machine,
        // as loaded as it is now, plus the Redis timeouts' budget.
        let started = Instant::now();
        let healthy = app.call(function, request.clone()).await;
        let baseline = started.elapsed();
        assert!(healthy.status < 500, "{function:?} healthy: {}", healthy.status);
        let started = Instant::now();
        let reply = call_with(&down, function, request).await;
        if function == Function::VerifyHash {
            assert_eq!(reply.status, 200, "{:?}", reply.body);
            assert!(reply.body["hash"].as_str().is_some_and(|h| h.starts_with("v1.")), "{:?}", reply.body);
        } else {
            assert_eq!((reply.status, reply.code()), (503, "BUSY"), "{function:?}");
            assert_eq!(reply.retry_after.as_deref(), Some("1"));
            assert!(reply.body["detail"].as_str().is_none_or(|d| !d.contains("127.0.0.1")), "no internal detail");
        }
        let took = started.elapsed();
        assert!(took < baseline + BUSY_BUDGET, "{function:?} took {took:?} (healthy: {baseline:?})");
    }
}

/// An order the consumer stores while a rebuild has its bucket stopped keeps its outbox entry and
/// its sent record's entry: the rebuild reads them, whatever DynamoDB's index shows yet (in AWS it
/// may lag). Once the rebuild is done, reconcile finds the order durable and clears both.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_order_stored_while_its_bucket_is_stopped_keeps_its_entries_until_the_rebuild_is_done() {
    let app = app().await;
    let event = app.open_event(5).await;
    let granted = app.grab(&event, "ada").await;
    assert_eq!(granted.status, 202, "{}", granted.body);
    let order_id = granted.body["order_id"].as_str().unwrap().to_owned();
    let stored = app.functions.store.get_event(&event).await.unwrap().unwrap().event;
    // A failover's mark: the cache reads as written in another history.
    let opening = app.functions.gate.opening(&event).await.unwrap();
    let mut r = app.redis.clone();
    let _: () = r.hdel(keys::meta(&event), &opening).await.unwrap();
    let halted = rebuilder(&app).rebuild_until(&stored, Some(shared::recovery::RebuildStep::Stopped)).await.unwrap();
    assert_eq!(halted, Rebuild::Busy);
    consume(&app).await;
    assert_eq!(app.order_of(&event, "ada").await.body["status"], "CONFIRMED");
    let record = keys::sent(keys::Buckets::of(&event, 1).get(0).unwrap());
    // (Two commands: the outbox and the record lie on different slots.)
    let in_outbox: bool = r.hexists(keys::outbox(&event), &order_id).await.unwrap();
    let in_record: bool = r.hexists(&record, &order_id).await.unwrap();
    assert_eq!((in_outbox, in_record), (true, true), "left for the rebuild to read");
    // The halted rebuild's lock expires; the next runs whole, then reconcile clears.
    let _: () = r.del(keys::rebuild_lock(&event)).await.unwrap();
    assert_eq!(rebuilder(&app).rebuild(&stored).await.unwrap(), Rebuild::Done);
    let (holdings, _) = cache(&app, &event).await;
    assert_eq!(holdings["ada"], format!("{order_id}:{}", granted.body["ticket_no"]));
    let report = app.functions.reconcile.run().await;
    assert_eq!(report.failures, 0, "{report:?}");
    let in_outbox: bool = r.hexists(keys::outbox(&event), &order_id).await.unwrap();
    let in_record: Option<String> = r.hget(&record, &order_id).await.unwrap();
    assert!(!in_outbox, "the outbox entry cleared once durable");
    // The record's entry stays a while, marked stored (a rebuild then still names its user and
    // number, whatever DynamoDB's index shows yet); reconcile removes it later.
    assert!(in_record.is_some_and(|e| e.starts_with('S')), "marked stored in the record");
}
