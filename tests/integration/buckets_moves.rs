//! A sharded event's numbers on their way between buckets (docs/DESIGN.md section 6, "Buckets"),
//! played with the raw scripts as a process stopped between a move's steps leaves them: a move's
//! numbers are in no bucket's seats, only in its record, and still free. Found by a hostile review
//! of the moves: a late order was stored REJECTED while its number was on its way, a user joined
//! the line (and another was told SOLD_OUT) while numbers were on their way, and a second
//! consumer's claim of a number for an order already taken in lost that number.

use std::time::Duration;

use redis::AsyncCommands;
use shared::{
    domain::{OrderMessage, UserId},
    gate::{ADMIT_SOURCE, MOVE_OUT_SOURCE, keys},
};

use crate::{
    buckets::{assert_exact, caches, homed_at, on_cluster_with, open_sharded, open_sharded_with},
    helpers::*,
};

/// `move_out.lua` alone: a refill's first step (`claim` None) or a late order's claim.
async fn move_out(app: &TestApp, from: &keys::Bucket, id: &str, to: u16, claim: Option<(&str, &str, u32)>) -> String {
    let (n, who) = match claim {
        Some((u, o, n)) => (n.to_string(), format!("{u}|{o}")),
        None => (String::new(), String::new()),
    };
    redis::Script::new(MOVE_OUT_SOURCE)
        .key(keys::meta(from))
        .key(keys::seats(from))
        .key(keys::moving(from))
        .arg(keys::opening_prefix())
        .arg(id)
        .arg(to)
        .arg(shared::gate::MOVE_MOST)
        .arg(n)
        .arg(who)
        .invoke_async(&mut app.redis.clone())
        .await
        .unwrap()
}

/// `admit.lua` alone at `home`: a consumer's step for `user`'s order `holding` of number `n`
/// ("look", or "claimed" with the move's id and generation in `extra`).
async fn admit(
    app: &TestApp,
    home: &keys::Bucket,
    user: &UserId,
    holding: &str,
    n: u32,
    step: &str,
    extra: &[&str],
) -> String {
    let script = redis::Script::new(ADMIT_SOURCE);
    let mut call = script.prepare_invoke();
    call.key(keys::meta(home)).key(keys::seats(home)).key(keys::moved(home));
    call.arg(keys::user_field(user)).arg(holding).arg(n).arg(keys::opening_prefix()).arg(step);
    for a in extra {
        call.arg(*a);
    }
    call.invoke_async(&mut app.redis.clone()).await.unwrap()
}

