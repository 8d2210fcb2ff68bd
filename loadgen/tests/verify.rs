//! `ticketgrab-verify` run as an auditor runs it, on draws (whole or in pages), entry receipts,
//! red-packet events and the vectors made by the product; and the second implementations
//! (tests/draw_v1.py, tests/split_v1.py) against the product's own.

use std::{path::PathBuf, process::Command};

use serde_json::json;
use shared::domain::{
    EventId,
    draw::{self, Algorithm, EntryKey, PAGE_PLACES, Published},
    entry_receipt::{DrawHead, ReceiptKey, ReceiptKeyRing},
    key_rotation::Staged,
    red_packet::{self, AmountSeed},
};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// A JSON document in a file of its own, removed when dropped.
struct Temp(PathBuf);

impl Temp {
    fn new(document: &serde_json::Value) -> Self {
        let file = std::env::temp_dir().join(format!("verify-{}.json", uuid::Uuid::now_v7().simple()));
        std::fs::write(&file, document.to_string()).unwrap();
        Self(file)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

/// The verifier with these arguments: its exit code and what it printed.
fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ticketgrab-verify")).args(args).output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The verifier on a JSON document: its exit code and what it printed.
fn verify(kind: &str, document: &serde_json::Value, extra: &[&str]) -> (i32, String) {
    let file = Temp::new(document);
    run(&[&[kind, file.path()], extra].concat())
}

fn entrants(n: usize) -> Vec<String> {
    draw::entrants((0..n).map(|i| format!("fan-{i}")))
}

#[test]
fn a_draw_checks_out_and_tampering_with_it_fails_naming_why() {
    let published = Published::new(Algorithm::V1, entrants(2_000), &[42; 32], None).unwrap();
    let good = serde_json::to_value(&published).unwrap();
    let (code, said) = verify("draw", &good, &[]);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("2000 entrants"), "{said}");

    let mut tampered = good.clone();
    let first = tampered["order"][0].clone();
    tampered["order"][0] = tampered["order"][1].clone();
    tampered["order"][1] = first;
    let (code, said) = verify("draw", &tampered, &[]);
    assert_eq!((code, said.contains("place 1")), (1, true), "{said}");

    let mut changed = good.clone();
    changed["entrants"].as_array_mut().unwrap().pop();
    let (code, said) = verify("draw", &changed, &[]);
    assert_eq!((code, said.contains("entrants")), (1, true), "the count names the drop: {said}");
    changed["entrant_count"] = json!(1_999);
    let (code, said) = verify("draw", &changed, &[]);
    assert_eq!((code, said.contains("root")), (1, true), "{said}");

    let mut wrong = good.clone();
    wrong["secret"] = json!("11".repeat(32));
    let (code, said) = verify("draw", &wrong, &[]);
    assert_eq!((code, said.contains("commitment")), (1, true), "{said}");

    let (code, _) = verify("draw", &json!({"not": "a draw"}), &[]);
    assert_eq!(code, 2, "unreadable input");

    // With a beacon round: checked against its chain's key.
    let chain = shared::domain::beacon::LocalChain::new(&[3; 32]);
    let beaconed =
        serde_json::to_value(Published::new(Algorithm::V1, entrants(100), &[42; 32], Some(chain.round(5))).unwrap())
            .unwrap();
    assert_eq!(verify("draw", &beaconed, &[]).0, 0);
    let mut forged = beaconed.clone();
    forged["beacon"]["round"] = json!(6);
    let (code, said) = verify("draw", &forged, &[]);
    assert_eq!((code, said.contains("not the chain's for round 6")), (1, true), "{said}");
}

#[test]
fn a_red_packet_event_checks_out_and_a_wrong_amount_fails() {
    let seed = AmountSeed::generate();
    let event = json!({
        "id": "packets", "capacity": 100,
        "red_packet": {"total": 8_888, "currency": "CNY", "commitment": seed.commitment(), "algorithm": red_packet::ALGORITHM},
        "red_packet_seed": seed.to_hex(),
    });
    let split = red_packet::split(&seed, 8_888, 100);
    let (code, said) = verify("red-packet", &event, &["--ticket", "7", "--amount", &split[6].to_string()]);
    assert_eq!(code, 0, "{said}");
    let (code, said) = verify("red-packet", &event, &["--ticket", "7", "--amount", &(split[6] + 1).to_string()]);
    assert_eq!((code, said.contains("ticket 7")), (1, true), "{said}");
    let mut other = event.clone();
    other["red_packet_seed"] = json!(AmountSeed::generate().to_hex());
    let (code, said) = verify("red-packet", &other, &[]);
    assert_eq!((code, said.contains("commitment")), (1, true), "{said}");
    let mut early = event.clone();
    early.as_object_mut().unwrap().remove("red_packet_seed");
    assert_eq!(verify("red-packet", &early, &[]).0, 1, "no seed before the sale's end");
}

#[test]
fn a_second_implementation_agrees_on_the_root_and_the_order() {
    let chain = shared::domain::beacon::LocalChain::new(&[7; 32]);
    for (n, beacon) in [(1, None), (2, None), (33, None), (500, None), (500, Some(chain.round(9_001)))] {
        let published = Published::new(Algorithm::V1, entrants(n), &[n as u8; 32], beacon).unwrap();
        let file = std::env::temp_dir().join(format!("draw-{}.json", uuid::Uuid::now_v7().simple()));
        std::fs::write(&file, serde_json::to_string(&published).unwrap()).unwrap();
        let out = Command::new("python3").arg(repo().join("tests/draw_v1.py")).arg(&file).output().expect("python3");
        std::fs::remove_file(&file).ok();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(published.root.as_str()), "the root of {n}");
        assert_eq!(lines.map(str::to_owned).collect::<Vec<_>>(), published.order, "the order of {n}");
    }
}

