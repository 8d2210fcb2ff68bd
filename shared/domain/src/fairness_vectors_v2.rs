//! The test vectors of docs/FAIRNESS.md's private entrants (`tests/vectors/fairness-v2.json`):
//! `ticket-draw/v2`'s leaves, draws and proofs (section 2a) and `ticket-entry-receipt/v1`'s
//! receipts (section 6a), with every intermediate. The stream, the split, the proof of work and
//! the beacon are unchanged and stay in `fairness-v1.json` ([`super::fairness_vectors`]). The
//! same three implementations check them.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{
    EventId,
    draw::{self, Algorithm::V2, EntryKey, ProofStep},
    entry_receipt::{ReceiptKey, ReceiptKeyRing},
    hex::{decode, encode as hex},
    key_rotation::Staged,
    stream::Stream,
};

pub const VERSION: &str = "fairness-vectors/v2";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vectors {
    pub version: String,
    pub leaf: Vec<LeafVector>,
    pub draw: Vec<DrawVector>,
    pub proof: Vec<ProofVector>,
    pub receipt: Vec<ReceiptVector>,
    pub head: Vec<HeadVector>,
}

/// Section 6b: a draw's signed head and whether it checks against the receipt key given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadVector {
    pub signing_seed: String,
    pub checked_with: String,
    pub payload: String,
    pub head: String,
    pub checks: bool,
    pub why: String,
}

/// Section 2a, step 2: an entry key's leaf in an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeafVector {
    pub event: String,
    pub entry_key: String,
    pub leaf: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawVector {
    pub event: String,
    /// The entries' keys, in the order they entered.
    pub entry_keys: Vec<String>,
    /// Their leaves, each once, sorted: the entrants.
    pub entrants: Vec<String>,
    pub root: String,
    pub secret: String,
    pub commitment: String,
    pub beacon_signature: Option<String>,
    pub randomness: String,
    pub seed: String,
    /// The shuffle's draws (`j` for `i` from `n - 1` down to 1), then the order of leaves.
    pub swaps: Vec<u64>,
    pub order: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofVector {
    pub entrants: Vec<String>,
    pub leaf: String,
    pub proof: Vec<ProofStep>,
    pub root: String,
}

/// Section 6a: a receipt and whether it checks against the one public key given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptVector {
    /// The signing key's 32-byte Ed25519 seed (RFC 8032's private key), hex; its public key
    /// (base64url) and id.
    pub signing_seed: String,
    pub public_key: String,
    pub key_id: String,
    /// The published key the receipt is checked against (base64url), and that key's id.
    pub checked_with: String,
    /// The payload's JSON text, as signed.
    pub payload: String,
    pub receipt: String,
    pub checks: bool,
    pub why: String,
}

/// drand's test round 3 (`super::fairness_vectors`' beacon vector).
const DRAND_ROUND_3: &str =
    "b98dae74f6a9d2ec79d75ba273dcfda86a45d589412860eb4c0fd056b00654dbf667c1b6884987c9aee0d43f8ba9db52";

