//! Red packets with real amounts (docs/DESIGN.md section 11): a total split once at release from a
//! committed seed; the grab reply, the order, the mail and the report carry each amount; the seed
//! is revealed after the sale and recomputes the split; a second implementation agrees.

use std::collections::HashSet;

use redis::AsyncCommands;
use serde_json::{Value, json};
use sha2::Digest;
use shared::{
    domain::{
        EventId,
        red_packet::{self, AmountSeed},
    },
    gate::keys,
    http::routes::Function,
};
use time::{Duration, OffsetDateTime};

use crate::helpers::{TestApp, fixture, for_event, fresh_event_id, repo_root, with_body};

fn packets(id: &EventId, capacity: u32, total: Value, currency: Value, opens: OffsetDateTime) -> Value {
    json!({
        "id": id.as_str(), "title": "Red packets", "capacity": capacity,
        "sale_start": shared::domain::event::rfc3339(opens),
        "sale_end": shared::domain::event::rfc3339(opens + Duration::hours(1)),
        "total_amount": total, "currency": currency,
    })
}

async fn release(app: &TestApp, body: &Value) -> crate::helpers::Reply {
    app.call(Function::Release, with_body(fixture("release-http.json"), body)).await
}

async fn public_event(app: &TestApp, id: &EventId) -> Value {
    let reply = app.call(Function::Query, for_event(fixture("query-event.json"), id)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_red_packet_sale_carries_each_amount_in_the_reply_the_order_the_mail_and_the_report() {
    let app = TestApp::for_mail(30).await;
    let id = fresh_event_id();
    let (capacity, total) = (100u32, 10_000u64);
    let released = release(&app, &packets(&id, capacity, json!(total), json!("CNY"), OffsetDateTime::now_utc())).await;
    assert_eq!(released.status, 201, "{}", released.body);
    let public = &released.body["red_packet"];
    assert_eq!(public["total"], total);
    assert_eq!(public["currency"], "CNY");
    assert_eq!(public["algorithm"], red_packet::ALGORITHM);
    let commitment = public["commitment"].as_str().expect("a commitment").to_owned();
    assert!(!released.body.to_string().contains("seed"), "the seed stays secret: {}", released.body);
    assert!(public_event(&app, &id).await.get("red_packet_seed").is_none(), "not while the sale is open");

    // 150 users for 100 packets.
    let users: Vec<String> = (0..150).map(|i| format!("rp-{i}")).collect();
    let replies = futures::future::join_all(users.iter().map(|u| app.grab(&id, u))).await;
    let winners: Vec<(&String, &crate::helpers::Reply)> =
        users.iter().zip(&replies).filter(|(_, r)| r.status == 202).collect();
    assert_eq!(winners.len(), capacity as usize);
    assert!(replies.iter().all(|r| r.status == 202 || r.code() == "SOLD_OUT"));
    let mut sum = 0;
    for (_, reply) in &winners {
        let amount = &reply.body["amount"];
        assert_eq!(amount["currency"], "CNY", "{}", reply.body);
        let value = amount["value"].as_u64().expect("an amount");
        assert!(value >= 1);
        sum += value;
    }
    assert_eq!(sum, total, "the packets sold hold the total exactly");
    let (user, first) = winners[0];
    let again = app.grab(&id, user).await;
    assert_eq!((again.status, &again.body["amount"]), (200, &first.body["amount"]), "a retry, the same amount");
    let order = app.order_of(&id, user).await;
    assert_eq!(order.body["amount"], first.body["amount"], "{}", order.body);

    assert_eq!(app.deliver_all().await, capacity as usize);
    let value = first.body["amount"]["value"].as_u64().unwrap();
    let line = format!("Red packet:    {}.{:02} CNY", value / 100, value % 100);
    let mail = app.sent_mail().await.into_iter().find(|m| m.to == [format!("{user}@example.com")]).expect("mailed");
    assert!(mail.body_text.contains(&line), "{line} in {}", mail.body_text);

    let report = app.report(&id, None).await;
    assert_eq!(report.status, 200);
    assert_eq!(report.body["red_packet"]["held"], total, "{}", report.body);
    let check = report.body["checks"].as_array().unwrap().iter().find(|c| c["name"] == "red_packet_amounts").cloned();
    assert_eq!(check.expect("the check")["passed"], true);
    assert_eq!(report.body["passed"], true, "{}", report.body);

    // The stored seed (what the reveal will publish) is the one committed to at release.
    let stored = app.functions.store.get_event(&id).await.unwrap().unwrap().event.red_packet.unwrap();
    assert_eq!(stored.seed.commitment(), commitment);
}

#[tokio::test]
async fn after_the_sale_the_seed_is_revealed_and_recomputes_every_amount() {
    let app = TestApp::new().await;
    let now = OffsetDateTime::now_utc();
    let mut event =
        crate::helpers::test_event(fresh_event_id(), 20, now - Duration::hours(2), now - Duration::minutes(1));
    event.red_packet = Some(red_packet::RedPacket {
        total: 888,
        currency: red_packet::Currency::parse("JPY").unwrap(),
        seed: AmountSeed::generate(),
    });
    app.functions.store.put_event(&event).await.unwrap();
    let public = public_event(&app, &event.id).await;
    let seed = public["red_packet_seed"].as_str().expect("revealed after the sale");
    let bytes: Vec<u8> = (0..32).map(|i| u8::from_str_radix(&seed[2 * i..2 * i + 2], 16).unwrap()).collect();
    let digest: String = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(public["red_packet"]["commitment"], digest, "the seed hashes to the commitment");
    let split = red_packet::split(&AmountSeed::from_hex(seed).unwrap(), 888, 20);
    assert_eq!(split, event.red_packet.unwrap().split(20), "anyone recomputes the split");
}

#[tokio::test]
async fn a_retried_release_keeps_its_first_seed() {
    let app = TestApp::for_mail(30).await;
    let id = fresh_event_id();
    let body = packets(&id, 10, json!(1_000), json!("EUR"), OffsetDateTime::now_utc());
    let first = release(&app, &body).await;
    assert_eq!(first.status, 201);
    let mut r = app.redis.clone();
    let _: () = r.del(&[keys::meta(&id), keys::seats(&id)]).await.unwrap();
    let mut again = release(&app, &body).await;
    for _ in 0..20 {
        if again.status != 503 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        again = release(&app, &body).await;
    }
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(again.body["red_packet"]["commitment"], first.body["red_packet"]["commitment"]);
}

#[tokio::test]
async fn bad_red_packets_are_refused_naming_the_field_and_nothing_is_stored() {
    let app = TestApp::new().await;
    let opens = OffsetDateTime::now_utc() + Duration::minutes(5);
    for (total, currency, field) in [
        (json!(1_000), Value::Null, "currency"),
        (Value::Null, json!("CNY"), "total_amount"),
        (json!(99), json!("CNY"), "total_amount"),
        (json!(0), json!("CNY"), "total_amount"),
        (json!(red_packet::MAX_TOTAL + 1), json!("CNY"), "total_amount"),
        (json!("1000"), json!("CNY"), "total_amount"),
        (json!(1.5), json!("CNY"), "total_amount"),
        (json!(1_000), json!("cny"), "currency"),
        (json!(1_000), json!("YUAN"), "currency"),
    ] {
        let id = fresh_event_id();
        let reply = release(&app, &packets(&id, 100, total.clone(), currency.clone(), opens)).await;
        assert_eq!(reply.status, 400, "{total} {currency}: {}", reply.body);
        let fields: Vec<&str> =
            reply.body["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
        assert_eq!(fields, [field], "{total} {currency}: {}", reply.body);
        assert!(app.functions.store.get_event(&id).await.unwrap().is_none(), "nothing stored");
    }
}

/// tests/split_v1.py, written from the description alone, agrees with the product on random
/// seeds, totals and sizes.
#[test]
fn a_second_implementation_agrees() {
    let mut seen = HashSet::new();
    for round in 0..12u32 {
        let seed = AmountSeed::generate();
        let (n, total) = (1 + round * 37, 1 + u64::from(round * 37) + u64::from(round).pow(5));
        let out = std::process::Command::new("python3")
            .arg(repo_root().join("tests/split_v1.py"))
            .args([seed.to_hex(), total.to_string(), n.to_string()])
            .output()
            .expect("python3");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let theirs: Vec<u64> = String::from_utf8(out.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(theirs, red_packet::split(&seed, total, n), "seed {}", seed.to_hex());
        seen.insert(theirs.len());
        let commitment = std::process::Command::new("python3")
            .arg(repo_root().join("tests/split_v1.py"))
            .args(["--commitment", &seed.to_hex()])
            .output()
            .expect("python3");
        assert_eq!(String::from_utf8(commitment.stdout).unwrap().trim(), seed.commitment());
    }
    assert_eq!(seen.len(), 12);
}
