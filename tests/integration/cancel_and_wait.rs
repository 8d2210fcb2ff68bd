//! After the grab, against the real stack: cancellation, the waitlist, the ticket pass at the door
//! and the organiser's audit; their refusals; the races (a cancellation against a check-in, two
//! give-backs of one number) and a crash between the DynamoDB cancel and the Redis give-back.

use std::collections::{BTreeSet, HashMap, HashSet};

use redis::AsyncCommands;
use serde_json::{Value, json};
use shared::{
    domain::{EventId, Holding, UserId},
    gate::{GaveBack, keys},
    http::routes::Function,
    store::cancellations::{Cancellation, GiveBackDue},
};
use time::{Duration, OffsetDateTime};

use crate::helpers::*;

/// The fixture sent by `sub` in the given Cognito groups (`"[staff]"`, `"[admin]"`).
pub(crate) fn as_member(mut event: Value, sub: &str, groups: &str) -> Value {
    event["requestContext"]["authorizer"]["jwt"]["claims"] = json!({
        "sub": sub, "email": format!("{sub}@example.com"), "email_verified": "true", "cognito:groups": groups,
    });
    event
}

impl TestApp {
    pub(crate) async fn cancel(&self, event: &EventId, user: &str) -> Reply {
        self.call(Function::Grab, for_user(for_event(fixture("cancel.json"), event), user)).await
    }

    pub(crate) async fn join_waitlist(&self, event: &EventId, user: &str) -> Reply {
        let body = json!({ "hash": self.hash_for(event, user) });
        self.call(Function::Grab, for_user(with_body(for_event(fixture("waitlist-join.json"), event), &body), user))
            .await
    }

    pub(crate) async fn waitlist(&self, event: &EventId, user: &str) -> Reply {
        self.call(Function::Grab, for_user(for_event(fixture("waitlist.json"), event), user)).await
    }

    pub(crate) async fn check_in(&self, event: &EventId, pass: &str, groups: &str) -> Reply {
        let body = json!({ "pass": pass });
        self.call(
            Function::Door,
            as_member(with_body(for_event(fixture("check-in.json"), event), &body), "door-1", groups),
        )
        .await
    }

    pub(crate) async fn report(&self, event: &EventId, format: Option<&str>) -> Reply {
        let mut req = as_member(for_event(fixture("report.json"), event), "organiser", "[admin]");
        if let Some(f) = format {
            req = with_query(req, &[("format", f)]);
        }
        self.call(Function::Query, req).await
    }

    pub(crate) async fn order_of(&self, event: &EventId, user: &str) -> Reply {
        self.call(Function::Query, for_user(for_event(fixture("query-order.json"), event), user)).await
    }

    /// Everything on this test's queue handed to mail, until the queue is empty.
    pub(crate) async fn deliver_all(&self) -> usize {
        let mut n = 0;
        loop {
            let bodies = self.drain_queue_raw().await;
            if bodies.is_empty() {
                return n;
            }
            for body in bodies {
                self.deliver(&body).await.expect("delivered");
                n += 1;
            }
        }
    }

    /// The pass in the confirmation mail `user` received.
    pub(crate) async fn pass_of(&self, user: &str) -> String {
        let to = format!("{user}@example.com");
        let mail: Vec<_> = self.sent_mail().await.into_iter().filter(|m| m.to.contains(&to)).collect();
        assert_eq!(mail.len(), 1, "one confirmation for {user}");
        let line = mail[0].body_text.lines().find_map(|l| l.strip_prefix("Pass: ")).expect("a pass in the mail");
        line.trim().to_owned()
    }

    /// A cancellation's first half alone, as a crash before the give-back leaves it: DynamoDB
    /// holds it (and its marker), Redis was not told. The give-back due, and what was held.
    pub(crate) async fn cancel_in_dynamodb(&self, event: &EventId, user: &str) -> (GiveBackDue, Holding) {
        let user = UserId::parse(user).unwrap();
        let order = self.functions.store.get_order_now(event, &user).await.unwrap().unwrap();
        let now = OffsetDateTime::now_utc();
        let cancelled = self.functions.store.cancel_order(event, &user, &order, now).await;
        assert!(matches!(cancelled, Ok(Cancellation::Cancelled(_))));
        let holding = Holding { order: order.order_id.clone(), ticket_no: order.ticket_no };
        (GiveBackDue { user, order_id: order.order_id, ticket_no: order.ticket_no, cancelled_at: now }, holding)
    }

    /// The give-backs as cancel and reconcile run them, on this test's queue.
    pub(crate) fn give_backs(&self) -> shared::give_back::GiveBacks {
        let queue = shared::queue::OrderQueue::new(self.sqs.clone(), self.queue_url.clone());
        let courier = shared::delivery::Courier::new(self.functions.gate.clone(), queue, self.settings.seal_keys());
        shared::give_back::GiveBacks::new(self.functions.gate.clone(), self.functions.store.clone(), courier)
    }

    pub(crate) async fn free_numbers(&self, event: &EventId) -> BTreeSet<u32> {
        let mut r = self.redis.clone();
        let free: Vec<u32> = r.lrange(keys::seats(event), 0, -1).await.unwrap();
        free.into_iter().collect()
    }
}

