//! A sharded sale that loses one bucket while the others are granting (docs/DESIGN.md section 10,
//! "The exact rebuild"), on the stack's three-master cluster: the rebuild stopped after each of
//! its steps as a killed process leaves it, and a rebuild overtaken by another. Every user told
//! `202` must end holding exactly that number, `CONFIRMED`; no number may be held twice, no order
//! stored `REJECTED`, and the audit must agree. (The rush with a loss, at scale and with the other
//! faults, is the fault campaign's: `bench/src/campaign.rs`.)

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use redis::AsyncCommands;
use shared::gate::keys;

use crate::{
    buckets::{on_cluster_with, open_sharded},
    helpers::*,
};

/// What a crowd was told: user -> the number a `202` (or a retry's `200`) gave them.
type Told = BTreeMap<String, u32>;

/// What a sale's end must show, from DynamoDB and the report: every user in `told` holds that
/// number in a `CONFIRMED` order; no number is held by two orders; no order is `REJECTED`; the
/// audit passes.
pub(crate) async fn assert_exact_after(app: &TestApp, event: &shared::domain::EventId, told: &Told, capacity: u32) {
    let rows = app.functions.store.all_orders(event).await.expect("the orders");
    let mut holders: HashMap<u32, Vec<String>> = HashMap::new();
    let mut rejected = Vec::new();
    for row in &rows {
        match row.status {
            shared::domain::OrderStatus::Rejected => rejected.push(row.user_id.to_string()),
            shared::domain::OrderStatus::Confirmed => {
                holders.entry(row.ticket_no.get()).or_default().push(row.user_id.to_string())
            }
            _ => {}
        }
    }
    let stored: HashMap<&str, (&str, u32, shared::domain::OrderStatus)> =
        rows.iter().map(|r| (r.user_id.as_str(), (r.order_id.as_str(), r.ticket_no.get(), r.status))).collect();
    let broken: Vec<String> = told
        .iter()
        .filter(|(user, n)| {
            stored
                .get(user.as_str())
                .is_none_or(|(_, held, status)| *held != **n || *status != shared::domain::OrderStatus::Confirmed)
        })
        .map(|(user, n)| format!("{user} told {n}, stored {:?}", stored.get(user.as_str())))
        .collect();
    let twice: Vec<_> = holders.iter().filter(|(_, h)| h.len() > 1).collect();
    assert!(
        broken.is_empty(),
        "{} users told a number do not hold it: {:?}",
        broken.len(),
        &broken[..broken.len().min(10)]
    );
    assert!(twice.is_empty(), "numbers held twice: {twice:?}");
    assert!(rejected.is_empty(), "{} orders REJECTED: {rejected:?}", rejected.len());
    assert!(told.len() as u32 <= capacity);
    let audit = app.report(event, None).await;
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// A sale whose one `REJECTED` order the test made on purpose (a late order a rebuild that went by
/// the queue left out): the audit fails on that, and on nothing else.
pub(crate) fn assert_audit_fails_only_on_the_rejection(audit: &Reply) {
    let failed: Vec<&str> = audit.body["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["no_order_rejected"], "{:#}", audit.body["checks"]);
}

/// The rebuild of a sharded event stopped after each of its steps, as a process killed there
/// would leave it (its lock kept until it expires), while grabs keep arriving at every bucket, the
/// intact ones included; then a rebuild runs whole. Whatever step it stopped after, every user
/// told a number holds it, `CONFIRMED`, once, no order is `REJECTED`, and the audit passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rebuild_stopped_after_any_step_loses_no_202() {
    use shared::recovery::RebuildStep::*;
    let app = on_cluster_with(|s| {
        s.rebuild.settle = Duration::ZERO;
        s.rebuild.max_wait = Duration::from_secs(3);
        s.reconcile.outbox_age = Duration::ZERO;
    })
    .await;
    for halt in [Stopped, OutboxesRead, StoreRead, Recorded, Laid(1), Laid(2)] {
        let (event, buckets) = open_sharded(&app, 30, 3).await;
        let stored = app.functions.rebuilder.event(&event).await.unwrap().unwrap();
        let tail = own_tail(&event).to_owned();
        let mut told = Told::new();
        let grab = async |user: String, told: &mut Told| {
            let reply = Box::pin(app.grab(&event, &user)).await;
            match reply.status {
                202 | 200 => _ = told.insert(user, reply.body["ticket_no"].as_u64().unwrap() as u32),
                503 => {}
                409 if reply.code() == "SOLD_OUT" => {}
                _ => panic!("{halt:?} {user}: {} {}", reply.status, reply.body),
            }
            reply.status
        };
        // Before the loss: two users of each home; the first three orders stored, the other three
        // only in their home's outbox (their messages taken off the queue, as if lost).
        for b in 0..3 {
            for user in crate::buckets::homed_at(&buckets, b, &format!("early-{tail}"), 2) {
                assert_eq!(grab(user, &mut told).await, 202);
            }
        }
        let bodies = app.drain_queue_raw().await;
        for body in &bodies[..3] {
            app.deliver(body).await.expect("delivered");
        }
        lose_opening(&app, buckets.get(1).unwrap()).await;

        let halted = app.functions.rebuilder.rebuild_until(&stored, Some(halt)).await.unwrap();
        assert_eq!(halted, shared::recovery::Rebuild::Busy, "{halt:?}");
        // Grabs arrive at every home while the rebuild lies stopped.
        let mut answered = Vec::new();
        for b in 0..3 {
            for user in crate::buckets::homed_at(&buckets, b, &format!("during-{tail}"), 2) {
                answered.push(grab(user, &mut told).await);
            }
        }
        let granted = answered.iter().filter(|s| **s == 202).count();
        match halt {
            // Stopped everywhere: nothing decides until a lay-down opens a bucket.
            Stopped | OutboxesRead | StoreRead | Recorded => assert_eq!(granted, 0, "{halt:?}: {answered:?}"),
            // Bucket 2 is laid down and open (bucket 0 is laid last).
            Laid(_) => assert!(granted >= 2, "{halt:?}: {answered:?}"),
        }
        // The killed rebuild's lock expires; the next request's rebuild runs whole.
        let mut r = app.redis.clone();
        let _: () = r.del(keys::rebuild_lock(&event)).await.unwrap();
        let done = eventually(Duration::from_secs(30), || async {
            app.functions.rebuilder.rebuild(&stored).await.unwrap() != shared::recovery::Rebuild::Busy
        })
        .await;
        assert!(done, "{halt:?}: the rebuild never finished");
        for user in (0..30).map(|i| format!("after-{tail}-{i}")) {
            assert_ne!(grab(user, &mut told).await, 503, "{halt:?}");
        }
        app.deliver_all().await;
        let report = app.functions.reconcile.run().await;
        assert_eq!(report.failures, 0, "{halt:?}");
        app.deliver_all().await;
        assert_eq!(told.len(), 30, "{halt:?}: every number sold once the sale resumed");
        assert_exact_after(&app, &event, &told, 30).await;
    }
}

/// One bucket loses its opening field, as a lost or replaced shard leaves it (in cluster mode
/// the field names the node: completed as the scripts complete it).
async fn lose_opening(app: &TestApp, bucket: &keys::Bucket) {
    let mut r = app.redis.clone();
    let field: String = redis::Script::new("return ARGV[1] .. string.sub(redis.call('CLUSTER', 'MYID'), 1, 12)")
        .key(keys::meta(bucket))
        .arg(keys::opening_prefix())
        .invoke_async(&mut r)
        .await
        .unwrap();
    let removed: u32 = r.hdel(keys::meta(bucket), &field).await.unwrap();
    assert_eq!(removed, 1, "the bucket was open");
}

/// A rebuild overtaken by another (its lock expired while it stalled after its reads, and another
/// rebuild stopped the buckets, read and opened them again) lays nothing down when it resumes:
/// every bucket refuses its older snapshot, and the grants made since stand.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_overtaken_rebuild_lays_nothing_down() {
    let app = on_cluster_with(|s| {
        s.rebuild.settle = Duration::ZERO;
        s.rebuild.max_wait = Duration::from_secs(3);
    })
    .await;
    let (event, buckets) = open_sharded(&app, 9, 3).await;
    let stored = app.functions.rebuilder.event(&event).await.unwrap().unwrap();
    let (gate, store) = (&app.functions.gate, &app.functions.store);
    lose_opening(&app, buckets.get(2).unwrap()).await;
    // The first rebuild stops every bucket and reads, then stalls past its lock.
    let first = gate.lock_rebuild(&event, Duration::from_secs(30)).await.unwrap().expect("the lock");
    gate.stop(&buckets, &first).await.unwrap();
    gate.stop_sent(&buckets, &first).await.unwrap();
    let snapshot = store.holdings(&event).await.unwrap();
    let mut r = app.redis.clone();
    let _: () = r.del(keys::rebuild_lock(&event)).await.unwrap();
    // Another rebuild runs whole, and the sale goes on.
    assert_eq!(app.functions.rebuilder.rebuild(&stored).await.unwrap(), shared::recovery::Rebuild::Done);
    let tail = own_tail(&event).to_owned();
    let mut told = Told::new();
    for b in 0..3 {
        for user in crate::buckets::homed_at(&buckets, b, &format!("since-{tail}"), 1) {
            let reply = app.grab(&event, &user).await;
            assert_eq!(reply.status, 202, "{}", reply.body);
            told.insert(user, reply.body["ticket_no"].as_u64().unwrap() as u32);
        }
    }
    let before = crate::buckets::caches(&app, &buckets).await;
    // The first resumes: refused at the first bucket it opens, nothing changed.
    let laid = gate.lay_down(&first, &stored, &buckets, &snapshot, &[], None).await.unwrap();
    assert_eq!(laid, shared::gate::LaidDown::Fenced);
    assert_eq!(crate::buckets::caches(&app, &buckets).await, before, "nothing laid down");
    app.deliver_all().await;
    assert_exact_after(&app, &event, &told, 9).await;
}

/// A sharded sale loses one bucket whole (outbox and all) while its orders are still on the
/// shared queue behind another sale's backlog, and the consumer has not reached them: the queue
/// reads busy for as long as the rebuild would wait (and longer). The bucket's sent record, on
/// another shard, holds every order on its way: the rebuild runs at once, whatever the queue holds,
/// the holders' `GET /order` reads `PENDING` (never `NO_ORDER`), none of their numbers is sold
/// again, and once the queue drains every user told `202` holds that number, no order `REJECTED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bucket_lost_behind_another_sales_backlog_sells_none_of_its_numbers_again() {
    use futures::StreamExt;
    use shared::domain::{Email, OrderId, OrderMessage, TicketNo, UserId, order::MessageHead};
    // Waiting for the queue, the rebuild would answer busy for 20 s (the backlog outlasts that),
    // then sell the lost bucket's numbers again.
    let app = on_cluster_with(|s| {
        s.rebuild.settle = Duration::from_millis(500);
        s.rebuild.max_wait = Duration::from_secs(20);
    })
    .await;
    let (event, buckets) = open_sharded(&app, 30, 3).await;
    let other = app.open_event(400).await;
    let backlog: Vec<String> = (1..=400)
        .map(|n| {
            let user = UserId::parse(&format!("other-{n}")).unwrap();
            let email = Email::parse(&format!("other-{n}@example.com")).unwrap();
            MessageHead::new(&OrderId::generate(), &other, &user, &email, "2026-11-29T00:00:00Z")
                .complete(TicketNo::new(n))
        })
        .collect();
    futures::stream::iter(&backlog).for_each_concurrent(16, |body| app.send_order(body)).await;

    let tail = own_tail(&event).to_owned();
    let mut told = Told::new();
    let lost = buckets.get(1).unwrap();
    let holders = crate::buckets::homed_at(&buckets, 1, &format!("lost-{tail}"), 6);
    for user in &holders {
        let reply = app.grab(&event, user).await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        told.insert(user.clone(), reply.body["ticket_no"].as_u64().unwrap() as u32);
    }
    // The shard that holds the bucket is lost whole: the bucket's keys, and the sent records of
    // other buckets that lie on the same master.
    lose_shard_of(&app, lost, &buckets).await;

    // Every holder still reads their order (503 only while the rebuild settles, never NO_ORDER):
    // the rebuild this asks for needs nothing of the queue.
    let started = std::time::Instant::now();
    for user in &holders {
        let order = loop {
            let req = for_user(for_event(fixture("query-order.json"), &event), user);
            let order = app.call(shared::http::routes::Function::Query, req).await;
            if order.status != 503 || started.elapsed() > Duration::from_secs(15) {
                break order;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!((order.status, order.body["status"].as_str()), (200, Some("PENDING")), "{user}: {}", order.body);
        assert_eq!(order.body["ticket_no"].as_u64(), Some(u64::from(told[user])));
    }
    assert!(started.elapsed() < Duration::from_secs(10), "the rebuild waited for the queue: {:?}", started.elapsed());
    let depth = shared::queue::OrderQueue::new(app.sqs.clone(), app.queue_url.clone()).in_flight().await.unwrap();
    assert!(depth >= 400, "the other sale's backlog is still queued ({depth})");

    // The rest of the sale: every number not held is sold once, none of the lost bucket's.
    for user in (0..40).map(|i| format!("after-{tail}-{i}")) {
        let reply = app.grab(&event, &user).await;
        match (reply.status, reply.code()) {
            (202, _) => _ = told.insert(user, reply.body["ticket_no"].as_u64().unwrap() as u32),
            (409, "SOLD_OUT") => {}
            other => panic!("{user}: {other:?} {}", reply.body),
        }
    }
    assert_eq!(told.len(), 30, "every number sold once");
    // The queue drains: the other sale's orders first, then this one's.
    loop {
        let bodies = app.drain_queue_raw().await;
        if bodies.is_empty() {
            break;
        }
        let ours: Vec<&String> =
            bodies.iter().filter(|b| OrderMessage::parse(b).is_ok_and(|m| m.event_id == event)).collect();
        for body in ours {
            app.deliver(body).await.expect("delivered");
        }
    }
    assert_exact_after(&app, &event, &told, 30).await;
}

/// A shard lost whole, as far as keys tell: `bucket`'s keys, and every sent record of the event
/// whose slot lies on the same master.
async fn lose_shard_of(app: &TestApp, bucket: &keys::Bucket, buckets: &keys::Buckets) {
    let mut r = app.redis.clone();
    let slot_of = async |key: &str| -> u16 {
        let mut r = app.redis.clone();
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query_async(&mut r).await.unwrap()
    };
    let ranges: Vec<(u16, u16, Vec<redis::Value>)> = {
        let slots: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut r).await.unwrap();
        slots
            .into_iter()
            .map(|range| match range {
                redis::Value::Array(v) => {
                    let n = |v: &redis::Value| match v {
                        redis::Value::Int(n) => *n as u16,
                        _ => panic!("{v:?}"),
                    };
                    let master = match &v[2] {
                        redis::Value::Array(node) => node.clone(),
                        other => panic!("{other:?}"),
                    };
                    (n(&v[0]), n(&v[1]), master)
                }
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let master_of =
        |slot: u16| ranges.iter().find(|(from, to, _)| (*from..=*to).contains(&slot)).map(|r| format!("{:?}", r.2));
    let lost_master = master_of(slot_of(&keys::meta(bucket)).await);
    let _: () = r.del(&keys::cache(bucket)).await.unwrap();
    let mut records = 0;
    for b in buckets.iter() {
        let record = keys::sent(b);
        if master_of(slot_of(&record).await) == lost_master {
            let _: () = r.del(&record).await.unwrap();
            records += 1;
        }
    }
    println!("the shard of {bucket} lost, with {records} sent records");
}

/// A holder's retry answered by the script a moment before the bucket is lost, whose order was
/// then only in the outbox (its first grab between the script and its sent record, as one whose
/// calls to AWS are slow): the rebuild cannot know the order, so the retry must not name it. The
/// retry's status read goes to DynamoDB over a network the test holds shut while the bucket is
/// lost and rebuilt (campaign seed 197: `grab 503`, then the retry's `grab 200` of that order, then
/// `GET /order` 404 `NO_ORDER`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_answered_before_its_bucket_was_lost_names_no_order_the_loss_took() {
    retry_across_a_loss(false).await;
}

/// The same retry, while the user's next grab is granted another order on the rebuilt cache and
/// stored before the retry's status read arrives: that read finds an order of the user, not the
/// one the retry holds (a hostile review's interleaving), and the retry must not name the lost one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_whose_user_was_granted_again_since_names_no_order_the_loss_took() {
    retry_across_a_loss(true).await;
}

async fn retry_across_a_loss(granted_again: bool) {
    use shared::{
        config::GrabPolicy,
        domain::{Email, OrderId, UserId, event::epoch_ms, order::MessageHead},
        gate::{GrabAttempt, GrabOutcome},
        http::routes::Function,
        recovery::Rebuild,
    };
    let app = TestApp::for_mail(30).await;
    let (far, valve) = local_runner::network::valve_network(&app.settings.aws_endpoint).await.expect("a network");
    let mut settings = app.settings.clone();
    settings.aws_endpoint = far;
    let held = std::sync::Arc::new(local_runner::Functions::build(&settings, &app.queue_url).await.expect("functions"));
    let event = app.open_event(3).await;
    let stored = app.functions.store.get_event(&event).await.unwrap().unwrap().event;

    // ada's first grab, decided and not yet kept in its sent record: the order is in the outbox alone.
    let ada = UserId::parse("ada").unwrap();
    let first = OrderId::generate();
    let head =
        MessageHead::new(&first, &event, &ada, &Email::parse("ada@example.com").unwrap(), "2026-11-29T10:00:00Z");
    let now = epoch_ms(time::OffsetDateTime::now_utc());
    let attempt = GrabAttempt { event: &event, user: &ada, order_id: &first, head: &head, clock_ms: now };
    let granted = app.functions.gate.grab(&attempt, GrabPolicy::default()).await.unwrap().outcome;
    assert!(matches!(granted, GrabOutcome::Granted { .. }), "{granted:?}");

    // Her retry: the script names that order, then her order's status is asked of DynamoDB, held.
    valve.shut();
    let retry = {
        let (held, body) = (held.clone(), serde_json::json!({ "hash": app.hash_for(&event, "ada") }));
        let request = for_user(with_body(for_event(fixture("grab.json"), &event), &body), "ada");
        tokio::spawn(async move { call_with(&held, Function::Grab, request).await })
    };
    valve.held(1).await;
    // Meanwhile the bucket is lost and rebuilt: no record of her order is left anywhere.
    let mut r = app.redis.clone();
    let _: () = r.del(&keys::cache(&event)).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while app.functions.rebuilder.rebuild(&stored).await.unwrap() != Rebuild::Done {
        assert!(std::time::Instant::now() < deadline, "the rebuild did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut told = Told::new();
    if granted_again {
        // Her next grab, from another device, is granted another number, stored before the
        // retry's read arrives.
        let again = app.grab(&event, "ada").await;
        assert_eq!(again.status, 202, "{}", again.body);
        app.deliver_all().await;
        told.insert("ada".to_owned(), again.body["ticket_no"].as_u64().unwrap() as u32);
    }
    valve.open();
    let retry = retry.await.unwrap();
    assert_ne!(retry.body["order_id"], first.to_string(), "ada was told of an order the loss took: {}", retry.body);
    assert_eq!((retry.status, retry.code()), (503, "BUSY"), "{}", retry.body);

    if !granted_again {
        // She asks again, is given a number, and holds it.
        let again = app.grab(&event, "ada").await;
        assert_eq!(again.status, 202, "{}", again.body);
        app.deliver_all().await;
        told.insert("ada".to_owned(), again.body["ticket_no"].as_u64().unwrap() as u32);
    }
    assert_exact_after(&app, &event, &told, 3).await;
}
