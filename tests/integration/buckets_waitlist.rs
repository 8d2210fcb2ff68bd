//! A sharded event's waitlist (docs/DESIGN.md section 6, "Buckets"), on the local three-master
//! Redis Cluster: the line lives at bucket 0 and each user's field at their home, so a returned
//! number reaches the line's head in steps (let go at the canceller's home, hand at bucket 0,
//! promote at the head's home). The line is served in order whatever the homes; a give-back or a
//! join stopped between its steps is finished by its retry or by reconcile; a lost cache is
//! rebuilt with its line; and every number stays held once, on sale once or held for the line once.

use std::{
    collections::{BTreeSet, HashMap},
    time::Duration,
};

use redis::AsyncCommands;
use shared::{
    domain::{EventId, Holding, OrderId, UserId, order::WaitHead},
    gate::{GaveBack, HAND_SOURCE, LET_GO_SOURCE, PROMOTE_SOURCE, WAIT_SOURCE, keys},
};
use time::OffsetDateTime;

use crate::{
    buckets::{caches, homed_at, on_cluster_with, open_sharded_with},
    cancel_and_wait::wait_until,
    helpers::*,
};

/// The users in bucket 0's line, first first.
async fn line(app: &TestApp, buckets: &keys::Buckets) -> Vec<String> {
    app.redis.clone().zrange(keys::wait(buckets.get(0).unwrap()), 0, -1).await.unwrap()
}

/// The numbers held for the line after the sale (bucket 0's `returned`).
async fn returned(app: &TestApp, buckets: &keys::Buckets) -> Vec<u32> {
    app.redis.clone().lrange(keys::returned(buckets.get(0).unwrap()), 0, -1).await.unwrap()
}

/// Every number of the event exactly once: held by one user at their home, on sale in one bucket,
/// or held for the line at bucket 0; and no give-back or promotion left part way.
async fn assert_whole(app: &TestApp, buckets: &keys::Buckets, capacity: u32) -> HashMap<String, (String, u32)> {
    assert_whole_but(app, buckets, capacity, &[]).await
}

/// [`assert_whole`], but for the users in `rejected`, whose fields name an order stored
/// `REJECTED` (its number is another's: the field only tells a retry of it).
async fn assert_whole_but(
    app: &TestApp,
    buckets: &keys::Buckets,
    capacity: u32,
    rejected: &[&str],
) -> HashMap<String, (String, u32)> {
    let mut r = app.redis.clone();
    let mut numbers = returned(app, buckets).await;
    let mut holdings = HashMap::new();
    for (b, cache) in buckets.iter().zip(caches(app, buckets).await) {
        for (user, held) in cache.holdings {
            assert_eq!(buckets.home(&UserId::parse(&user).unwrap()), b, "{user}'s field lives at home");
            if rejected.contains(&user.as_str()) {
                continue;
            }
            numbers.push(held.1);
            holdings.insert(user, held);
        }
        numbers.extend(cache.seats);
        let giving: HashMap<String, String> = r.hgetall(keys::giving(b)).await.unwrap();
        assert!(giving.is_empty(), "no number left in hand at bucket {}: {giving:?}", b.index());
    }
    let handed: HashMap<String, String> = r.hgetall(keys::handed(buckets.get(0).unwrap())).await.unwrap();
    assert!(handed.values().all(|v| v == "="), "every promotion settled: {handed:?}");
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=capacity).collect::<Vec<_>>(), "every number once");
    holdings
}

/// The promotion `user` holds, as the waitlist route shows it.
async fn promoted_number(app: &TestApp, event: &EventId, user: &str) -> u32 {
    let r = app.waitlist(event, user).await;
    assert_eq!(r.body["status"], "HOLDS_ORDER", "{user}: {}", r.body);
    r.body["ticket_no"].as_u64().unwrap() as u32
}