#[tokio::test]
async fn a_cancelled_ticket_is_free_again_and_its_holder_cannot_grab_twice() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(2).await;
    // Her own name: five cancellations in a second are the route's per-user limit.
    let ada = &format!("ada-{}", own_tail(&event));
    let granted = app.grab(&event, ada).await;
    assert_eq!(granted.status, 202);
    let ticket = granted.body["ticket_no"].as_u64().unwrap() as u32;

    // Not yet durable: it cannot be given back, and the user is told to retry.
    assert_eq!((app.cancel(&event, ada).await.status, app.cancel(&event, ada).await.code()), (409, "ORDER_PENDING"));
    assert_eq!(app.cancel(&event, "nobody").await.code(), "NO_ORDER");
    app.deliver_all().await;

    let with_body = with_body(for_user(for_event(fixture("cancel.json"), &event), ada), &json!({"order_id": "x"}));
    assert_eq!(app.call(Function::Grab, with_body).await.code(), "BAD_REQUEST", "a DELETE takes no body");
    let first = app.cancel(&event, ada).await;
    assert_eq!((first.status, first.body["status"].as_str()), (200, Some("CANCELLED")), "{}", first.body);
    let again = app.cancel(&event, ada).await;
    assert_eq!(again.status, 200);
    assert_eq!((&again.body["order_id"], &again.body["status"]), (&first.body["order_id"], &first.body["status"]));

    // Free in Redis (nobody waits) and in DynamoDB (no ticket item), the order CANCELLED.
    assert_eq!(app.free_numbers(&event).await, BTreeSet::from([1, 2]));
    let order = app.order_of(&event, ada).await;
    assert_eq!(order.body["status"], "CANCELLED");
    assert!(order.body["cancelled_at"].is_string());
    let grab_again = app.grab(&event, ada).await;
    assert_eq!((grab_again.status, grab_again.code()), (409, "ORDER_CANCELLED"));
    // The number sells again, and its new holder's order is stored (the ticket item was freed).
    let mut holders = HashMap::new();
    for user in ["bob", "cy"] {
        let r = app.grab(&event, user).await;
        assert_eq!(r.status, 202, "{}", r.body);
        holders.insert(r.body["ticket_no"].as_u64().unwrap() as u32, user);
    }
    assert!(holders.contains_key(&ticket));
    app.deliver_all().await;
    for user in ["bob", "cy"] {
        assert_eq!(app.order_of(&event, user).await.body["status"], "CONFIRMED");
    }
    let report = app.report(&event, None).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!((report.body["confirmed"].as_u64(), report.body["cancelled"].as_u64()), (Some(2), Some(1)));
    assert_eq!(report.body["mails_sent"], 3, "ada's mail went out before she cancelled");
    assert_eq!(report.body["passed"], true, "{:#}", report.body["checks"]);
}

#[tokio::test]
async fn cancelling_is_refused_once_the_window_closes() {
    let app = TestApp::for_mail(30).await;
    let now = OffsetDateTime::now_utc();
    let mut event = test_event(fresh_event_id(), 1, now - Duration::minutes(5), now + Duration::hours(1));
    event.cancel_until = now + Duration::seconds(2);
    app.functions.store.put_event(&event).await.unwrap();
    app.functions.gate.warm(&event).await.unwrap();
    assert_eq!(app.grab(&event.id, "ada").await.status, 202);
    app.deliver_all().await;
    // Past the window by the clock, not by a guess.
    let left = event.cancel_until - OffsetDateTime::now_utc();
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs() + std::time::Duration::from_millis(50)).await;
    }
    let refused = app.cancel(&event.id, "ada").await;
    assert_eq!((refused.status, refused.code()), (410, "CANCEL_CLOSED"));
    assert_eq!(app.order_of(&event.id, "ada").await.body["status"], "CONFIRMED");
    assert!(app.free_numbers(&event.id).await.is_empty());
}

