//! The mail consumer against DynamoDB, SES and SQS in MiniStack and Redis: one order and one mail
//! per message whatever the delivery pattern, drift never oversells, failures retry to one mail.

use std::{collections::HashSet, time::Duration};

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use shared::{
    domain::{EventId, MailStatus, OrderId, OrderMessage, OrderStatus, UserId, event::epoch_ms},
    handlers::mail::{Handled, MessageError},
    http::routes::Function,
    store::schema::{attr, key},
};
use time::OffsetDateTime;

use crate::helpers::*;

/// A real grab and the message it put on this test's queue.
async fn grabbed(app: &TestApp, event: &EventId, user: &str) -> String {
    assert_eq!(app.grab(event, user).await.status, 202);
    let messages = app.drain_queue_raw().await;
    assert_eq!(messages.len(), 1);
    messages.into_iter().next().unwrap()
}

async fn mail_status(app: &TestApp, event: &EventId, user: &str) -> (OrderStatus, String) {
    let item = app
        .functions
        .store
        .client()
        .get_item()
        .table_name(app.functions.store.table())
        .key(attr::PK, AttributeValue::S(key::order(event, &UserId::parse(user).unwrap())))
        .key(attr::SK, AttributeValue::S(key::ORDER_SK.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("the order is stored");
    let status = OrderStatus::parse(item["status"].as_s().unwrap()).unwrap();
    (status, item["mail_status"].as_s().unwrap().clone())
}

async fn ticket_holder(app: &TestApp, event: &EventId, ticket: u32) -> Option<String> {
    app.functions
        .store
        .client()
        .get_item()
        .table_name(app.functions.store.table())
        .key(attr::PK, AttributeValue::S(key::ticket(event, shared::domain::TicketNo::new(ticket))))
        .key(attr::SK, AttributeValue::S(key::TICKET_SK.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .map(|i| i["order_id"].as_s().unwrap().clone())
}

fn drifted(body: &str, user: &str, ticket_no: u32) -> String {
    let mut m = OrderMessage::parse(body).unwrap();
    m.user_id = shared::domain::UserId::parse(user).unwrap();
    m.email = shared::domain::Email::parse(&format!("{user}@example.com")).unwrap();
    m.order_id = OrderId::generate();
    m.ticket_no = shared::domain::TicketNo::new(ticket_no);
    serde_json::to_string(&m).unwrap()
}

/// The cache counts the order as its user's (the consumer's own check passes): what a drifted
/// cache did, so DynamoDB's conditions are what stands between it and an oversold ticket.
async fn counted_by_the_drifted_cache(app: &TestApp, body: &str) {
    let m = OrderMessage::parse(body).unwrap();
    let holding = format!("{}:{}", m.order_id, m.ticket_no);
    let field = format!("={}", m.user_id);
    let _: () =
        redis::AsyncCommands::hset(&mut app.redis.clone(), shared::gate::keys::meta(&m.event_id), field, holding)
            .await
            .unwrap();
}

#[tokio::test]
async fn one_message_delivered_three_times_at_once_and_again_gives_one_order_and_one_mail() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(10).await;
    let body = grabbed(&app, &event, "u1").await;

    let at_once = futures::future::join_all((0..3).map(|_| app.deliver(&body))).await;
    // One delivery sends; a concurrent one may find the send in progress and fail, to be retried.
    let sent_now = at_once.iter().filter(|r| matches!(r, Ok(Handled::ConfirmedAndMailed))).count();
    assert_eq!(sent_now, 1, "{at_once:?}");
    for r in &at_once {
        assert!(matches!(r, Ok(_) | Err(MessageError::MailInProgress)), "{r:?}");
    }
    for _ in 0..3 {
        assert_eq!(app.deliver(&body).await.unwrap(), Handled::AlreadyDone);
    }
    // And three copies in one batch.
    let batch = app.sqs_batch(&[("a", &body), ("b", &body), ("c", &body)]);
    assert!(app.functions.mail.handle_batch(batch).await.batch_item_failures.is_empty());

    assert_eq!(mail_status(&app, &event, "u1").await, (OrderStatus::Confirmed, "SENT".into()));
    let mail = app.sent_mail().await;
    assert_eq!(mail.len(), 1, "one mail");
    assert_eq!(mail[0].to, ["u1@example.com"]);
    let order = OrderMessage::parse(&body).unwrap();
    assert!(
        mail[0].body_text.contains(order.order_id.as_str())
            && mail[0].subject.contains(&format!("#{}", order.ticket_no))
    );
    assert!(app.cache(&event).await.outbox.is_empty(), "the outbox entry is gone once durable");
}

#[tokio::test]
async fn a_ticket_already_held_rejects_the_new_order_and_a_second_order_is_dropped() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(10).await;
    let body = grabbed(&app, &event, "u1").await;
    assert_eq!(app.deliver(&body).await.unwrap(), Handled::ConfirmedAndMailed);
    let first = OrderMessage::parse(&body).unwrap();

    // Redis drifted and handed u2 the same ticket number.
    let clash = drifted(&body, "u2", first.ticket_no.get());
    counted_by_the_drifted_cache(&app, &clash).await;
    assert_eq!(app.deliver(&clash).await.unwrap(), Handled::Rejected);
    assert_eq!(app.deliver(&clash).await.unwrap(), Handled::AlreadyDone, "a redelivery changes nothing");
    assert_eq!(
        ticket_holder(&app, &event, first.ticket_no.get()).await.as_deref(),
        Some(first.order_id.as_str()),
        "never oversold"
    );
    let reply = app.call(Function::Query, for_user(for_event(fixture("query-order.json"), &event), "u2")).await;
    assert_eq!((reply.status, reply.body["status"].as_str()), (200, Some("REJECTED")), "{}", reply.body);
    assert!(reply.body["reason"].as_str().unwrap().contains("held by another order"));

    // ...and u1 a second order with another number.
    let second = drifted(&body, "u1", 7);
    counted_by_the_drifted_cache(&app, &second).await;
    assert_eq!(app.deliver(&second).await.unwrap(), Handled::DroppedSecondOrder);
    assert_eq!(ticket_holder(&app, &event, 7).await, None, "the dropped order holds no ticket");
    let reply = app.call(Function::Query, for_user(for_event(fixture("query-order.json"), &event), "u1")).await;
    assert_eq!(
        (reply.body["status"].as_str(), reply.body["order_id"].as_str()),
        (Some("CONFIRMED"), Some(first.order_id.as_str()))
    );

    let attendees = app.call(Function::Query, for_event(fixture("query-attendees.json"), &event)).await;
    assert_eq!(attendees.body["orders"].as_array().unwrap().len(), 1, "only the holder is an attendee");
    let mail = app.sent_mail().await;
    assert_eq!(
        mail.iter().map(|m| m.to.clone()).collect::<Vec<_>>(),
        [vec!["u1@example.com".to_owned()]],
        "no mail for rejected or dropped orders"
    );
}

#[tokio::test]
async fn ses_failing_then_recovering_sends_exactly_one_mail() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(10).await;
    let body = grabbed(&app, &event, "u1").await;
    app.ses().delete_email_identity().email_identity(&app.settings.mail.from).send().await.unwrap();

    for _ in 0..2 {
        let failed = app.deliver(&body).await;
        assert!(matches!(failed, Err(MessageError::Mail(_))), "{failed:?}");
        assert_eq!(
            mail_status(&app, &event, "u1").await,
            (OrderStatus::Confirmed, "PENDING".into()),
            "durable, mail still due"
        );
    }
    assert!(app.sent_mail().await.is_empty());

    app.ses().create_email_identity().email_identity(&app.settings.mail.from).send().await.unwrap();
    assert_eq!(app.deliver(&body).await.unwrap(), Handled::ConfirmedAndMailed);
    assert_eq!(app.deliver(&body).await.unwrap(), Handled::AlreadyDone);
    assert_eq!(mail_status(&app, &event, "u1").await, (OrderStatus::Confirmed, "SENT".into()));
    assert_eq!(app.sent_mail().await.len(), 1);
}

#[tokio::test]
async fn a_crash_between_claim_and_send_ends_in_one_mail() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(10).await;
    let body = grabbed(&app, &event, "u1").await;
    let order = OrderMessage::parse(&body).unwrap();
    let now = OffsetDateTime::now_utc();
    // The crashed delivery: stored and claimed, nothing sent.
    app.functions.store.persist_order(&order, now).await.unwrap();
    let claim = app.functions.store.claim_mail(&order, now, now - time::Duration::minutes(10)).await.unwrap();
    assert_eq!(claim, shared::store::orders::MailClaim::Claimed);

    // A redelivery while the claim is fresh does not send: the claimant may still be sending.
    assert!(matches!(app.deliver(&body).await, Err(MessageError::MailInProgress)));
    assert!(app.sent_mail().await.is_empty());

    // Once the claim is older than the timeout it is taken over.
    let old = epoch_ms(now - time::Duration::minutes(10));
    app.functions
        .store
        .client()
        .update_item()
        .table_name(app.functions.store.table())
        .key(attr::PK, AttributeValue::S(key::order(&event, &UserId::parse("u1").unwrap())))
        .key(attr::SK, AttributeValue::S(key::ORDER_SK.into()))
        .update_expression("SET mail_claimed_at = :old")
        .expression_attribute_values(":old", AttributeValue::N(old.to_string()))
        .send()
        .await
        .unwrap();
    assert_eq!(app.deliver(&body).await.unwrap(), Handled::ConfirmedAndMailed);
    assert_eq!(app.deliver(&body).await.unwrap(), Handled::AlreadyDone);
    assert_eq!(app.sent_mail().await.len(), 1);
    assert_eq!(mail_status(&app, &event, "u1").await.1, MailStatus::Sent.as_str());
}