fn event() -> EventId {
    EventId::parse("evt-audited").unwrap()
}

/// `n` entrants' leaves in `event()`, sorted, each of a key of its own.
fn leaves(n: usize) -> Vec<String> {
    draw::entrants((0..n).map(|i| {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&(i as u64).to_le_bytes());
        EntryKey::from_bytes(key).leaf(&event())
    }))
}

/// A v2 draw as the event publishes it whole, with its terms: a ballot of `capacity` places, or
/// a fair open admitting `rate` a second.
fn v2_draw(leaves: Vec<String>, capacity: u32, rate: Option<u32>) -> Published {
    Published {
        event_id: Some(event().as_str().to_owned()),
        entries_close: Some("2026-11-27T10:00:00Z".into()),
        drawn_at: Some("2026-11-27T10:00:05Z".into()),
        capacity: Some(capacity),
        admission_rate: rate,
        ..Published::new(Algorithm::V2, leaves, &[42; 32], None).unwrap()
    }
}

#[test]
fn a_v2_draw_in_pages_joins_and_checks_out_in_any_order_and_not_with_a_page_missing() {
    let n = 2 * PAGE_PLACES + 123;
    let whole = v2_draw(leaves(n), 100, None);
    let pages: Vec<Temp> =
        (0..n).step_by(PAGE_PLACES).map(|from| Temp::new(&serde_json::to_value(whole.page(from)).unwrap())).collect();
    assert_eq!(pages.len(), 3);
    let paths: Vec<&str> = pages.iter().map(Temp::path).collect();
    let (code, said) = run(&[&["draw"], &paths[..]].concat());
    assert_eq!(code, 0, "{said}");
    assert!(said.contains(&format!("{n} entrants")) && said.contains("3 pages joined"), "{said}");
    // A page shows no entrants: they are the order's leaves sorted.
    let first = std::fs::read_to_string(&pages[0].0).unwrap();
    assert!(!first.contains("\"entrants\""), "{first}");
    // In any order; and the whole document alone.
    let (code, said) = run(&["draw", paths[2], paths[0], paths[1]]);
    assert_eq!(code, 0, "{said}");
    let (code, said) = verify("draw", &serde_json::to_value(&whole).unwrap(), &[]);
    assert_eq!(code, 0, "{said}");
    // A page missing, or given twice: not one draw.
    let (code, said) = run(&["draw", paths[0], paths[2]]);
    assert_eq!((code, said.contains("pages")), (1, true), "{said}");
    let (code, said) = run(&["draw", paths[0], paths[1], paths[1], paths[2]]);
    assert_eq!((code, said.contains("pages")), (1, true), "{said}");
    // Two places swapped within a page.
    let mut swapped = serde_json::to_value(whole.page(PAGE_PLACES)).unwrap();
    let order = swapped["order"].as_array_mut().unwrap();
    order.swap(0, 1);
    let swapped = Temp::new(&swapped);
    let (code, said) = run(&["draw", paths[0], swapped.path(), paths[2]]);
    assert_eq!((code, said.contains(&format!("place {}", PAGE_PLACES + 1))), (1, true), "{said}");
}