#[tokio::test]
async fn a_returned_ticket_goes_to_the_head_of_the_waitlist_who_is_mailed() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(1).await;
    assert_eq!(app.join_waitlist(&event, "bob").await.code(), "NOT_SOLD_OUT");
    assert_eq!(app.grab(&event, "ada").await.status, 202);
    assert_eq!(app.join_waitlist(&event, "ada").await.code(), "HOLDS_ORDER");
    assert_eq!(app.grab(&event, "bob").await.code(), "SOLD_OUT");
    for (user, position) in [("bob", 1), ("cy", 2), ("dee", 3)] {
        let r = app.join_waitlist(&event, user).await;
        assert_eq!((r.status, r.body["position"].as_u64()), (201, Some(position)), "{}", r.body);
    }
    let again = app.join_waitlist(&event, "bob").await;
    assert_eq!((again.status, again.body["position"].as_u64()), (200, Some(1)));
    assert_eq!(app.waitlist(&event, "cy").await.body["position"], 2);
    assert_eq!(app.waitlist(&event, "zed").await.code(), "NOT_WAITING");
    app.deliver_all().await;

    assert_eq!(app.cancel(&event, "ada").await.status, 200);
    // bob holds the number now, in the outbox and on the queue like a grab's order.
    let bob = app.waitlist(&event, "bob").await;
    assert_eq!((bob.body["status"].as_str(), bob.body["ticket_no"].as_u64()), (Some("HOLDS_ORDER"), Some(1)));
    assert_eq!(app.waitlist(&event, "cy").await.body["position"], 1);
    assert!(app.free_numbers(&event).await.is_empty(), "the number went to bob, not back on sale");
    // bob giving it back while his promotion is still on its way: not before it is stored.
    assert_eq!(app.cancel(&event, "bob").await.code(), "ORDER_PENDING");
    let messages = app.drain_queue().await;
    assert_eq!(messages.len(), 1);
    assert_eq!((messages[0]["user_id"].as_str(), messages[0]["promoted"].as_bool()), (Some("bob"), Some(true)));
    app.deliver(&messages[0].to_string()).await.unwrap();
    assert_eq!(app.order_of(&event, "bob").await.body["status"], "CONFIRMED");
    assert!(app.pass_of("bob").await.starts_with("TP2."));
    assert!(app.functions.gate.outbox(&event).await.unwrap().is_empty());

    // bob gives it back too: cy is next; cy cancels: dee; dee cancels: nobody waits, back on sale.
    for (from, to) in [("bob", Some("cy")), ("cy", Some("dee")), ("dee", None)] {
        assert_eq!(app.cancel(&event, from).await.status, 200);
        let sent = app.deliver_all().await;
        assert_eq!(sent, usize::from(to.is_some()));
        if let Some(to) = to {
            assert_eq!(app.order_of(&event, to).await.body["status"], "CONFIRMED");
        }
    }
    assert_eq!(app.free_numbers(&event).await, BTreeSet::from([1]));
    let report = app.report(&event, None).await;
    assert_eq!((report.body["cancelled"].as_u64(), report.body["promoted"].as_u64()), (Some(4), Some(3)));
    assert_eq!(report.body["passed"], true, "{:#}", report.body);
}

#[tokio::test]
async fn the_waitlist_is_bounded_and_refuses_who_cannot_use_it() {
    let app = TestApp::for_mail(30).await;
    let now = OffsetDateTime::now_utc();
    let mut event = test_event(fresh_event_id(), 1, now - Duration::minutes(1), now + Duration::hours(1));
    event.waitlist_size = 2;
    app.functions.store.put_event(&event).await.unwrap();
    app.functions.gate.warm(&event).await.unwrap();
    let e = &event.id;
    assert_eq!(app.grab(e, "ada").await.status, 202);
    assert_eq!(app.join_waitlist(e, "bob").await.status, 201);
    assert_eq!(app.join_waitlist(e, "cy").await.status, 201);
    let full = app.join_waitlist(e, "dee").await;
    assert_eq!((full.status, full.code()), (409, "WAITLIST_FULL"));
    let forged = app
        .call(
            Function::Grab,
            for_user(with_body(for_event(fixture("waitlist-join.json"), e), &json!({"hash": "v1.x"})), "eve"),
        )
        .await;
    assert_eq!(forged.code(), "BAD_HASH");
    let mut r = app.redis.clone();
    assert_eq!(r.zcard::<_, u64>(keys::wait(e)).await.unwrap(), 2, "refusals wrote nothing");
    // A user who cancelled may not come back through the waitlist either.
    app.deliver_all().await;
    assert_eq!(app.cancel(e, "ada").await.status, 200);
    assert_eq!(app.join_waitlist(e, "ada").await.code(), "ORDER_CANCELLED");
}

#[tokio::test]
async fn a_ticket_checks_in_once_and_a_cancelled_or_forged_pass_is_refused() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    for user in ["ada", "bob"] {
        assert_eq!(app.grab(&event, user).await.status, 202);
    }
    app.deliver_all().await;
    let pass = app.pass_of("ada").await;

    let key = app.call(Function::Query, for_user(for_event(fixture("pass-key.json"), &event), "anyone")).await;
    assert_eq!((key.status, key.body["algorithm"].as_str()), (200, Some("Ed25519")));
    assert_eq!(key.body["public_key"], app.settings.pass.public().encoded());
    assert_eq!(key.body["key_id"], app.settings.pass.public().id());

    assert_eq!(app.check_in(&event, &pass, "[students]").await.code(), "FORBIDDEN");
    // Another event's staff may not; this event's staff group may (below, after the admin scan).
    assert_eq!(app.check_in(&event, &pass, &format!("[staff-{}]", fresh_event_id())).await.code(), "FORBIDDEN");
    let first = app.check_in(&event, &pass, &format!("[staff-{event}]")).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let second = app.check_in(&event, &pass, "[admin]").await;
    assert_eq!((second.status, second.code()), (409, "ALREADY_CHECKED_IN"));
    assert_eq!(second.body["checked_in_at"], first.body["checked_in_at"], "the first scan's time");
    // A used ticket is not given back.
    assert_eq!(app.cancel(&event, "ada").await.code(), "ALREADY_CHECKED_IN");

    let bob_pass = app.pass_of("bob").await;
    assert_eq!(app.cancel(&event, "bob").await.status, 200);
    assert_eq!(app.check_in(&event, &bob_pass, "[staff]").await.code(), "TICKET_CANCELLED");
    // Forged: a pass of another deployment's key, and what anyone holding only the published
    // public key can make of it (used as a secret, or its id copied into another key's pass).
    let genuine = shared::domain::ticket_pass::PassKeyRing::from(app.settings.pass.public()).verify(&pass).unwrap();
    let other_key = shared::domain::ticket_pass::PassKey::new(b"another deployment's pass key").unwrap();
    let foreign = other_key.issue(&genuine);
    let from_public = shared::domain::ticket_pass::PassKey::new(key.body["public_key"].as_str().unwrap().as_bytes())
        .unwrap()
        .issue(&genuine);
    let (payload, sig) = foreign[4..].split_once('.').unwrap();
    let payload =
        String::from_utf8(base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload).unwrap())
            .unwrap()
            .replace(&other_key.public().id(), &app.settings.pass.public().id());
    let relabelled =
        format!("TP2.{}.{sig}", base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload));
    for bad in [foreign.as_str(), &from_public, &relabelled, "TP1.e30.AAAA", "not a pass"] {
        assert_eq!(app.check_in(&event, bad, "[staff]").await.code(), "BAD_PASS", "{bad}");
    }
    // A genuine pass at another event's door.
    let other = app.open_event(1).await;
    assert_eq!(app.check_in(&other, &pass, "[staff]").await.code(), "BAD_PASS");

    let report = app.report(&event, None).await;
    assert_eq!((report.body["checked_in"].as_u64(), report.body["confirmed"].as_u64()), (Some(1), Some(1)));
    let csv = app.report(&event, Some("csv")).await;
    assert_eq!(csv.content_type, "text/csv; charset=utf-8");
    let text = csv.body.as_str().unwrap();
    assert_eq!(text.lines().count(), 2, "a header and ada's line: {text}");
    assert!(text.lines().nth(1).unwrap().contains("ada@example.com"));
    assert_eq!(app.report(&event, Some("xml")).await.code(), "BAD_REQUEST");
}