/// Mail times of a test's own: (patience, send timeout, claim timeout).
fn mail_times(s: &mut local_runner::LocalSettings, patience_ms: u64, timeout_ms: u64, claim_ms: u64) {
    s.mail = shared::config::MailSettings::timed(
        s.mail.from.clone(),
        s.mail.concurrency,
        Duration::from_millis(patience_ms),
        Duration::from_millis(timeout_ms),
        Duration::from_millis(claim_ms),
    )
    .expect("mail times");
}

/// Sets the order's mail claim back in time, as if it had been taken `ago`.
async fn age_claim(app: &TestApp, event: &EventId, user: &str, ago: time::Duration) {
    let old = epoch_ms(OffsetDateTime::now_utc() - ago);
    app.functions
        .store
        .client()
        .update_item()
        .table_name(app.functions.store.table())
        .key(attr::PK, AttributeValue::S(key::order(event, &UserId::parse(user).unwrap())))
        .key(attr::SK, AttributeValue::S(key::ORDER_SK.into()))
        .update_expression("SET mail_claimed_at = :old")
        .expression_attribute_values(":old", AttributeValue::N(old.to_string()))
        .send()
        .await
        .unwrap();
}

/// A send that never left (SES unreachable: the connection is refused) certainly sent nothing: it is
/// tried again at once, then the claim goes back, so the next delivery sends without waiting.
#[tokio::test]
async fn a_send_that_never_reached_ses_hands_its_claim_back_at_once() {
    let app = TestApp::for_mail_with(30, |s| s.mail_endpoint = Some("http://127.0.0.1:1".into())).await;
    let event = app.open_event(10).await;
    let body = grabbed(&app, &event, "u1").await;
    let failed = app.deliver(&body).await;
    assert!(
        matches!(&failed, Err(MessageError::Mail(e)) if e.certainly_not_sent() && e.to_string().contains("not reached")),
        "{failed:?}"
    );
    assert_eq!(mail_status(&app, &event, "u1").await, (OrderStatus::Confirmed, "PENDING".into()), "claim handed back");
    assert!(app.sent_mail().await.is_empty());
}

