//! A fair open (docs/DESIGN.md section 11): users join a queue before the sale; at its time the
//! organiser reveals the committed secret and the places taken so far are shuffled by the draw;
//! the queue admits a wave a second in that order, each user with a token verify-hash requires;
//! later arrivals queue behind. The grab script still decides among those admitted.

use std::collections::{HashMap, HashSet};

use futures::StreamExt;
use serde_json::{Value, json};
use shared::{
    domain::{
        EventId,
        draw::{self, Algorithm, ProofStep},
        event::rfc3339,
        hex,
    },
    http::routes::Function,
};
use time::{Duration, OffsetDateTime};

use crate::{
    cancel_and_wait::as_member,
    helpers::{Reply, TestApp, fixture, for_event, for_user, fresh_event_id, repo_root, with_body, with_query},
};

fn fair_open(id: &EventId, capacity: u32, opens: OffsetDateTime, commitment: &str) -> Value {
    json!({
        "id": id.as_str(), "title": "The fair open", "capacity": capacity,
        "sale_mode": "fair_open", "draw_commitment": commitment, "admission_rate": 100,
        "queue_opens": rfc3339(OffsetDateTime::now_utc() - Duration::minutes(1)),
        "sale_start": rfc3339(opens), "sale_end": rfc3339(opens + Duration::hours(1)),
    })
}

impl TestApp {
    async fn join_queue(&self, event: &EventId, user: &str) -> Reply {
        self.call(Function::Grab, for_user(for_event(fixture("queue-join.json"), event), user)).await
    }

    /// Joins, retrying a `503` (two joins of one user at once: DynamoDB cancels one).
    async fn join_queue_surely(&self, event: &EventId, user: &str) -> Reply {
        loop {
            let reply = self.join_queue(event, user).await;
            if reply.status != 503 {
                return reply;
            }
        }
    }

    async fn queue_place(&self, event: &EventId, user: &str) -> Reply {
        self.call(Function::Grab, for_user(for_event(fixture("queue.json"), event), user)).await
    }

    async fn hash_admitted(&self, event: &EventId, user: &str, admission: Option<&str>) -> Reply {
        let mut req = for_user(for_event(fixture("verify-hash.json"), event), user);
        if let Some(token) = admission {
            req = with_query(req, &[("admission", token)]);
        }
        self.call(Function::VerifyHash, req).await
    }

    async fn grab_with(&self, event: &EventId, user: &str, hash: &str) -> Reply {
        let req = for_user(with_body(for_event(fixture("grab.json"), event), &json!({ "hash": hash })), user);
        self.call(Function::Grab, req).await
    }

    async fn draw_fair_open(&self, event: &EventId, secret: &[u8; 32]) -> Reply {
        let reveal = json!({ "secret": hex::encode(secret) });
        let req = as_member(with_body(for_event(fixture("release-draw.json"), event), &reveal), "organiser", "[admin]");
        self.call(Function::Release, req).await
    }