/// A holder let in by number names the order staff confirmed with them: a ticket another order
/// holds since (the first cancelled, the number granted again) is not let in on that word, and
/// nothing is written. A second scan names the door that let the ticket in.
#[tokio::test]
async fn a_let_in_by_number_names_the_order_confirmed_and_a_second_scan_names_the_first_door() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(1).await;
    let first = app.grab(&event, "ada").await;
    assert_eq!(first.status, 202);
    app.deliver_all().await;
    assert_eq!(app.cancel(&event, "ada").await.status, 200);
    let again = app.grab(&event, "bob").await;
    assert_eq!((again.status, again.body["ticket_no"].as_u64()), (202, Some(1)), "{}", again.body);
    app.deliver_all().await;
    let by_number = |order: &serde_json::Value| {
        let body = json!({ "ticket_no": 1, "order_id": order, "door": "Gate A" });
        as_member(with_body(for_event(fixture("check-in.json"), &event), &body), "door-1", "[staff]")
    };
    // Staff looked ada up before she cancelled: her order no longer holds the number.
    let stale = app.call(Function::Door, by_number(&first.body["order_id"])).await;
    assert_eq!((stale.status, stale.code()), (409, "TICKET_CANCELLED"), "{}", stale.body);
    assert_eq!(app.report(&event, None).await.body["checked_in"], 0, "nothing written");
    let bobs = app.call(Function::Door, by_number(&again.body["order_id"])).await;
    assert_eq!(bobs.status, 200, "{}", bobs.body);
    let pass = app.pass_of("bob").await;
    let second = app.check_in(&event, &pass, "[staff]").await;
    assert_eq!(
        (second.code(), second.body["door"].as_str()),
        ("ALREADY_CHECKED_IN", Some("Gate A")),
        "{}",
        second.body
    );
}

/// A cancellation and a check-in of the same ticket at once, many times: exactly one wins each
/// time, and what DynamoDB and Redis hold agrees with the winner.
#[tokio::test]
async fn a_cancellation_racing_a_check_in_has_one_winner() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(20).await;
    let users: Vec<String> = (0..20).map(|i| format!("r{i}")).collect();
    for u in &users {
        assert_eq!(app.grab(&event, u).await.status, 202);
    }
    app.deliver_all().await;
    let mut passes = Vec::new();
    for u in &users {
        passes.push(app.pass_of(u).await);
    }
    let races = users.iter().zip(&passes).map(|(u, pass)| {
        let app = &app;
        let event = &event;
        async move {
            let (cancel, check_in) = tokio::join!(app.cancel(event, u), app.check_in(event, pass, "[staff]"));
            (cancel.status, check_in.status)
        }
    });
    let outcomes = futures::future::join_all(races).await;
    let (mut cancelled, mut admitted) = (0u32, 0u32);
    for (u, (cancel, check_in)) in users.iter().zip(&outcomes) {
        // A storage conflict is a 503 for one of them: the loser, still never both.
        assert!(
            matches!((cancel, check_in), (200, 409) | (409, 200) | (503, 200) | (200, 503)),
            "{u}: {cancel} {check_in}"
        );
        let status = app.order_of(&event, u).await.body["status"].as_str().unwrap().to_owned();
        if *cancel == 200 {
            cancelled += 1;
            assert_eq!(status, "CANCELLED");
        } else {
            admitted += 1;
            assert_eq!(status, "CONFIRMED");
        }
    }
    assert_eq!(cancelled + admitted, 20);
    assert_eq!(app.free_numbers(&event).await.len() as u32, cancelled, "every cancelled number is back, no other");
    let report = app.report(&event, None).await;
    assert_eq!(report.body["checked_in"].as_u64(), Some(u64::from(admitted)));
    assert_eq!(report.body["passed"], true);
}

