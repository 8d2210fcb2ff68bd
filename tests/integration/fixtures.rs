//! The sample events in `events/` are what `cargo lambda invoke`, `sam local invoke`,
//! `sam remote invoke` and these tests use: each must be a valid HTTP API event for a real route,
//! a release payload, an SQS batch for mail or a reconcile trigger; the `-bad` ones must be refused.

use std::collections::BTreeSet;

use aws_lambda_events::{apigw::ApiGatewayV2httpRequest, sqs::SqsEvent};
use shared::{
    domain::{EventDraft, OrderMessage},
    handlers::reconcile::Trigger,
    http::routes,
};
use time::OffsetDateTime;

use crate::helpers::{TestApp, fixture, repo_root, test_event};

#[test]
fn every_sample_event_parses_and_names_a_real_route() {
    let mut seen = 0;
    for entry in std::fs::read_dir(repo_root().join("events")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let value = fixture(&name);
        seen += 1;
        let bad = name.contains("bad");
        if name.starts_with("release-direct") {
            let parsed = EventDraft::from_json(&value);
            assert_eq!(parsed.is_ok(), !bad, "{name}: {parsed:?}");
            continue;
        }
        if name.starts_with("reconcile") {
            let parsed = Trigger::parse(&value);
            assert_eq!(parsed.is_ok(), !bad, "{name}: {parsed:?}");
            continue;
        }
        if name.starts_with("mail") {
            let batch: SqsEvent = serde_json::from_value(value).unwrap_or_else(|e| panic!("{name}: {e}"));
            let malformed =
                batch.records.iter().filter(|r| OrderMessage::parse(r.body.as_deref().unwrap_or("")).is_err());
            assert_eq!(malformed.count() > 0, bad, "{name}");
            continue;
        }
        let event: ApiGatewayV2httpRequest = serde_json::from_value(value).unwrap_or_else(|e| panic!("{name}: {e}"));
        let key = event.request_context.route_key.clone().unwrap_or_default();
        if name.starts_with("pages") {
            // The pages' route, outside the API's table: a file that is served, or one that is not.
            assert_eq!(key, pages::ROUTE_KEY, "{name}");
            let file = &event.path_parameters["file"];
            assert_eq!(event.raw_path.as_deref(), Some(format!("{}{file}", pages::PATH_PREFIX).as_str()), "{name}");
            assert_eq!(pages::file(file).is_none(), bad, "{name}");
            continue;
        }
        let path = event.raw_path.clone().unwrap_or_default();
        let method = event.request_context.http.method.as_str().to_owned();
        let (route, _) = routes::find(&method, &path.replace("%23", "x"))
            .unwrap_or_else(|| panic!("{name}: no route for {method} {path}"));
        assert_eq!(route.key(), key, "{name}");
        assert_eq!(event.route_key.as_deref(), Some(key.as_str()), "{name}");
    }
    assert!(seen >= 17, "only {seen} sample events");
}

/// Every function has a sample and a bad sample.
#[test]
fn every_function_has_a_sample_and_a_bad_one() {
    let names: BTreeSet<String> = std::fs::read_dir(repo_root().join("events"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for function in ["release", "query", "verify-hash", "grab", "mail", "reconcile", "pages"] {
        let of = |bad: bool| {
            names.iter().any(|n| n.starts_with(function) && (n.contains("bad") || n.contains("no-claims")) == bad)
        };
        assert!(of(false) && of(true), "{function}: a sample and a bad sample in events/");
    }
}

/// The SQS samples through the mail handler on the real stack: the good batch stores and mails
/// both orders; the bad batch fails exactly its two malformed messages and its forged one (ticket
/// 99999 to another address, under a seal the key did not make), and its good one is mailed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mail_batch_samples_do_what_they_say_on_the_real_stack() {
    let app = TestApp::for_mail(30).await;
    let now = OffsetDateTime::now_utc();
    let draft = EventDraft::from_json(&fixture("release-direct.json")).unwrap();
    let event =
        test_event(draft.id.unwrap(), draft.capacity, now - time::Duration::minutes(1), now + time::Duration::hours(1));
    app.functions.store.put_event(&event).await.unwrap();

    let good: SqsEvent = serde_json::from_value(fixture("mail-batch.json")).unwrap();
    assert!(app.functions.mail.handle_batch(good).await.batch_item_failures.is_empty());
    let bad: SqsEvent = serde_json::from_value(fixture("mail-batch-bad.json")).unwrap();
    let failed: BTreeSet<String> = app
        .functions
        .mail
        .handle_batch(bad.clone())
        .await
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect();
    // The samples are sealed with the development key (scripts/local.env's ORDER_KEY).
    let refused: BTreeSet<String> = bad
        .records
        .iter()
        .filter(|r| {
            let body = r.body.as_deref().unwrap();
            let seal = r.message_attributes.get("seal").and_then(|a| a.string_value.as_deref());
            OrderMessage::parse(body).is_err() || app.settings.seal.check(body, seal).is_err()
        })
        .map(|r| r.message_id.clone().unwrap())
        .collect();
    assert_eq!(refused.len(), 3, "two malformed messages and a forged one");
    assert_eq!(failed, refused);
    let mut to: Vec<String> = app.sent_mail().await.into_iter().flat_map(|m| m.to).collect();
    to.sort();
    assert_eq!(to, ["student-1@example.com", "student-2@example.com", "student-3@example.com"]);
}