/// SES accepts the mail and its answer never comes: past the patience the send is counted on the
/// order, past the send timeout its outcome is unknown, and the claim is kept. No delivery sends it
/// again until the claim goes stale; one that does then sends the second mail this window allows
/// (RELIABILITY.md: the residual window).
#[tokio::test]
async fn a_send_ses_never_answers_keeps_its_claim_until_it_goes_stale() {
    let settings = local_runner::LocalSettings::from_env().unwrap();
    let silent = crate::late_ses::LateSes::silent(&settings.aws_endpoint).await;
    let app = TestApp::for_mail_with(30, |s| {
        s.mail_endpoint = Some(silent.url.clone());
        mail_times(s, 200, 1_000, 60_000);
    })
    .await;
    let event = app.open_event(10).await;
    let body = grabbed(&app, &event, "u1").await;
    let failed = app.deliver(&body).await;
    assert!(matches!(&failed, Err(MessageError::Mail(e)) if !e.certainly_not_sent()), "{failed:?}");
    assert_eq!(mail_status(&app, &event, "u1").await.1, "SENDING", "the claim is kept");
    let rows = app.functions.store.all_orders(&event).await.unwrap();
    assert_eq!(rows[0].mail_unanswered, 1, "the unanswered send is on the order");
    assert_eq!(app.sent_mail().await.len(), 1, "SES accepted it");

    // Redeliveries while the claim is fresh send nothing.
    for _ in 0..3 {
        assert!(matches!(app.deliver(&body).await, Err(MessageError::MailInProgress)));
    }
    assert_eq!(app.sent_mail().await.len(), 1);

    // Once the claim is stale a delivery (here through a SES that answers) sends again.
    age_claim(&app, &event, "u1", time::Duration::minutes(2)).await;
    let mut answering = app.settings.clone();
    answering.mail_endpoint = None;
    let functions = local_runner::Functions::build(&answering, &app.queue_url).await.unwrap();
    let sealed = app.seal(&body);
    assert_eq!(functions.mail.handle_message(&body, Some(&sealed)).await.unwrap(), Handled::ConfirmedAndMailed);
    assert_eq!(app.sent_mail().await.len(), 2, "the residual window's second mail");
}