/// The same number given back twice at once (the cancel's own give-back and reconcile's, say):
/// one promotion, one place taken off the waitlist, never two orders for one number.
#[tokio::test]
async fn two_give_backs_of_one_number_promote_once() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(1).await;
    assert_eq!(app.grab(&event, "ada").await.status, 202);
    for user in ["bob", "cy"] {
        assert_eq!(app.join_waitlist(&event, user).await.status, 201);
    }
    app.deliver_all().await;
    // The crash: DynamoDB holds the cancellation, Redis was never told.
    let (due, _) = app.cancel_in_dynamodb(&event, "ada").await;
    assert_eq!(app.functions.store.give_backs_due(&event).await.unwrap().len(), 1);

    let returns = app.give_backs();
    let tries = (0..8).map(|_| returns.give_back(&event, &due));
    let results: Vec<GaveBack> = futures::future::join_all(tries).await.into_iter().map(Result::unwrap).collect();
    let promoted: Vec<_> = results.iter().filter(|r| matches!(r, GaveBack::Promoted { .. })).collect();
    assert_eq!(promoted.len(), 1, "{results:?}");
    assert_eq!(results.iter().filter(|r| **r == GaveBack::Gone).count(), 7);
    assert_eq!(app.waitlist(&event, "cy").await.body["position"], 1, "one place taken");
    assert!(app.functions.store.give_backs_due(&event).await.unwrap().is_empty());
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(&event, "bob").await.body["status"], "CONFIRMED");
}

/// A crash between the DynamoDB cancel and the Redis give-back: reconcile finds the marker and
/// finishes it; no number lost, none given twice.
#[tokio::test]
async fn reconcile_gives_back_what_a_crash_left() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(2).await;
    for user in ["ada", "bob"] {
        assert_eq!(app.grab(&event, user).await.status, 202);
    }
    app.deliver_all().await;
    let ada = UserId::parse("ada").unwrap();
    let order = app.functions.store.get_order_now(&event, &ada).await.unwrap().unwrap();
    app.functions.store.cancel_order(&event, &ada, &order, OffsetDateTime::now_utc()).await.unwrap();
    assert!(app.free_numbers(&event).await.is_empty(), "Redis was not told");

    let report = app.functions.reconcile.run().await;
    assert_eq!(report.returned, 1, "{report:?}");
    assert_eq!(report.drift, 0, "{report:?}");
    assert_eq!(app.free_numbers(&event).await, BTreeSet::from([order.ticket_no.get()]));
    assert_eq!(app.grab(&event, "ada").await.code(), "ORDER_CANCELLED");
    // The next run finds nothing to do.
    assert_eq!(app.functions.reconcile.run().await.returned, 0);
    assert_eq!(app.free_numbers(&event).await.len(), 1);
}

/// Drift: a ticket Redis holds for an order that is neither stored nor in the outbox is counted.
#[tokio::test]
async fn reconcile_counts_drift_between_redis_and_dynamodb() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    assert_eq!(app.grab(&event, "ada").await.status, 202);
    app.deliver_all().await;
    assert_eq!(app.functions.reconcile.run().await.drift, 0);
    // An order that reached Redis and then vanished from the outbox before it was stored.
    assert_eq!(app.grab(&event, "bob").await.status, 202);
    let lost = app.drain_queue().await;
    assert_eq!(lost.len(), 1);
    let mut r = app.redis.clone();
    let _: () = r.del(keys::outbox(&event)).await.unwrap();
    assert_eq!(app.functions.reconcile.run().await.drift, 1);
}

