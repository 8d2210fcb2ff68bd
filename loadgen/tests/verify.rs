//! `ticketgrab-verify` run as an auditor runs it, on draws and red-packet events made by the
//! product; and the second implementations (tests/draw_v1.py, tests/split_v1.py) against the
//! product's own.

use std::{path::PathBuf, process::Command};

use serde_json::json;
use shared::domain::{
    draw::{self, Published},
    red_packet::{self, AmountSeed},
};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// The verifier on a JSON document: its exit code and what it printed.
fn verify(kind: &str, document: &serde_json::Value, extra: &[&str]) -> (i32, String) {
    let file = std::env::temp_dir().join(format!("verify-{}.json", uuid::Uuid::now_v7().simple()));
    std::fs::write(&file, document.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ticketgrab-verify")).arg(kind).arg(&file).args(extra).output().unwrap();
    std::fs::remove_file(&file).ok();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn entrants(n: usize) -> Vec<String> {
    draw::entrants((0..n).map(|i| format!("fan-{i}")))
}

#[test]
fn a_draw_checks_out_and_tampering_with_it_fails_naming_why() {
    let published = Published::new(entrants(2_000), &[42; 32], None).unwrap();
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
        serde_json::to_value(Published::new(entrants(100), &[42; 32], Some(chain.round(5))).unwrap()).unwrap();
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
        let published = Published::new(entrants(n), &[n as u8; 32], beacon).unwrap();
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