#[tokio::test]
async fn a_batch_of_ten_with_two_malformed_bodies_fails_exactly_those_two() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(10).await;
    let mut bodies = Vec::new();
    for i in 0..8 {
        bodies.push(grabbed(&app, &event, &format!("b{i}")).await);
    }
    let mut batch: Vec<(String, String)> =
        bodies.iter().enumerate().map(|(i, b)| (format!("ok-{i}"), b.clone())).collect();
    batch.insert(3, ("bad-json".into(), "{not json".into()));
    let mut bad_field: Value = serde_json::from_str(&bodies[0]).unwrap();
    bad_field["event_id"] = json!("no#such{event}");
    batch.insert(7, ("bad-id".into(), bad_field.to_string()));
    let refs: Vec<(&str, &str)> = batch.iter().map(|(i, b)| (i.as_str(), b.as_str())).collect();

    let response = app.functions.mail.handle_batch(app.sqs_batch(&refs)).await;
    let failed: HashSet<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    assert_eq!(failed, HashSet::from(["bad-json", "bad-id"]));
    for i in 0..8 {
        assert_eq!(mail_status(&app, &event, &format!("b{i}")).await, (OrderStatus::Confirmed, "SENT".into()));
    }
    assert_eq!(app.sent_mail().await.len(), 8);
}