/// The issue's scenario: 100 tickets, 2,000 students; 30 cancel; exactly 30 waiting students are
/// promoted and mailed; every number held by one user; the audit passes; 100 distinct check-ins,
/// every second scan refused.
#[tokio::test]
async fn a_lecture_with_cancellations_a_waitlist_and_the_door() {
    let app = TestApp::for_mail(60).await;
    let event = app.open_event(100).await;
    let users: Vec<String> = (0..2000).map(|i| format!("s{i:04}")).collect();
    let grabs = futures::stream::iter(users.iter().map(|u| {
        let app = &app;
        let event = &event;
        async move { (u.clone(), app.grab(event, u).await) }
    }));
    let replies: Vec<(String, Reply)> =
        futures::StreamExt::collect(futures::StreamExt::buffer_unordered(grabs, 64)).await;
    let winners: Vec<&String> = replies.iter().filter(|(_, r)| r.status == 202).map(|(u, _)| u).collect();
    let refused: Vec<&String> = replies.iter().filter(|(_, r)| r.code() == "SOLD_OUT").map(|(u, _)| u).collect();
    assert_eq!(winners.len(), 100);
    assert_eq!(refused.len(), 1900);
    // Forty of the refused join the waitlist, in this order.
    let waiting: Vec<&String> = refused.iter().take(40).copied().collect();
    for (i, u) in waiting.iter().enumerate() {
        let r = app.join_waitlist(&event, u).await;
        assert_eq!((r.status, r.body["position"].as_u64()), (201, Some(i as u64 + 1)));
    }
    assert_eq!(app.deliver_all().await, 100);

    let cancelling: Vec<&String> = winners.iter().take(30).copied().collect();
    for u in &cancelling {
        assert_eq!(app.cancel(&event, u).await.status, 200);
    }
    assert_eq!(app.deliver_all().await, 30, "thirty promotions");
    for (i, u) in waiting.iter().enumerate() {
        let expected = if i < 30 { "CONFIRMED" } else { "NO_ORDER" };
        let order = app.order_of(&event, u).await;
        let got = order.body["status"].as_str().unwrap_or(order.code());
        assert_eq!(got, expected, "{u} at place {}", i + 1);
    }
    assert_eq!(app.waitlist(&event, waiting[30]).await.body["position"], 1);

    // Every number held by one user; mails: one per order that was ever confirmed.
    let rows = app.functions.store.all_orders(&event).await.unwrap();
    let held: Vec<u32> = rows.iter().filter(|r| r.status.as_str() == "CONFIRMED").map(|r| r.ticket_no.get()).collect();
    assert_eq!(held.iter().collect::<HashSet<_>>().len(), 100);
    assert_eq!(held.len(), 100);
    let mail = app.sent_mail().await;
    assert_eq!(mail.len(), 130);
    assert_eq!(mail.iter().map(|m| m.to.clone()).collect::<HashSet<_>>().len(), 130, "one mail per order");
    assert!(app.free_numbers(&event).await.is_empty());
    assert!(app.functions.gate.outbox(&event).await.unwrap().is_empty());

    // The door: every holder in once, every second scan refused, the cancelled passes refused.
    let holders: Vec<String> =
        rows.iter().filter(|r| r.status.as_str() == "CONFIRMED").map(|r| r.user_id.to_string()).collect();
    let mut seen = HashSet::new();
    for u in &holders {
        let pass = app.pass_of(u).await;
        let first = app.check_in(&event, &pass, "[staff]").await;
        assert_eq!(first.status, 200, "{u}: {}", first.body);
        assert!(seen.insert(first.body["ticket_no"].as_u64().unwrap()));
        assert_eq!(app.check_in(&event, &pass, "[staff]").await.code(), "ALREADY_CHECKED_IN");
    }
    assert_eq!(seen.len(), 100);
    for u in cancelling.iter().take(3) {
        let pass = app.pass_of(u).await;
        assert_eq!(app.check_in(&event, &pass, "[staff]").await.code(), "TICKET_CANCELLED");
    }

    let report = app.report(&event, None).await;
    let b = &report.body;
    assert_eq!(b["passed"], true, "{b:#}");
    assert_eq!(
        [
            &b["capacity"],
            &b["confirmed"],
            &b["cancelled"],
            &b["promoted"],
            &b["checked_in"],
            &b["mails_sent"],
            &b["waiting"]
        ],
        [&json!(100), &json!(100), &json!(30), &json!(30), &json!(100), &json!(130), &json!(10)]
    );
}

/// An order the sale made, as the grab script writes it: sealed on the queue, taken into the cache
/// by the consumer (the grab script refuses a grab after the sale's end, so a test of the time
/// after it seeds its holders this way).
pub(crate) fn sold(event: &EventId, user: &str, ticket_no: u32) -> String {
    serde_json::to_string(&shared::domain::OrderMessage {
        v: 1,
        order_id: shared::domain::OrderId::generate(),
        event_id: event.clone(),
        user_id: UserId::parse(user).unwrap(),
        email: shared::domain::Email::parse(&format!("{user}@example.com")).unwrap(),
        ticket_no: shared::domain::TicketNo::new(ticket_no),
        created_at: shared::domain::event::rfc3339(OffsetDateTime::now_utc()),
        promoted: false,
    })
    .unwrap()
}

pub(crate) async fn wait_until(t: OffsetDateTime) {
    let left = t - OffsetDateTime::now_utc();
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs() + std::time::Duration::from_millis(50)).await;
    }
}