/// One sold-out sale over three buckets, its line five users homed over all three: cancellations
/// reach them in line order (two at once reach the next two), a waiter who holds an order when
/// their turn comes (a late order of theirs, stored REJECTED, named in their field) is passed over,
/// and with nobody waiting a number goes on sale in bucket 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sharded_sales_line_is_served_in_order_whatever_the_homes() {
    let app = on_cluster_with(|_| {}).await;
    let (event, buckets) = open_sharded_with(&app, 3, 3, |_| {}).await;
    let e = &event;
    let home = |u: &str| buckets.home(&UserId::parse(u).unwrap()).index();
    // Bucket 0's number goes first: the line's bucket is empty, but the others are not.
    let a = homed_at(&buckets, 0, "holder-a", 1).remove(0);
    assert_eq!(app.grab(e, &a).await.status, 202);
    for bucket in [0, 1] {
        let early = homed_at(&buckets, bucket, "early", 1).remove(0);
        let r = app.join_waitlist(e, &early).await;
        assert_eq!(r.code(), "NOT_SOLD_OUT", "homed at {bucket}: numbers left in buckets 1 and 2");
    }
    let b = homed_at(&buckets, 1, "holder-b", 1).remove(0);
    let c = homed_at(&buckets, 2, "holder-c", 1).remove(0);
    for user in [&b, &c] {
        assert_eq!(app.grab(e, user).await.status, 202);
    }
    assert_eq!(app.deliver_all().await, 3);

    let (two, one, zero) =
        (homed_at(&buckets, 2, "wait-2", 2), homed_at(&buckets, 1, "wait-1", 2), homed_at(&buckets, 0, "wait-0", 1));
    let waiters = [&two[0], &one[0], &zero[0], &two[1], &one[1]];
    for (i, user) in waiters.iter().enumerate() {
        let r = app.join_waitlist(e, user).await;
        assert_eq!((r.status, r.body["position"].as_u64()), (201, Some(i as u64 + 1)), "{}", r.body);
    }
    let again = app.join_waitlist(e, waiters[0]).await;
    assert_eq!((again.status, again.body["position"].as_u64()), (200, Some(1)));
    assert_eq!(app.join_waitlist(e, &c).await.code(), "HOLDS_ORDER", "read at c's home, bucket 2");
    assert_eq!(app.waitlist(e, waiters[2]).await.body["position"], 3);
    assert_eq!(line(&app, &buckets).await, waiters.map(|w| w.to_string()), "one line, at bucket 0");

    // a's number goes to the head, homed at bucket 2, through bucket 0's line.
    let a_number = assert_whole(&app, &buckets, 3).await[&a].1;
    assert_eq!(app.cancel(e, &a).await.status, 200);
    assert_eq!(promoted_number(&app, e, waiters[0]).await, a_number);
    assert_eq!(app.waitlist(e, waiters[1]).await.body["position"], 1);
    let at_home = caches(&app, &buckets).await.remove(usize::from(home(waiters[0])));
    assert_eq!(at_home.outbox.len(), 1, "the promotion in the outbox at its user's home");
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(e, waiters[0]).await.body["status"], "CONFIRMED");

    // Two cancellations at once: the next two in line get one number each.
    let (rb, rc) = tokio::join!(app.cancel(e, &b), app.cancel(e, &c));
    assert_eq!((rb.status, rc.status), (200, 200));
    let got: BTreeSet<u32> =
        [promoted_number(&app, e, waiters[1]).await, promoted_number(&app, e, waiters[2]).await].into();
    assert_eq!(got.len(), 2, "one number each");
    assert_eq!(app.deliver_all().await, 2);

    // The fourth's grab of the open reaches the consumer late, its number sold since: stored
    // REJECTED and named in their field (a rebuild that stopped waiting for the queue had left it
    // out). When their turn comes they hold an order: passed over, and the fifth is served.
    app.send_order(&crate::cancel_and_wait::sold(e, waiters[3], a_number)).await;
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(e, waiters[3]).await.body["status"], "REJECTED");
    tokio::time::sleep(Duration::from_millis(2)).await;
    app.functions.store.record_rebuild(e, "test", OffsetDateTime::now_utc(), Some(1), 0).await.unwrap();
    assert_eq!(app.cancel(e, waiters[0]).await.status, 200);
    assert_eq!(promoted_number(&app, e, waiters[4]).await, a_number);
    assert_eq!(app.waitlist(e, waiters[3]).await.body["status"], "HOLDS_ORDER");
    assert_eq!(app.deliver_all().await, 1);

    // Nobody waits: during the sale the next number goes on sale, in the line's bucket.
    let freed = promoted_number(&app, e, waiters[1]).await;
    assert_eq!(app.cancel(e, waiters[1]).await.status, 200);
    assert_eq!(caches(&app, &buckets).await[0].seats, [freed]);
    let holdings = assert_whole_but(&app, &buckets, 3, &[waiters[3]]).await;
    assert_eq!(holdings.len(), 2);

    let run = app.functions.reconcile.run().await;
    assert_eq!((run.drift, run.returned, run.promotions_settled, run.failures), (0, 0, 0, 0), "{run:?}");
    let audit = app.report(e, None).await;
    assert_eq!((audit.body["cancelled"].as_u64(), audit.body["promoted"].as_u64()), (Some(5), Some(4)));
    crate::partial_loss::assert_audit_fails_only_on_the_rejection(&audit);
}

