//! A ballot (docs/DESIGN.md section 11): users enter, once each; the organiser reveals the secret
//! committed at release and draws; the first `capacity` of the draw get orders through the
//! ordinary path (queue, consumer, mail with the pass), the rest wait in draw order; anyone
//! recomputes the published draw, and a second implementation agrees.

use std::collections::{BTreeSet, HashMap, HashSet};

use aws_sdk_dynamodb::types::AttributeValue::S;
use futures::StreamExt;
use redis::AsyncCommands;
use serde_json::{Value, json};
use shared::{
    domain::{
        EventId, UserId,
        beacon::{self, LocalChain},
        draw::{self, Algorithm, EntryKey, ProofStep, Published},
        entry_receipt::{DrawHead, ReceiptKey, ReceiptKeyRing},
        event::rfc3339,
        hex, proof_of_work,
        sale_mode::EntryShards,
    },
    gate::keys,
    http::routes::Function,
    store::schema::key,
};
use time::{Duration, OffsetDateTime};

use crate::{
    cancel_and_wait::as_member,
    helpers::{Reply, TestApp, fixture, for_event, for_user, fresh_event_id, repo_root, with_body},
};

fn ballot(id: &EventId, capacity: u32, draw_from: OffsetDateTime, commitment: &str) -> Value {
    json!({
        "id": id.as_str(), "title": "The ballot", "capacity": capacity,
        "sale_mode": "ballot", "draw_commitment": commitment,
        "sale_start": rfc3339(draw_from), "sale_end": rfc3339(draw_from + Duration::hours(1)),
    })
}

fn secret() -> [u8; 32] {
    *uuid::Uuid::now_v7().as_bytes().repeat(2).first_chunk().unwrap()
}

impl TestApp {
    pub(crate) async fn release_body(&self, body: &Value) -> Reply {
        self.call(Function::Release, with_body(fixture("release-http.json"), body)).await
    }

    async fn enter(&self, event: &EventId, user: &str) -> Reply {
        self.call(Function::Grab, for_user(for_event(fixture("entry.json"), event), user)).await
    }

    /// Enters `user`, retrying a `503` (two entries of one user at once: DynamoDB cancels one).
    async fn enter_surely(&self, event: &EventId, user: &str) -> Reply {
        loop {
            let reply = self.enter(event, user).await;
            if reply.status != 503 {
                return reply;
            }
        }
    }

    pub(crate) async fn entry(&self, event: &EventId, user: &str) -> Reply {
        self.call(Function::Query, for_user(for_event(fixture("entry-status.json"), event), user)).await
    }

    async fn published_draw(&self, event: &EventId) -> Reply {
        self.call(Function::Query, for_user(for_event(fixture("draw.json"), event), "anyone")).await
    }

    /// Every page of the published draw (`?from=`), and the whole they join into.
    pub(crate) async fn whole_draw(&self, event: &EventId) -> (Vec<Value>, Published) {
        let (mut pages, mut from) = (Vec::new(), Some(0));
        while let Some(at) = from {
            let mut req = for_user(for_event(fixture("draw.json"), event), "anyone");
            req["rawQueryString"] = json!(format!("from={at}"));
            req["queryStringParameters"] = json!({ "from": at.to_string() });
            let page = self.call(Function::Query, req).await;
            assert_eq!(page.status, 200, "{}", page.body);
            from = page.body["next"].as_u64();
            pages.push(page.body);
        }
        let parsed = pages.iter().map(|p| serde_json::from_value(p.clone()).expect("a page")).collect();
        (pages, Published::join(parsed).expect("the pages join"))
    }