/// The sale ended an hour before cancellations close. Sold out; 20 users join the waitlist after
/// the end, 25 holders cancel after it: the first 20 numbers go to the 20 waiting users (mailed),
/// the other 5 are held for the waitlist and, when it closes with nobody to take them, reported
/// unsold. The audit passes throughout.
#[tokio::test]
async fn after_the_sale_every_returned_ticket_reaches_a_waiting_user_or_is_counted_unsold() {
    let app = TestApp::for_mail(30).await;
    // The set-up below (100 orders stored, 20 joins, 25 cancellations) must end before the window
    // closes, which the test then waits for: 30 s (it took over 20 s with four tests beside it).
    let cancel_until = OffsetDateTime::now_utc() + Duration::seconds(30);
    let mut event =
        test_event(fresh_event_id(), 100, cancel_until - Duration::hours(2), cancel_until - Duration::hours(1));
    event.cancel_until = cancel_until;
    app.functions.store.put_event(&event).await.unwrap();
    app.functions.gate.warm(&event).await.unwrap();
    let e = &event.id;
    let holder = |i: u32| format!("h{i}-{}", own_tail(e));
    let waiter = |i: u32| format!("w{i}-{}", own_tail(e));
    for n in 1..=100 {
        app.send_order(&sold(e, &holder(n), n)).await;
    }
    assert_eq!(app.deliver_all().await, 100);
    assert!(app.free_numbers(e).await.is_empty(), "sold out");

    // After the end, a hash still comes for the waitlist (until cancel_until), a grab does not.
    let hash = app.call(Function::VerifyHash, for_user(for_event(fixture("verify-hash.json"), e), &waiter(0))).await;
    assert_eq!(hash.status, 200, "{}", hash.body);
    assert_eq!(app.grab(e, &waiter(0)).await.code(), "SALE_ENDED");
    for i in 0..20 {
        let joined = app.join_waitlist(e, &waiter(i)).await;
        assert_eq!((joined.status, joined.body["position"].as_u64()), (201, Some(u64::from(i) + 1)), "{}", joined.body);
    }
    for n in 1..=25 {
        assert_eq!(app.cancel(e, &holder(n)).await.status, 200);
    }
    assert_eq!(app.deliver_all().await, 20, "one promotion per waiting user");
    let mail = app.sent_mail().await;
    for i in 0..20 {
        let order = app.order_of(e, &waiter(i)).await;
        assert_eq!(order.body["status"], "CONFIRMED", "{}", order.body);
        let to = format!("{}@example.com", waiter(i));
        assert_eq!(mail.iter().filter(|m| m.to.contains(&to)).count(), 1, "one mail for {to}");
    }
    // Nobody waits now: the 5 other numbers are held for the waitlist, not on sale.
    assert!(app.free_numbers(e).await.is_empty());
    let mut r = app.redis.clone();
    assert_eq!(r.llen::<_, u64>(keys::returned(e)).await.unwrap(), 5);
    let report = app.report(e, None).await;
    assert_eq!(report.body["passed"], true, "{:#}", report.body["checks"]);
    assert_eq!((report.body["unsold"].as_u64(), report.body["returned_unclaimed"].as_u64()), (Some(5), Some(5)));
    assert_eq!((report.body["confirmed"].as_u64(), report.body["promoted"].as_u64()), (Some(95), Some(20)));

    // Closed: the waitlist answers so, nobody was left waiting, the 5 stay unsold.
    wait_until(cancel_until).await;
    assert_eq!(app.waitlist(e, &waiter(0)).await.code(), "WAITLIST_CLOSED");
    assert_eq!(app.join_waitlist(e, &waiter(30)).await.code(), "WAITLIST_CLOSED");
    assert_eq!(app.cancel(e, &holder(30)).await.code(), "CANCEL_CLOSED");
    let run = app.functions.reconcile.run().await;
    assert_eq!((run.failures, run.notices), (0, 0));
    let report = app.report(e, None).await;
    assert_eq!(report.body["passed"], true, "{:#}", report.body["checks"]);
    assert_eq!(report.body["unsold"], 5);
}

/// After `cancel_until` the waitlist closes: each user still waiting gets one mail saying no ticket
/// came back, their place and address leave Redis (and the address leaves DynamoDB once mailed);
/// the promoted user gets no such mail; running reconcile again or redelivering sends nothing more.
#[tokio::test]
async fn the_waitlist_closes_after_cancel_until_and_each_user_still_waiting_is_told_once() {
    let app = TestApp::for_mail(30).await;
    let now = OffsetDateTime::now_utc();
    let mut event = test_event(fresh_event_id(), 1, now - Duration::minutes(1), now + Duration::seconds(6));
    event.cancel_until = now + Duration::seconds(9);
    app.functions.store.put_event(&event).await.unwrap();
    app.functions.gate.warm(&event).await.unwrap();
    let e = &event.id;
    let user = |name: &str| format!("{name}-{}", own_tail(e));
    assert_eq!(app.grab(e, &user("ada")).await.status, 202);
    for name in ["bob", "cy", "dee"] {
        assert_eq!(app.join_waitlist(e, &user(name)).await.status, 201);
    }
    app.deliver_all().await;
    assert_eq!(app.cancel(e, &user("ada")).await.status, 200);
    assert_eq!(app.deliver_all().await, 1, "bob promoted");
    let stored = app.functions.store.waiters(e).await.unwrap();
    assert_eq!(
        stored.iter().map(|w| (w.user.to_string(), w.place)).collect::<Vec<_>>().len(),
        3,
        "every place durable"
    );

    wait_until(event.cancel_until).await;
    assert_eq!(app.waitlist(e, &user("cy")).await.code(), "WAITLIST_CLOSED");
    let run = app.functions.reconcile.run().await;
    assert_eq!((run.failures, run.notices), (0, 2), "{run:?}");
    let mut r = app.redis.clone();
    assert!(!r.exists::<_, bool>(keys::waiting(e)).await.unwrap(), "the addresses left Redis");
    assert!(!r.exists::<_, bool>(keys::wait(e)).await.unwrap());
    assert_eq!(app.functions.reconcile.run().await.notices, 0, "closed once");
    let notices = app.drain_queue_raw().await;
    assert_eq!(notices.len(), 2);
    for body in &notices {
        app.deliver(body).await.expect("a notice is sent");
        // A redelivery sends nothing more.
        assert_eq!(app.deliver(body).await.unwrap(), shared::handlers::mail::Handled::AlreadyDone);
    }
    let mail = app.sent_mail().await;
    let told = |name: &str| {
        let to = format!("{}@example.com", user(name));
        mail.iter().filter(|m| m.to.contains(&to) && m.subject.starts_with("No ticket came back")).count()
    };
    assert_eq!((told("bob"), told("cy"), told("dee")), (0, 1, 1));
    assert!(app.functions.store.waiters(e).await.unwrap().is_empty(), "no place is waiting any more");
    let items = app
        .functions
        .store
        .client()
        .query()
        .table_name(app.functions.store.table())
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(format!("WAIT#{e}")))
        .send()
        .await
        .unwrap();
    assert!(items.items().iter().all(|i| !i.contains_key("email")), "no address is kept");
}