/// Give-backs stopped between their steps, as a process killed there leaves them (the raw steps
/// play what it had run): after the let-go alone, reconcile finishes it from its marker; after the
/// head was popped, eight give-backs at once finish it with one promotion, to that very head.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sharded_give_back_stopped_between_its_steps_promotes_once() {
    let app = on_cluster_with(|_| {}).await;
    let (event, buckets) = open_sharded_with(&app, 2, 2, |_| {}).await;
    let e = &event;
    let (a, b) = (homed_at(&buckets, 0, "holder-a", 1).remove(0), homed_at(&buckets, 1, "holder-b", 1).remove(0));
    for user in [&a, &b] {
        assert_eq!(app.grab(e, user).await.status, 202);
    }
    let waiters = [homed_at(&buckets, 1, "wait-1", 1).remove(0), homed_at(&buckets, 0, "wait-0", 2).remove(1)];
    let third = homed_at(&buckets, 1, "wait-1", 2).remove(1);
    for user in waiters.iter().chain([&third]) {
        assert_eq!(app.join_waitlist(e, user).await.status, 201);
    }
    assert_eq!(app.deliver_all().await, 2);

    // a's give-back stopped after the let-go: a holds nothing, the number is in hand at a's home.
    let (_, a_holding) = app.cancel_in_dynamodb(e, &a).await;
    assert!(let_go(&app, &buckets, &a, &a_holding).await.starts_with("HAND:"));
    assert_eq!(app.waitlist(e, &waiters[0]).await.body["position"], 1, "nobody promoted yet");
    let run = app.functions.reconcile.run().await;
    assert_eq!((run.returned, run.failures), (1, 0), "{run:?}");
    assert_eq!(promoted_number(&app, e, &waiters[0]).await, a_holding.ticket_no.get());
    assert!(app.functions.store.give_backs_due(e).await.unwrap().is_empty());

    // b's stopped after bucket 0 popped the next head and recorded the promotion for them.
    let (b_due, b_holding) = app.cancel_in_dynamodb(e, &b).await;
    let generation = let_go(&app, &buckets, &b, &b_holding).await.strip_prefix("HAND:").unwrap().to_owned();
    let first_try = OrderId::generate();
    let reply = hand(&app, &buckets, &b_holding, &first_try, "", &generation).await;
    assert!(reply.starts_with("HEAD:") && reply.contains(&waiters[1]), "{reply}");
    assert_eq!(line(&app, &buckets).await, std::slice::from_ref(&third), "the head left the line");
    // Between the steps the promoted user's order is theirs, on its way: never NO_ORDER.
    let between = app.order_of(e, &waiters[1]).await;
    assert_eq!(
        (between.status, between.body["status"].as_str(), between.body["order_id"].as_str()),
        (200, Some("PENDING"), Some(first_try.as_str())),
        "{}",
        between.body
    );

    let returns = app.give_backs();
    let tries = (0..8).map(|_| returns.give_back(e, &b_due));
    let results: Vec<GaveBack> = futures::future::join_all(tries).await.into_iter().map(Result::unwrap).collect();
    let promoted: Vec<_> = results.iter().filter(|r| matches!(r, GaveBack::Promoted { .. })).collect();
    assert_eq!(promoted.len(), 1, "{results:?}");
    let GaveBack::Promoted { user, order_id, .. } = promoted[0] else { unreachable!() };
    assert_eq!((user.as_str(), order_id), (waiters[1].as_str(), &first_try), "the head popped, the first try's order");
    assert_eq!(results.iter().filter(|r| **r == GaveBack::Gone).count(), 7);
    assert_eq!(app.waitlist(e, &third).await.body["position"], 1, "one place taken");
    assert!(app.functions.store.give_backs_due(e).await.unwrap().is_empty());

    assert_eq!(app.deliver_all().await, 2);
    for user in &waiters {
        assert_eq!(app.order_of(e, user).await.body["status"], "CONFIRMED");
    }
    assert_eq!(assert_whole(&app, &buckets, 2).await.len(), 2);
    let audit = app.report(e, None).await;
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// The two drivers one give-back marker can have (the cancel's own retry and reconcile), played
/// step by step with the real scripts, interleaved so each reads what the other is about to
/// change: the head of the line holds an order (a late order of theirs, stored REJECTED and named
/// in their field), one driver skips them and promotes the next, and the other, a step behind,
/// finds the first head still unable (holding an order never goes back to holding nothing) and
/// the same record for the next. One user is promoted, once, with one order; the next waiter
/// keeps their place.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_drivers_of_one_give_back_promote_one_user_once() {
    let app = on_cluster_with(|s| s.reconcile.outbox_age = Duration::ZERO).await;
    let (event, buckets) = open_sharded_with(&app, 2, 2, |_| {}).await;
    let e = &event;
    let tail = own_tail(e).to_owned();
    let (a, b) = (
        homed_at(&buckets, 0, &format!("a-{tail}"), 1).remove(0),
        homed_at(&buckets, 1, &format!("b-{tail}"), 1).remove(0),
    );
    for user in [&a, &b] {
        assert_eq!(app.grab(e, user).await.status, 202);
    }
    let (first, second, third) = (
        homed_at(&buckets, 1, &format!("w1-{tail}"), 1).remove(0),
        homed_at(&buckets, 0, &format!("w2-{tail}"), 1).remove(0),
        homed_at(&buckets, 1, &format!("w3-{tail}"), 1).remove(0),
    );
    for user in [&first, &second, &third] {
        assert_eq!(app.join_waitlist(e, user).await.status, 201);
    }
    assert_eq!(app.deliver_all().await, 2);
    // The head's grab of the open arrives late, for a's number: REJECTED, named in their field.
    let a_number = app.order_of(e, &a).await.body["ticket_no"].as_u64().unwrap() as u32;
    app.send_order(&crate::cancel_and_wait::sold(e, &first, a_number)).await;
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(e, &first).await.body["status"], "REJECTED");
    tokio::time::sleep(Duration::from_millis(2)).await;
    app.functions.store.record_rebuild(e, "test", OffsetDateTime::now_utc(), Some(1), 0).await.unwrap();

    // b cancels; two drivers of the give-back, A and B, step by step.
    let (b_due, b_holding) = app.cancel_in_dynamodb(e, &b).await;
    let generation = let_go(&app, &buckets, &b, &b_holding).await.strip_prefix("HAND:").unwrap().to_owned();
    assert_eq!(let_go(&app, &buckets, &b, &b_holding).await, format!("HAND:{generation}"), "B: in hand too");
    let head = |reply: String| reply.strip_prefix("HEAD:").unwrap_or_else(|| panic!("{reply}")).to_owned();
    let a_first = head(hand(&app, &buckets, &b_holding, &OrderId::generate(), "", &generation).await);
    let b_first = head(hand(&app, &buckets, &b_holding, &OrderId::generate(), "", &generation).await);
    assert_eq!(a_first, b_first, "both drivers read the one record");
    assert!(a_first.contains(&first));
    assert!(promote(&app, &buckets, &a_first, &generation).await.starts_with("SKIP:"), "A: the head holds an order");
    let a_next = head(hand(&app, &buckets, &b_holding, &OrderId::generate(), &a_first, &generation).await);
    assert!(a_next.contains(&second), "{a_next}");
    let a_promotion = shared::domain::OrderMessage::parse(&a_next).unwrap().order_id;
    let b_promotion = shared::domain::OrderMessage::parse(&b_first).unwrap().order_id;
    assert_ne!(a_promotion, b_promotion, "the next head's order is its own");
    assert_eq!(promote(&app, &buckets, &a_next, &generation).await, "PROMOTED", "A promotes the second");
    // B, a step behind: the first head still cannot take it, and the record names the second.
    assert!(promote(&app, &buckets, &b_first, &generation).await.starts_with("SKIP:"));
    let b_next = head(hand(&app, &buckets, &b_holding, &OrderId::generate(), &b_first, &generation).await);
    assert_eq!(b_next, a_next, "B finds A's record");
    assert_eq!(promote(&app, &buckets, &b_next, &generation).await, "ALREADY");

    // The marker's own driver finishes it: nothing more is promoted.
    let returns = app.give_backs();
    assert_eq!(returns.give_back(e, &b_due).await.unwrap(), GaveBack::Gone);
    assert_eq!(app.waitlist(e, &third).await.body["position"], 1, "the third keeps their place, now first");
    let promoted: Vec<String> = caches(&app, &buckets).await.iter().flat_map(|c| c.outbox.values().cloned()).collect();
    assert_eq!(promoted, std::slice::from_ref(&a_next), "one promotion in the outbox, at the second's home");
    let run = app.functions.reconcile.run().await;
    assert_eq!((run.redriven, run.failures), (1, 0), "{run:?}");
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(e, &second).await.body["order_id"], a_promotion.as_str());
    assert_eq!(app.order_of(e, &second).await.body["status"], "CONFIRMED");
    // Stored: the marker goes at reconcile's next pass, with nothing more promoted.
    let run = app.functions.reconcile.run().await;
    assert_eq!((run.returned, run.redriven, run.failures), (0, 0, 0), "{run:?}");
    assert!(app.functions.store.give_backs_due(e).await.unwrap().is_empty());
    let audit = app.report(e, None).await;
    assert_eq!(audit.body["promoted"], 1);
    crate::partial_loss::assert_audit_fails_only_on_the_rejection(&audit);
}