/// A body a forger would send: valid in form, for a ticket nobody grabbed, to someone else's address.
fn forged_body(event: &EventId, user: &str, ticket_no: u32) -> String {
    json!({
        "v": 1, "order_id": OrderId::generate(), "event_id": event, "user_id": user,
        "email": "victim@example.org", "created_at": "2026-11-23T10:00:00Z", "ticket_no": ticket_no,
    })
    .to_string()
}

fn stored_order_exists(app: &TestApp, event: &EventId, user: &str) -> impl std::future::Future<Output = bool> {
    let (store, event, user) =
        (app.functions.store.clone(), event.clone(), shared::domain::UserId::parse(user).unwrap());
    async move { store.get_order(&event, &user).await.unwrap().is_some() }
}

#[tokio::test]
async fn malformed_and_forged_messages_end_in_the_dlq_storing_and_mailing_nothing_and_never_block_others() {
    let app = TestApp::for_mail(1).await;
    let event = app.open_event(100).await;
    let good = grabbed(&app, &event, "u1").await;
    let dlq_url = format!("{}-dlq", app.queue_url);
    for body in ["{not json", good.as_str()] {
        app.send_order(body).await;
    }
    // Put on the queue by someone without the key: no seal at all, and a seal made with another key.
    let unsealed = forged_body(&event, "forger", 99_999);
    app.sqs.send_message().queue_url(&app.queue_url).message_body(&unsealed).send().await.unwrap();
    let wrong_key = shared::domain::order_seal::SealKey::new(b"a key that is not the deployment's").unwrap();
    let ghost = forged_body(&event, "ghost", 1);
    shared::queue::OrderQueue::new(app.sqs.clone(), app.queue_url.clone()).send(&ghost, &wrong_key).await.unwrap();

    let poller = app.poller();
    // Poll as the event source mapping does until SQS moves the three (bounded).
    let mut in_dlq: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while in_dlq.len() < 3 && tokio::time::Instant::now() < deadline {
        // A call the emulator, starved by the suite beside it, does not answer in time is tried again.
        let _ = poller.poll_once().await;
        if let Ok(out) = app.sqs.receive_message().queue_url(&dlq_url).max_number_of_messages(10).send().await {
            in_dlq.extend(out.messages.unwrap_or_default().into_iter().map(|m| m.body.unwrap_or_default()));
        }
    }
    in_dlq.sort();
    let mut expected = vec!["{not json".to_owned(), unsealed, ghost];
    expected.sort();
    assert_eq!(in_dlq, expected, "the malformed and the forged messages reached the DLQ");
    assert_eq!(
        mail_status(&app, &event, "u1").await,
        (OrderStatus::Confirmed, "SENT".into()),
        "their neighbour went through"
    );
    assert!(!stored_order_exists(&app, &event, "forger").await, "the forged order was not stored");
    assert!(!stored_order_exists(&app, &event, "ghost").await, "nor the order under another key's seal");
    let to: Vec<String> = app.sent_mail().await.into_iter().flat_map(|m| m.to).collect();
    assert_eq!(to, ["u1@example.com"], "no mail to the forger's victim");
    let left = app.sqs.receive_message().queue_url(&app.queue_url).max_number_of_messages(10).send().await.unwrap();
    assert!(left.messages.unwrap_or_default().is_empty(), "nothing acknowledged silently, nothing left behind");
}

