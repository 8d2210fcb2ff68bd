//! The organiser's live view and the door's offline check-ins, against the real stack: the view's
//! figures are the cache's and the audit's, its rates are the grabs' outcomes as the grab
//! environment tallied them, and its refusals are problems; an offline check-in is stored at the
//! time the door let the pass in, a retried sync is no conflict, and a pass another door had
//! checked in first is one conflict on its order, counted by the audit.

use serde_json::{Value, json};
use shared::{domain::EventId, http::routes::Function};
use time::{Duration, OffsetDateTime, format_description::well_known::Rfc3339};

use crate::helpers::*;

fn as_admin(mut event: Value) -> Value {
    event["requestContext"]["authorizer"]["jwt"]["claims"] = json!({
        "sub": "organiser", "email": "organiser@example.com", "email_verified": "true", "cognito:groups": "[admin]",
    });
    event
}

impl TestApp {
    async fn live(&self, event: &EventId, query: &[(&str, &str)]) -> Reply {
        self.call(Function::Query, as_admin(with_query(for_event(fixture("live.json"), event), query))).await
    }

    async fn check_in_offline(&self, event: &EventId, pass: &str, at: &str) -> Reply {
        let body = json!({ "pass": pass, "admitted_offline_at": at });
        self.call(Function::Door, as_admin(with_body(for_event(fixture("check-in.json"), event), &body))).await
    }
}