/// A give-back's second step alone (`hand.lua` at bucket 0) for the number of `holding`, a newly
/// popped head getting `promotion`, `skip` the record found unable to take it: its reply.
async fn hand(
    app: &TestApp,
    buckets: &keys::Buckets,
    holding: &Holding,
    promotion: &OrderId,
    skip: &str,
    generation: &str,
) -> String {
    let line0 = buckets.get(0).unwrap();
    redis::Script::new(HAND_SOURCE)
        .key(keys::meta(line0))
        .key(keys::wait(line0))
        .key(keys::waiting(line0))
        .key(keys::handed(line0))
        .key(keys::seats(line0))
        .key(keys::returned(line0))
        .arg(holding.order.as_str())
        .arg(holding.ticket_no.get())
        .arg(WaitHead::tail(promotion, "2026-11-26T00:00:00Z"))
        .arg(shared::domain::event::epoch_ms(OffsetDateTime::now_utc()))
        .arg(skip)
        .arg(keys::opening_prefix())
        .arg(generation)
        .invoke_async(&mut app.redis.clone())
        .await
        .unwrap()
}

/// A give-back's third step alone (`promote.lua` at the promoted user's home): its reply.
async fn promote(app: &TestApp, buckets: &keys::Buckets, message: &str, generation: &str) -> String {
    let promoted = shared::domain::OrderMessage::parse(message).unwrap();
    let home = buckets.home(&promoted.user_id);
    redis::Script::new(PROMOTE_SOURCE)
        .key(keys::meta(home))
        .key(keys::outbox(home))
        .arg(keys::user_field(&promoted.user_id))
        .arg(promoted.order_id.as_str())
        .arg(promoted.ticket_no.get())
        .arg(message)
        .arg(keys::opening_prefix())
        .arg(generation)
        .invoke_async(&mut app.redis.clone())
        .await
        .unwrap()
}