fn sha(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn key(i: u32) -> [u8; 32] {
    sha(format!("ticket-grab entry key {i}").as_bytes())
}

fn event(id: &str) -> EventId {
    EventId::parse(id).expect("a vector's event id")
}

fn draw_vector(event_id: &str, keys: &[[u8; 32]], secret: [u8; 32], signature: Option<&str>) -> DrawVector {
    let ev = event(event_id);
    let entrants = draw::entrants(keys.iter().map(|k| EntryKey::from_bytes(*k).leaf(&ev)));
    let root = draw::root(V2, &entrants);
    let randomness = signature.map(|s| sha(&decode::<48>(s).expect("a signature's 48 bytes")));
    let seed = draw::seed(V2, &secret, &root, randomness.as_ref().map_or(&[][..], |r| &r[..]));
    let mut stream = Stream::new(&seed);
    let swaps = (1..entrants.len() as u64).rev().map(|i| stream.below(i + 1)).collect();
    DrawVector {
        event: event_id.into(),
        entry_keys: keys.iter().map(|k| hex(k)).collect(),
        root: hex(&root),
        secret: hex(&secret),
        commitment: draw::commitment(&secret),
        beacon_signature: signature.map(str::to_owned),
        randomness: randomness.map(|r| hex(&r)).unwrap_or_default(),
        seed: hex(&seed),
        swaps,
        order: draw::order(&entrants, &seed),
        entrants,
    }
}

fn receipt_vector(signer: [u8; 32], checked_with: [u8; 32], payload: &str, why: &str) -> ReceiptVector {
    let key = ReceiptKey::from_seed(&signer);
    let with = ReceiptKey::from_seed(&checked_with).public();
    let receipt = key.sign(payload.as_bytes());
    let ring = ReceiptKeyRing { current: with.clone(), next: None, previous: None };
    ReceiptVector {
        signing_seed: hex(&signer),
        public_key: key.public().encoded(),
        key_id: key.public().id(),
        checked_with: with.encoded(),
        payload: payload.into(),
        checks: ring.verify(&receipt).is_ok(),
        why: why.into(),
        receipt,
    }
}

/// A receipt vector whose payload is replaced after signing: the signature no longer holds.
fn changed(mut v: ReceiptVector, payload: &str) -> ReceiptVector {
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
    let signature = v.receipt.rsplit_once('.').expect("a receipt").1.to_owned();
    v.receipt = format!("TR1.{}.{signature}", URL_SAFE_NO_PAD.encode(payload));
    v.payload = payload.into();
    v.checks = false;
    v.why = "the payload changed after signing".into();
    v
}

/// The vectors, computed by this crate's code.
pub fn generate() -> Vectors {
    let keys: Vec<[u8; 32]> = (0..10).map(key).collect();
    let leaf = [("ev-1", key(0)), ("ev-2", key(0)), ("ev-1", key(1)), ("Ev_2027-x", [0; 32])]
        .into_iter()
        .map(|(e, k)| LeafVector { event: e.into(), entry_key: hex(&k), leaf: EntryKey::from_bytes(k).leaf(&event(e)) })
        .collect();
    let draw = vec![
        draw_vector("ev-1", &[], [1; 32], None),
        draw_vector("ev-1", &keys[..1], [1; 32], None),
        draw_vector("ev-1", &keys[..3], [0xab; 32], None),
        draw_vector("ev-1", &keys, [0xab; 32], None),
        draw_vector("ev-2", &keys, [0xab; 32], None),
        draw_vector("ev-1", &keys, [0xab; 32], Some(DRAND_ROUND_3)),
    ];
    let ten = &draw[3];
    let proof = [0usize, 9, 8, 4]
        .into_iter()
        .map(|i| {
            let leaf = EntryKey::from_bytes(keys[i]).leaf(&event("ev-1"));
            ProofVector {
                entrants: ten.entrants.clone(),
                proof: draw::proof(V2, &ten.entrants, &leaf).expect("an entrant"),
                leaf,
                root: ten.root.clone(),
            }
        })
        .collect();
    let (signer, stranger) = (sha(b"ticket-grab receipt key"), sha(b"another receipt key"));
    let id = ReceiptKey::from_seed(&signer).public().id();
    let first = EntryKey::from_bytes(keys[0]).leaf(&event("ev-1"));
    let payload = |late: &str| format!(r#"{{"k":"{id}","e":"ev-1","l":"{first}","t":"2027-03-01T09:30:00Z"{late}}}"#);
    let plain = receipt_vector(signer, signer, &payload(""), "a receipt of an entry");
    let receipt = vec![
        plain.clone(),
        receipt_vector(signer, signer, &payload(r#","r":7"#), "a fair open's place taken after its entries closed"),
        changed(plain, &payload("").replace("09:30", "09:31")),
        receipt_vector(stranger, signer, &payload(""), "signed by another key that names the published key's id"),
        receipt_vector(
            stranger,
            signer,
            &payload("").replace(&id, &ReceiptKey::from_seed(&stranger).public().id()),
            "signed by a key that is not published",
        ),
    ];
    let ten_head = format!(
        r#"{{"k":"{id}","e":"ev-1","algorithm":"ticket-draw/v2","commitment":"{}","root":"{}","entrant_count":10,"entries_close":"2027-03-01T10:00:00Z","drawn_at":"2027-03-01T10:00:05Z","capacity":3,"receipt_keys":["{id}"]}}"#,
        ten.commitment, ten.root
    );
    let head = vec![
        head_vector(signer, signer, &ten_head, "the head of draw 3 (a ballot of 3 places)"),
        HeadVector {
            head: {
                let signed = head_vector(signer, signer, &ten_head, "").head;
                let signature = signed.rsplit_once('.').expect("a head").1.to_owned();
                use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
                format!("TH1.{}.{signature}", URL_SAFE_NO_PAD.encode(ten_head.replace(":10,", ":9,")))
            },
            payload: ten_head.replace(":10,", ":9,"),
            checks: false,
            why: "the entrant count changed after signing".into(),
            ..head_vector(signer, signer, &ten_head, "")
        },
        head_vector(signer, signer, &ten_head.replace("ev-1", "ev-2"), "the same head for another event"),
    ];
    Vectors { version: VERSION.into(), leaf, draw, proof, receipt, head }
}

fn head_vector(signer: [u8; 32], checked_with: [u8; 32], payload: &str, why: &str) -> HeadVector {
    let key = ReceiptKey::from_seed(&signer);
    let with = ReceiptKey::from_seed(&checked_with).public();
    let head = key.sign_head_payload(payload.as_bytes());
    let ring = ReceiptKeyRing { current: with.clone(), next: None, previous: None };
    HeadVector {
        signing_seed: hex(&signer),
        checked_with: with.encoded(),
        payload: payload.into(),
        checks: ring.verify_head(&head).is_ok(),
        why: why.into(),
        head,
    }
}

/// Each vector recomputed by this crate's code: the number checked, or the first disagreement.
pub fn check(given: &Vectors) -> Result<usize, String> {
    if given.version != VERSION {
        return Err(format!("the vectors are {}, not {VERSION}", given.version));
    }
    let mut checked = 0;
    let mut agree = |what: String, ok: bool| {
        checked += 1;
        if ok { Ok(()) } else { Err(format!("{what} disagrees")) }
    };
    let bytes32 = |hex: &str| decode::<32>(hex).ok_or_else(|| format!("not 32 bytes of hex: {hex}"));
    let ev = |id: &str| EventId::parse(id).map_err(|e| format!("event {id}: {e}"));
    for (i, v) in given.leaf.iter().enumerate() {
        agree(format!("leaf {i}"), EntryKey::from_bytes(bytes32(&v.entry_key)?).leaf(&ev(&v.event)?) == v.leaf)?;
    }
    for (i, v) in given.draw.iter().enumerate() {
        let keys = v.entry_keys.iter().map(|k| bytes32(k)).collect::<Result<Vec<_>, _>>()?;
        ev(&v.event)?;
        let ours = draw_vector(&v.event, &keys, bytes32(&v.secret)?, v.beacon_signature.as_deref());
        agree(format!("draw {i}"), &ours == v)?;
    }
    for (i, v) in given.proof.iter().enumerate() {
        let ok = draw::proof(V2, &v.entrants, &v.leaf).as_ref() == Some(&v.proof)
            && hex(&draw::root(V2, &v.entrants)) == v.root
            && draw::proves(V2, &v.leaf, &v.proof, &v.root);
        agree(format!("proof {i}"), ok)?;
    }
    for (i, v) in given.receipt.iter().enumerate() {
        let signer = ReceiptKey::from_seed(&bytes32(&v.signing_seed)?);
        let with = super::entry_receipt::PublicReceiptKey::decode(&v.checked_with).map_err(|e| e.to_string())?;
        let ring = ReceiptKeyRing::of(&Staged::only(signer.clone()));
        let ring = ReceiptKeyRing { current: with, ..ring };
        let ok = signer.public().encoded() == v.public_key
            && signer.public().id() == v.key_id
            && ring.verify(&v.receipt).is_ok() == v.checks
            && (!v.checks || signer.sign(v.payload.as_bytes()) == v.receipt);
        agree(format!("receipt {i}"), ok)?;
    }
    for (i, v) in given.head.iter().enumerate() {
        let signer = ReceiptKey::from_seed(&bytes32(&v.signing_seed)?);
        let with = super::entry_receipt::PublicReceiptKey::decode(&v.checked_with).map_err(|e| e.to_string())?;
        let ring = ReceiptKeyRing { current: with, next: None, previous: None };
        let ok = ring.verify_head(&v.head).is_ok() == v.checks
            && (!v.checks || signer.sign_head_payload(v.payload.as_bytes()) == v.head);
        agree(format!("head {i}"), ok)?;
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/fairness-v2.json")
    }

    /// The file is what the code computes (`UPDATE_VECTORS=1` writes it afresh).
    #[test]
    fn the_v2_vectors_in_the_repository_are_the_codes() {
        let ours = generate();
        if std::env::var_os("UPDATE_VECTORS").is_some() {
            let text = serde_json::to_string_pretty(&ours).expect("vectors") + "\n";
            std::fs::write(file(), text).expect("the vectors written");
        }
        let text = std::fs::read_to_string(file()).expect("tests/vectors/fairness-v2.json");
        let theirs: Vectors = serde_json::from_str(&text).expect("the vectors' form");
        assert_eq!(theirs, ours);
        assert_eq!(check(&theirs), Ok(4 + 6 + 4 + 5 + 3));
        assert_eq!(theirs.head.iter().map(|h| h.checks).collect::<Vec<_>>(), [true, false, true]);
        let verdicts: Vec<bool> = theirs.receipt.iter().map(|r| r.checks).collect();
        assert_eq!(verdicts, [true, true, false, false, false]);
    }

    #[test]
    fn a_v2_vector_changed_by_one_byte_is_caught() {
        let mut v = generate();
        v.draw[3].order.swap(0, 1);
        assert_eq!(check(&v), Err("draw 3 disagrees".into()));
        let mut v = generate();
        v.receipt[2].checks = true;
        assert_eq!(check(&v), Err("receipt 2 disagrees".into()));
    }
}