#[tokio::test]
async fn the_live_view_shows_the_cache_the_tallied_outcomes_and_the_audit() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    for user in ["ada", "bob", "cy", "dee", "eve"] {
        app.grab(&event, user).await;
    }
    assert_eq!(app.grab(&event, "ada").await.status, 200, "a retry: ALREADY");
    // Refused before the gate: a bad hash, and an event nobody released. Neither is a sale's
    // outcome, and neither may make a key.
    let forged = with_body(app.grab_event(&event, "fay"), &json!({ "hash": "v1.1.AAAA" }));
    assert_eq!(app.call(Function::Grab, forged).await.code(), "BAD_HASH");
    let made_up = fresh_event_id();
    assert_eq!(app.grab(&made_up, "fay").await.code(), "EVENT_NOT_FOUND");
    app.functions.grab.tally().flush().await;
    let mut redis = app.redis.clone();
    let made_up_keys: Vec<String> =
        redis::AsyncCommands::keys(&mut redis, format!("tally:{{tally:{made_up}}}:*")).await.unwrap();
    assert!(made_up_keys.is_empty(), "{made_up_keys:?}");

    let live = app.live(&event, &[]).await;
    assert_eq!(live.status, 200, "{}", live.body);
    let v = &live.body;
    assert_eq!(
        (v["cache"].as_str(), v["remaining"].as_u64(), v["capacity"].as_u64()),
        (Some("live"), Some(0), Some(3))
    );
    assert_eq!(v["in_flight"].as_u64(), Some(3), "three orders in the outbox, none stored yet");
    assert_eq!(v["waiting"].as_u64(), Some(0));
    let mut outcomes = std::collections::BTreeMap::<String, u64>::new();
    for second in v["grabs"]["per_second"].as_array().unwrap() {
        for (code, n) in second["outcomes"].as_object().unwrap() {
            *outcomes.entry(code.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    let want = [("ALREADY", 1), ("OK", 3), ("SOLD_OUT", 2)].map(|(c, n)| (c.to_owned(), n)).into_iter().collect();
    assert_eq!(outcomes, want, "every grab tallied once, by its outcome");
    assert_eq!(v["grabs"]["until"].as_i64().unwrap() - v["grabs"]["from"].as_i64().unwrap(), 5 * 60 - 1);
    assert_eq!((v["audit"]["confirmed"].as_u64(), v["audit"]["passed"].as_bool()), (Some(0), Some(true)));
    assert!(v["audit"]["as_of"].is_string());

    // Once the orders are stored, the queue is empty and (an audit later) they are confirmed.
    app.deliver_all().await;
    let drained = app.live(&event, &[("minutes", "1")]).await;
    assert_eq!(drained.body["in_flight"].as_u64(), Some(0));
    assert_eq!(drained.body["grabs"]["until"].as_i64().unwrap() - drained.body["grabs"]["from"].as_i64().unwrap(), 59);
    let confirmed = eventually(std::time::Duration::from_secs(12), || async {
        app.live(&event, &[]).await.body["audit"]["confirmed"].as_u64() == Some(3)
    })
    .await;
    assert!(confirmed, "the audit is at most five seconds old");
    let report = app.report(&event, None).await.body;
    let audit = app.live(&event, &[]).await.body["audit"].clone();
    for field in ["confirmed", "mails_sent", "checked_in", "check_in_conflicts", "cancelled", "passed"] {
        assert_eq!(audit[field], report[field], "{field}: the live view's audit is the report's");
    }

    // Refusals: problems, and nothing read.
    for bad in ["0", "16", "01", "+1", "x", ""] {
        let r = app.live(&event, &[("minutes", bad)]).await;
        assert_eq!((r.status, r.code()), (400, "BAD_REQUEST"), "minutes={bad}");
    }
    assert_eq!(app.live(&fresh_event_id(), &[]).await.code(), "EVENT_NOT_FOUND");
    let student = app.call(Function::Query, for_user(for_event(fixture("live.json"), &event), "ada")).await;
    assert_eq!(student.code(), "FORBIDDEN");
}

#[tokio::test]
async fn an_offline_check_in_keeps_its_time_and_two_doors_are_one_conflict() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    for user in ["ada", "bob"] {
        assert_eq!(app.grab(&event, user).await.status, 202);
    }
    app.deliver_all().await;
    let (ada, bob) = (app.pass_of("ada").await, app.pass_of("bob").await);

    // Ada was let in offline a minute ago; the sync stores that time, and a retried sync (its
    // reply lost) finds its own time: no conflict.
    let at = (OffsetDateTime::now_utc() - Duration::minutes(1)).format(&Rfc3339).unwrap();
    let synced = app.check_in_offline(&event, &ada, &at).await;
    assert_eq!(synced.status, 200, "{}", synced.body);
    assert_eq!(synced.body["checked_in_at"], at);
    let again = app.check_in_offline(&event, &ada, &at).await;
    assert_eq!((again.status, again.code()), (409, "ALREADY_CHECKED_IN"));
    assert_eq!(app.report(&event, None).await.body["check_in_conflicts"], 0);

    // Bob was checked in online at one door, and let in offline at another: one conflict, however
    // often the second door retries.
    assert_eq!(app.check_in(&event, &bob, "[staff]").await.status, 200);
    let later = OffsetDateTime::now_utc().format(&Rfc3339).unwrap();
    for _ in 0..2 {
        let second = app.check_in_offline(&event, &bob, &later).await;
        assert_eq!((second.status, second.code()), (409, "ALREADY_CHECKED_IN"));
    }
    let report = app.report(&event, None).await.body;
    assert_eq!((report["checked_in"].as_u64(), report["check_in_conflicts"].as_u64()), (Some(2), Some(1)));
    assert!(report["passed"].as_bool().unwrap(), "a conflict is counted, not a failed invariant");
    let orders = app.call(Function::Query, as_admin(for_event(fixture("query-attendees.json"), &event))).await;
    let conflicts: Vec<u64> =
        orders.body["orders"].as_array().unwrap().iter().map(|o| o["check_in_conflicts"].as_u64().unwrap()).collect();
    assert_eq!(conflicts.iter().sum::<u64>(), 1, "{conflicts:?}");

    // An offline time that is not one, or in the future, is refused and changes nothing.
    let future = (OffsetDateTime::now_utc() + Duration::minutes(5)).format(&Rfc3339).unwrap();
    for bad in ["yesterday", "2026-13-01T00:00:00Z", future.as_str()] {
        let r = app.check_in_offline(&event, &ada, bad).await;
        assert_eq!((r.status, r.code()), (400, "BAD_REQUEST"), "{bad}");
    }
    assert_eq!(app.report(&event, None).await.body["check_in_conflicts"], 1);
}