/// Even under a valid seal (a bug in a sender), an order for an unknown event or a ticket number
/// outside the event's capacity is refused before anything is written.
#[tokio::test]
async fn a_sealed_order_for_an_unknown_event_or_a_ticket_beyond_capacity_writes_nothing() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(100).await;
    let beyond = forged_body(&event, "beyond", 101);
    assert!(matches!(
        app.deliver(&beyond).await,
        Err(MessageError::TicketOutOfRange { ticket_no, capacity: 100 }) if ticket_no.get() == 101
    ));
    let unknown = forged_body(&fresh_event_id(), "nowhere", 1);
    assert!(matches!(app.deliver(&unknown).await, Err(MessageError::UnknownEvent(_))));
    assert!(!stored_order_exists(&app, &event, "beyond").await);
    assert!(app.sent_mail().await.is_empty());
    // The last number of the event is a number like any other.
    let last = forged_body(&event, "last", 100);
    assert_eq!(app.deliver(&last).await.unwrap(), Handled::ConfirmedAndMailed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_thousand_users_through_the_runner_end_with_every_invariant_holding() {
    let app = std::sync::Arc::new(TestApp::for_mail(30).await);
    let event = app.open_event(100).await;
    let (base, _stop) = crate::runner::start_runner(&app).await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let poller = app.poller();
    let polling = tokio::spawn(poller.run(4, Default::default(), stop_rx));

    let http = local_runner::client::new();
    let auth = local_runner::authorizer::Authorizer::new(&app.settings.jwt_secret);
    // All 2,000 users start at once; at most 256 sockets are open at a time, as behind API Gateway,
    // so the test measures the system rather than this machine's listen backlog.
    let sockets = std::sync::Arc::new(tokio::sync::Semaphore::new(256));
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..2_000)
        .map(|i| {
            let (http, base, event, sockets) = (http.clone(), base.clone(), event.clone(), sockets.clone());
            let user = format!("s{i:04}-{}", &app.settings.mail.from[8..16]);
            let token =
                auth.mint(&user, Some(&format!("{user}@example.com")), false, Duration::from_secs(600)).unwrap();
            tokio::spawn(async move {
                let _socket = sockets.acquire().await.unwrap();
                let hash = crate::runner::verify_hash_over_http(&http, &base, event.as_str(), &token).await;
                // A 503 promises nothing was decided that a retry will not find: clients retry it.
                loop {
                    let reply = crate::runner::grab_over_http(&http, &base, event.as_str(), &token, &hash).await;
                    let (status, wait) = (reply.status().as_u16(), crate::runner::retry_after(&reply));
                    if status != 503 {
                        return (user, status, reply.json::<Value>().await.unwrap());
                    }
                    tokio::time::sleep(wait).await;
                }
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (user, status, body) = task.await.unwrap();
        match status {
            202 => winners.push((user, body["order_id"].as_str().unwrap().to_owned())),
            409 => assert_eq!(body["code"], "SOLD_OUT"),
            other => panic!("{other}: {body}"),
        }
    }
    let grabbed_in = started.elapsed();
    assert_eq!(winners.len(), 100);

    // Drained: every winner's order durable and mailed, the outbox empty, with reconcile running
    // as its schedule would (a grab whose send outlasts its budget on a loaded machine leaves its
    // order in the outbox for reconcile; two CI runs at four tests at a time did not drain, cause
    // not found). How fast is the benchmarks' to say; the bound is only for a loaded machine.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let (drained, outbox, mailed) = loop {
        let (outbox, mailed) = (app.cache(&event).await.outbox.len(), app.sent_mail().await.len());
        if (outbox == 0 && mailed >= 100) || std::time::Instant::now() > deadline {
            break (outbox == 0 && mailed >= 100, outbox, mailed);
        }
        app.functions.reconcile.run().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let drain = started.elapsed();
    let _ = stop_tx.send(true);
    polling.await.unwrap();
    assert!(drained, "drained within 300 s: {outbox} orders left in the outbox, {mailed} of 100 mailed");
    println!(
        "2,000 users / 100 tickets through the runner: grabs answered in {grabbed_in:?}, drained (100 durable, 100 mails, outbox empty) in {drain:?}"
    );

    // DynamoDB: 100 CONFIRMED, distinct ticket numbers in 1..100, one per winner, the order ids replied.
    let list = app
        .call(Function::Query, with_query(for_event(fixture("query-attendees.json"), &event), &[("limit", "500")]))
        .await;
    let orders = list.body["orders"].as_array().unwrap();
    assert_eq!(orders.len(), 100);
    assert!(orders.iter().all(|o| o["status"] == "CONFIRMED"));
    let tickets: HashSet<u64> = orders.iter().map(|o| o["ticket_no"].as_u64().unwrap()).collect();
    assert_eq!(tickets, (1..=100).collect());
    let stored: HashSet<(String, String)> = orders
        .iter()
        .map(|o| (o["user_id"].as_str().unwrap().to_owned(), o["order_id"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(stored, winners.iter().cloned().collect(), "every OK reply is exactly one durable order");

    // Mail: one per confirmed order, to the winners' addresses.
    let mail = app.sent_mail().await;
    let to: Vec<String> = mail.iter().flat_map(|m| m.to.clone()).collect();
    assert_eq!(to.len(), 100);
    assert_eq!(
        to.iter().cloned().collect::<HashSet<_>>(),
        winners.iter().map(|(u, _)| format!("{u}@example.com")).collect()
    );

    // Redis: free + holdings = capacity, outbox empty.
    let cache = app.cache(&event).await;
    assert_eq!((cache.seats.len(), cache.holdings.len(), cache.outbox.len()), (0, 100, 0));
}

/// Orders reach the consumer after the cache was lost and rebuilt from DynamoDB without them (a
/// send its grab gave up on, landing late; or a rebuild that stopped waiting for the queue). The
/// cache decides: a number it sold again stays with the user told `202` for it and the late order
/// is `REJECTED` (its user, asking again, is told of it); a number still free is taken in; a user
/// who holds another order gets no second one. No number has two holders.
#[tokio::test]
async fn an_order_the_rebuilt_cache_never_counted_never_takes_a_number_sold_again() {
    let app = TestApp::for_mail(30).await;
    let event = app.open_event(3).await;
    let late = grabbed(&app, &event, "late").await;
    let free_late = grabbed(&app, &event, "free-late").await;
    let ticket = |body: &str| OrderMessage::parse(body).unwrap().ticket_no.get();

    // Lost, and rebuilt exactly from DynamoDB, which never saw either order.
    let mut r = app.redis.clone();
    let _: () = redis::AsyncCommands::del(&mut r, &shared::gate::keys::cache(&event)).await.unwrap();
    let (gate, store) = (&app.functions.gate, &app.functions.store);
    let stored = store.get_event(&event).await.unwrap().unwrap().event;
    let lock = gate.lock_rebuild(&event, Duration::from_secs(30)).await.unwrap().expect("the lock");
    let buckets = gate.buckets_of(&stored);
    gate.stop(&buckets, &lock).await.unwrap();
    gate.stop_sent(&buckets, &lock).await.unwrap();
    let holdings = store.holdings(&event).await.unwrap();
    let laid = gate.lay_down(&lock, &stored, &buckets, &holdings, &[], None).await.unwrap();
    assert_eq!(laid, shared::gate::LaidDown::Open);
    gate.unlock_rebuild(lock).await.unwrap();

    let winner = grabbed(&app, &event, "winner").await;
    assert_eq!(ticket(&winner), ticket(&late), "the rebuilt cache sold the number again");
    assert_eq!(app.deliver(&late).await.unwrap(), Handled::Rejected);
    assert_eq!(app.deliver(&late).await.unwrap(), Handled::AlreadyDone, "a redelivery changes nothing");
    assert_eq!(app.deliver(&winner).await.unwrap(), Handled::ConfirmedAndMailed, "the 202 keeps its ticket");
    assert_eq!(app.deliver(&free_late).await.unwrap(), Handled::ConfirmedAndMailed, "taken in: its number was free");
    let second = drifted(&late, "winner", 3);
    assert_eq!(app.deliver(&second).await.unwrap(), Handled::DroppedUncounted, "winner holds an order");

    let cache = app.cache(&event).await;
    assert_eq!(cache.holdings["free-late"].1, ticket(&free_late));
    assert_eq!(cache.seats, [3], "the number taken in is off sale, the dropped order's is not");
    // The late user asks again: told of the rejected order, not given a second one.
    let again = app.grab(&event, "late").await;
    assert_eq!(
        (again.status, &again.body["order_id"]),
        (200, &serde_json::to_value(OrderMessage::parse(&late).unwrap().order_id).unwrap())
    );
    let reply = app.call(Function::Query, for_user(for_event(fixture("query-order.json"), &event), "late")).await;
    assert_eq!(reply.body["status"].as_str(), Some("REJECTED"), "{}", reply.body);

    let holders = [
        ticket_holder(&app, &event, 1).await,
        ticket_holder(&app, &event, 2).await,
        ticket_holder(&app, &event, 3).await,
    ];
    let winner_order = OrderMessage::parse(&winner).unwrap().order_id.to_string();
    let free_order = OrderMessage::parse(&free_late).unwrap().order_id.to_string();
    let mut expected = [None, None, None];
    expected[ticket(&winner) as usize - 1] = Some(winner_order);
    expected[ticket(&free_late) as usize - 1] = Some(free_order);
    assert_eq!(holders, expected, "every number held once, by the order the cache counts");
    let mut mailed: Vec<String> = app.sent_mail().await.into_iter().flat_map(|m| m.to).collect();
    mailed.sort();
    assert_eq!(mailed, ["free-late@example.com", "winner@example.com"]);
}

/// A send SES answers late but within the send timeout (3 s here, past the shared configuration's
/// 2 s attempt timeout) is waited for: counted unanswered once, then settled by the late answer,
/// one mail and no claim left to go stale.
#[tokio::test]
async fn a_send_answered_after_the_patience_but_within_the_timeout_is_settled_by_its_answer() {
    let settings = local_runner::LocalSettings::from_env().unwrap();
    let late = crate::late_ses::LateSes::start(&settings.aws_endpoint, Duration::from_secs(3)).await;
    let app = TestApp::for_mail_with(30, |s| {
        s.mail_endpoint = Some(late.url.clone());
        mail_times(s, 500, 10_000, 60_000);
    })
    .await;
    let event = app.open_event(10).await;
    let body = grabbed(&app, &event, "u1").await;
    let handled = app.deliver(&body).await;
    assert!(matches!(handled, Ok(shared::handlers::mail::Handled::ConfirmedAndMailed)), "{handled:?}");
    assert_eq!(mail_status(&app, &event, "u1").await.1, "SENT");
    let rows = app.functions.store.all_orders(&event).await.unwrap();
    assert_eq!(rows[0].mail_unanswered, 1, "counted while it was awaited");
    assert_eq!(app.sent_mail().await.len(), 1);
}

/// SES's rate per second reached (a drain faster than the account's rate): each throttled send is
/// waited out and sent again, not counted a failed delivery (five of those and the order's message
/// would be in the DLQ): every order stored and mailed once, no message failed.
#[tokio::test]
async fn sends_throttled_by_the_ses_rate_are_waited_out_not_failed() {
    let settings = local_runner::LocalSettings::from_env().unwrap();
    let ses = crate::late_ses::LateSes::throttling(&settings.aws_endpoint, 5).await;
    let app = TestApp::for_mail_with(30, |s| s.mail_endpoint = Some(ses.url.clone())).await;
    let event = app.open_event(10).await;
    let mut bodies = Vec::new();
    for user in ["t1", "t2", "t3", "t4"] {
        bodies.push(grabbed(&app, &event, user).await);
    }
    for body in &bodies {
        let handled = app.deliver(body).await;
        assert!(matches!(handled, Ok(shared::handlers::mail::Handled::ConfirmedAndMailed)), "{handled:?}");
    }
    let mut mailed: Vec<String> = app.sent_mail().await.into_iter().flat_map(|m| m.to).collect();
    mailed.sort();
    assert_eq!(mailed, ["t1@example.com", "t2@example.com", "t3@example.com", "t4@example.com"]);
}
