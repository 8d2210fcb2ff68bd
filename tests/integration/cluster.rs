//! Cluster mode (ElastiCache with cluster mode enabled): the gate on a Redis Cluster of three
//! masters (`scripts/stack` makes it with `redis-cli --cluster create`), through the redis crate's
//! cluster client. The concurrency, rebuild and fault tests run on it too: `scripts/test` runs
//! them a second time with `REDIS_URL` at the cluster and `REDIS_CLUSTER=true`. This test shows
//! what that cannot: the events spread over the shards, every key of one event on one of them.

use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use shared::gate::keys;

use crate::{failover::offset, faults::redis_info, helpers::*};

/// The cluster's masters, from `CLUSTER NODES` (`<id> <ip:port@bus> <flags> ...`).
async fn masters(url: &str) -> Vec<String> {
    let mut conn = redis::Client::open(redis_info(url)).unwrap().get_multiplexed_async_connection().await.expect(
        "the Redis Cluster of the local stack is not running: start it with `scripts/stack start` (scripts/test does this)",
    );
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query_async(&mut conn).await.unwrap();
    nodes
        .lines()
        .filter(|line| line.split(' ').nth(2).is_some_and(|flags| flags.contains("master")))
        .map(|line| line.split(' ').nth(1).unwrap().split('@').next().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn events_spread_over_the_masters_with_all_of_an_events_keys_on_one() {
    let url = std::env::var("REDIS_CLUSTER_URL").unwrap_or_else(|_| "redis://127.0.0.1:16381".into());
    let masters = masters(&url).await;
    assert_eq!(masters.len(), 3, "{masters:?}");
    let app = TestApp::for_mail_with(30, |s| {
        s.gate.redis_url = url.clone();
        s.gate.cluster = true;
    })
    .await;
    let mut events = Vec::new();
    for _ in 0..12 {
        let event = app.open_event(5).await;
        let reply = app.grab(&event, "u1").await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        events.push(event);
    }

    // Asked directly, a master answers for the keys of its slots and redirects (MOVED) the others.
    let mut owners: HashMap<String, HashSet<String>> = HashMap::new();
    for master in &masters {
        let mut node = redis::Client::open(redis_info(&format!("redis://{master}")))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        for event in &events {
            for key in [keys::meta(event), keys::seats(event), keys::outbox(event)] {
                let held: redis::RedisResult<u32> = redis::cmd("EXISTS").arg(&key).query_async(&mut node).await;
                match held {
                    Ok(1) => {
                        owners.entry(event.to_string()).or_default().insert(master.clone());
                    }
                    Ok(n) => panic!("{key} on {master}: EXISTS {n}"),
                    Err(e) => assert_eq!(e.code(), Some("MOVED"), "{key} on {master}: {e}"),
                }
            }
        }
    }
    for event in &events {
        let on = &owners[event.as_str()];
        assert_eq!(on.len(), 1, "the keys of {event} on {on:?}");
    }
    let used: HashSet<&String> = owners.values().flatten().collect();
    assert!(used.len() >= 2, "12 events all on {used:?}");
    println!("12 events over {} masters: {owners:?}", used.len());
}

/// A cluster node of the test's own (its slot map in a file of its own).
/// Release reads the cluster's slot map and says when a sharded event's buckets share a master
/// (the sale then runs at that master's rate): four buckets on three masters do, three spread
/// over them do not.
#[tokio::test]
async fn release_says_when_an_events_buckets_share_a_master() {
    let url = std::env::var("REDIS_CLUSTER_URL").unwrap_or_else(|_| "redis://127.0.0.1:16381".into());
    assert_eq!(masters(&url).await.len(), 3);
    let app = TestApp::for_mail_with(30, |s| {
        s.gate.redis_url = url.clone();
        s.gate.cluster = true;
    })
    .await;
    let now = time::OffsetDateTime::now_utc();
    for (buckets, shared) in [(3, false), (4, true)] {
        let id = crate::buckets::spread_event_id();
        let body = serde_json::json!({
            "id": id.as_str(), "title": "spread", "capacity": 40, "buckets": buckets,
            "sale_start": shared::domain::event::rfc3339(now + time::Duration::minutes(5)),
            "sale_end": shared::domain::event::rfc3339(now + time::Duration::hours(1)),
        });
        let reply =
            app.call(shared::http::routes::Function::Release, with_body(fixture("release-http.json"), &body)).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        let codes: Vec<&str> =
            reply.body["warnings"].as_array().into_iter().flatten().filter_map(|w| w["code"].as_str()).collect();
        assert_eq!(codes.contains(&"BUCKETS_SHARE_A_MASTER"), shared, "{buckets} buckets: {}", reply.body);
    }
}

/// A reshard after the release: reconcile reads the slot map again on each run and says when a
/// sharded sale's buckets came to share a master (`buckets_sharing_a_master`, the
/// `BucketsShareAMaster` metric), and the sale goes on exact across the move.
#[tokio::test]
async fn reconcile_says_when_a_reshard_puts_two_buckets_on_one_master() {
    let url = std::env::var("REDIS_CLUSTER_URL").unwrap_or_else(|_| "redis://127.0.0.1:16381".into());
    let app = TestApp::for_mail_with(30, |s| {
        s.gate.redis_url = url.clone();
        s.gate.cluster = true;
    })
    .await;
    let (event, buckets) = crate::buckets::open_sharded(&app, 30, 3).await;
    let slots: Vec<u16> = buckets.iter().map(|b| keys::slot(&b.to_string())).collect();
    let report = app.functions.reconcile.run().await;
    assert_eq!((report.buckets_sharing_a_master, report.failures), (0, 0), "three buckets on three masters");

    let home_of_first = slot_owner(&url, slots[0]).await;
    let home_of_second = slot_owner(&url, slots[1]).await;
    assert_ne!(home_of_first, home_of_second);
    move_slot(&url, slots[1], &home_of_first).await;
    // Whatever fails below, the slot goes back: the cluster is every cluster test's.
    let during = std::panic::AssertUnwindSafe(async {
        let report = app.functions.reconcile.run().await;
        assert_eq!((report.buckets_sharing_a_master, report.failures), (1, 0), "bucket 1 moved onto bucket 0's master");

        // The sale goes on across the move, every number once, to 30 of 40 users retrying on 503 as
        // clients do: the moved bucket's meta now sits on a master of another replication history,
        // which the gate cannot tell from a failover that lost writes, so the event is rebuilt
        // exactly from DynamoDB first (a few seconds of `503 BUSY`, docs/RELIABILITY.md).
        let mut granted = HashSet::new();
        let mut busy = 0;
        for i in 0..40 {
            let mut reply = app.grab(&event, &format!("reshard-{i}")).await;
            while reply.status == 503 && busy < 600 {
                busy += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                reply = app.grab(&event, &format!("reshard-{i}")).await;
            }
            match reply.status {
                202 => assert!(granted.insert(reply.body["ticket_no"].as_u64().unwrap()), "{}", reply.body),
                409 => assert_eq!(reply.code(), "SOLD_OUT"),
                other => panic!("{other}: {}", reply.body),
            }
        }
        assert_eq!(granted.len(), 30);
        assert_eq!(app.functions.gate.stock(&event).await.unwrap(), Some(0));
        println!(
            "after the reshard: {busy} grabs answered 503 BUSY (a retry each 100 ms) before the rebuilt sale served"
        );
    });
    let during = futures::FutureExt::catch_unwind(during).await;
    move_slot(&url, slots[1], &home_of_second).await;
    if let Err(panic) = during {
        std::panic::resume_unwind(panic);
    }
    let report = app.functions.reconcile.run().await;
    assert_eq!((report.buckets_sharing_a_master, report.failures), (0, 0), "moved back");
}

/// The cluster's nodes as `CLUSTER NODES` lists them: (id, "host:port", flags, slots).
async fn cluster_nodes(url: &str) -> Vec<(String, String, String, Vec<String>)> {
    let mut conn = redis::Client::open(redis_info(url)).unwrap().get_multiplexed_async_connection().await.unwrap();
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query_async(&mut conn).await.unwrap();
    nodes
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let addr = f[1].split('@').next().unwrap().to_owned();
            (f[0].to_owned(), addr, f[2].to_owned(), f[8..].iter().map(|s| (*s).to_owned()).collect())
        })
        .collect()
}