    /// Waits for the user's admission, then asks verify-hash with it and grabs.
    async fn admitted_grab(&self, event: &EventId, user: &str) -> Reply {
        loop {
            let place = self.queue_place(event, user).await;
            if let Some(token) = place.body["admission"].as_str() {
                let hash = self.hash_admitted(event, user, Some(token)).await;
                assert_eq!(hash.status, 200, "{user}: {}", hash.body);
                return self.grab_with(event, user, hash.body["hash"].as_str().unwrap()).await;
            }
            assert_eq!(place.body["status"], "WAITING", "{user}: {}", place.body);
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_open_of_100_tickets_admits_2000_queued_users_in_the_draws_order_and_the_first_100_win() {
    let app = TestApp::for_mail(60).await;
    let id = fresh_event_id();
    let secret: [u8; 32] = *uuid::Uuid::now_v7().as_bytes().repeat(2).first_chunk().unwrap();
    // The shuffle takes who joined before the open (entries close then, fixed at release): room
    // for 2,200 joins while the whole suite shares the emulator (they take some 5 s alone).
    let opens = OffsetDateTime::now_utc() + Duration::seconds(60);
    let released = app.release_body(&fair_open(&id, 100, opens, &draw::commitment(&secret))).await;
    assert_eq!(released.status, 201, "{}", released.body);
    assert_eq!(released.body["queue"]["admission_rate"], 100);

    // 2,000 users join before the open, 200 of them twice at once: one place each.
    let users: Vec<String> = (0..2_000).map(|i| format!("q-{i:04}")).collect();
    let attempts: Vec<&String> = users.iter().chain(users.iter().take(200)).collect();
    let joining = std::time::Instant::now();
    let answered: Vec<(&String, Reply)> =
        futures::stream::iter(attempts.iter().map(|u| async { (*u, app.join_queue_surely(&id, u).await) }))
            .buffer_unordered(32)
            .collect()
            .await;
    eprintln!("2,200 joins took {} ms (the close leaves 60 s)", joining.elapsed().as_millis());
    // Each place's leaf and receipt, as its join told them: the receipt checks and names the leaf.
    let ring = app.receipt_keys(&id).await;
    let mut user_of: HashMap<String, String> = HashMap::new();
    for (user, reply) in &answered {
        let leaf = reply.body["leaf"].as_str().expect("a place's leaf").to_owned();
        let receipt = ring.verify(reply.body["receipt"].as_str().unwrap()).expect("a receipt that checks");
        assert_eq!((receipt.leaf.as_str(), receipt.late), (leaf.as_str(), None));
        user_of.insert(leaf, (*user).clone());
    }
    assert_eq!(user_of.len(), 2_000, "one leaf per user");
    let replies: Vec<Reply> = answered.into_iter().map(|(_, r)| r).collect();
    let created = replies.iter().filter(|r| r.status == 201).count();
    let again = replies.iter().filter(|r| r.status == 200).count();
    assert_eq!((created, again), (2_000, 200), "one place per user");
    assert_eq!(replies[0].body["status"], "QUEUED", "{}", replies[0].body);
    assert_eq!(replies[0].body["shuffle_at"].as_str(), Some(rfc3339(opens).as_str()));

    // Nobody gets a hash without an admission, nor with another's, nor with a verify hash.
    let no_admission = app.hash_admitted(&id, "q-0001", None).await;
    assert_eq!(no_admission.code(), "NOT_ADMITTED", "{}", no_admission.body);

    let mut left = opens - OffsetDateTime::now_utc();
    while left.is_positive() {
        tokio::time::sleep(left.unsigned_abs()).await;
        left = opens - OffsetDateTime::now_utc();
    }
    let drawn = app.draw_fair_open(&id, &secret).await;
    assert_eq!(drawn.status, 200, "{}", drawn.body);
    assert_eq!((drawn.body["sale_mode"].as_str(), drawn.body["entrants"].as_u64()), (Some("fair_open"), Some(2_000)));
    assert!(drawn.body.get("winners").is_none(), "a fair open's draw hands out nothing: {}", drawn.body);

    let (pages, published) = app.whole_draw(&id).await;
    assert_eq!(published.verify(), Ok(()));
    assert!(!serde_json::to_string(&pages).unwrap().contains("q-0"), "no user id published");
    let file = std::env::temp_dir().join(format!("fair-open-{id}.json"));
    std::fs::write(&file, serde_json::to_vec(&published).unwrap()).unwrap();
    let out =
        std::process::Command::new("python3").arg(repo_root().join("tests/draw_v2.py")).arg(&file).output().unwrap();
    let theirs: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().skip(1).map(str::to_owned).collect();
    assert_eq!(theirs, published.order, "tests/draw_v2.py agrees");
    let in_order: Vec<String> = published.order.iter().map(|leaf| user_of[leaf].clone()).collect();

    // The queue tells each their place in the draw's order, and their entry proves it from their
    // leaf; a late arrival queues behind, with a receipt naming its rank.
    for (i, user) in in_order.iter().enumerate().step_by(97) {
        let place = app.queue_place(&id, user).await.body;
        assert_eq!(place["position"].as_u64(), Some(i as u64 + 1), "{place}");
    }
    for user in [&in_order[0], &in_order[1_234]] {
        let entry = app.entry(&id, user).await.body;
        let leaf = entry["leaf"].as_str().unwrap();
        let proof: Vec<ProofStep> = serde_json::from_value(entry["proof"].clone()).expect("a proof");
        assert!(draw::proves(Algorithm::V2, leaf, &proof, &published.root), "{entry}");
        assert_eq!(published.order[entry["draw_position"].as_u64().unwrap() as usize - 1], leaf);
        assert!(entry.get("won").is_none(), "a fair open's place wins by grabbing: {entry}");
    }
    let last = app.queue_place(&id, &in_order[1_999]).await.body;
    assert_eq!(last["status"], "WAITING", "admitted 19 s after the draw: {last}");
    let late = app.join_queue(&id, "late-comer").await;
    assert_eq!(
        (late.status, late.body["position"].as_u64(), late.body["late"].as_bool()),
        (201, Some(2_001), Some(true))
    );
    let receipt = ring.verify(late.body["receipt"].as_str().unwrap()).expect("the late place's receipt");
    assert_eq!((receipt.late.map(|r| r.get()), receipt.leaf.as_str()), (Some(1), late.body["leaf"].as_str().unwrap()));

    // An admission is its user's: another's token is refused.
    let first = app.queue_place(&id, &in_order[0]).await.body;
    let token = first["admission"].as_str().expect("the first wave is admitted at the draw").to_owned();
    assert_eq!(app.hash_admitted(&id, &in_order[5], Some(&token)).await.code(), "NOT_ADMITTED");
    assert_eq!(app.hash_admitted(&id, &in_order[0], Some("a1.1.AAAA")).await.code(), "NOT_ADMITTED");

    // The organiser's live view: the queue (2,000 shuffled, one late), admitted in waves since the
    // draw, and the three users verify-hash turned away.
    app.functions.verify_hash.tally().flush().await;
    let live = app.call(Function::Query, as_member(for_event(fixture("live.json"), &id), "organiser", "[admin]")).await;
    let entries = &live.body["entries"];
    assert_eq!(
        (entries["mode"].as_str(), entries["entered"].as_u64(), entries["late"].as_u64()),
        (Some("fair_open"), Some(2_001), Some(1)),
        "{entries}"
    );
    assert_eq!(entries["admission_rate"].as_u64(), Some(100));
    assert!(
        entries["admitted"].as_u64().is_some_and(|n| n >= 100) && entries["all_admitted_at"].is_string(),
        "{entries}"
    );
    assert_eq!(live.body["blocked"]["NOT_ADMITTED"].as_u64(), Some(3), "{}", live.body["blocked"]);

    // The first wave grabs as it is admitted, then the second as it is: exactly the first 100 of
    // the draw's order win, and the next wave finds the sale sold out.
    let first_wave: Vec<Reply> = futures::stream::iter(in_order[..100].iter().map(|u| app.admitted_grab(&id, u)))
        .buffer_unordered(50)
        .collect()
        .await;
    assert!(first_wave.iter().all(|g| g.status == 202), "every user of the first wave won");
    let second_wave: Vec<Reply> = futures::stream::iter(in_order[100..150].iter().map(|u| app.admitted_grab(&id, u)))
        .buffer_unordered(50)
        .collect()
        .await;
    assert!(second_wave.iter().all(|g| g.code() == "SOLD_OUT"), "the second wave found it sold out");
    let holders: HashSet<String> = app.cache(&id).await.holdings.keys().cloned().collect();
    let wanted: HashSet<String> = in_order[..100].iter().cloned().collect();
    assert_eq!(holders, wanted, "the first 100 admitted who grabbed, in the published order");
    assert_eq!(app.deliver_all().await, 100);
    let report = app.report(&id, None).await.body;
    let check = report["checks"].as_array().unwrap().iter().find(|c| c["name"] == "fair_open_draw").cloned();
    assert_eq!(check.expect("the fair open's check")["passed"], true, "{report}");
    assert_eq!(report["passed"], true, "{report}");
}

#[tokio::test]
async fn a_fair_opens_release_and_queue_refuse_what_they_must() {
    let app = TestApp::new().await;
    let opens = OffsetDateTime::now_utc() + Duration::minutes(5);
    let commitment = draw::commitment(&[5; 32]);
    for (change, field) in [
        (json!({ "queue_opens": null }), "queue_opens"),
        (json!({ "queue_opens": rfc3339(opens + Duration::minutes(1)) }), "queue_opens"),
        (json!({ "admission_rate": 0 }), "admission_rate"),
        (json!({ "draw_commitment": null }), "draw_commitment"),
        (json!({ "sale_mode": "first_come" }), "draw_commitment"),
    ] {
        let id = fresh_event_id();
        let mut body = fair_open(&id, 10, opens, &commitment);
        for (k, v) in change.as_object().unwrap() {
            body[k] = v.clone();
        }
        let reply = app.release_body(&body).await;
        assert_eq!(reply.status, 400, "{change}: {}", reply.body);
        let fields: Vec<&str> =
            reply.body["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
        assert!(fields.contains(&field), "{change}: {}", reply.body);
        assert!(app.functions.store.get_event(&id).await.unwrap().is_none(), "nothing stored");
    }

    let mut later = fair_open(&fresh_event_id(), 10, opens, &commitment);
    later["queue_opens"] = json!(rfc3339(opens - Duration::minutes(1)));
    assert_eq!(app.release_body(&later).await.status, 201);
    let id = EventId::parse(later["id"].as_str().unwrap()).unwrap();
    assert_eq!(app.join_queue(&id, "early").await.code(), "QUEUE_NOT_OPEN");
    assert_eq!(app.queue_place(&id, "early").await.code(), "NOT_QUEUED");
    let plain = app.open_event(5).await;
    assert_eq!(app.join_queue(&plain, "u1").await.code(), "NOT_A_FAIR_OPEN");
    assert_eq!(app.queue_place(&plain, "u1").await.code(), "NOT_A_FAIR_OPEN");
    let with_body = with_body(for_user(for_event(fixture("queue-join.json"), &id), "u1"), &json!({ "x": 1 }));
    assert_eq!(app.call(Function::Grab, with_body).await.code(), "BAD_REQUEST");
    assert_eq!(
        app.functions.store.entry_count(&id, shared::domain::sale_mode::EntryShards::CURRENT).await.unwrap(),
        0,
        "nothing joined"
    );
}