/// A give-back's first step alone (`let_go.lua` at `user`'s home), as a process killed after it
/// leaves it: its reply.
async fn let_go(app: &TestApp, buckets: &keys::Buckets, user: &str, holding: &Holding) -> String {
    let user = UserId::parse(user).unwrap();
    let home = buckets.home(&user);
    redis::Script::new(LET_GO_SOURCE)
        .key(keys::meta(home))
        .key(keys::giving(home))
        .arg(keys::user_field(&user))
        .arg(keys::holding(holding))
        .arg(holding.order.as_str())
        .arg(holding.ticket_no.get())
        .arg(keys::opening_prefix())
        .invoke_async(&mut app.redis.clone())
        .await
        .unwrap()
}

/// After a sharded sale: numbers cancelled with nobody waiting are held at bucket 0 for the line,
/// and a user homed at another bucket who joins is handed one at once (`202 PROMOTED`). A join
/// stopped after bucket 0 handed it the number (before its home settled it) is finished by
/// reconcile, even after the user joined the line again meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_sharded_sale_returned_numbers_reach_users_homed_anywhere() {
    let app = on_cluster_with(|s| s.reconcile.outbox_age = Duration::ZERO).await;
    let now = OffsetDateTime::now_utc();
    let (event, buckets) = open_sharded_with(&app, 6, 3, |e| {
        e.sale_end = now + time::Duration::seconds(4);
        e.cancel_until = now + time::Duration::minutes(5);
    })
    .await;
    let e = &event;
    let holders: Vec<String> = (0..3).flat_map(|b| homed_at(&buckets, b, "holder", 2)).collect();
    for user in &holders {
        assert_eq!(app.grab(e, user).await.status, 202);
    }
    assert_eq!(app.deliver_all().await, 6);
    let stored = app.functions.store.get_event(e).await.unwrap().unwrap();
    wait_until(stored.event.sale_end).await;

    let waiters = [homed_at(&buckets, 1, "wait", 1).remove(0), homed_at(&buckets, 2, "wait", 1).remove(0)];
    for (i, user) in waiters.iter().enumerate() {
        let r = app.join_waitlist(e, user).await;
        assert_eq!((r.status, r.body["position"].as_u64()), (201, Some(i as u64 + 1)), "{}", r.body);
    }
    for user in &holders[..4] {
        assert_eq!(app.cancel(e, user).await.status, 200);
    }
    assert_eq!(app.deliver_all().await, 2, "the two waiting users promoted");
    assert_eq!(returned(&app, &buckets).await.len(), 2, "the other two held for the line at bucket 0");
    assert!(caches(&app, &buckets).await.iter().all(|c| c.seats.is_empty()), "none on sale after the end");

    // A user homed at bucket 1 joins: handed one at once, settled at their home.
    let joiner = homed_at(&buckets, 1, "late", 1).remove(0);
    let r = app.join_waitlist(e, &joiner).await;
    assert_eq!((r.status, r.body["status"].as_str()), (202, Some("PROMOTED")), "{}", r.body);
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(e, &joiner).await.body["status"], "CONFIRMED");
    let to = format!("{joiner}@example.com");
    assert_eq!(app.sent_mail().await.iter().filter(|m| m.to.contains(&to)).count(), 1);

    // The next, homed at bucket 2: their join stopped after bucket 0 handed them the last number.
    let stopped = homed_at(&buckets, 2, "late", 1).remove(0);
    let stopped_id = UserId::parse(&stopped).unwrap();
    let promotion = OrderId::generate();
    let at = OffsetDateTime::now_utc();
    let email = shared::domain::Email::parse(&format!("{stopped}@example.com")).unwrap();
    let reply: String = redis::Script::new(WAIT_SOURCE)
        .key(keys::meta(buckets.get(0).unwrap()))
        .key(keys::seats(buckets.get(0).unwrap()))
        .key(keys::wait(buckets.get(0).unwrap()))
        .key(keys::waiting(buckets.get(0).unwrap()))
        .key(keys::returned(buckets.get(0).unwrap()))
        .key(keys::outbox(buckets.get(0).unwrap()))
        .key(keys::handed(buckets.get(0).unwrap()))
        .arg(keys::user_field(&stopped_id))
        .arg(&stopped)
        .arg(WaitHead::new(e, &stopped_id, &email).as_str())
        .arg(shared::domain::event::epoch_ms(at))
        .arg(keys::opening_prefix())
        .arg(promotion.as_str())
        .arg(WaitHead::tail(&promotion, &shared::domain::event::rfc3339(at)))
        .arg("-")
        .arg(0)
        .arg(keys::joined_hand(&promotion))
        .invoke_async(&mut app.redis.clone())
        .await
        .unwrap();
    assert!(reply.starts_with("HANDED:"), "{reply}");
    // Their retry finds nothing held back any more: they join the line.
    let r = app.join_waitlist(e, &stopped).await;
    assert_eq!((r.status, r.body["position"].as_u64()), (201, Some(1)), "{}", r.body);

    let run = app.functions.reconcile.run().await;
    assert_eq!((run.promotions_settled, run.failures), (1, 0), "{run:?}");
    let r = app.waitlist(e, &stopped).await;
    assert_eq!(
        (r.body["status"].as_str(), r.body["order_id"].as_str()),
        (Some("HOLDS_ORDER"), Some(promotion.as_str()))
    );
    assert!(line(&app, &buckets).await.is_empty(), "promoted, they left the line");
    assert_eq!(app.deliver_all().await, 1, "the promotion, re-driven from the outbox");
    assert_eq!(app.order_of(e, &stopped).await.body["status"], "CONFIRMED");
    assert_eq!(app.functions.reconcile.run().await.promotions_settled, 0, "settled once");

    assert_eq!(assert_whole(&app, &buckets, 6).await.len(), 6);
    let audit = app.report(e, None).await;
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
    assert_eq!((audit.body["cancelled"].as_u64(), audit.body["promoted"].as_u64()), (Some(4), Some(4)));
}