/// The "host:port" of the master serving `slot`.
async fn slot_owner(url: &str, slot: u16) -> String {
    // `[slot->-id]` and `[slot-<-id]` are a migration in progress, not a range served.
    let serves = |range: &str| match range.split_once('-') {
        _ if range.starts_with('[') => false,
        Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).contains(&slot),
        None => range.parse::<u16>().unwrap() == slot,
    };
    let nodes = cluster_nodes(url).await;
    let owner = nodes.iter().find(|(_, _, flags, slots)| flags.contains("master") && slots.iter().any(|r| serves(r)));
    owner.expect("a master serves every slot").1.clone()
}

/// Moves `slot` and its keys to the master at `to`, as `redis-cli --cluster reshard` does:
/// importing on the target, migrating on the source, `MIGRATE` the keys, then every master told.
async fn move_slot(url: &str, slot: u16, to: &str) {
    let from = slot_owner(url, slot).await;
    let nodes = cluster_nodes(url).await;
    let id_of = |addr: &str| nodes.iter().find(|n| n.1 == addr).unwrap().0.clone();
    let (from_id, to_id) = (id_of(&from), id_of(to));
    let conn_to = |addr: String| async move {
        redis::Client::open(redis_info(&format!("redis://{addr}")))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    };
    let (mut source, mut target) = (conn_to(from.clone()).await, conn_to(to.to_owned()).await);
    let setslot = |state: &str, node: &str| redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg(state).arg(node).clone();
    let _: () = setslot("IMPORTING", &from_id).query_async(&mut target).await.unwrap();
    let _: () = setslot("MIGRATING", &to_id).query_async(&mut source).await.unwrap();
    let (host, port) = to.split_once(':').unwrap();
    loop {
        let keys: Vec<String> =
            redis::cmd("CLUSTER").arg("GETKEYSINSLOT").arg(slot).arg(100).query_async(&mut source).await.unwrap();
        if keys.is_empty() {
            break;
        }
        let _: () = redis::cmd("MIGRATE")
            .arg(host)
            .arg(port)
            .arg("")
            .arg(0)
            .arg(5_000)
            .arg("AUTH")
            .arg(crate::faults::redis_token())
            .arg("KEYS")
            .arg(&keys)
            .query_async(&mut source)
            .await
            .unwrap();
    }
    // The target first, then the source, then the other masters (replicas learn by gossip).
    let _: () = setslot("NODE", &to_id).query_async(&mut target).await.unwrap();
    let _: () = setslot("NODE", &to_id).query_async(&mut source).await.unwrap();
    for (_, addr, ..) in nodes.iter().filter(|n| n.2.contains("master") && n.1 != from && n.1 != to) {
        let _: () = setslot("NODE", &to_id).query_async(&mut conn_to(addr.clone()).await).await.unwrap();
    }
    assert_eq!(slot_owner(url, slot).await, to);
}

