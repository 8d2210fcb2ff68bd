//! Everyone at once, on tokio tasks, through the grab handler; then count what is really in Redis
//! and on the queue (docs/DESIGN.md section 13).

use std::{collections::HashSet, sync::Arc};

use futures::StreamExt;
use serde_json::json;
use shared::{config::GrabPolicy, http::routes::Function};

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_thousand_users_race_for_a_hundred_tickets() {
    let app = Arc::new(TestApp::build(GrabPolicy::default(), true).await);
    let event = app.open_event(100).await;
    let users: Vec<String> = (0..2_000).map(|i| format!("student-{i:04}")).collect();

    // Every user gets a hash from verify-hash first, as a client would.
    let mut grabs = Vec::new();
    for user in &users {
        let reply =
            app.call(Function::VerifyHash, for_user(for_event(fixture("verify-hash.json"), &event), user)).await;
        assert_eq!(reply.status, 200);
        grabs.push(for_user(
            with_body(for_event(fixture("grab.json"), &event), &json!({ "hash": reply.body["hash"] })),
            user,
        ));
    }
    let tasks: Vec<_> = grabs
        .into_iter()
        .map(|g| {
            let app = app.clone();
            tokio::spawn(async move { app.call(Function::Grab, g).await })
        })
        .collect();
    let mut granted = Vec::new();
    let mut sold_out = 0;
    for task in tasks {
        let reply = task.await.unwrap();
        match (reply.status, reply.code()) {
            (202, _) => granted.push(reply.body),
            (409, "SOLD_OUT") => sold_out += 1,
            other => panic!("unexpected reply {other:?}: {}", reply.body),
        }
    }
    assert_eq!((granted.len(), sold_out), (100, 1_900));
    let tickets: HashSet<u64> = granted.iter().map(|g| g["ticket_no"].as_u64().unwrap()).collect();
    assert_eq!(tickets, (1..=100).collect(), "100 distinct ticket numbers in 1..100");
    let order_ids: HashSet<&str> = granted.iter().map(|g| g["order_id"].as_str().unwrap()).collect();
    assert_eq!(order_ids.len(), 100);

    let cache = app.cache(&event).await;
    assert_eq!(
        (cache.seats.len(), cache.holdings.len(), cache.outbox.len()),
        (0, 100, 100),
        "free + holdings = capacity; one outbox entry per order"
    );
    assert_eq!(cache.held(), (1..=100).collect::<Vec<_>>());

    // Each granted order was sent; a send the loaded emulator did not answer within grab's 1.5 s
    // leaves its order in the outbox for reconcile (checked below: the outbox holds all 100), and a
    // retried send may land twice (consumers are idempotent, docs/DESIGN.md section 7).
    let messages = app.drain_queue().await;
    let sent: HashSet<&str> = messages.iter().map(|m| m["order_id"].as_str().unwrap()).collect();
    assert!(sent.is_subset(&order_ids), "every message is a granted order");
    assert!(!sent.is_empty());
    if sent.len() < 100 {
        println!("{} of 100 sends timed out under load; their orders wait in the outbox", 100 - sent.len());
    }
    let outboxed: HashSet<String> = cache
        .outbox
        .iter()
        .map(|(id, m)| {
            assert_eq!(serde_json::from_str::<serde_json::Value>(m).unwrap()["order_id"], id.as_str());
            id.clone()
        })
        .collect();
    assert_eq!(outboxed, order_ids.iter().map(|s| s.to_string()).collect::<HashSet<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_user_firing_two_hundred_grabs_gets_one_ticket() {
    // The default rate limit (`GRAB_RATE_LIMIT`'s): a user who holds an order is answered with it, never
    // limited, however fast they retry.
    let app = Arc::new(TestApp::build(GrabPolicy::default(), true).await);
    let event = app.open_event(100).await;
    let grab = for_user(
        with_body(for_event(fixture("grab.json"), &event), &json!({ "hash": app.hash_for(&event, "eager") })),
        "eager",
    );
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let app = app.clone();
            let grab = grab.clone();
            tokio::spawn(async move { app.call(Function::Grab, grab).await })
        })
        .collect();
    let mut statuses = Vec::new();
    let mut order_ids = HashSet::new();
    let mut tickets = HashSet::new();
    for task in tasks {
        let reply = task.await.unwrap();
        statuses.push(reply.status);
        order_ids.insert(reply.body["order_id"].as_str().unwrap().to_owned());
        tickets.insert(reply.body["ticket_no"].as_u64().unwrap());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 202).count(), 1, "one grab creates the order");
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 199, "every other reply is the same order");
    assert_eq!((order_ids.len(), tickets.len()), (1, 1), "every reply names the same order id");

    let cache = app.cache(&event).await;
    assert_eq!((cache.seats.len(), cache.holdings.len(), cache.outbox.len()), (99, 1, 1));
    assert_eq!(app.drain_queue().await.len(), 1);
}

/// 10,000 grabs from one user as fast as they return, while 200 others buy 50 tickets of another
/// event: the flooder is answered `429` past the limit (its requests refused before the sale
/// counted), and the sale beside it goes on untouched: every other user is answered, none limited,
/// exactly 50 tickets sold.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_grabs_from_one_user_are_limited_and_the_sale_beside_them_is_not() {
    let app = Arc::new(TestApp::build(GrabPolicy::default(), true).await);
    let now = time::OffsetDateTime::now_utc();
    let later = app.put_event(10, now + time::Duration::hours(1), now + time::Duration::hours(2)).await;
    let sale = app.open_event(50).await;
    let flood = app.grab_event(&later, "flooder");
    // The flooder keeps 64 requests in flight (a bot's connection pool), as fast as they return.
    let flooding = {
        let (app, flood) = (app.clone(), flood.clone());
        tokio::spawn(async move {
            futures::stream::iter(0..10_000)
                .map(|_| {
                    let (app, flood) = (app.clone(), flood.clone());
                    async move { app.call(Function::Grab, flood).await.code().to_owned() }
                })
                .buffer_unordered(64)
                .collect::<Vec<String>>()
                .await
        })
    };
    let buying: Vec<_> = (0..200)
        .map(|i| {
            let (app, sale) = (app.clone(), sale.clone());
            tokio::spawn(async move { app.grab(&sale, &format!("buyer-{i:03}")).await })
        })
        .collect();
    let started = std::time::Instant::now();
    let mut flooder = std::collections::BTreeMap::<String, usize>::new();
    for code in flooding.await.unwrap() {
        *flooder.entry(code).or_default() += 1;
    }
    let windows = started.elapsed().as_millis() as usize / 1000 + 2;
    let mut buyers = std::collections::BTreeMap::<u16, usize>::new();
    for task in buying {
        *buyers.entry(task.await.unwrap().status).or_default() += 1;
    }
    let refused = flooder.get("SALE_NOT_STARTED").copied().unwrap_or(0);
    assert_eq!(refused + flooder.get("RATE_LIMITED").copied().unwrap_or(0), 10_000, "{flooder:?}");
    assert!(refused <= 5 * windows, "at most five refusals per window reached the script: {flooder:?}");
    assert_eq!(buyers, [(202, 50), (409, 150)].into_iter().collect(), "the sale beside the flood");
    assert_eq!(app.cache(&sale).await.holdings.len(), 50);
}
