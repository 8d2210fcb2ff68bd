//! A single key of an event's cache lost while the rest is there: evicted (the template's
//! `noeviction` keeps that from happening; a cache configured otherwise, or an operator's `DEL`,
//! does it). Each is found where it is read, or by reconcile's look at the whole (docs/DESIGN.md
//! section 10, "Repair"), and the cache is repaired from DynamoDB: no number stays unsold, no
//! waiting user is passed over, no order is lost.

use std::time::Duration;

use redis::AsyncCommands;
use shared::{gate::keys, http::routes::Function};

use crate::helpers::*;

/// A test app whose reconcile sends an outbox entry again at once.
async fn app() -> TestApp {
    TestApp::for_mail_with(30, |s| {
        s.reconcile.outbox_age = Duration::ZERO;
        // Reconcile looks at the whole cache at every run (deployed: once a minute, as it runs).
        s.reconcile.whole_every = Duration::ZERO;
        s.rebuild.settle = Duration::ZERO;
    })
    .await
}

/// An event of one ticket, held by ada (stored), with bob then cy waiting.
async fn sold_out_with_two_waiting(app: &TestApp) -> shared::domain::EventId {
    let event = app.open_event(1).await;
    assert_eq!(app.grab(&event, "ada").await.status, 202);
    app.deliver_all().await;
    for user in ["bob", "cy"] {
        assert_eq!(app.join_waitlist(&event, user).await.status, 201);
    }
    event
}

/// The free numbers lost: the grab reads an empty list as sold out, but reconcile finds numbers in
/// no place (not on sale, held, on their way or being given back), twice in a row, and repairs the
/// cache: the numbers are on sale again.
#[tokio::test]
async fn a_lost_list_of_free_numbers_is_found_by_reconcile_and_laid_down_again() {
    let app = app().await;
    let event = app.open_event(10).await;
    for user in ["a", "b", "c"] {
        assert_eq!(app.grab(&event, user).await.status, 202);
    }
    app.deliver_all().await;
    let mut r = app.redis.clone();
    let _: () = r.del(keys::seats(&event)).await.unwrap();
    assert_eq!(app.grab(&event, "d").await.code(), "SOLD_OUT", "the grab cannot tell an empty list from a lost one");
    let first = app.functions.reconcile.run().await;
    assert_eq!(first.rebuilt, 0, "one look may be a moment of traffic: {first:?}");
    let second = app.functions.reconcile.run().await;
    assert_eq!(second.rebuilt, 1, "found twice: repaired {second:?}");
    assert_eq!(app.cache(&event).await.seats.len(), 7, "the seven unsold numbers are on sale again");
    // The environment that was told SOLD_OUT remembers it for its span (docs/DESIGN.md section 6).
    tokio::time::sleep(app.settings.gate.sold_out_memory.mul_f64(shared::gate::SOLD_OUT_MEMORY_SPREAD)).await;
    let mut sold = 3;
    for i in 0..10 {
        let reply = app.grab(&event, &format!("late-{i}")).await;
        if reply.status == 202 {
            sold += 1;
        }
    }
    assert_eq!(sold, 10);
    app.deliver_all().await;
    let report = app.report(&event, None).await;
    assert_eq!(report.body["passed"], true, "{:#}", report.body["checks"]);
}

/// The line's heads lost (or the line itself): a give-back finds the line and its heads disagree,
/// gives nothing, and the cache is repaired from the durable places: the first who waits is
/// promoted, as if nothing was lost.
#[tokio::test]
async fn a_lost_key_of_the_line_is_found_by_the_give_back_and_the_first_who_waits_is_promoted() {
    for lost in ["waiting", "wait"] {
        let app = app().await;
        let event = sold_out_with_two_waiting(&app).await;
        let mut r = app.redis.clone();
        let key = if lost == "wait" { keys::wait(&event) } else { keys::waiting(&event) };
        let _: () = r.del(&key).await.unwrap();
        assert_eq!(app.cancel(&event, "ada").await.status, 200);
        let bob = app.waitlist(&event, "bob").await;
        assert_eq!(bob.body["status"], "HOLDS_ORDER", "{lost}: {}", bob.body);
        assert_eq!(app.waitlist(&event, "cy").await.body["position"], 1, "{lost}");
        assert!(app.free_numbers(&event).await.is_empty(), "{lost}: the number went to bob, not on sale");
    }
}

/// The line and its heads lost together: nothing disagrees in the cache, but the durable places
/// whose users hold nothing are missing from it; reconcile finds that twice and repairs the line.
#[tokio::test]
async fn a_line_lost_whole_is_found_by_reconcile_and_laid_down_again() {
    let app = app().await;
    let event = sold_out_with_two_waiting(&app).await;
    let mut r = app.redis.clone();
    let _: () = r.del(&[keys::wait(&event), keys::waiting(&event)]).await.unwrap();
    app.functions.reconcile.run().await;
    assert_eq!(app.functions.reconcile.run().await.rebuilt, 1);
    let line: Vec<String> = r.zrange(keys::wait(&event), 0, -1).await.unwrap();
    assert_eq!(line, ["bob", "cy"], "the line, in its order");
    assert_eq!(app.cancel(&event, "ada").await.status, 200);
    assert_eq!(app.waitlist(&event, "bob").await.body["status"], "HOLDS_ORDER");
}

/// The outbox lost while an order its grab could not send waits in it (the queue unreachable):
/// its sent record still has it, and reconcile sends it from there; its user, told 503, asks
/// again and is told of that very order, which ends CONFIRMED.
#[tokio::test]
async fn an_order_whose_outbox_entry_is_lost_is_sent_from_its_sent_record() {
    let app = app().await;
    let event = app.open_event(5).await;
    let unreachable =
        format!("{}/000000000000/no-such-queue-{}", app.settings.aws_endpoint, uuid::Uuid::now_v7().simple());
    let broken = local_runner::Functions::build(&app.settings, &unreachable).await.unwrap();
    // Told 503 where no replica holds its sent record (the single server here), 202 where one
    // does (cluster mode, a replica a master): either way the order is in its record, not sent.
    let reply = call_with(&broken, Function::Grab, app.grab_event(&event, "ada")).await;
    assert!(matches!(reply.status, 202 | 503), "{}", reply.body);
    let held = app.cache(&event).await.holdings["ada"].clone();
    let mut r = app.redis.clone();
    let _: () = r.del(keys::outbox(&event)).await.unwrap();
    let report = app.functions.reconcile.run().await;
    assert_eq!(report.redriven, 1, "sent from the record: {report:?}");
    app.deliver_all().await;
    let order = app.order_of(&event, "ada").await;
    assert_eq!(
        (order.body["status"].as_str(), order.body["order_id"].as_str()),
        (Some("CONFIRMED"), Some(held.0.as_str()))
    );
    let again = app.grab(&event, "ada").await;
    assert_eq!((again.status, again.body["order_id"].as_str()), (200, Some(held.0.as_str())));
    // Stored: its record keeps it, marked, until reconcile removes it a while later.
    let entry: String = r.hget(keys::sent(keys::Buckets::of(&event, 1).get(0).unwrap()), &held.0).await.unwrap();
    assert!(entry.starts_with('S'), "marked stored: {entry}");
}