/// Every bucket's cache lost while users wait: the rebuild lays the line at bucket 0 again in its
/// order and each holder's field at their home, and the next cancellation reaches the head.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_sharded_cache_is_rebuilt_with_its_line() {
    let app = on_cluster_with(|s| s.rebuild.max_wait = Duration::from_secs(3)).await;
    let (event, buckets) = open_sharded_with(&app, 3, 3, |_| {}).await;
    let e = &event;
    let holders: Vec<String> = (0..3).flat_map(|b| homed_at(&buckets, b, "holder", 1)).collect();
    for user in &holders {
        assert_eq!(app.grab(e, user).await.status, 202);
    }
    assert_eq!(app.deliver_all().await, 3);
    let waiters = [homed_at(&buckets, 2, "wait", 1).remove(0), homed_at(&buckets, 1, "wait", 1).remove(0)];
    for user in &waiters {
        assert_eq!(app.join_waitlist(e, user).await.status, 201);
    }
    let mut r = app.redis.clone();
    for b in buckets.iter() {
        let _: () = r.del(&keys::cache(b)).await.unwrap();
    }

    let started = std::time::Instant::now();
    let place = loop {
        let reply = app.waitlist(e, &waiters[1]).await;
        match reply.status {
            503 if started.elapsed() < Duration::from_secs(60) => tokio::time::sleep(Duration::from_millis(250)).await,
            _ => break reply,
        }
    };
    assert_eq!((place.status, place.body["position"].as_u64()), (200, Some(2)), "{}", place.body);
    assert_eq!(line(&app, &buckets).await, waiters.to_vec(), "the line, in its order, at bucket 0");
    let held = assert_whole(&app, &buckets, 3).await;
    assert_eq!(held.len(), 3, "every holder's field at their home");

    let n = held[&holders[1]].1;
    assert_eq!(app.cancel(e, &holders[1]).await.status, 200);
    assert_eq!(promoted_number(&app, e, &waiters[0]).await, n);
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(e, &waiters[0]).await.body["status"], "CONFIRMED");
    let audit = app.report(e, None).await;
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// A failover lost a join's write to the line but not its durable place, after the sale, while a
/// number was held for the line: the rebuild of the lost cache finds both and hands the number to
/// that user itself, laying the promotion at the user's home (holding and outbox entry), whence
/// reconcile sends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sharded_rebuild_hands_a_held_number_to_a_durable_waiter_at_their_home() {
    let app = on_cluster_with(|s| {
        s.rebuild.max_wait = Duration::from_secs(3);
        s.reconcile.outbox_age = Duration::ZERO;
    })
    .await;
    let now = OffsetDateTime::now_utc();
    let (event, buckets) = open_sharded_with(&app, 3, 3, |e| {
        e.sale_end = now + time::Duration::seconds(3);
        e.cancel_until = now + time::Duration::minutes(5);
    })
    .await;
    let e = &event;
    let holders: Vec<String> = (0..3).flat_map(|b| homed_at(&buckets, b, "holder", 1)).collect();
    for user in &holders {
        assert_eq!(app.grab(e, user).await.status, 202);
    }
    assert_eq!(app.deliver_all().await, 3);
    wait_until(now + time::Duration::seconds(3)).await;
    assert_eq!(app.cancel(e, &holders[1]).await.status, 200);
    let held = returned(&app, &buckets).await;
    assert_eq!(held.len(), 1, "nobody waited: held for the line at bucket 0");

    let waiter = homed_at(&buckets, 2, "durable", 1).remove(0);
    let user = UserId::parse(&waiter).unwrap();
    let email = shared::domain::Email::parse(&format!("{waiter}@example.com")).unwrap();
    let place = shared::domain::Waiter { user: user.clone(), email, place: 1 };
    app.functions.store.add_waiter(e, &place, OffsetDateTime::now_utc()).await.unwrap();
    let mut r = app.redis.clone();
    for b in buckets.iter() {
        let _: () = r.del(&keys::cache(b)).await.unwrap();
    }

    let started = std::time::Instant::now();
    let mut rebuilt = 0;
    while rebuilt == 0 && started.elapsed() < Duration::from_secs(60) {
        let run = app.functions.reconcile.run().await;
        assert_eq!(run.failures, 0, "{run:?}");
        rebuilt = run.rebuilt;
        if rebuilt == 0 {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    assert_eq!(rebuilt, 1, "the cache rebuilt");
    let home = caches(&app, &buckets).await.remove(usize::from(buckets.home(&user).index()));
    let (order, n) = home.holdings[&waiter].clone();
    assert_eq!(n, held[0], "the held number is the durable waiter's");
    assert!(home.outbox.contains_key(&order), "the promotion in the outbox at their home");
    assert!(returned(&app, &buckets).await.is_empty() && line(&app, &buckets).await.is_empty());
    assert_eq!(app.deliver_all().await, 1, "re-driven by the rebuilding run");
    assert_eq!(app.order_of(e, &waiter).await.body["status"], "CONFIRMED");
    assert_eq!(assert_whole(&app, &buckets, 3).await.len(), 3);
    let audit = app.report(e, None).await;
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// The fault matrix's "cache lost with a waitlist" on a sharded event: 20 numbers over three
/// buckets sold, 30 users waiting. Five holders cancel (their promotions on the queue, not yet
/// stored), ten more cancel in DynamoDB only (a crash before each give-back), and every bucket's
/// keys are lost. The rebuild restores the line in its order, keeps the ten numbers with their
/// cancelled orders until reconcile gives them back through the line, and the next ten waiting
/// users get them: 15 promoted, 15 still waiting in order, nothing lost or given twice, one mail
/// each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sharded_cache_lost_with_its_line_and_give_backs_in_flight_loses_nothing() {
    let app = on_cluster_with(|s| s.rebuild.max_wait = Duration::from_secs(3)).await;
    let (event, buckets) = open_sharded_with(&app, 20, 3, |_| {}).await;
    let e = &event;
    let tag = own_tail(e);
    let holders: Vec<String> = (0..20).map(|i| format!("h{i:02}-{tag}")).collect();
    let waiters: Vec<String> = (0..30).map(|i| format!("w{i:02}-{tag}")).collect();
    for user in &holders {
        assert_eq!(app.grab(e, user).await.status, 202);
    }
    for (i, user) in waiters.iter().enumerate() {
        let joined = app.join_waitlist(e, user).await;
        assert_eq!(joined.body["position"].as_u64(), Some(i as u64 + 1), "{}", joined.body);
    }
    settle(&app, e).await;
    for user in &holders[..5] {
        assert_eq!(app.cancel(e, user).await.status, 200);
    }
    for user in &holders[5..15] {
        app.cancel_in_dynamodb(e, user).await;
    }
    assert_eq!(app.functions.store.give_backs_due(e).await.unwrap().len(), 10);
    let mut r = app.redis.clone();
    for b in buckets.iter() {
        let _: () = r.del(&keys::cache(b)).await.unwrap();
    }
    let lost_at = std::time::Instant::now();

    settle(&app, e).await;
    println!("a sharded cache lost with its line: settled {:.1} s after the loss", lost_at.elapsed().as_secs_f64());
    let store = &app.functions.store;
    for user in holders[15..].iter().chain(&waiters[..15]) {
        let order = store.get_order_now(e, &UserId::parse(user).unwrap()).await.unwrap();
        assert!(order.is_some_and(|o| o.status == shared::domain::OrderStatus::Confirmed), "{user} holds a ticket");
    }
    let confirmed: Vec<u32> = store
        .all_orders(e)
        .await
        .unwrap()
        .iter()
        .filter(|o| o.status == shared::domain::OrderStatus::Confirmed)
        .map(|o| o.ticket_no.get())
        .collect();
    assert_eq!(confirmed.iter().collect::<BTreeSet<_>>().len(), 20, "20 confirmed, each number once");
    for (i, user) in waiters[15..].iter().enumerate() {
        assert_eq!(app.waitlist(e, user).await.body["position"], i + 1, "{user} keeps their place");
    }
    let mut mails: HashMap<String, usize> = HashMap::new();
    for to in app.sent_mail().await.into_iter().flat_map(|m| m.to) {
        *mails.entry(to).or_default() += 1;
    }
    assert!(mails.values().all(|&n| n == 1), "one mail each: {mails:?}");
    assert_eq!(assert_whole(&app, &buckets, 20).await.len(), 20);
    let audit = app.report(e, None).await;
    assert_eq!(audit.body["passed"], true, "{:#}", audit.body["checks"]);
}

/// Runs the consumer and reconcile until nothing is on its way: every bucket cached, every
/// give-back run, every bucket's outbox and the queue empty.
async fn settle(app: &TestApp, event: &EventId) {
    let poller = app.poller();
    let queue = shared::queue::OrderQueue::new(app.sqs.clone(), app.queue_url.clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        assert!(std::time::Instant::now() < deadline, "did not settle within 120 s");
        while poller.poll_once().await.unwrap_or(1) > 0 && std::time::Instant::now() < deadline {}
        let run = app.functions.reconcile.run().await;
        let gate = &app.functions.gate;
        let cached = gate.window(event).await.is_ok_and(|w| w.is_some());
        let due = app.functions.store.give_backs_due(event).await.map(|d| d.len()).unwrap_or(1);
        let outbox = gate.outbox_len(event).await.unwrap_or(u64::MAX);
        if run.failures == 0 && cached && due == 0 && outbox == 0 && queue.in_flight().await.is_ok_and(|n| n == 0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