async fn private_node() -> crate::faults::PrivateRedis {
    let conf = format!("/tmp/tg-node-{}.conf", uuid::Uuid::now_v7().simple());
    crate::faults::PrivateRedis::start_with(&[
        "--cluster-enabled".into(),
        "yes".into(),
        "--cluster-config-file".into(),
        conf,
        "--cluster-node-timeout".into(),
        "2000".into(),
    ])
    .await
}

async fn node_conn(node: &crate::faults::PrivateRedis) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_info(&node.url())).unwrap().get_multiplexed_async_connection().await.unwrap()
}

/// Makes the node behind `r` a replica of the primary behind `p` (listening on `primary_port`):
/// it meets the primary, then replicates it once it knows it (once: asked again, a replica starts
/// its sync over).
async fn replicate(
    r: &mut redis::aio::MultiplexedConnection,
    p: &mut redis::aio::MultiplexedConnection,
    primary_port: u16,
) {
    let _: () = redis::cmd("CLUSTER").arg("MEET").arg("127.0.0.1").arg(primary_port).query_async(r).await.unwrap();
    let primary_id: String = redis::cmd("CLUSTER").arg("MYID").query_async(p).await.unwrap();
    let joined = eventually(Duration::from_secs(20), || {
        let (mut r, id) = (r.clone(), primary_id.clone());
        async move { redis::cmd("CLUSTER").arg("REPLICATE").arg(&id).query_async::<()>(&mut r).await.is_ok() }
    })
    .await;
    assert!(joined, "the replica did not learn of the primary");
}

async fn info(conn: &mut redis::aio::MultiplexedConnection, what: &str) -> String {
    redis::cmd(what).arg(if what == "INFO" { "replication" } else { "INFO" }).query_async(conn).await.unwrap()
}