    /// The receipts' public keys, as anyone signed in reads them.
    pub(crate) async fn receipt_keys(&self, event: &EventId) -> ReceiptKeyRing {
        let reply = self.call(Function::Grab, for_user(for_event(fixture("receipt-key.json"), event), "anyone")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        ReceiptKeyRing::from_published(&reply.body).expect("a ring")
    }

    /// The organiser's draw, asked again while it answers `202` (not finished by one ask).
    async fn draw(&self, event: &EventId, reveal: &Value) -> Reply {
        loop {
            let reply = self.draw_once(event, reveal).await;
            if reply.status != 202 {
                return reply;
            }
        }
    }

    /// One ask of the draw.
    async fn draw_once(&self, event: &EventId, reveal: &Value) -> Reply {
        let req = as_member(with_body(for_event(fixture("release-draw.json"), event), reveal), "organiser", "[admin]");
        self.call(Function::Release, req).await
    }
}

/// Waits until `t`: a draw runs from the time its release published, a known instant.
async fn until(t: OffsetDateTime) {
    let left = t - OffsetDateTime::now_utc();
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ballot_of_100_tickets_for_2000_entrants_mails_100_and_waits_the_rest_in_draw_order()
-> Result<(), draw::DrawFault> {
    let app = TestApp::for_mail(60).await;
    let id = fresh_event_id();
    let secret = secret();
    // Entries close at sale_start (fixed at release): room for 2,200 entries while the whole suite
    // shares the emulator (they take some 5 s alone).
    let draw_from = OffsetDateTime::now_utc() + Duration::seconds(60);
    let released = app.release_body(&ballot(&id, 100, draw_from, &draw::commitment(&secret))).await;
    assert_eq!(released.status, 201, "{}", released.body);
    assert_eq!(
        (released.body["sale_mode"].as_str(), released.body["draw"]["commitment"].as_str()),
        (Some("ballot"), Some(draw::commitment(&secret).as_str()))
    );

    // No grab takes a ballot's number; a fan who tried still enters and can win.
    assert_eq!(app.grab(&id, "fan-0000").await.code(), "BALLOT_ONLY");

    // 2,000 entrants, 200 of them entering twice at once: one entry each.
    let users: Vec<String> = (0..2_000).map(|i| format!("fan-{i:04}")).collect();
    let attempts: Vec<&String> = users.iter().chain(users.iter().take(200)).collect();
    let joining = std::time::Instant::now();
    let answered: Vec<(&String, Reply)> =
        futures::stream::iter(attempts.iter().map(|u| async { (*u, app.enter_surely(&id, u).await) }))
            .buffer_unordered(32)
            .collect()
            .await;
    eprintln!("2,200 entries took {} ms (the close leaves 60 s)", joining.elapsed().as_millis());
    // Each entrant's leaf, from the reply that told them: a duplicate is told the same entry.
    let mut user_of: HashMap<String, String> = HashMap::new();
    for (user, reply) in &answered {
        let leaf = reply.body["leaf"].as_str().expect("an entry's leaf").to_owned();
        assert_eq!(
            user_of.insert(leaf, (*user).clone()).unwrap_or_else(|| (*user).clone()),
            **user,
            "one leaf per user"
        );
    }
    assert_eq!(user_of.len(), 2_000);
    // Each receipt checks with the published keys and names its entry's leaf, which its key makes.
    let ring = app.receipt_keys(&id).await;
    for (user, reply) in answered.iter().step_by(97) {
        let receipt = ring.verify(reply.body["receipt"].as_str().unwrap()).expect("a receipt that checks");
        let key = EntryKey::from_hex(reply.body["entry_key"].as_str().unwrap()).unwrap();
        assert_eq!((&receipt.event, &receipt.leaf), (&id, &key.leaf(&id)), "{user}");
        assert_eq!(Some(receipt.leaf.as_str()), reply.body["leaf"].as_str());
    }
    let replies: Vec<Reply> = answered.into_iter().map(|(_, r)| r).collect();
    let created = replies.iter().filter(|r| r.status == 201).count();
    let again = replies.iter().filter(|r| r.status == 200 && r.body["status"] == "ENTERED").count();
    assert_eq!((created, again), (2_000, 200), "one entry per user, the duplicate told so");
    assert_eq!(app.functions.store.entry_count(&id, EntryShards::CURRENT).await.unwrap(), 2_000);
    assert_eq!(app.entry(&id, "fan-0007").await.body["status"], "ENTERED");
    assert_eq!(app.published_draw(&id).await.code(), "NOT_DRAWN");

    let reveal = json!({ "secret": hex::encode(&secret) });
    if OffsetDateTime::now_utc() < draw_from {
        assert_eq!(app.draw(&id, &reveal).await.code(), "DRAW_TOO_EARLY");
    }
    until(draw_from).await;
    // A wrong secret draws nothing; entries closed at sale_start, as the release fixed: a late
    // fan is refused, whatever the draw's state.
    let wrong = app.draw(&id, &json!({ "secret": hex::encode(&[1; 32]) })).await;
    assert_eq!((wrong.status, wrong.code()), (400, "BAD_REVEAL"), "{}", wrong.body);
    assert_eq!(app.enter(&id, "late-fan").await.code(), "REGISTRATION_CLOSED");

    let started = std::time::Instant::now();
    let drawn = app.draw(&id, &reveal).await;
    assert_eq!(drawn.status, 200, "{}", drawn.body);
    eprintln!("the draw of 2,000 entrants took {} ms", started.elapsed().as_millis());
    assert_eq!(
        (drawn.body["entrants"].as_u64(), drawn.body["winners"].as_u64(), drawn.body["waiting"].as_u64()),
        (Some(2_000), Some(100), Some(100)),
        "the waitlist holds 100 (waitlist_size, the capacity by default): the rest have their place in the draw"
    );
    assert_eq!(app.enter(&id, "too-late").await.code(), "REGISTRATION_CLOSED");
    let again = app.draw(&id, &reveal).await;
    assert_eq!((again.status, &again.body["root"]), (200, &drawn.body["root"]), "a second draw is the first");

    // The published draw checks out, names no user, and a second implementation derives the same
    // order.
    let (pages, published) = app.whole_draw(&id).await;
    assert_eq!(published.verify(), Ok(()));
    assert_eq!((published.algorithm()?, published.entrant_count), (Algorithm::V2, Some(2_000)));
    let shown = serde_json::to_string(&pages).unwrap();
    assert!(!shown.contains("fan-") && pages.iter().all(|p| p.get("entrants").is_none()), "no user id published");
    assert_eq!(
        published.sorted_entrants()?,
        user_of.keys().cloned().collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>()
    );
    let file = std::env::temp_dir().join(format!("ballot-{id}.json"));
    std::fs::write(&file, serde_json::to_vec(&published).unwrap()).unwrap();
    let out =
        std::process::Command::new("python3").arg(repo_root().join("tests/draw_v2.py")).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let theirs: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().skip(1).map(str::to_owned).collect();
    assert_eq!(theirs, published.order, "tests/draw_v2.py agrees");
    let in_order: Vec<String> = published.order.iter().map(|leaf| user_of[leaf].clone()).collect();
    let (winners, losers) = in_order.split_at(100);

    // Exactly the first 100 of the draw hold orders: in the cache, on the queue, then mailed.
    let cache = app.cache(&id).await;
    let holders: BTreeSet<String> = cache.holdings.keys().cloned().collect();
    assert_eq!(holders, winners.iter().cloned().collect(), "the winners hold, nobody else");
    assert_eq!(cache.held(), (1..=100).collect::<Vec<_>>(), "every number held once");
    assert_eq!(app.deliver_all().await, 100, "one order per winner, none twice for the second draw");
    let mailed: HashSet<String> = app.sent_mail().await.iter().flat_map(|m| m.to.clone()).collect();
    let wanted: HashSet<String> = winners.iter().map(|u| format!("{u}@example.com")).collect();
    assert_eq!(mailed, wanted, "each winner mailed once with a pass, nobody else");
    for user in &winners[..3] {
        let order = app.order_of(&id, user).await;
        assert_eq!(order.body["status"], "CONFIRMED", "{}", order.body);
    }

    let report = app.report(&id, None).await.body;
    let check = report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "ballot_draw").cloned();
    assert_eq!(check.expect("the ballot's check")["passed"], true, "{report}");
    assert_eq!(report["passed"], true, "{report}");

    // The next 100 wait in draw order, in the cache and durably; the rest hold no place.
    let mut redis = app.redis.clone();
    let waiting: Vec<String> = redis.zrange(keys::wait(&id), 0, -1).await.unwrap();
    assert_eq!(waiting, losers[..100], "the waitlist is the draw's order after the winners");
    let stored: Vec<String> =
        app.functions.store.waiters(&id).await.unwrap().into_iter().map(|w| w.user.as_str().to_owned()).collect();
    assert_eq!(stored, losers[..100]);
    let place = app.waitlist(&id, &losers[0]).await;
    assert_eq!((place.body["status"].as_str(), place.body["position"].as_u64()), (Some("WAITING"), Some(1)));
    assert_eq!(app.waitlist(&id, &losers[100]).await.code(), "NOT_WAITING", "past the waitlist's size");

    // Each entrant sees their place in the draw and a proof from their own leaf.
    for (user, won) in [(&winners[0], true), (&losers[10], false), (&losers[1_500], false)] {
        let entry = app.entry(&id, user).await.body;
        assert_eq!((entry["status"].as_str(), entry["won"].as_bool()), (Some("DRAWN"), Some(won)), "{entry}");
        let position = entry["draw_position"].as_u64().unwrap() as usize;
        let leaf = entry["leaf"].as_str().unwrap();
        assert_eq!(published.order[position - 1], leaf);
        let proof: Vec<ProofStep> = serde_json::from_value(entry["proof"].clone()).unwrap();
        assert!(draw::proves(Algorithm::V2, leaf, &proof, &published.root));
        assert!(!draw::proves(Algorithm::V2, &published.order[position % 2_000], &proof, &published.root));
    }

    // Tampering with any part fails the check: a place swapped, an entry dropped (its receipt then
    // proves it was accepted), another secret.
    let mut tampered = published.clone();
    tampered.order.swap(3, 250);
    assert_eq!(tampered.verify(), Err(draw::DrawFault::Order(4)));
    let mut dropped = published.clone();
    dropped.order.retain(|leaf| leaf != &published.order[150]);
    dropped.entrant_count = Some(1_999);
    assert_eq!(dropped.verify(), Err(draw::DrawFault::Root));
    let wrong = Published { secret: hex::encode(&[2; 32]), ..published.clone() };
    assert_eq!(wrong.verify(), Err(draw::DrawFault::Commitment));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_draw_is_finished_by_asking_again_and_a_named_beacon_round_is_required() {
    let app = TestApp::for_mail(60).await;
    // The runner's development chain (no drand server is reachable here), timed as quicknet.
    let chain = LocalChain::development();
    let id = fresh_event_id();
    let secret = secret();
    let draw_from = OffsetDateTime::now_utc() + Duration::seconds(3);
    let mut body = ballot(&id, 3, draw_from, &draw::commitment(&secret));
    // The round left out: the release names the chain's first round after the entries close.
    body["draw_beacon"] = json!({ "public_key": chain.public_key() });
    let released = app.release_body(&body).await;
    assert_eq!(released.status, 201, "{}", released.body);
    let close = OffsetDateTime::parse(
        released.body["draw"]["entries_close"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(close.unix_timestamp(), draw_from.unix_timestamp(), "entries close at sale_start by default");
    let round = released.body["draw"]["beacon"]["round"].as_u64().unwrap();
    assert_eq!(round, chain.chain("development").first_round_after(close.unix_timestamp()));
    let mut user_of = HashMap::new();
    for i in 0..8 {
        let entered = app.enter(&id, &format!("b-{i}")).await;
        assert_eq!(entered.status, 201);
        user_of.insert(entered.body["leaf"].as_str().unwrap().to_owned(), format!("b-{i}"));
    }
    until(draw_from).await;
    let secret = hex::encode(&secret);
    for (reveal, why) in [
        (json!({ "secret": secret }), "the round's signature is missing"),
        (json!({ "secret": secret, "beacon_signature": chain.round(round + 1).signature }), "another round"),
        (
            json!({ "secret": secret, "beacon_signature": LocalChain::new(&[12; 32]).round(round).signature }),
            "another chain",
        ),
        (json!({ "secret": secret, "extra": 1 }), "an unknown field"),
    ] {
        let refused = app.draw(&id, &reveal).await;
        assert_eq!(refused.status, 400, "{why}: {}", refused.body);
    }
    let reveal = json!({ "secret": secret, "beacon_signature": chain.round(round).signature });
    assert_eq!(app.draw(&id, &reveal).await.status, 200);
    let (_, published) = app.whole_draw(&id).await;
    assert_eq!(published.beacon.as_ref().map(|b| b.round), Some(round));
    assert_eq!(published.verify(), Ok(()));
    let in_order: Vec<String> = published.order.iter().map(|leaf| user_of[leaf].clone()).collect();

    // A draw cut off before it counted a chunk laid: asking again lays it again, nothing twice.
    let cache_before = app.cache(&id).await;
    app.functions
        .store
        .client()
        .update_item()
        .table_name(app.functions.store.table())
        .key("PK", aws_sdk_dynamodb::types::AttributeValue::S(format!("EVENT#{id}")))
        .key("SK", aws_sdk_dynamodb::types::AttributeValue::S("META".into()))
        .update_expression("REMOVE draw_done_at, draw_chunks_laid")
        .send()
        .await
        .unwrap();
    assert_eq!(app.draw(&id, &reveal).await.status, 200);
    assert_eq!(app.cache(&id).await.holdings, cache_before.holdings, "the same holders");
    assert_eq!(app.deliver_all().await, 3, "three orders, each once");
    let waiting: Vec<String> = app.redis.clone().zrange(keys::wait(&id), 0, -1).await.unwrap();
    assert_eq!(waiting, in_order[3..6], "three wait (the waitlist's size, the capacity by default)");

    // While the draw still lays its waiting places, a winner's ticket cannot be given back: the
    // line may not hold the one it is owed to yet, and a ballot's number never goes on sale.
    let done_removed = || async {
        app.functions
            .store
            .client()
            .update_item()
            .table_name(app.functions.store.table())
            .key("PK", S(key::event(&id)))
            .key("SK", S(key::EVENT_SK.into()))
            .update_expression("REMOVE draw_done_at")
            .send()
            .await
            .unwrap();
    };
    done_removed().await;
    let before = app.cache(&id).await;
    let refused = app.cancel(&id, &in_order[0]).await;
    assert_eq!((refused.status, refused.code()), (409, "DRAW_UNDER_WAY"), "{}", refused.body);
    assert_eq!(refused.retry_after.as_deref(), Some("1"));
    assert_eq!(app.cache(&id).await, before, "nothing given back");
    assert_eq!(app.order_of(&id, &in_order[0]).await.body["status"], "CONFIRMED");
    assert_eq!(app.draw(&id, &reveal).await.status, 200, "the draw finished");

    // A winner who cancels hands the number to the first in draw order who waits.
    assert_eq!(app.cancel(&id, &in_order[0]).await.status, 200);
    assert_eq!(app.deliver_all().await, 1, "the promotion's order");
    assert_eq!(app.order_of(&id, &in_order[3]).await.body["status"], "CONFIRMED");
    // The line empties; a number given back then is held for it, never put on a sale that cannot
    // open.
    for (winner, waiter) in [(&in_order[1], &in_order[4]), (&in_order[2], &in_order[5])] {
        assert_eq!(app.cancel(&id, winner).await.status, 200);
        assert_eq!(app.deliver_all().await, 1);
        assert_eq!(app.order_of(&id, waiter).await.body["status"], "CONFIRMED");
    }
    let last = app.order_of(&id, &in_order[3]).await.body["ticket_no"].as_u64().unwrap() as u32;
    assert_eq!(app.cancel(&id, &in_order[3]).await.status, 200);
    let cache = app.cache(&id).await;
    assert!(!cache.seats.contains(&last), "a ballot's number is never on sale: {:?}", cache.seats);
    let returned: Vec<u32> = app.redis.clone().lrange(keys::returned(&id), 0, -1).await.unwrap();
    assert_eq!(returned, [last], "held back");
    let report = app.report(&id, None).await;
    assert_eq!(report.body["passed"], true, "{:#}", report.body["checks"]);

    // A draw completed before draws kept a roll (no shard counted read, no roll written) is still
    // published, from its entries: the same draw.
    let store = &app.functions.store;
    store
        .client()
        .update_item()
        .table_name(store.table())
        .key("PK", S(key::event(&id)))
        .key("SK", S(key::EVENT_SK.into()))
        .update_expression("REMOVE roll_shards")
        .send()
        .await
        .unwrap();
    for shard in EntryShards::CURRENT.all() {
        let parts = store
            .client()
            .query()
            .table_name(store.table())
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", S(key::roll(&id, shard)))
            .send()
            .await
            .unwrap();
        for part in parts.items() {
            let key = [("PK", part["PK"].clone()), ("SK", part["SK"].clone())];
            store
                .client()
                .delete_item()
                .table_name(store.table())
                .set_key(Some(key.map(|(k, v)| (k.to_owned(), v)).into()))
                .send()
                .await
                .unwrap();
        }
    }
    let fresh = shared::handlers::draws::published_draw::DrawView::new(store.clone(), app.functions.rebuilder.clone());
    let again = fresh.published(&id).await.expect("published from the entries");
    assert_eq!(again.page(0).order, published.order, "the same draw");
}

#[tokio::test]
async fn entries_close_when_the_release_said_and_the_published_draw_says_when() {
    let app = TestApp::for_mail(60).await;
    let id = fresh_event_id();
    let secret = secret();
    let now = OffsetDateTime::now_utc();
    let (close, draw_from) = (now + Duration::seconds(2), now + Duration::seconds(4));
    let mut body = ballot(&id, 1, draw_from, &draw::commitment(&secret));
    body["entries_close"] = json!(rfc3339(close));
    let released = app.release_body(&body).await;
    assert_eq!(released.status, 201, "{}", released.body);
    assert_eq!(released.body["draw"]["entries_close"], rfc3339(close));
    let early = app.enter(&id, "early").await;
    assert_eq!(early.status, 201);
    until(close).await;
    let late = app.enter(&id, "late").await;
    assert_eq!((late.status, late.code()), (410, "REGISTRATION_CLOSED"), "{}", late.body);
    let reveal = json!({ "secret": hex::encode(&secret) });
    assert_eq!(app.draw(&id, &reveal).await.code(), "DRAW_TOO_EARLY");
    until(draw_from).await;
    assert_eq!(app.draw(&id, &reveal).await.status, 200);
    let published = app.published_draw(&id).await.body;
    assert_eq!(published["order"], json!([early.body["leaf"]]), "nothing entered after the close");
    assert_eq!(
        (published["entries_close"].as_str(), published["capacity"].as_u64()),
        (Some(rfc3339(close).as_str()), Some(1))
    );
    let drawn_at =
        OffsetDateTime::parse(published["drawn_at"].as_str().unwrap(), &time::format_description::well_known::Rfc3339)
            .unwrap();
    assert!(drawn_at >= draw_from, "{drawn_at}");
    let mut dated: Published = serde_json::from_value(published).unwrap();
    assert_eq!(dated.verify(), Ok(()));
    dated.drawn_at = Some(rfc3339(close - Duration::seconds(1)));
    assert_eq!(dated.verify(), Err(draw::DrawFault::DrawnBeforeClose), "a draw dated before the close is caught");
}

#[tokio::test]
async fn a_ballots_release_and_routes_refuse_what_they_must_and_change_nothing() {
    let app = TestApp::new().await;
    let opens = OffsetDateTime::now_utc() + Duration::minutes(5);
    let commitment = draw::commitment(&[3; 32]);
    for (change, field) in [
        (json!({ "draw_commitment": null }), "draw_commitment"),
        (json!({ "draw_commitment": "ABC" }), "draw_commitment"),
        (json!({ "sale_mode": "lottery" }), "sale_mode"),
        (json!({ "sale_mode": "first_come" }), "draw_commitment"),
        (json!({ "draw_beacon": { "public_key": "00", "round": 1 } }), "draw_beacon"),
        (json!({ "draw_beacon": { "round": "one" } }), "draw_beacon"),
        // A chain this deployment does not know: a key of the organiser's own would let them know
        // every round; a key that is no point of the group (no round could ever be signed).
        (json!({ "draw_beacon": { "public_key": LocalChain::new(&[12; 32]).public_key() } }), "draw_beacon"),
        (json!({ "draw_beacon": { "public_key": "11".repeat(96) } }), "draw_beacon"),
        // Quicknet's round 1, of 2023: out long ago, its randomness known to all.
        (json!({ "draw_beacon": { "public_key": beacon::quicknet().public_key, "round": 1 } }), "draw_beacon"),
        (json!({ "entries_close": rfc3339(opens + Duration::minutes(1)) }), "entries_close"),
        (json!({ "entries_close": rfc3339(OffsetDateTime::now_utc() - Duration::minutes(1)) }), "entries_close"),
        (json!({ "expected_rate": 1000 }), "expected_rate"),
    ] {
        let id = fresh_event_id();
        let mut body = ballot(&id, 10, opens, &commitment);
        for (k, v) in change.as_object().unwrap() {
            body[k] = v.clone();
        }
        let reply = app.release_body(&body).await;
        assert_eq!(reply.status, 400, "{change}: {}", reply.body);
        assert_eq!(reply.body["errors"][0]["field"], field, "{change}: {}", reply.body);
        assert!(app.functions.store.get_event(&id).await.unwrap().is_none(), "nothing stored");
    }

    let plain = app.open_event(5).await;
    assert_eq!(app.enter(&plain, "u1").await.code(), "NOT_A_BALLOT");
    assert_eq!(app.entry(&plain, "u1").await.code(), "NOT_A_BALLOT");
    assert_eq!(app.published_draw(&plain).await.code(), "NOT_A_BALLOT");
    assert_eq!(app.enter(&fresh_event_id(), "u1").await.code(), "EVENT_NOT_FOUND");

    let id = fresh_event_id();
    assert_eq!(app.release_body(&ballot(&id, 10, opens, &commitment)).await.status, 201);
    let with_body = with_body(for_user(for_event(fixture("entry.json"), &id), "u1"), &json!({ "x": 1 }));
    assert_eq!(app.call(Function::Grab, with_body).await.code(), "BAD_REQUEST");
    assert_eq!(app.entry(&id, "u1").await.code(), "NOT_ENTERED");
    let join = app.join_waitlist(&id, "u1").await;
    assert_eq!(join.code(), "BALLOT_ONLY", "{}", join.body);
    let reveal = json!({ "secret": hex::encode(&[3; 32]) });
    assert_eq!(app.draw(&id, &reveal).await.code(), "DRAW_TOO_EARLY");
    let as_user = for_user(with_body_of_draw(&id, &reveal), "u1");
    assert_eq!(app.call(Function::Release, as_user).await.status, 403);
    assert_eq!(app.functions.store.ballot_state(&id).await.unwrap(), Default::default(), "nothing closed or drawn");
    assert_eq!(app.functions.store.entry_count(&id, EntryShards::CURRENT).await.unwrap(), 0);
}

/// An operator who drops an accepted entry from the store before the draw signs a head for the
/// draw without it: the entrant's receipt, the keys with that head and the published pages prove
/// the exclusion (and tests/draw_v2.py, written from FAIRNESS.md, agrees: exit 3); every other
/// receipt finds its place (exit 0).
#[tokio::test]
async fn a_dropped_entry_is_proven_left_out_by_its_receipt_and_the_signed_head() {
    let app = TestApp::for_mail(60).await;
    let id = fresh_event_id();
    let secret = secret();
    let draw_from = OffsetDateTime::now_utc() + Duration::seconds(3);
    assert_eq!(app.release_body(&ballot(&id, 2, draw_from, &draw::commitment(&secret))).await.status, 201);
    let mut entries = Vec::new();
    for user in ["kept-1", "kept-2", "dropped", "kept-3"] {
        let entered = app.enter(&id, user).await;
        assert_eq!(entered.status, 201, "{}", entered.body);
        entries.push((user, entered.body));
    }
    // Before the draw, the keys carry no head yet.
    let before = app.call(Function::Grab, for_user(for_event(fixture("receipt-key.json"), &id), "anyone")).await;
    assert!(before.body["draw_head"].is_null(), "{}", before.body);
    // The operator deletes one accepted entry.
    app.functions
        .store
        .client()
        .delete_item()
        .table_name(app.functions.store.table())
        .key(
            "PK",
            S(key::entries(&id, EntryShards::CURRENT, EntryShards::CURRENT.of(&UserId::parse("dropped").unwrap()))),
        )
        .key("SK", S(key::waiter(&UserId::parse("dropped").unwrap())))
        .send()
        .await
        .unwrap();
    until(draw_from).await;
    assert_eq!(app.draw(&id, &json!({ "secret": hex::encode(&secret) })).await.status, 200);
    let (_, published) = app.whole_draw(&id).await;
    assert_eq!(published.verify(), Ok(()));
    // The paging edges openapi.yaml names: one past the last place is an empty last page; an index
    // that is no whole number is refused.
    let n = published.order.len();
    for (from, status) in [(format!("{}", n + 5), 200), ("x".to_owned(), 400), ("-1".to_owned(), 400)] {
        let mut req = for_user(for_event(fixture("draw.json"), &id), "anyone");
        req["rawQueryString"] = json!(format!("from={from}"));
        req["queryStringParameters"] = json!({ "from": from });
        let page = app.call(Function::Query, req).await;
        assert_eq!(page.status, status, "from={from}: {}", page.body);
        if status == 200 {
            assert_eq!(page.body["from"], n, "{}", page.body);
            assert_eq!(page.body["order"], json!([]), "{}", page.body);
            assert!(page.body.get("next").is_none(), "{}", page.body);
        }
    }
    let keys = app.call(Function::Grab, for_user(for_event(fixture("receipt-key.json"), &id), "anyone")).await.body;
    let ring = ReceiptKeyRing::from_published(&keys).unwrap();
    let head = ring.verify_head(keys["draw_head"].as_str().expect("a signed head after the draw")).unwrap();
    assert!(head.matches(&published), "{head:?}");
    // The head was signed when the draw completed and kept: what the route serves, whatever keys
    // are held since.
    let kept = app.functions.store.ballot_state(&id).await.unwrap().draw.and_then(|d| d.head);
    assert_eq!(kept.as_deref(), keys["draw_head"].as_str(), "the head served is the one kept");
    assert_eq!(keys["committed"], serde_json::to_value(&published.receipt_keys).unwrap(), "{keys}");
    let draw_file = std::env::temp_dir().join(format!("dropped-{id}.json"));
    std::fs::write(&draw_file, serde_json::to_vec(&published).unwrap()).unwrap();
    let keys_file = std::env::temp_dir().join(format!("dropped-{id}-keys.json"));
    std::fs::write(&keys_file, serde_json::to_vec(&keys).unwrap()).unwrap();
    for (user, entry) in &entries {
        let receipt = ring.verify(entry["receipt"].as_str().unwrap()).unwrap();
        let drawn = published.order.contains(&receipt.leaf);
        assert_eq!(drawn, *user != "dropped", "{user}");
        let out = std::process::Command::new("python3")
            .arg(repo_root().join("tests/draw_v2.py"))
            .args(["--receipt", entry["receipt"].as_str().unwrap(), "--keys"])
            .arg(&keys_file)
            .arg("--draw")
            .arg(&draw_file)
            .args(["--entry-key", entry["entry_key"].as_str().unwrap()])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(if drawn { 0 } else { 3 }), "{user}: {said}");
    }

    // The operator's trick (docs/FAIRNESS.md section 6b): a head, signed with its real key, that
    // vouches only for a key of its own making, and a keys document from which the key that signed
    // the receipts has rotated out. The receipts' keys were committed at release, in the terms every
    // page carries: the dropped entry is proven left out all the same, by both verifiers.
    let committed = published.receipt_keys.clone();
    assert!(!committed.is_empty(), "the release committed the receipt keys: {:?}", published.receipt_keys);
    let released = app.call(Function::Query, for_user(for_event(fixture("query-event.json"), &id), "anyone")).await;
    assert_eq!(released.body["draw"]["receipt_keys"], serde_json::to_value(&committed).unwrap(), "{}", released.body);
    let operator = app.settings.hash.receipts.get().await.unwrap().current.clone();
    let other = ReceiptKey::from_seed(&[0x5a; 32]);
    let disowning = operator.sign_head(&DrawHead { receipt_keys: vec![other.public().id()], ..head.clone() });
    let rotated = ReceiptKeyRing { current: other.public(), next: None, previous: None };
    let tricked = rotated.published(&id, Some(disowning));
    let tricked_file = std::env::temp_dir().join(format!("dropped-{id}-tricked-keys.json"));
    std::fs::write(&tricked_file, serde_json::to_vec(&tricked).unwrap()).unwrap();
    let (_, dropped) = entries.iter().find(|(user, _)| *user == "dropped").unwrap();
    let receipt = dropped["receipt"].as_str().unwrap();
    let python = std::process::Command::new("python3")
        .arg(repo_root().join("tests/draw_v2.py"))
        .args(["--receipt", receipt, "--keys"])
        .arg(&tricked_file)
        .arg("--draw")
        .arg(&draw_file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&python.stdout);
    assert_eq!(python.status.code(), Some(3), "the second implementation: {said}");
    assert!(said.contains("contradicts its terms"), "{said}");
    let receipt_file = std::env::temp_dir().join(format!("dropped-{id}-receipt.json"));
    std::fs::write(&receipt_file, serde_json::to_vec(&json!({ "receipt": receipt, "keys": tricked })).unwrap())
        .unwrap();
    let verifier = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join("ticketgrab-verify");
    assert!(verifier.exists(), "{} (the test command builds the workspace's binaries first)", verifier.display());
    let rust = std::process::Command::new(&verifier)
        .arg("receipt")
        .arg(&receipt_file)
        .arg("--draw")
        .arg(&draw_file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&rust.stdout);
    assert_eq!(rust.status.code(), Some(3), "ticketgrab-verify: {said}{}", String::from_utf8_lossy(&rust.stderr));
    assert!(said.contains("contradicts its terms"), "{said}");

    // A keys document naming another commitment than the draw's contradicts it: nothing proven.
    let mut contradicting = keys.clone();
    contradicting["committed"] = json!([{ "key_id": other.public().id(), "public_key": other.public().encoded() }]);
    let contradicting_file = std::env::temp_dir().join(format!("dropped-{id}-contradicting-keys.json"));
    std::fs::write(&contradicting_file, serde_json::to_vec(&contradicting).unwrap()).unwrap();
    let python = std::process::Command::new("python3")
        .arg(repo_root().join("tests/draw_v2.py"))
        .args(["--receipt", receipt, "--keys"])
        .arg(&contradicting_file)
        .arg("--draw")
        .arg(&draw_file)
        .output()
        .unwrap();
    assert_eq!(python.status.code(), Some(1), "{}", String::from_utf8_lossy(&python.stdout));
    std::fs::write(&receipt_file, serde_json::to_vec(&json!({ "receipt": receipt, "keys": contradicting })).unwrap())
        .unwrap();
    let rust = std::process::Command::new(&verifier)
        .arg("receipt")
        .arg(&receipt_file)
        .arg("--draw")
        .arg(&draw_file)
        .output()
        .unwrap();
    assert_eq!(rust.status.code(), Some(1), "{}", String::from_utf8_lossy(&rust.stdout));
}

/// A ballot may ask each entry for work (ticket-pow/v1): without it, with a wrong nonce or with
/// another user's, the entry is refused and nothing is written; with it, entered.
#[tokio::test]
async fn a_ballot_asking_for_work_enters_only_who_did_it() {
    let app = TestApp::new().await;
    let opens = OffsetDateTime::now_utc() + Duration::minutes(5);
    let commitment = draw::commitment(&[6; 32]);
    for bits in [json!(0), json!(29), json!("12")] {
        let mut body = ballot(&fresh_event_id(), 10, opens, &commitment);
        body["proof_of_work_bits"] = bits.clone();
        let refused = app.release_body(&body).await;
        assert_eq!(refused.body["errors"][0]["field"], "proof_of_work_bits", "{bits}: {}", refused.body);
    }
    let mut first_come = ballot(&fresh_event_id(), 10, opens, &commitment);
    first_come["sale_mode"] = json!("first_come");
    first_come.as_object_mut().unwrap().remove("draw_commitment");
    first_come["proof_of_work_bits"] = json!(12);
    assert_eq!(app.release_body(&first_come).await.body["errors"][0]["field"], "proof_of_work_bits");

    let id = fresh_event_id();
    let mut body = ballot(&id, 10, opens, &commitment);
    body["proof_of_work_bits"] = json!(12);
    let released = app.release_body(&body).await;
    assert_eq!(released.body["draw"]["proof_of_work_bits"], 12, "{}", released.body);
    let enter = |user: &'static str, work: Option<String>| {
        let mut req = for_user(for_event(fixture("entry.json"), &id), user);
        if let Some(nonce) = work {
            req = with_body(req, &json!({ "proof_of_work": nonce }));
        }
        app.call(Function::Grab, req)
    };
    let user = shared::domain::UserId::parse("worker").unwrap();
    let other = shared::domain::UserId::parse("idler").unwrap();
    let theirs = proof_of_work::solve(&id, &other, 12);
    assert!(!proof_of_work::verify(&id, &user, 12, &theirs), "the pair chosen so the nonce is not also ours");
    // Three refusals and two entries: the route's limit is five a window. The third is this
    // user's own solution with a leading zero: the same number, not its one canonical form.
    let mine = proof_of_work::solve(&id, &user, 12);
    for work in [None, Some(theirs), Some(format!("0{mine}"))] {
        let refused = enter("worker", work.clone()).await;
        assert_eq!((refused.status, refused.code()), (403, "BAD_PROOF_OF_WORK"), "{work:?}: {}", refused.body);
    }
    assert_eq!(app.functions.store.entry_count(&id, EntryShards::CURRENT).await.unwrap(), 0, "nothing entered");
    assert_eq!(enter("worker", Some(mine.clone())).await.status, 201);
    assert_eq!(enter("worker", Some(mine)).await.status, 200, "the same entry again");
}

fn with_body_of_draw(id: &EventId, reveal: &Value) -> Value {
    with_body(for_event(fixture("release-draw.json"), id), reveal)
}

/// A draw one ask cannot finish (a large ballot's: release's 15 s) goes on from where each ask
/// stopped: asked a wave of the entries' shards, then a chunk of places at a time, and by two
/// organisers at once, it lays down the same draw a single ask would, each number once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_in_many_asks_at_once_lays_down_the_one_draw() -> Result<(), draw::DrawFault> {
    use shared::handlers::draws::draw::{Draw, DrawStep, Reveal};
    let app = TestApp::for_mail(60).await;
    let id = fresh_event_id();
    let secret = secret();
    let draw_from = OffsetDateTime::now_utc() + Duration::seconds(30);
    let released = app.release_body(&ballot(&id, 500, draw_from, &draw::commitment(&secret))).await;
    assert_eq!(released.status, 201, "{}", released.body);
    let users: Vec<String> = (0..1_200).map(|i| format!("fan-{i:04}")).collect();
    let answered: Vec<Reply> =
        futures::stream::iter(users.iter().map(|u| app.enter_surely(&id, u))).buffer_unordered(50).collect().await;
    assert!(answered.iter().all(|r| r.status == 201), "one entry each");
    let mut user_of: HashMap<String, String> = HashMap::new();
    for user in &users {
        let entry = app.entry(&id, user).await.body;
        user_of.insert(entry["leaf"].as_str().expect("a leaf").to_owned(), user.clone());
    }
    until(draw_from).await;

    // Every ask does the least it may: one wave of shards, or one chunk of 500 places.
    let draw = Draw::new(
        app.functions.store.clone(),
        app.functions.gate.clone(),
        app.functions.rebuilder.clone(),
        app.courier(),
        app.settings.hash.receipts.clone(),
    )
    .paced(std::time::Duration::ZERO, std::time::Duration::ZERO);
    let organiser = |draw: Draw| {
        let id = id.clone();
        let reveal = Reveal { secret: hex::encode(&secret), beacon_signature: None };
        async move {
            let mut steps = Vec::new();
            loop {
                match draw.draw(&id, &reveal, OffsetDateTime::now_utc()).await.expect("an ask") {
                    DrawStep::Done(summary) => return (steps, summary),
                    DrawStep::Drawing(p) => steps.push((p.shards_read, p.places_laid, p.shards)),
                }
            }
        }
    };
    let ((one, first), (other, second)) = tokio::join!(organiser(draw.clone()), organiser(draw));
    assert_eq!((first.entrants, first.winners, first.waiting), (1_200, Some(500), Some(500)), "{first:?}");
    assert_eq!((&first.root, first.drawn_at), (&second.root, second.drawn_at), "one draw, whoever finished it");
    let steps = one.len() + other.len();
    assert!(steps >= 256 / 16, "one wave an ask: {one:?} {other:?}");
    for steps in [&one, &other] {
        assert!(steps.windows(2).all(|w| (w[0].0, w[0].1) <= (w[1].0, w[1].1)), "progress only grows: {steps:?}");
        assert!(steps.iter().all(|s| s.2 == 256), "256 shards: {steps:?}");
    }

    // The draw a single ask would make: the published one checks, and is the entrants' leaves
    // shuffled by the secret.
    let (_, published) = app.whole_draw(&id).await;
    assert_eq!(published.verify(), Ok(()));
    assert_eq!(published.root, first.root);
    let mut leaves: Vec<String> = user_of.keys().cloned().collect();
    leaves.sort();
    assert_eq!(published.order, draw::draw(Algorithm::V2, &leaves, &secret, b""));
    let in_order: Vec<String> = published.order.iter().map(|leaf| user_of[leaf].clone()).collect();

    // Exactly the first 500 hold, once each, and are mailed once; the next 500 wait in order.
    let cache = app.cache(&id).await;
    let holders: BTreeSet<String> = cache.holdings.keys().cloned().collect();
    assert_eq!(holders, in_order[..500].iter().cloned().collect(), "the winners hold, nobody else");
    assert_eq!(cache.held(), (1..=500).collect::<Vec<_>>(), "every number held once");
    assert_eq!(app.deliver_all().await, 500, "one order per winner, none twice for the second organiser");
    let mut redis = app.redis.clone();
    let waiting: Vec<String> = redis.zrange(keys::wait(&id), 0, -1).await.unwrap();
    assert_eq!(waiting, in_order[500..1_000], "the waitlist is the draw's order after the winners");
    Ok(())
}

/// The roll is read whole or not at all: a shard's part missing (an empty shard's too: it is not
/// told from one never read) or its parts disagreeing on their count fails the read, and the draw
/// records nothing from it.
#[tokio::test]
async fn a_roll_with_a_part_missing_or_disagreeing_is_refused() {
    use shared::store::draws::RollEntry;
    let app = TestApp::new().await;
    let store = &app.functions.store;
    let id = fresh_event_id();
    let shards = EntryShards::new(3).unwrap();
    let entry = |i: u64| {
        let mut leaf = [0u8; 32];
        leaf[..8].copy_from_slice(&i.to_be_bytes());
        RollEntry { leaf, user: UserId::parse(&format!("roll-{i:06}-{}", "x".repeat(50))).unwrap() }
    };
    // Shard 0 in two parts (6,000 entrants of some 90 bytes), shard 1 empty, shard 2 one.
    store.write_roll(&id, 0, (0..6_000).map(entry).collect()).await.unwrap();
    store.write_roll(&id, 1, Vec::new()).await.unwrap();
    store.write_roll(&id, 2, vec![entry(9_999)]).await.unwrap();
    assert_eq!(store.roll(&id, shards).await.unwrap().len(), 6_001);

    let part = |shard: u32, part: u32| {
        [("PK".to_owned(), S(key::roll(&id, shard))), ("SK".to_owned(), S(key::roll_part(part)))].into()
    };
    let delete = |shard, n| store.client().delete_item().table_name(store.table()).set_key(Some(part(shard, n))).send();
    delete(1, 0).await.unwrap();
    assert!(store.roll(&id, shards).await.is_err(), "an empty shard's part gone");
    store.write_roll(&id, 1, Vec::new()).await.unwrap();
    delete(0, 1).await.unwrap();
    assert!(store.roll(&id, shards).await.is_err(), "a part gone");
    store.write_roll(&id, 0, (0..6_000).map(entry).collect()).await.unwrap();
    assert_eq!(store.roll(&id, shards).await.unwrap().len(), 6_001, "written again, whole");
    let first = store.client().get_item().table_name(store.table()).set_key(Some(part(0, 0))).send().await.unwrap();
    let mut first = first.item.unwrap();
    first.insert("parts".into(), aws_sdk_dynamodb::types::AttributeValue::N("3".into()));
    store.client().put_item().table_name(store.table()).set_item(Some(first)).send().await.unwrap();
    assert!(store.roll(&id, shards).await.is_err(), "parts that disagree on their count");
}