/// What `loadgen --receipt-out` writes.
fn shown(receipt: &str, entry_key: Option<&EntryKey>, keys: &serde_json::Value) -> serde_json::Value {
    let mut doc = json!({ "receipt": receipt, "keys": keys });
    if let Some(k) = entry_key {
        doc["entry_key"] = json!(k.to_hex());
    }
    doc
}

#[test]
fn a_receipt_shows_its_place_and_its_leaf_left_out_proves_an_exclusion() {
    let signer = ReceiptKey::from_seed(&[5; 32]);
    let ring = ReceiptKeyRing::of(&Staged::only(signer.clone()));
    let mine = EntryKey::generate();
    let leaf = mine.leaf(&event());
    let receipt = signer.issue(&event(), &leaf, "2026-11-27T09:59:00Z", None);
    let mut all = leaves(40);
    all.push(leaf.clone());
    let ballot = v2_draw(draw::entrants(all.clone()), 10, None);
    // The keys as GET /receipt-key gives them after a draw: with the draw's signed head.
    let signed = |d: &Published| {
        let head = DrawHead { receipt_keys: ring.ids(), ..DrawHead::of(d, "").expect("a whole draw's head") };
        ring.published(&event(), Some(signer.sign_head(&head)))
    };
    let keys = signed(&ballot);
    let place = ballot.order.iter().position(|l| *l == leaf).unwrap() + 1;
    let ballot_file = Temp::new(&serde_json::to_value(ballot.page(0)).unwrap());
    let check = |doc: &serde_json::Value, draw: &Temp| {
        let file = Temp::new(doc);
        run(&["receipt", file.path(), "--draw", draw.path()])
    };

    // In the draw: its place, and whether it won.
    let (code, said) = check(&shown(&receipt, Some(&mine), &keys), &ballot_file);
    assert_eq!(code, 0, "{said}");
    let won = if place <= 10 { "it won" } else { "it did not win" };
    assert!(said.contains(&format!("place {place} of 41")) && said.contains(won), "{said}");
    assert!(said.contains("entry key hashes to its leaf"), "{said}");
    assert_eq!(check(&shown(&receipt, None, &keys), &ballot_file).0, 0, "the key is optional");

    // A fair open: when the place is admitted.
    let open = Temp::new(&serde_json::to_value(v2_draw(draw::entrants(all.clone()), 10, Some(4)).page(0)).unwrap());
    let (code, said) = check(&shown(&receipt, Some(&mine), &keys), &open);
    assert_eq!(code, 0, "{said}");
    let second = (place - 1) / 4;
    assert!(said.contains(&format!("admitted {second} s after the draw")), "{said}");

    // Forged: another's payload under this signature; a stranger's key claiming this key's id;
    // another entrant's key shown for this leaf.
    let (_, signature) = receipt.rsplit_once('.').unwrap();
    let other = signer.issue(&event(), &leaves(1)[0], "2026-11-27T09:59:00Z", None);
    let (other_head, _) = other.rsplit_once('.').unwrap();
    let (code, said) = check(&shown(&format!("{other_head}.{signature}"), None, &keys), &ballot_file);
    assert_eq!((code, said.contains("does not check")), (1, true), "{said}");
    let stranger = ReceiptKey::from_seed(&[6; 32]);
    let payload = json!({"k": signer.public().id(), "e": event(), "l": leaf, "t": "2026-11-27T09:59:00Z"});
    let (code, said) = check(&shown(&stranger.sign(payload.to_string().as_bytes()), None, &keys), &ballot_file);
    assert_eq!((code, said.contains("signature")), (1, true), "{said}");
    let (code, said) =
        check(&shown(&stranger.issue(&event(), &leaf, "2026-11-27T09:59:00Z", None), None, &keys), &ballot_file);
    assert_eq!((code, said.contains("key")), (1, true), "an unknown key: {said}");
    let (code, said) = check(&shown(&receipt, Some(&EntryKey::generate()), &keys), &ballot_file);
    assert_eq!((code, said.contains("entry key")), (1, true), "{said}");

    // Left out: a draw made without the leaf, which recomputes and which the operator signed: the
    // receipt proves the exclusion. The same draw with no signed head (the keys of before the
    // draw), or a head that is another draw's, or the leaf cut from the published draw (it no
    // longer recomputes): anyone could make those, and they prove nothing.
    let dropped = v2_draw(leaves(40), 10, None);
    let without = Temp::new(&serde_json::to_value(dropped.page(0)).unwrap());
    let (code, said) = check(&shown(&receipt, Some(&mine), &signed(&dropped)), &without);
    assert_eq!((code, said.contains("left out an entry it accepted")), (3, true), "{said}");
    let unsigned = ring.published(&event(), None);
    let (code, said) = check(&shown(&receipt, Some(&mine), &unsigned), &without);
    assert_eq!((code, said.contains("proves nothing")), (1, true), "{said}");
    let (code, said) = check(&shown(&receipt, Some(&mine), &keys), &without);
    assert_eq!((code, said.contains("not the one its signed head names")), (1, true), "{said}");
    let mut cut = serde_json::to_value(ballot.page(0)).unwrap();
    cut["order"].as_array_mut().unwrap().retain(|l| l.as_str() != Some(leaf.as_str()));
    cut["entrant_count"] = json!(40);
    let cut = Temp::new(&cut);
    let (code, said) = check(&shown(&receipt, None, &keys), &cut);
    assert_eq!((code, said.contains("does not check out")), (1, true), "{said}");
    // A key of anyone's own, its receipt and head: the head is checked against the keys given, so
    // the receipt must be checked against keys the operator published (kept with it).
    let forger = ReceiptKey::from_seed(&[9; 32]);
    let forged_ring = ReceiptKeyRing::of(&Staged::only(forger.clone()));
    let forged_receipt = forger.issue(&event(), &EntryKey::generate().leaf(&event()), "2026-11-27T09:59:00Z", None);
    let forged_keys = forged_ring.published(&event(), Some(signer.sign_head(&DrawHead::of(&dropped, "").unwrap())));
    let (code, said) = check(&shown(&forged_receipt, None, &forged_keys), &without);
    assert_eq!((code, said.contains("draw head does not check")), (1, true), "a head the forger cannot sign: {said}");
    // The operator's own keys and genuine head, with the forger's key added beside them as
    // `previous`: the forger's receipt checks against the document, but no head vouches for its key.
    let mut padded = signed(&dropped);
    padded["previous"] = json!({ "key_id": forger.public().id(), "public_key": forger.public().encoded() });
    let (code, said) = check(&shown(&forged_receipt, None, &padded), &without);
    assert_eq!((code, said.contains("not one the signed head vouches for")), (1, true), "{said}");

    // Another event's draw: not this receipt's to judge (a draw naming no event is taken as the
    // receipt's, and says so).
    let mut elsewhere = serde_json::to_value(ballot.page(0)).unwrap();
    elsewhere["event_id"] = json!("evt-other");
    let (code, said) = check(&shown(&receipt, None, &keys), &Temp::new(&elsewhere));
    assert_eq!((code, said.contains("evt-other")), (1, true), "{said}");
    elsewhere.as_object_mut().unwrap().remove("event_id");
    let (code, said) = check(&shown(&receipt, None, &keys), &Temp::new(&elsewhere));
    assert_eq!((code, said.contains("names no event")), (0, true), "{said}");

    // A fair open's late place (dated after the close) is behind the draw, not in it; a rank on a
    // ballot, or dated before the close, is an entry the draw must hold.
    let late = signer.issue(&event(), &leaf, "2026-11-27T10:00:09Z", Some(3));
    let open_dropped = v2_draw(leaves(40), 10, Some(4));
    let open_without = Temp::new(&serde_json::to_value(open_dropped.page(0)).unwrap());
    let (code, said) = check(&shown(&late, Some(&mine), &signed(&open_dropped)), &open_without);
    assert_eq!((code, said.contains("late place") && said.contains("place is 43")), (0, true), "{said}");
    let early = signer.issue(&event(), &leaf, "2026-11-27T09:59:00Z", Some(3));
    let (code, said) = check(&shown(&early, Some(&mine), &signed(&open_dropped)), &open_without);
    assert_eq!(code, 3, "a rank dated before the close: {said}");
    let (code, said) = check(&shown(&late, Some(&mine), &signed(&dropped)), &without);
    assert_eq!(code, 3, "a rank on a ballot: {said}");
    let zero = json!({"k": signer.public().id(), "e": event(), "l": leaf, "t": "2026-11-27T10:00:09Z", "r": 0});
    let (code, _) = check(&shown(&signer.sign(zero.to_string().as_bytes()), None, &keys), &ballot_file);
    assert_eq!(code, 1, "rank 0 is no rank");

    // Unreadable: no receipt, a draw that is no file. Keys that are none do not check (docs/FAIRNESS.md
    // section 6a: a keys document whose key is not one).
    assert_eq!(check(&json!({"keys": keys}), &ballot_file).0, 2);
    assert_eq!(check(&shown(&receipt, None, &json!({"public_key": "nope"})), &ballot_file).0, 1);
    let file = Temp::new(&shown(&receipt, None, &keys));
    assert_eq!(run(&["receipt", file.path(), "--draw", "/nonexistent/draw.json"]).0, 2);
}