/// A late order whose number is on its way between buckets (a refill stopped after its first
/// step) is taken in, not rejected: the consumer finishes the moves under way before it calls the
/// number sold. No one else can buy it afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_order_whose_number_is_on_its_way_is_taken_in() {
    let app = on_cluster_with(|_| {}).await;
    let (event, buckets) = open_sharded(&app, 6, 3).await;
    let tail = own_tail(&event).to_owned();
    // Bucket 2 holds [3, 6]; a refill for home 0 takes number 3 and stops.
    let record = move_out(&app, buckets.get(2).unwrap(), "refill-stopped", 0, None).await;
    assert!(record.contains("|3|"), "{record}");
    let late = homed_at(&buckets, 1, &format!("late-{tail}"), 1).remove(0);
    app.send_order(&crate::cancel_and_wait::sold(&event, &late, 3)).await;
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(&event, &late).await.body["status"], "CONFIRMED");
    // The other five sell to the rest, none of them number 3.
    for b in homed_at(&buckets, 0, &format!("buyer-{tail}"), 6) {
        let reply = app.grab(&event, &b).await;
        assert_ne!(reply.body["ticket_no"], 3, "{}", reply.body);
    }
    app.deliver_all().await;
    let all = caches(&app, &buckets).await;
    assert_eq!(assert_exact(&all, &buckets, 6)[&late].1, 3);
    let audit = app.report(&event, None).await;
    assert_eq!((audit.body["rejected"].as_u64(), audit.body["confirmed"].as_u64()), (Some(0), Some(6)));
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// Numbers on their way between buckets are not sold out: while a stopped move holds the last
/// two, a join is refused `NOT_SOLD_OUT` and a grab finishes the moves and gets one. Nobody waits
/// while a number can still be bought.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn numbers_on_their_way_are_not_sold_out() {
    let app = on_cluster_with(|_| {}).await;
    let (event, buckets) = open_sharded_with(&app, 9, 3, |_| {}).await;
    let e = &event;
    let tail = own_tail(e).to_owned();
    for (b, n) in [(0u16, 3usize), (2, 3)] {
        for u in homed_at(&buckets, b, &format!("h{b}-{tail}"), n) {
            assert_eq!(app.grab(e, &u).await.status, 202);
        }
    }
    // A refill from bucket 1 to bucket 0 stops after its first step: two numbers on their way.
    let record = move_out(&app, buckets.get(1).unwrap(), "stopped", 0, None).await;
    assert!(record.starts_with("MOVING:"), "{record}");
    let last = homed_at(&buckets, 1, &format!("h1-{tail}"), 1).remove(0);
    assert_eq!(app.grab(e, &last).await.status, 202);
    assert_eq!(caches(&app, &buckets).await.iter().map(|c| c.seats.len()).sum::<usize>(), 0, "no seats anywhere");

    let w = homed_at(&buckets, 2, &format!("w-{tail}"), 1).remove(0);
    assert_eq!(app.join_waitlist(e, &w).await.code(), "NOT_SOLD_OUT", "two numbers on their way");
    let x = homed_at(&buckets, 0, &format!("x-{tail}"), 1).remove(0);
    assert_eq!(app.grab(e, &x).await.status, 202, "the grab finished the move and took one");
    let y = homed_at(&buckets, 2, &format!("y-{tail}"), 1).remove(0);
    assert_eq!(app.grab(e, &y).await.status, 202, "and the other");
    assert_eq!(app.grab(e, &w).await.code(), "SOLD_OUT");
    assert_eq!(app.join_waitlist(e, &w).await.status, 201, "now sold out: the line");
    app.deliver_all().await;
    assert_exact(&caches(&app, &buckets).await, &buckets, 9);
    let audit = app.report(e, None).await;
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// Two consumers of one late order's message: the second looked (the number not at home) before
/// the first claimed and stored it; the user then cancelled and the number went back on sale; the
/// second's claim takes it again. Its arrival finds the order cancelled and puts the number on sale
/// at home: taken twice for one order, it is free once, never lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_number_claimed_twice_for_one_order_is_not_lost() {
    let app = on_cluster_with(|_| {}).await;
    let (event, buckets) = open_sharded_with(&app, 6, 3, |_| {}).await;
    let e = &event;
    let tail = own_tail(e).to_owned();
    let late = homed_at(&buckets, 1, &format!("late-{tail}"), 1).remove(0);
    // Number 4 lies in bucket 0.
    let body = crate::cancel_and_wait::sold(e, &late, 4);
    let order = OrderMessage::parse(&body).unwrap();
    let home = buckets.get(1).unwrap();
    let user = UserId::parse(&late).unwrap();
    let holding = format!("{}:4", order.order_id);
    let admit = async |step: &str, extra: &[&str]| admit(&app, home, &user, &holding, 4, step, extra).await;
    // The second consumer looks first (not at home), then stalls.
    assert_eq!(admit("look", &[]).await, "ELSEWHERE");
    // The first handles the message whole: claimed in bucket 0, taken in, stored.
    app.send_order(&body).await;
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(e, &late).await.body["status"], "CONFIRMED");
    // The user cancels; nobody waits: number 4 is on sale again.
    assert_eq!(app.cancel(e, &late).await.status, 200);
    assert!(caches(&app, &buckets).await.iter().any(|c| c.seats.contains(&4)));
    // The second resumes: its claim (an id of its own) takes 4 again...
    let all = caches(&app, &buckets).await;
    let from = buckets.iter().zip(&all).find(|(_, c)| c.seats.contains(&4)).unwrap().0.clone();
    let record = move_out(&app, &from, "second-claim", 1, Some((&late, order.order_id.as_str(), 4))).await;
    let generation = record.strip_prefix("MOVING:").unwrap().split('|').next().unwrap().to_owned();
    // ...and its arrival puts it on sale at home: the order is counted (cancelled), the number free.
    assert_eq!(admit("claimed", &["second-claim", &generation]).await, "COUNTED");
    let _: u32 = app.redis.clone().hdel(keys::moving(&from), "second-claim").await.unwrap();
    let all = caches(&app, &buckets).await;
    assert!(all[1].seats.contains(&4), "on sale at the claimant's home");
    assert_exact(&all, &buckets, 6);
    assert_eq!(app.functions.gate.tidy_moves(e, Duration::ZERO).await.unwrap(), 0);
    app.deliver_all().await;
    let audit = app.report(e, None).await;
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// Every bucket's `arrivals` as Redis holds it.
async fn arrivals(app: &TestApp, buckets: &keys::Buckets) -> Vec<u64> {
    let mut counts = Vec::new();
    for b in buckets.iter() {
        let n: Option<u64> = app.redis.clone().hget(keys::meta(b), keys::ARRIVALS).await.unwrap();
        counts.push(n.unwrap_or(0));
    }
    counts
}