/// A cache the previous release laid out (layout v3: the opening field without a layout version,
/// no `cancel_until` or `wait_max` in meta, the waitlist only in Redis) is rebuilt on first touch,
/// at once, and its waiting user keeps their place: grabs, joins and cancellations through the new
/// code work on it.
#[tokio::test]
async fn a_cache_of_the_previous_layout_is_rebuilt_on_first_touch_keeping_its_waitlist() {
    use shared::domain::{Email, order::WaitHead};
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(2).await;
    let user = |name: &str| format!("{name}-{}", own_tail(&event));
    assert_eq!(app.grab(&event, &user("ada")).await.status, 202);
    assert_eq!(app.grab(&event, &user("bob")).await.status, 202);
    app.deliver_all().await;

    // Lay the cache out as v3 wrote it, sold out, with one user waiting there alone.
    let mut r = app.redis.clone();
    let opening = app.functions.gate.opening(&event).await.unwrap();
    let history = opening.strip_prefix(&keys::opening_prefix()).unwrap().to_owned();
    let open_from: String = r.hget(keys::meta(&event), &opening).await.unwrap();
    let old = UserId::parse(&user("old")).unwrap();
    let head = WaitHead::new(&event, &old, &Email::parse(&format!("{old}@example.com")).unwrap());
    let _: () = redis::pipe()
        .atomic()
        .hdel(keys::meta(&event), &[opening.as_str(), "cancel_until", "wait_max"])
        .hset(keys::meta(&event), format!("open_from@{history}"), open_from)
        .zadd(keys::wait(&event), old.as_str(), 1)
        .hset(keys::waiting(&event), old.as_str(), head.as_str())
        .query_async(&mut r)
        .await
        .unwrap();
    assert!(app.functions.gate.window(&event).await.unwrap().is_none(), "the new code does not read it as its own");

    // First touch: a join, answered at once (no wait as for a lost cache).
    let cy = app.join_waitlist(&event, &user("cy")).await;
    assert_eq!((cy.status, cy.body["position"].as_u64()), (201, Some(2)), "{}", cy.body);
    assert_eq!(app.waitlist(&event, old.as_str()).await.body["position"], 1, "the old place kept");
    assert!(app.functions.store.waiters(&event).await.unwrap().iter().any(|w| w.user == old), "and made durable");
    app.deliver_all().await;
    assert_eq!(app.cancel(&event, &user("ada")).await.status, 200);
    assert_eq!(app.deliver_all().await, 1);
    assert_eq!(app.order_of(&event, old.as_str()).await.body["status"], "CONFIRMED");
    let meta = app.cache(&event).await.meta;
    assert!(meta.contains_key(&opening) && !meta.contains_key(&format!("open_from@{history}")));
    let report = app.report(&event, None).await;
    assert_eq!(report.body["passed"], true, "{:#}", report.body["checks"]);
}

/// The door opens in the window the organiser set (by default from 2 h before `starts_at` to 6 h
/// after): a pass shown the day before is refused, nothing written.
#[tokio::test]
async fn check_in_is_accepted_only_in_the_events_window() {
    let app = TestApp::for_mail(30).await;
    let now = OffsetDateTime::now_utc();
    let mut event = test_event(fresh_event_id(), 2, now - Duration::minutes(1), now + Duration::hours(1));
    event.starts_at = Some(now + Duration::days(1));
    app.functions.store.put_event(&event).await.unwrap();
    app.functions.gate.warm(&event).await.unwrap();
    let user = format!("early-{}", own_tail(&event.id));
    assert_eq!(app.grab(&event.id, &user).await.status, 202);
    app.deliver_all().await;
    let pass = app.pass_of(&user).await;
    let early = app.check_in(&event.id, &pass, "[staff]").await;
    assert_eq!((early.status, early.code()), (409, "CHECK_IN_CLOSED"), "{}", early.body);
    assert!(app.order_of(&event.id, &user).await.body["checked_in_at"].is_null(), "nothing written");

    // The organiser opened the door now: let in.
    let mut open = test_event(fresh_event_id(), 2, now - Duration::minutes(1), now + Duration::hours(1));
    open.starts_at = Some(now + Duration::days(1));
    open.check_in_from = Some(now - Duration::minutes(1));
    app.functions.store.put_event(&open).await.unwrap();
    app.functions.gate.warm(&open).await.unwrap();
    let guest = format!("guest-{}", own_tail(&open.id));
    assert_eq!(app.grab(&open.id, &guest).await.status, 202);
    app.deliver_all().await;
    assert_eq!(app.check_in(&open.id, &app.pass_of(&guest).await, "[staff]").await.status, 200);
}