/// A real failover in cluster mode: a shard of a primary and its replica (two cluster nodes, every
/// slot on the primary), the primary killed and the replica taking over (`CLUSTER FAILOVER
/// TAKEOVER`). The replica is another node, so every event cached by the primary reads as written
/// in another history: the sale pauses, the cache is rebuilt from DynamoDB, and every user told
/// `202` before the failover still holds their ticket after it. The event is sharded (three
/// buckets, docs/DESIGN.md section 6): all of them are rebuilt, a take from a sibling included.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_in_cluster_mode_pauses_the_sale_and_rebuilds_it_exactly() {
    logs_when_asked();
    let mut primary = private_node().await;
    let replica = private_node().await;
    let (mut p, mut r) = (node_conn(&primary).await, node_conn(&replica).await);
    let _: () = redis::cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(0).arg(16383).query_async(&mut p).await.unwrap();
    replicate(&mut r, &mut p, primary.port).await;
    let synced = eventually(Duration::from_secs(20), || {
        let (mut r, mut p) = (r.clone(), p.clone());
        async move {
            info(&mut r, "INFO").await.contains("master_link_status:up")
                && info(&mut p, "CLUSTER").await.contains("cluster_state:ok")
        }
    })
    .await;
    assert!(synced, "the shard did not form");

    let nodes = format!("{},{}", primary.url(), replica.url());
    let app = TestApp::for_mail_with(1, |s| {
        // What ElastiCache's configuration endpoint is: a way to every node of the cluster.
        s.gate.redis_url = nodes;
        s.gate.cluster = true;
        s.rebuild.max_wait = Duration::from_secs(10);
    })
    .await;
    // A sharded event (its buckets all on this one shard): three users homed in one bucket, so the
    // third takes a number from a sibling before the failover.
    let (event, buckets) = crate::buckets::open_sharded(&app, 6, 3).await;
    let users = crate::buckets::homed_at(&buckets, 0, "u", 4);
    let mut told = HashMap::new();
    for user in &users[..3] {
        let reply = app.grab(&event, user).await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        told.insert(user.as_str(), (reply.body["order_id"].clone(), reply.body["ticket_no"].clone()));
    }
    // The replica has them too (this test is about the node changing, not about lag).
    let replicated = eventually(Duration::from_secs(10), || {
        let (mut p, mut r) = (p.clone(), r.clone());
        async move {
            let written = offset(&mut p, "master_repl_offset").await;
            offset(&mut r, "slave_repl_offset").await >= written
        }
    })
    .await;
    assert!(replicated);

    primary.kill();
    let _: () = redis::cmd("CLUSTER").arg("FAILOVER").arg("TAKEOVER").query_async(&mut r).await.unwrap();
    let promoted = eventually(Duration::from_secs(20), || {
        let mut r = r.clone();
        async move { info(&mut r, "INFO").await.contains("role:master") }
    })
    .await;
    assert!(promoted, "the replica did not take over");

    // Clients retry 503s; the sale resumes once the cache is rebuilt on the new primary.
    let consume = app.poller();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let polling = tokio::spawn(consume.run(1, Default::default(), stop_rx));
    let started = std::time::Instant::now();
    let mut statuses = Vec::new();
    let mut u4 = None;
    while started.elapsed() < Duration::from_secs(60) {
        let reply = app.grab(&event, &users[3]).await;
        statuses.push(reply.status);
        if reply.status != 503 {
            u4 = Some(reply);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let _ = stop_tx.send(true);
    polling.await.unwrap();
    let u4 = u4.unwrap_or_else(|| panic!("the sale never resumed: {statuses:?}"));
    assert_eq!(u4.status, 202, "{}", u4.body);
    assert!(statuses.contains(&503), "the sale paused for the rebuild");
    println!("cluster failover: the sale resumed after {:?} ({} x 503)", started.elapsed(), statuses.len() - 1);

    // Every user told 202 before the failover still holds their order and number on the new
    // primary, and the newcomer got another number. (The test's own connection finds the new
    // primary on its first request after the failover, which fails, as the gate's did.)
    let found = eventually(Duration::from_secs(10), || {
        let (mut conn, key) = (app.redis.clone(), keys::meta(&event));
        async move { redis::AsyncCommands::exists::<_, bool>(&mut conn, key).await.is_ok() }
    })
    .await;
    assert!(found);
    // Rebuilt whole: every bucket again, each user's holding at home, every number once.
    let caches = crate::buckets::caches(&app, &buckets).await;
    let holdings = crate::buckets::assert_exact(&caches, &buckets, 6);
    for (user, (order, ticket)) in &told {
        let (held_order, held_ticket) = &holdings[*user];
        assert_eq!((held_order.as_str(), u64::from(*held_ticket)), (order.as_str().unwrap(), ticket.as_u64().unwrap()));
    }
    let numbers: HashSet<u32> = holdings.values().map(|(_, n)| *n).collect();
    let free: usize = caches.iter().map(|c| c.seats.len()).sum();
    assert_eq!((holdings.len(), numbers.len(), free), (4, 4, 2));
}

/// Refusals of a sold-out event in cluster mode read the user's field on the slot's replica
/// (docs/DESIGN.md section 6), with nothing run or written on the primary, and a replica that joins
/// the shard after the reader first connected serves them too once the reader's map is renewed
/// (`REDIS_READER_REFRESH_MS`): a shard of the test's own, first a primary alone, then its replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_cluster_mode_refusals_read_the_slots_replica_even_one_added_later() {
    use crate::sold_out::{SCRIPT_AND_FIELD_COMMANDS, calls, calls_of, reset};
    logs_when_asked();
    let primary = private_node().await;
    let mut p = node_conn(&primary).await;
    let _: () = redis::cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(0).arg(16383).query_async(&mut p).await.unwrap();
    let formed = eventually(Duration::from_secs(20), || {
        let mut p = p.clone();
        async move { info(&mut p, "CLUSTER").await.contains("cluster_state:ok") }
    })
    .await;
    assert!(formed, "the one-node cluster did not form");
    let app = TestApp::for_mail_with(30, |s| {
        s.gate.redis_url = primary.url();
        s.gate.cluster = true;
        s.gate.reader_url = Some(primary.url());
        s.gate.sold_out_memory = Duration::from_secs(120);
        s.gate.reader_refresh = Duration::from_millis(300);
    })
    .await;
    let event = app.open_event(1).await;
    let ada = app.grab(&event, "ada").await;
    assert_eq!(ada.status, 202, "{}", ada.body);
    app.deliver_all().await;
    assert_eq!(app.grab(&event, "cy").await.code(), "SOLD_OUT", "the script says sold out: the memory starts");

    // No replica yet: the reader's map has none, and it reads the primary.
    reset(&mut p).await;
    assert_eq!(app.grab(&event, "fan-0").await.code(), "SOLD_OUT");
    assert_eq!((calls(&mut p, "hmget").await, calls(&mut p, "evalsha").await), (1, 0), "one read, no script");

    // A replica joins the shard.
    let replica = private_node().await;
    let mut r = node_conn(&replica).await;
    replicate(&mut r, &mut p, primary.port).await;
    let listed = eventually(Duration::from_secs(30), || {
        let (mut r, mut p) = (r.clone(), p.clone());
        async move {
            let slots: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut p).await.unwrap();
            // One range: its bounds, then the nodes serving it (the primary, and the replica).
            let nodes = match &slots {
                redis::Value::Array(ranges) => match ranges.first() {
                    Some(redis::Value::Array(range)) => range.len().saturating_sub(2),
                    _ => 0,
                },
                _ => 0,
            };
            info(&mut r, "INFO").await.contains("master_link_status:up") && nodes == 2
        }
    })
    .await;
    assert!(listed, "the replica did not join the shard");

    // Within the reader's renewal, the refusals move to the replica.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut n = 1;
    while calls(&mut r, "hmget").await == 0 {
        assert!(std::time::Instant::now() < deadline, "the refusals never reached the new replica");
        assert_eq!(app.grab(&event, &format!("fan-{n}")).await.code(), "SOLD_OUT");
        n += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    reset(&mut p).await;
    reset(&mut r).await;
    for i in 0..30 {
        assert_eq!(app.grab(&event, &format!("late-{i}")).await.code(), "SOLD_OUT");
    }
    let again = app.grab(&event, "ada").await;
    assert_eq!((again.status, &again.body["order_id"]), (200, &ada.body["order_id"]), "the holder gets their order");
    let on_primary = calls_of(&p, &SCRIPT_AND_FIELD_COMMANDS).await;
    assert_eq!(on_primary, 0, "31 refusals ran and wrote nothing on the primary");
    assert_eq!(calls(&mut r, "hmget").await, 31, "one read each, on the slot's replica");
}