#[test]
fn every_vectors_file_checks_out_by_its_version() {
    for (file, version) in [
        ("fairness-v1.json", "fairness-vectors/v1"),
        ("fairness-v2.json", "fairness-vectors/v2"),
        ("fairness-documents.json", "fairness-documents/v1"),
    ] {
        let path = repo().join("tests/vectors").join(file);
        let (code, said) = run(&["vectors", path.to_str().unwrap()]);
        assert_eq!((code, said.contains(version)), (0, true), "{file}: {said}");
    }
    let (code, said) = verify("vectors", &json!({"version": "fairness-vectors/v9"}), &[]);
    assert_eq!(code, 2, "{said}");
}

/// What no vector can hold (the vectors are JSON themselves): a file naming a member twice is
/// unreadable, and one file may hold every page as an array; the Rust verifier and the Python one
/// (written from docs/FAIRNESS.md) alike.
#[test]
fn a_file_naming_a_member_twice_is_unreadable_and_one_file_may_hold_every_page() {
    let whole = v2_draw(leaves(25), 3, None);
    let text = serde_json::to_string(&whole).unwrap();
    let twice = std::env::temp_dir().join(format!("verify-{}.json", uuid::Uuid::now_v7().simple()));
    std::fs::write(&twice, text.replacen("\"capacity\":3", "\"capacity\":3,\"capacity\":4", 1)).unwrap();
    let pages = Temp::new(&json!([
        serde_json::to_value(Published {
            entrant_count: Some(25),
            from: Some(0),
            next: Some(10),
            order: whole.order[..10].to_vec(),
            ..whole.clone()
        })
        .unwrap(),
        serde_json::to_value(Published {
            entrant_count: Some(25),
            from: Some(10),
            next: None,
            order: whole.order[10..].to_vec(),
            ..whole.clone()
        })
        .unwrap(),
    ]));
    // One number in two spellings on two pages: one double, the same terms; the largest double.
    let spelled = |note: &str, from: usize, to: usize, next: Option<usize>| {
        let page = Published {
            entrant_count: Some(25),
            from: Some(from as u64),
            next: next.map(|n| n as u64),
            order: whole.order[from..to].to_vec(),
            ..whole.clone()
        };
        let text = serde_json::to_string(&page).unwrap().replacen('{', &format!("{{\"note\":{note},"), 1);
        let file = std::env::temp_dir().join(format!("verify-{}.json", uuid::Uuid::now_v7().simple()));
        std::fs::write(&file, text).unwrap();
        file
    };
    let python = |file: &str| {
        let out = Command::new("python3").arg(repo().join("tests/draw_v2.py")).arg(file).output().unwrap();
        out.status.code().unwrap()
    };
    let twice_path = twice.to_str().unwrap();
    assert_eq!((run(&["draw", twice_path]).0, python(twice_path)), (2, 2));
    assert_eq!((run(&["draw", pages.path()]).0, python(pages.path())), (0, 0));
    std::fs::remove_file(twice).ok();
    for (a, b) in [
        ("48382277801338157e-8", "483822778.01338154"),
        ("1.7976931348623158e308", "1.7976931348623157e308"),
        ("18446744073709551616", "1.8446744073709552e19"),
    ] {
        let (first, last) = (spelled(a, 0, 10, Some(10)), spelled(b, 10, 25, None));
        let (first, last) = (first.to_str().unwrap().to_owned(), last.to_str().unwrap().to_owned());
        let out = Command::new("python3").arg(repo().join("tests/draw_v2.py")).args([&first, &last]).output().unwrap();
        assert_eq!((run(&["draw", &first, &last]).0, out.status.code().unwrap()), (0, 0), "{a} and {b}");
        std::fs::remove_file(first).ok();
        std::fs::remove_file(last).ok();
    }
    // An integer in range is never a double: 2^64 - 1 and 2^64 are other terms.
    let (first, last) =
        (spelled("18446744073709551615", 0, 10, Some(10)), spelled("18446744073709551616", 10, 25, None));
    let (first, last) = (first.to_str().unwrap().to_owned(), last.to_str().unwrap().to_owned());
    let out = Command::new("python3").arg(repo().join("tests/draw_v2.py")).args([&first, &last]).output().unwrap();
    assert_eq!((run(&["draw", &first, &last]).0, out.status.code().unwrap()), (1, 1));
    std::fs::remove_file(first).ok();
    std::fs::remove_file(last).ok();
    // Not JSON here (docs/FAIRNESS.md section 8): NaN, a byte-order mark, a lone surrogate, a number
    // too large for a double; `-0` a double where an integer belongs; no page at all.
    let capacity = "\"capacity\":3";
    for (what, text) in [
        ("NaN", text.replacen(capacity, "\"capacity\":NaN", 1)),
        ("a byte-order mark", format!("\u{feff}{text}")),
        ("a lone surrogate", text.replacen(capacity, "\"capacity\":3,\"note\":\"\\ud800\"", 1)),
        ("1e400", text.replacen(capacity, "\"capacity\":3,\"note\":1e400", 1)),
        (
            "an integer of 310 digits",
            text.replacen(capacity, &format!("\"capacity\":3,\"note\":1{}", "0".repeat(309)), 1),
        ),
        ("-0", text.replacen(capacity, "\"capacity\":-0", 1)),
        ("no page", "[]".to_owned()),
    ] {
        let file = std::env::temp_dir().join(format!("verify-{}.json", uuid::Uuid::now_v7().simple()));
        std::fs::write(&file, &text).unwrap();
        let path = file.to_str().unwrap();
        assert_eq!((run(&["draw", path]).0, python(path)), (2, 2), "{what}");
        std::fs::remove_file(&file).ok();
    }
}