/// Every step that puts numbers on sale counts it where they arrive, as a sharded grab's look
/// relies on (it answers `SOLD_OUT` only if no count moved while it looked: docs/DESIGN.md section
/// 6, "Sold out"): a move's arrival, a cancelled number back on sale with nobody waiting, a
/// claimed number its user does not take in, and an unsharded event's give-back. A grab counts
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn numbers_put_on_sale_are_counted_where_they_arrive() {
    let app = on_cluster_with(|_| {}).await;
    let (event, buckets) = open_sharded_with(&app, 6, 3, |_| {}).await;
    let e = &event;
    let tail = own_tail(e).to_owned();
    assert_eq!(arrivals(&app, &buckets).await, [0, 0, 0]);
    // Bucket 0 holds two numbers; its third user's grab moves numbers home from a sibling.
    let users = homed_at(&buckets, 0, &format!("h0-{tail}"), 3);
    for u in &users[..2] {
        assert_eq!(app.grab(e, u).await.status, 202);
    }
    assert_eq!(arrivals(&app, &buckets).await, [0, 0, 0], "grabs count nothing");
    assert_eq!(app.grab(e, &users[2]).await.status, 202);
    assert_eq!(arrivals(&app, &buckets).await, [1, 0, 0], "one move arrived home");
    app.deliver_all().await;
    // Nobody waits: the cancelled number goes on sale in bucket 0 (hand.lua).
    assert_eq!(app.cancel(e, &users[0]).await.status, 200);
    assert_eq!(arrivals(&app, &buckets).await, [2, 0, 0]);
    // A late order's number claimed from bucket 0 for a user at home 1 who took another order
    // meanwhile: the claim arrives and is put on sale there (admit.lua).
    let late = homed_at(&buckets, 1, &format!("late-{tail}"), 1).remove(0);
    assert_eq!(app.grab(e, &late).await.status, 202);
    let on_sale = caches(&app, &buckets).await[0].seats.first().copied().expect("a number on sale in bucket 0");
    let body = crate::cancel_and_wait::sold(e, &late, on_sale);
    let order = OrderMessage::parse(&body).unwrap();
    let record =
        move_out(&app, buckets.get(0).unwrap(), "claim", 1, Some((&late, order.order_id.as_str(), on_sale))).await;
    let generation = record.strip_prefix("MOVING:").unwrap().split('|').next().unwrap().to_owned();
    let home = buckets.get(1).unwrap();
    let user = UserId::parse(&late).unwrap();
    let holding = format!("{}:{on_sale}", order.order_id);
    let answer = admit(&app, home, &user, &holding, on_sale, "claimed", &["claim", &generation]).await;
    assert_eq!(answer, "UNCOUNTED", "the user holds another order");
    assert_eq!(arrivals(&app, &buckets).await, [2, 1, 0]);
    let _: u32 = app.redis.clone().hdel(keys::moving(buckets.get(0).unwrap()), "claim").await.unwrap();
    app.deliver_all().await;
    assert_exact(&caches(&app, &buckets).await, &buckets, 6);

    // An unsharded event's give-back (give_back.lua) counts in its one meta.
    let single = app.open_event(2).await;
    let one = keys::Buckets::of(&single, 1);
    assert_eq!(app.grab(&single, &format!("solo-{tail}")).await.status, 202);
    app.deliver_all().await;
    assert_eq!(app.cancel(&single, &format!("solo-{tail}")).await.status, 200);
    assert_eq!(arrivals(&app, &one).await, [1]);
}
