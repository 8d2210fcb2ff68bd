//! Cluster mode (ElastiCache with cluster mode enabled): the gate on a Redis Cluster of three
//! masters (`scripts/stack` makes it with `redis-cli --cluster create`), through the redis crate's
//! cluster client. The concurrency, rebuild and fault tests run on it too: `scripts/test` runs
//! them a second time with `REDIS_URL` at the cluster and `REDIS_CLUSTER=true`. This test shows
//! what that cannot: the events spread over the shards, every key of one event on one of them.

use std::collections::{HashMap, HashSet};

use shared::gate::keys;

use crate::helpers::*;

/// The cluster's masters, from `CLUSTER NODES` (`<id> <ip:port@bus> <flags> ...`).
async fn masters(url: &str) -> Vec<String> {
    let mut conn = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.expect(
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
        s.redis_url = url.clone();
        s.redis_cluster = true;
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
        let mut node =
            redis::Client::open(format!("redis://{master}")).unwrap().get_multiplexed_async_connection().await.unwrap();
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
