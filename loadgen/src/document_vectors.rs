//! docs/FAIRNESS.md's vectors of whole documents (`tests/vectors/fairness-documents.json`): what an
//! event publishes and an entrant keeps, each with the verdict a verifier must give, and
//! signatures that try each of section 6a's strict rules. `ticketgrab-verify vectors` and
//! `tests/draw_v2.py --vectors` check them by their own verdicts (this crate's [`crate::verdict`]);
//! the file is what this module's test writes.
//!
//! - `signature`: a receipt's or a head's text against one public key, and whether it checks: a
//!   genuine one, and one for each rule a lenient verifier would break (a small-order key or `R`, an
//!   `S` past the group order, a point or base64url text not in its canonical form, a member named
//!   twice, `null` or `1.0` where an integer belongs, ...).
//! - `case`: pages of a published draw, and for a receipt the entrant's file (`receipt`, `keys` as
//!   `GET /events/{id}/receipt-key` answers, `entry_key`), with the exit code the verdict must
//!   have (section 7): joined or not, excluded or not, and each way the documents can contradict
//!   each other.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::domain::entry_receipt::{PublicReceiptKey, ReceiptKeyRing};

use crate::verdict;

pub const VERSION: &str = "fairness-documents/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vectors {
    pub version: String,
    pub signature: Vec<SignatureVector>,
    pub case: Vec<CaseVector>,
}

/// A `TR1.` receipt or a `TH1.` head checked against `public_key` alone (base64url, as published:
/// possibly not a key at all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureVector {
    pub rule: String,
    pub public_key: String,
    pub text: String,
    pub checks: bool,
}

/// Published documents and the verdict they must get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseVector {
    pub name: String,
    /// `draw` (`ticketgrab-verify draw <pages>`) or `receipt` (`ticketgrab-verify receipt <shown>
    /// --draw <pages>`).
    pub check: String,
    pub pages: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<Value>,
    /// 0 checks out, 1 does not, 2 unreadable, 3 an exclusion proven.
    pub exit: u8,
}

/// Whether `text` checks against the one key `public_key` (a key that is not one checks nothing).
pub fn signature_checks(public_key: &str, text: &str) -> bool {
    let Ok(key) = PublicReceiptKey::decode(public_key) else { return false };
    let ring = ReceiptKeyRing { current: key, next: None, previous: None };
    if text.starts_with("TH1.") { ring.verify_head(text).is_ok() } else { ring.verify(text).is_ok() }
}

/// A case's verdict, by the verifier's own checks.
pub fn case_verdict(case: &CaseVector) -> Result<verdict::Verdict, String> {
    match (case.check.as_str(), &case.shown) {
        ("draw", None) => Ok(verdict::draw(case.pages.clone())),
        ("receipt", Some(shown)) => Ok(verdict::receipt(shown.clone(), case.pages.clone())),
        (check, _) => Err(format!("case {:?}: check {check:?} with or without `shown` as it needs", case.name)),
    }
}

/// Each vector checked by this crate's verifier: the number checked, or the first disagreement.
pub fn check(given: &Vectors) -> Result<usize, String> {
    if given.version != VERSION {
        return Err(format!("the vectors are {}, not {VERSION}", given.version));
    }
    for (i, v) in given.signature.iter().enumerate() {
        if signature_checks(&v.public_key, &v.text) != v.checks {
            return Err(format!("signature {i} ({}) disagrees", v.rule));
        }
    }
    for (i, case) in given.case.iter().enumerate() {
        let verdict = case_verdict(case)?;
        if verdict.exit_code() != case.exit {
            return Err(format!(
                "case {i} ({}) disagrees: exit {}, not {} ({})",
                case.name,
                verdict.exit_code(),
                case.exit,
                verdict.said()
            ));
        }
    }
    Ok(given.signature.len() + given.case.len())
}

#[cfg(test)]
mod write {
    //! The vectors, made here: documents as the server publishes them, then changed as an operator
    //! or a careless verifier would.

    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD as B64};
    use curve25519_dalek::Scalar;
    use serde_json::json;
    use sha2::{Digest, Sha256, Sha512};
    use shared::domain::{
        EventId,
        beacon::Beacon,
        draw::{Algorithm::V2, CommittedKey, EntryKey, Published, commitment, entrants},
        entry_receipt::{DrawHead, ReceiptKey, ReceiptKeyRing},
    };

    use super::*;

    fn sha(text: &str) -> [u8; 32] {
        Sha256::digest(text.as_bytes()).into()
    }

    /// The group's order `L`, little-endian.
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    /// The identity's encoding (`y = 1`): a point of small order.
    fn identity() -> [u8; 32] {
        let mut y = [0u8; 32];
        y[0] = 1;
        y
    }
    /// A committed key of these 32 bytes, under their id.
    fn committed(bytes: &[u8; 32]) -> CommittedKey {
        CommittedKey { key_id: B64.encode(&Sha256::digest(bytes)[..8]), public_key: B64.encode(bytes) }
    }

    fn of_key(key: &ReceiptKey) -> CommittedKey {
        CommittedKey { key_id: key.public().id(), public_key: key.public().encoded() }
    }

    /// A point of large order whose `y` is below 19, encoded with `y + p`: a reader that reduces
    /// `y` takes it for a key (strict rule 4 refuses it).
    fn large_order_y_plus_p() -> [u8; 32] {
        (2u8..19)
            .find_map(|y| {
                let mut canonical = [0u8; 32];
                canonical[0] = y;
                let key = ed25519_dalek::VerifyingKey::from_bytes(&canonical).ok().filter(|k| !k.is_weak())?;
                let mut plus_p = [0xffu8; 32];
                (plus_p[0], plus_p[31]) = (0xed + y, 0x7f);
                (key.to_edwards().compress().to_bytes() == canonical).then_some(plus_p)
            })
            .expect("a y below 19 on the curve")
    }

    /// The identity with `y + p` (`p = 2^255 - 19`): a non-canonical encoding.
    fn identity_plus_p() -> [u8; 32] {
        let mut y = [0xffu8; 32];
        y[0] = 0xee;
        y[31] = 0x7f;
        y
    }
    /// A point of order 8.
    const ORDER_8: &str = "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05";

    fn k(r: &[u8; 32], a: &[u8; 32], message: &[u8]) -> Scalar {
        let wide: [u8; 64] = Sha512::new().chain_update(r).chain_update(a).chain_update(message).finalize().into();
        Scalar::from_bytes_mod_order_wide(&wide)
    }

    fn text(prefix: &str, payload: &str, signature: &[u8]) -> String {
        format!("{prefix}{}.{}", B64.encode(payload), B64.encode(signature))
    }

    fn signed_bytes(prefix: &str, payload: &str) -> Vec<u8> {
        let context: &[u8] = if prefix == "TH1." { b"ticket-draw-head-v1\n" } else { b"ticket-entry-receipt-v1\n" };
        [context, B64.encode(payload).as_bytes()].concat()
    }

    /// A signature whose `R` is `r` and whose equation `[S]B = R + [k]A` holds: `S = k a` holds
    /// for `R` the identity (in any encoding a lenient reader takes for it).
    fn with_r(seed: &[u8; 32], r: [u8; 32], message: &[u8]) -> Vec<u8> {
        let key = ed25519_dalek::SigningKey::from_bytes(seed);
        let s = k(&r, key.verifying_key().as_bytes(), message) * key.to_scalar();
        [r, s.to_bytes()].concat()
    }

    fn signature_vectors(seed: &[u8; 32], payload: &str, head: &str) -> Vec<SignatureVector> {
        let key = ReceiptKey::from_seed(seed);
        let public = key.public().encoded();
        let genuine = key.sign(payload.as_bytes());
        let vector = |rule: &str, public_key: &str, text: String| SignatureVector {
            rule: rule.into(),
            public_key: public_key.into(),
            checks: signature_checks(public_key, &text),
            text,
        };
        let (head_of, sig_of) = genuine.rsplit_once('.').expect("a receipt");
        let sig = B64.decode(sig_of).expect("base64url");
        let with_payload = |p: &str| key.sign(p.as_bytes());
        let id = key.public().id();
        let id_of = |bytes: &[u8]| B64.encode(&Sha256::digest(bytes)[..8]);
        // A key of small order signs anything: R and A the identity, S = 0, for any payload.
        let small = identity();
        let small_payload = payload.replace(&id, &id_of(&small));
        let order_8 = shared::domain::hex::decode::<32>(ORDER_8).expect("hex");
        // With A of order 8 the equation holds when k is a multiple of 8: a payload is found for it.
        let eight_payload = (0..3600)
            .map(|n| {
                format!(
                    r#"{{"k":"{}","e":"ev-docs","l":"{}","t":"2027-03-01T09:{:02}:{:02}Z"}}"#,
                    id_of(&order_8),
                    "ab".repeat(32),
                    n / 60,
                    n % 60
                )
            })
            .find(|p| k(&identity(), &order_8, &signed_bytes("TR1.", p)).to_bytes()[0].is_multiple_of(8))
            .expect("one in eight payloads");
        // R = [x]B of a key of its own and S = x: with A of small order, [S]B = R + [k]A when
        // [k]A is the identity.
        let large = ed25519_dalek::SigningKey::from_bytes(&sha("a point of large order"));
        let eight_with_large_r = (0..3600)
            .map(|n| {
                format!(
                    r#"{{"k":"{}","e":"ev-docs","l":"{}","t":"2027-03-01T08:{:02}:{:02}Z"}}"#,
                    id_of(&order_8),
                    "ab".repeat(32),
                    n / 60,
                    n % 60
                )
            })
            .find(|p| {
                k(large.verifying_key().as_bytes(), &order_8, &signed_bytes("TR1.", p)).to_bytes()[0].is_multiple_of(8)
            })
            .expect("one in eight payloads");
        let s_plus_l = {
            let mut s = [0u8; 32];
            let mut carry = 0u16;
            for i in 0..32 {
                let sum = u16::from(sig[32 + i]) + u16::from(L[i]) + carry;
                s[i] = sum as u8;
                carry = sum >> 8;
            }
            [&sig[..32], &s[..]].concat()
        };
        // base64url out of its canonical form, each decoding to the genuine signature's bytes.
        let spare_bits = {
            let mut t = sig_of.to_owned();
            let last = t.pop().expect("a character");
            let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            let at = alphabet.iter().position(|c| *c as char == last).expect("base64url");
            t.push(alphabet[at | 1] as char);
            format!("{head_of}.{t}")
        };
        let mut vectors = vec![
            vector("a genuine receipt: it checks", &public, genuine.clone()),
            vector(
                "A of small order (the identity): with R the identity and S = 0 the equation holds for any payload",
                &B64.encode(small),
                text("TR1.", &small_payload, &[identity(), [0; 32]].concat()),
            ),
            vector(
                "A of order 8: with R the identity and S = 0 the equation holds for a payload whose k is a multiple of 8",
                &B64.encode(order_8),
                text("TR1.", &eight_payload, &[identity(), [0; 32]].concat()),
            ),
            vector(
                "R of small order (the identity): S = k a makes the equation hold",
                &public,
                text("TR1.", payload, &with_r(seed, identity(), &signed_bytes("TR1.", payload))),
            ),
            vector(
                "R not in canonical form (the identity's y + p): a reader that reduces y takes it for the identity",
                &public,
                text("TR1.", payload, &with_r(seed, identity_plus_p(), &signed_bytes("TR1.", payload))),
            ),
            vector(
                "A of small order (the identity), R a point of large order: with S its scalar the equation holds for any payload",
                &B64.encode(small),
                text("TR1.", &small_payload, &[*large.verifying_key().as_bytes(), large.to_scalar().to_bytes()].concat()),
            ),
            vector(
                "A of order 8, R a point of large order, S its scalar: the equation holds for a payload whose k is a multiple of 8",
                &B64.encode(order_8),
                text(
                    "TR1.",
                    &eight_with_large_r,
                    &[*large.verifying_key().as_bytes(), large.to_scalar().to_bytes()].concat(),
                ),
            ),
            vector("S + L: past the group order, the same point", &public, format!("{head_of}.{}", B64.encode(&s_plus_l))),
            vector(
                "A not in canonical form (the identity's y + p), R the identity, S = 0",
                &B64.encode(identity_plus_p()),
                text("TR1.", &payload.replace(&id, &id_of(&identity_plus_p())), &[identity(), [0; 32]].concat()),
            ),
            vector("the signature's base64url padded with '='", &public, format!("{genuine}==")),
            vector("a line end after the text", &public, format!("{genuine}\n")),
            vector("a space before the text", &public, format!(" {genuine}")),
            vector(
                "a member not named here nested to depth 64 in all: it checks",
                &public,
                with_payload(&payload.replace(r#""}"#, &format!(r#"","note":{}{}}}"#, "[".repeat(63), "]".repeat(63)))),
            ),
            vector(
                "a member not named here nested to depth 65: not JSON here",
                &public,
                with_payload(&payload.replace(r#""}"#, &format!(r#"","note":{}{}}}"#, "[".repeat(64), "]".repeat(64)))),
            ),
            vector("the signature's base64url with its spare bits not zero", &public, spare_bits),
            vector(
                "a member named twice (t): signed as it stands",
                &public,
                with_payload(&payload.replace(r#""}"#, r#"","t":"2027-03-01T09:00:00Z"}"#)),
            ),
            vector(
                "members in another order, with spaces and a member not named here: read by name, it checks",
                &public,
                with_payload(&format!(
                    r#"{{ "t": "2027-03-01T09:30:00Z", "note": 1, "l": "{}", "e": "ev-docs", "k": "{id}" }}"#,
                    "ab".repeat(32)
                )),
            ),
            vector(
                "a member not named here, named twice",
                &public,
                with_payload(&payload.replace(r#""}"#, r#"","note":1,"note":2}"#)),
            ),
            vector(
                "a lone surrogate in a member not named here: not JSON",
                &public,
                with_payload(&payload.replace(r#""}"#, r#"","note":"\ud800"}"#)),
            ),
            vector("r null", &public, with_payload(&payload.replace(r#""}"#, r#"","r":null}"#))),
            vector("r 0", &public, with_payload(&payload.replace(r#""}"#, r#"","r":0}"#))),
            vector("r 1.0: not an integer", &public, with_payload(&payload.replace(r#""}"#, r#"","r":1.0}"#))),
            vector("r a string", &public, with_payload(&payload.replace(r#""}"#, r#"","r":"7"}"#))),
            vector("r 7: a late place's rank, it checks", &public, with_payload(&payload.replace(r#""}"#, r#"","r":7}"#))),
            vector("l in upper case", &public, with_payload(&payload.replace(&"ab".repeat(32), &"AB".repeat(32)))),
            vector("e not an event id (a space)", &public, with_payload(&payload.replace("ev-docs", "ev docs"))),
            vector("k missing", &public, with_payload(&payload.replace(&format!(r#""k":"{id}","#), ""))),
            vector(
                "longer than 1,024 characters",
                &public,
                with_payload(&payload.replace(r#""}"#, &format!(r#"","note":"{}"}}"#, "x".repeat(800)))),
            ),
            vector("a genuine head: it checks", &public, key.sign_head_payload(head.as_bytes())),
            vector(
                "a head with admission_rate null",
                &public,
                key.sign_head_payload(head.replace(r#","receipt_keys""#, r#","admission_rate":null,"receipt_keys""#).as_bytes()),
            ),
            vector(
                "a head with entrant_count 10.0: not an integer",
                &public,
                key.sign_head_payload(head.replace(r#""entrant_count":10"#, r#""entrant_count":10.0"#).as_bytes()),
            ),
            vector(
                "a head naming root twice",
                &public,
                key.sign_head_payload(head.replace(r#","entrant_count""#, &format!(r#","root":"{}","entrant_count""#, "00".repeat(32))).as_bytes()),
            ),
            vector(
                "a head longer than 4,096 characters",
                &public,
                key.sign_head_payload(
                    head.replace(r#","receipt_keys""#, &format!(r#","note":"{}","receipt_keys""#, "x".repeat(3100))).as_bytes(),
                ),
            ),
            vector(
                "a head of 1,250 characters (a beacon round, two keys, a 64-character event id): it checks",
                &public,
                key.sign_head_payload(
                    head.replace("ev-docs", &"e".repeat(64))
                        .replace(
                            r#","receipt_keys":["#,
                            &format!(
                                r#","beacon_round":18446744073709551615,"beacon_public_key":"{}","beacon_signature":"{}","receipt_keys":["{id}","#,
                                "ab".repeat(96),
                                "cd".repeat(48)
                            ),
                        )
                        .as_bytes(),
                ),
            ),
        ];
        // The standard alphabet's '+' and '/' for '-' and '_' (a lenient reader takes both).
        if let Some(at) = sig_of.find(['-', '_']) {
            let mut t = sig_of.to_owned();
            t.replace_range(at..=at, if &sig_of[at..=at] == "-" { "+" } else { "/" });
            vectors.push(vector(
                "the signature in base64's standard alphabet ('+' or '/')",
                &public,
                format!("{head_of}.{t}"),
            ));
        }
        vectors
    }

    const EVENT: &str = "ev-docs";
    const CLOSE: &str = "2027-03-01T10:00:00Z";
    const DRAWN: &str = "2027-03-01T10:00:05Z";

    struct Sale {
        whole: Published,
        keys: Vec<EntryKey>,
    }

    fn ev() -> EventId {
        EventId::parse(EVENT).expect("an event id")
    }

    fn sale(keys: usize, rate: Option<u32>, committed: &[&ReceiptKey], leave_out: Option<usize>) -> Sale {
        let keys: Vec<EntryKey> =
            (0..keys).map(|i| EntryKey::from_bytes(sha(&format!("document entry {i}")))).collect();
        let leaves = keys.iter().enumerate().filter(|(i, _)| Some(*i) != leave_out).map(|(_, k)| k.leaf(&ev()));
        let mut whole = Published::new(V2, entrants(leaves), &[0xcd; 32], None).expect("no beacon");
        whole.entrants.clear();
        whole.event_id = Some(EVENT.into());
        whole.entries_close = Some(CLOSE.into());
        whole.drawn_at = Some(DRAWN.into());
        whole.capacity = Some(3);
        whole.admission_rate = rate;
        whole.receipt_keys = committed
            .iter()
            .map(|k| CommittedKey { key_id: k.public().id(), public_key: k.public().encoded() })
            .collect();
        Sale { whole, keys }
    }

    fn signer() -> ReceiptKey {
        ReceiptKey::from_seed(&sha("ticket-grab receipt key"))
    }
    fn second() -> ReceiptKey {
        ReceiptKey::from_seed(&sha("ticket-grab next receipt key"))
    }
    fn stranger() -> ReceiptKey {
        ReceiptKey::from_seed(&sha("another receipt key"))
    }

    /// The draw in pages of `size` places, walked by `next` from 0.
    fn pages(whole: &Published, size: usize) -> Vec<Value> {
        let n = whole.order.len();
        (0..n.max(1))
            .step_by(size)
            .map(|from| {
                let to = (from + size).min(n);
                serde_json::to_value(Published {
                    entrant_count: Some(n as u64),
                    from: Some(from as u64),
                    next: (to < n).then_some(to as u64),
                    order: whole.order[from.min(n)..to].to_vec(),
                    ..whole.clone()
                })
                .expect("a page")
            })
            .collect()
    }

    fn head(sale: &Sale, by: &ReceiptKey, vouching: Option<Vec<String>>) -> String {
        let mut head = DrawHead::of(&sale.whole, &by.public().id()).expect("a draw with its terms");
        if let Some(ids) = vouching {
            head.receipt_keys = ids;
        }
        by.sign_head(&head)
    }

    /// The keys document as `GET /events/{id}/receipt-key` answers it.
    fn keys_doc(current: &ReceiptKey, committed: &Published, draw_head: Option<String>) -> Value {
        let ring = ReceiptKeyRing { current: current.public(), next: None, previous: None };
        let mut doc = ring.published(&ev(), draw_head);
        if !committed.receipt_keys.is_empty() {
            doc["committed"] = serde_json::to_value(&committed.receipt_keys).expect("keys");
        }
        doc
    }

    fn shown(receipt: String, keys: Value, entry_key: Option<&EntryKey>) -> Value {
        let mut shown = json!({ "receipt": receipt, "keys": keys });
        if let Some(k) = entry_key {
            shown["entry_key"] = json!(k.to_hex());
        }
        shown
    }

    fn receipt(by: &ReceiptKey, key: &EntryKey, t: &str, late: Option<u64>) -> String {
        by.issue(&ev(), &key.leaf(&ev()), t, late)
    }

    fn case(name: &str, pages: Vec<Value>, shown: Option<Value>) -> CaseVector {
        let check = if shown.is_some() { "receipt" } else { "draw" };
        let mut case = CaseVector { name: name.into(), check: check.into(), pages, shown, exit: u8::MAX };
        case.exit = case_verdict(&case).expect("a case").exit_code();
        case
    }

    /// `value` changed by `change`.
    fn with(mut value: Value, change: impl FnOnce(&mut Value)) -> Value {
        change(&mut value);
        value
    }

    fn edit(mut pages: Vec<Value>, at: usize, f: impl FnOnce(&mut Value)) -> Vec<Value> {
        f(&mut pages[at]);
        pages
    }

    fn draw_cases() -> Vec<CaseVector> {
        let s = sale(10, None, &[&signer()], None);
        let walk = pages(&s.whole, 4);
        let mut reversed = walk.clone();
        reversed.reverse();
        let overlap = {
            let mut p = walk.clone();
            p.insert(
                1,
                serde_json::to_value(Published {
                    from: Some(2),
                    next: Some(6),
                    order: s.whole.order[2..6].to_vec(),
                    entrant_count: Some(10),
                    ..s.whole.clone()
                })
                .expect("a page"),
            );
            p
        };
        let all = |f: &dyn Fn(&mut Value)| {
            walk.iter()
                .cloned()
                .map(|mut p| {
                    f(&mut p);
                    p
                })
                .collect::<Vec<_>>()
        };
        let mut past_end = walk.clone();
        past_end.push(
            serde_json::to_value(Published {
                from: Some(10),
                next: None,
                order: vec![],
                entrant_count: Some(10),
                ..s.whole.clone()
            })
            .expect("a page"),
        );
        let development = {
            let chain = shared::domain::beacon::LocalChain::development();
            let close = shared::domain::instant::instant(CLOSE).expect("a time").unix_timestamp();
            with_round(&s, CLOSE, chain.round(shared::domain::beacon::quicknet().first_round_after(close)))
        };
        let twice = {
            let mut p = walk.clone();
            let first = p[0]["order"][0].clone();
            p[2]["order"][1] = first;
            p
        };
        vec![
            case("three pages of a ballot's draw of 10, walked by next from 0", walk.clone(), None),
            case("the same pages in another order", reversed, None),
            case("a page missing (places 4 to 7)", vec![walk[0].clone(), walk[2].clone()], None),
            case("the last page missing: the page before names a next", walk[..2].to_vec(), None),
            case("pages that overlap (one asked from 2 besides the walk)", overlap, None),
            case("an empty page from 10 (past the end) after the last", past_end, None),
            case(
                "an empty page from 10 that the last page's next names",
                {
                    let mut p = walk.clone();
                    p[2]["next"] = json!(10);
                    p.push(with(walk[2].clone(), |e| {
                        (e["from"], e["order"]) = (json!(10), json!([]));
                        e.as_object_mut().expect("a page").remove("next");
                    }));
                    p
                },
                None,
            ),
            case(
                "drawn_at not a time and no entries_close: nothing to compare it with",
                all(&|p| {
                    p["drawn_at"] = json!("2027-03-01 10:00:05");
                    p.as_object_mut().expect("a page").remove("entries_close");
                }),
                None,
            ),
            case(
                "entries_close not a time and no drawn_at",
                all(&|p| {
                    p["entries_close"] = json!("2027-03-01T10:00:00");
                    p.as_object_mut().expect("a page").remove("drawn_at");
                }),
                None,
            ),
            case(
                "one page's capacity other than the others'",
                edit(walk.clone(), 1, |p| p["capacity"] = json!(4)),
                None,
            ),
            case("one page with a member the others lack", edit(walk.clone(), 2, |p| p["note"] = json!("x")), None),
            case("every page with a member not named by the text: ignored", all(&|p| p["note"] = json!("x")), None),
            case(
                "every page with admission_rate null: as if absent",
                all(&|p| p["admission_rate"] = Value::Null),
                None,
            ),
            case(
                "entrant_count absent from every page",
                all(&|p| {
                    p.as_object_mut().expect("a page").remove("entrant_count");
                }),
                None,
            ),
            case("entrant_count 11 on every page, 10 places", all(&|p| p["entrant_count"] = json!(11)), None),
            case("a leaf twice (place 9 holds place 1's leaf)", twice, None),
            case(
                "two places swapped",
                {
                    let mut p = walk.clone();
                    let a = p[0]["order"][0].clone();
                    p[0]["order"][0] = p[0]["order"][1].clone();
                    p[0]["order"][1] = a;
                    p
                },
                None,
            ),
            case("drawn before its entries closed", all(&|p| p["drawn_at"] = json!("2027-03-01T09:59:59.999Z")), None),
            case(
                "drawn_at with an offset, after the close as an instant",
                all(&|p| p["drawn_at"] = json!("2027-03-01T11:00:05+01:00")),
                None,
            ),
            case("capacity 3.0: not an integer", all(&|p| p["capacity"] = json!(3.0)), None),
            case("receipt_keys not a list", all(&|p| p["receipt_keys"] = json!("keys")), None),
            case("the secret not the commitment's", all(&|p| p["commitment"] = json!(commitment(&[0xce; 32]))), None),
            case("receipt_keys null on every page: none committed", all(&|p| p["receipt_keys"] = Value::Null), None),
            case(
                "drawn_at a leap second: not a time here",
                all(&|p| p["drawn_at"] = json!("2027-03-01T23:59:60Z")),
                None,
            ),
            case(
                "drawn_at with ten fractional digits: not a time here",
                all(&|p| p["drawn_at"] = json!("2027-03-01T10:00:05.0000000001Z")),
                None,
            ),
            case("drawn_at with a lower-case t and z", all(&|p| p["drawn_at"] = json!("2027-03-01t10:00:05z")), None),
            case(
                "drawn_at with a space for the T: not a time here",
                all(&|p| p["drawn_at"] = json!("2027-03-01 10:00:05Z")),
                None,
            ),
            case("a page that is not an object", vec![walk[0].clone(), json!([1]), walk[2].clone()], None),
            case("from as a string", edit(walk.clone(), 1, |p| p["from"] = json!("4")), None),
            case(
                "capacity 3.0 on one page, other terms besides: unreadable first",
                edit(walk.clone(), 1, |p| p["capacity"] = json!(3.0)),
                None,
            ),
            case("order not a list", edit(walk.clone(), 0, |p| p["order"] = json!("leaves")), None),
            case("capacity 0 on every page", all(&|p| p["capacity"] = json!(0)), None),
            case(
                "a page of no places between two (its next its own from)",
                {
                    let mut p = walk.clone();
                    let mut empty = p[1].clone();
                    empty["order"] = json!([]);
                    empty["next"] = empty["from"].clone();
                    p.insert(1, empty);
                    p
                },
                None,
            ),
            case(
                "drawn_at with an offset of 24 hours: not a time here",
                all(&|p| p["drawn_at"] = json!("2027-03-02T10:00:05+24:00")),
                None,
            ),
            case("a beacon round of the development chain (its timing not checked)", development.clone(), None),
            case(
                "a development chain's round 7, long before the close: not quicknet's, its timing not checked",
                with_round(&s, CLOSE, shared::domain::beacon::LocalChain::development().round(7)),
                None,
            ),
            case(
                "receipt_keys [] on one page and absent from the others: other terms",
                edit(
                    all(&|p| {
                        p.as_object_mut().expect("a page").remove("receipt_keys");
                    }),
                    1,
                    |p| p["receipt_keys"] = json!([]),
                ),
                None,
            ),
            case(
                "a beacon of another scheme",
                development
                    .iter()
                    .cloned()
                    .map(|p| with(p, |p| p["beacon"]["scheme"] = json!("bls-unchained-on-g1")))
                    .collect(),
                None,
            ),
            case(
                "a beacon key of 95 bytes",
                development
                    .iter()
                    .cloned()
                    .map(|p| with(p, |p| p["beacon"]["public_key"] = json!("ab".repeat(95))))
                    .collect(),
                None,
            ),
            case("quicknet's round 123, the first after the close: it checks", quicknet("2023-08-23T15:15:30Z"), None),
            case(
                "quicknet's round 123, the close at .999 of a second (its floor is what counts): it checks",
                quicknet("2023-08-23T15:15:32.999Z"),
                None,
            ),
            case("quicknet's round 123 after a close whose first round is 124", quicknet("2023-08-23T15:15:33Z"), None),
            case(
                "entries_close not a time (no zone), drawn_at one",
                all(&|p| p["entries_close"] = json!("2027-03-01T10:00:00")),
                None,
            ),
            case(
                "entries_close on 29 February 2027: no such date",
                all(&|p| p["entries_close"] = json!("2027-02-29T10:00:00Z")),
                None,
            ),
            case("one page from 8, alone: the first page is not from 0", vec![walk[2].clone()], None),
            case("no page at all", vec![], None),
            case(
                "one document without from but with a next: not the last page",
                vec![with(walk[0].clone(), |p| {
                    p.as_object_mut().expect("a page").remove("from");
                })],
                None,
            ),
        ]
    }

    /// The pages of the draw of `keys` with a round of a beacon: the local runner's development
    /// chain's, at the round a release would name.
    fn with_round(s: &Sale, close: &str, round: Beacon) -> Vec<Value> {
        let mut w = s.whole.clone();
        let leaves = s.keys.iter().map(|k| k.leaf(&ev()));
        let drawn = Published::new(V2, entrants(leaves), &[0xcd; 32], Some(round)).expect("a round that verifies");
        (w.order, w.beacon, w.entries_close) = (drawn.order, drawn.beacon, Some(close.into()));
        w.drawn_at = Some(DRAWN.into());
        pages(&w, 4)
    }

    /// A draw with quicknet's own round 123 (its real signature), its entries closed at `close`.
    fn quicknet(close: &str) -> Vec<Value> {
        let round = Beacon {
            scheme: shared::domain::beacon::SCHEME.into(),
            public_key: shared::domain::beacon::quicknet().public_key,
            round: 123,
            signature: QUICKNET_ROUND_123.into(),
        };
        let mut pages = with_round(&sale(10, None, &[&signer()], None), close, round);
        for p in &mut pages {
            p["drawn_at"] = json!("2023-08-23T15:15:40Z");
        }
        pages
    }

    /// quicknet's round 123, as api.drand.sh gives it.
    const QUICKNET_ROUND_123: &str =
        "b75c69d0b72a5d906e854e808ba7e2accb1542ac355ae486d591aa9d43765482e26cd02df835d3546d23c4b13e0dfc92";

    fn receipt_cases() -> Vec<CaseVector> {
        let (one, two) = (signer(), second());
        let full = sale(10, None, &[&one], None);
        let winner = full.whole.order.first().cloned().expect("a place");
        let at = |leaf: &str| full.keys.iter().position(|k| k.leaf(&ev()) == leaf).expect("an entrant");
        let (won, lost) = (&full.keys[at(&winner)], &full.keys[at(full.whole.order.last().expect("a place"))]);
        let full_head = head(&full, &one, None);
        let full_pages = pages(&full.whole, 4);
        let keys = keys_doc(&one, &full.whole, Some(full_head.clone()));
        let t = "2027-03-01T09:30:00Z";
        // Entry 4 left out: the draw made again without it, and its head signed.
        let cut = sale(10, None, &[&one], Some(4));
        let cut_pages = pages(&cut.whole, 4);
        let victim = &cut.keys[4];
        let victim_receipt = receipt(&one, victim, t, None);
        let cut_keys = |head: Option<String>| keys_doc(&one, &cut.whole, head);
        let cut_head = head(&cut, &one, None);
        // The same cut draw naming quicknet's key and a round whose signature is another's.
        let forged = {
            let mut forged = sale(10, None, &[&one], Some(4));
            let round = Beacon {
                scheme: shared::domain::beacon::SCHEME.into(),
                public_key: shared::domain::beacon::quicknet().public_key,
                round: shared::domain::beacon::quicknet()
                    .first_round_after(shared::domain::instant::instant(CLOSE).expect("a time").unix_timestamp()),
                signature: QUICKNET_ROUND_123.into(),
            };
            let sorted = entrants(forged.whole.order.iter().cloned());
            let randomness: [u8; 32] =
                Sha256::digest(shared::domain::hex::decode::<48>(&round.signature).expect("hex")).into();
            let seed =
                shared::domain::draw::seed(V2, &[0xcd; 32], &shared::domain::draw::root(V2, &sorted), &randomness);
            (forged.whole.order, forged.whole.beacon) = (shared::domain::draw::order(&sorted, &seed), Some(round));
            forged
        };
        // Committed keys that are not well formed, the keys document naming the same list.
        let malformed = |name: &str, change: &dyn Fn(&mut Vec<CommittedKey>)| {
            let mut whole = full.whole.clone();
            change(&mut whole.receipt_keys);
            let keys = keys_doc(&one, &whole, Some(full_head.clone()));
            case(name, pages(&whole, 4), Some(shown(receipt(&one, won, t, None), keys, None)))
        };
        let mut cases = vec![
            case(
                "a winning entry, with its entry key",
                full_pages.clone(),
                Some(shown(receipt(&one, won, t, None), keys.clone(), Some(won))),
            ),
            case(
                "a drawn entry and no draw_head: still placed",
                full_pages.clone(),
                Some(shown(receipt(&one, won, t, None), with(keys.clone(), |k| k["draw_head"] = Value::Null), None)),
            ),
            case(
                "an entry that did not win",
                full_pages.clone(),
                Some(shown(receipt(&one, lost, t, None), keys.clone(), None)),
            ),
            case(
                "an entry left out of the draw its head names",
                cut_pages.clone(),
                Some(shown(victim_receipt.clone(), cut_keys(Some(cut_head.clone())), Some(victim))),
            ),
            case(
                "left out, its head vouching for a key the event did not commit to",
                cut_pages.clone(),
                Some(shown(
                    victim_receipt.clone(),
                    cut_keys(Some(head(&cut, &one, Some(vec![stranger().public().id()])))),
                    None,
                )),
            ),
            case(
                "left out, its head vouching for another key, and the keys document naming no committed keys: the pages' terms decide",
                cut_pages.clone(),
                Some(shown(
                    victim_receipt.clone(),
                    with(cut_keys(Some(head(&cut, &one, Some(vec![stranger().public().id()])))), |k| {
                        k.as_object_mut().expect("an object").remove("committed");
                    }),
                    None,
                )),
            ),
            case(
                "left out, and no draw_head",
                cut_pages.clone(),
                Some(shown(victim_receipt.clone(), cut_keys(None), None)),
            ),
            case(
                "left out, the head another draw's (the full draw's)",
                cut_pages.clone(),
                Some(shown(victim_receipt.clone(), cut_keys(Some(full_head.clone())), None)),
            ),
            case(
                "left out, the pages not recomputing (two places swapped)",
                edit(cut_pages.clone(), 0, |p| {
                    let a = p["order"][0].clone();
                    p["order"][0] = p["order"][1].clone();
                    p["order"][1] = a;
                }),
                Some(shown(victim_receipt.clone(), cut_keys(Some(cut_head.clone())), None)),
            ),
            case(
                "the keys document naming other committed keys than the pages",
                full_pages.clone(),
                Some(shown(
                    receipt(&one, won, t, None),
                    with(keys.clone(), |k| {
                        k["committed"] = json!([{"key_id": two.public().id(), "public_key": two.public().encoded()}])
                    }),
                    None,
                )),
            ),
            case(
                "signed by the keys document's current key, which the event did not commit to",
                full_pages.clone(),
                Some(shown(
                    receipt(&stranger(), won, t, None),
                    keys_doc(&stranger(), &full.whole, Some(full_head.clone())),
                    None,
                )),
            ),
            case(
                "an entry key that is not the receipt's leaf's",
                full_pages.clone(),
                Some(shown(receipt(&one, won, t, None), keys.clone(), Some(lost))),
            ),
            case(
                "an entry key that is not 64 lowercase hex digits",
                full_pages.clone(),
                Some(with(shown(receipt(&one, won, t, None), keys.clone(), None), |s| {
                    s["entry_key"] = json!("AB".repeat(32))
                })),
            ),
            malformed("the committed keys listing a key under another's id", &|keys: &mut Vec<CommittedKey>| {
                keys[0].key_id = two.public().id()
            }),
            malformed("the committed keys listing a key of small order", &|keys: &mut Vec<CommittedKey>| {
                keys.push(committed(&identity()))
            }),
            malformed("the committed keys listing a key not in canonical form (its y + p)", &|keys: &mut Vec<
                CommittedKey,
            >| {
                keys.push(committed(&large_order_y_plus_p()))
            }),
            malformed("the committed keys listing three keys", &|keys: &mut Vec<CommittedKey>| {
                keys.extend([of_key(&two), of_key(&stranger())])
            }),
            case(
                "left out, the head signed with admission_rate null",
                cut_pages.clone(),
                Some(shown(
                    victim_receipt.clone(),
                    cut_keys(Some({
                        let head = DrawHead::of(&cut.whole, &one.public().id()).expect("a head");
                        let text = serde_json::to_string(&head)
                            .expect("json")
                            .replace(r#","receipt_keys""#, r#","admission_rate":null,"receipt_keys""#);
                        one.sign_head_payload(text.as_bytes())
                    })),
                    None,
                )),
            ),
            case(
                "left out of a draw whose beacon signature is not the chain's: a receipt's verdict does not check it",
                pages(&forged.whole, 4),
                Some(shown(
                    victim_receipt.clone(),
                    keys_doc(&one, &forged.whole, Some(head(&forged, &one, None))),
                    None,
                )),
            ),
            case(
                "left out, a receipt with a rank on a ballot (no late places)",
                cut_pages.clone(),
                Some(shown(
                    receipt(&one, victim, "2027-03-01T10:00:01Z", Some(2)),
                    cut_keys(Some(cut_head.clone())),
                    None,
                )),
            ),
            case(
                "a receipt of another event",
                full_pages.clone(),
                Some(shown(
                    one.issue(&EventId::parse("ev-other").expect("an id"), &won.leaf(&ev()), t, None),
                    keys.clone(),
                    None,
                )),
            ),
            case(
                "the keys document's committed null: as if absent",
                full_pages.clone(),
                Some(shown(receipt(&one, won, t, None), with(keys.clone(), |k| k["committed"] = Value::Null), None)),
            ),
            case(
                "an entry_key null: as if absent",
                full_pages.clone(),
                Some(with(shown(receipt(&one, won, t, None), keys.clone(), None), |s| s["entry_key"] = Value::Null)),
            ),
            case(
                "committed keys with a member not named here, on the pages and in the keys document alike",
                pages(&full.whole, 4)
                    .into_iter()
                    .map(|mut p| {
                        p["receipt_keys"][0]["note"] = json!(1);
                        p
                    })
                    .collect(),
                Some(shown(
                    receipt(&one, won, t, None),
                    with(keys.clone(), |k| k["committed"][0]["note"] = json!(1)),
                    None,
                )),
            ),
            case(
                "committed keys with a member not named here on the pages only: not the keys document's",
                pages(&full.whole, 4)
                    .into_iter()
                    .map(|mut p| {
                        p["receipt_keys"][0]["note"] = json!(1);
                        p
                    })
                    .collect(),
                Some(shown(receipt(&one, won, t, None), keys.clone(), None)),
            ),
            case(
                "the keys document published for another event",
                full_pages.clone(),
                Some(shown(
                    receipt(&one, won, t, None),
                    with(keys.clone(), |k| k["event_id"] = json!("ev-other")),
                    None,
                )),
            ),
            case(
                "a receipt that does not check, and an entry key not hex: unreadable first",
                full_pages.clone(),
                Some(with(shown(receipt(&stranger(), won, t, None), keys.clone(), None), |s| {
                    s["entry_key"] = json!("zz")
                })),
            ),
            case(
                "the keys not an object",
                full_pages.clone(),
                Some(json!({"receipt": receipt(&one, won, t, None), "keys": "keys"})),
            ),
            case(
                "the keys document's previous key of small order (a receipt checked against the committed keys)",
                full_pages.clone(),
                Some(shown(
                    receipt(&one, won, t, None),
                    with(keys.clone(), |k| k["previous"] = json!({"public_key": B64.encode(identity())})),
                    None,
                )),
            ),
        ];
        // Two committed keys (a rotation staged at release): the second signs after it.
        let rotated = sale(10, None, &[&one, &two], None);
        let rotated_head = head(&rotated, &two, None);
        cases.push(case(
            "two committed keys: an entry signed by the second, the head too",
            pages(&rotated.whole, 4),
            Some(shown(
                receipt(&two, &rotated.keys[0], t, None),
                keys_doc(&two, &rotated.whole, Some(rotated_head)),
                None,
            )),
        ));
        // A fair open: places taken after the close are behind the draw, by their rank.
        let open = sale(10, Some(2), &[&one], Some(4));
        let open_pages = pages(&open.whole, 4);
        let open_keys = keys_doc(&one, &open.whole, Some(head(&open, &one, None)));
        let late = receipt(&one, &open.keys[4], "2027-03-01T10:00:01Z", Some(1));
        let far = {
            let mut far = sale(10, Some(1), &[&one], None);
            far.whole.entries_close = Some("9999-12-31T23:59:58Z".into());
            far.whole.drawn_at = Some("9999-12-31T23:59:59Z".into());
            far
        };
        let far_keys = keys_doc(&one, &far.whole, Some(head(&far, &one, None)));
        let far_last =
            far.keys.iter().find(|k| far.whole.order.last() == Some(&k.leaf(&ev()))).expect("the last place's");
        cases.extend([
            case(
                "a fair open's place taken after the close (rank 1), not in the draw",
                open_pages.clone(),
                Some(shown(late, open_keys.clone(), None)),
            ),
            case(
                "a rank dated before the close, not in the draw: an entry left out",
                open_pages.clone(),
                Some(shown(receipt(&one, &open.keys[4], "2027-03-01T09:59:59Z", Some(1)), open_keys.clone(), None)),
            ),
            case(
                "a rank dated at a leap second after the close, not in the draw: no time, an entry left out",
                open_pages.clone(),
                Some(shown(receipt(&one, &open.keys[4], "2027-03-01T10:00:60Z", Some(1)), open_keys.clone(), None)),
            ),
            case(
                "a rank dated after the close as an instant, in another offset, not in the draw",
                open_pages.clone(),
                Some(shown(
                    receipt(&one, &open.keys[4], "2027-03-01T11:00:00.000000001+01:00", Some(1)),
                    open_keys.clone(),
                    None,
                )),
            ),
            case(
                "a rank dated after the close whose leaf is drawn",
                open_pages.clone(),
                Some(shown(receipt(&one, &open.keys[0], "2027-03-01T10:00:01Z", Some(1)), open_keys.clone(), None)),
            ),
            case(
                "a rank of 2^64 - 1 after the close, not in the draw: a late place, far behind",
                open_pages.clone(),
                Some(shown(
                    receipt(&one, &open.keys[4], "2027-03-01T10:00:01Z", Some(u64::MAX)),
                    open_keys.clone(),
                    None,
                )),
            ),
            case(
                "a fair open drawn at the last second of 9999: its places admitted past what a date can say",
                pages(&far.whole, 4),
                Some(shown(receipt(&one, far_last, "9999-12-31T23:59:00Z", None), far_keys.clone(), None)),
            ),
            case(
                "a rank dated at the very instant of the close, not in the draw: a late place",
                open_pages.clone(),
                Some(shown(receipt(&one, &open.keys[4], CLOSE, Some(1)), open_keys.clone(), None)),
            ),
            case(
                "a rank dated after the close, not in the draw, and no head: the pages' close decides nothing",
                open_pages.clone(),
                Some(shown(
                    receipt(&one, &open.keys[4], "2027-03-01T10:00:01Z", Some(1)),
                    keys_doc(&one, &open.whole, None),
                    None,
                )),
            ),
        ]);
        // A head that differs from the draw in one of the members it is matched by, signed with
        // the committed key: it does not hold, and the missing leaf proves nothing.
        type Change = Box<dyn Fn(&mut Value)>;
        let matched: Vec<(&str, Change)> = vec![
            ("e", Box::new(|h| h["e"] = json!("ev-other"))),
            ("algorithm", Box::new(|h| h["algorithm"] = json!("ticket-draw/v1"))),
            ("commitment", Box::new(|h| h["commitment"] = json!(commitment(&[0xce; 32])))),
            ("root", Box::new(|h| h["root"] = json!("ef".repeat(32)))),
            ("entrant_count", Box::new(|h| h["entrant_count"] = json!(10))),
            (
                "entries_close, the same instant in other text",
                Box::new(|h| h["entries_close"] = json!("2027-03-01T10:00:00.000Z")),
            ),
            ("drawn_at", Box::new(|h| h["drawn_at"] = json!("2027-03-01T10:00:06Z"))),
            ("capacity", Box::new(|h| h["capacity"] = json!(4))),
            ("admission_rate, which the draw has none of", Box::new(|h| h["admission_rate"] = json!(2))),
            ("beacon_round alone, the draw having no beacon", Box::new(|h| h["beacon_round"] = json!(7))),
            (
                "all three beacon members, the draw having no beacon",
                Box::new(|h| {
                    h["beacon_round"] = json!(7);
                    h["beacon_public_key"] = json!("ab".repeat(96));
                    h["beacon_signature"] = json!("cd".repeat(48));
                }),
            ),
        ];
        for (member, change) in matched {
            let mut payload =
                serde_json::to_value(DrawHead::of(&cut.whole, &one.public().id()).expect("a head")).expect("json");
            change(&mut payload);
            let signed = one.sign_head_payload(payload.to_string().as_bytes());
            cases.push(case(
                &format!("left out, the head differing in {member}"),
                cut_pages.clone(),
                Some(shown(victim_receipt.clone(), cut_keys(Some(signed)), None)),
            ));
        }
        // The keys document's members of another kind: unreadable, whatever else.
        for (member, value) in
            [("event_id", json!(5)), ("draw_head", json!(5)), ("next", json!("x")), ("committed", json!("keys"))]
        {
            cases.push(case(
                &format!("the keys document's {member} of another kind"),
                full_pages.clone(),
                Some(shown(receipt(&one, won, t, None), with(keys.clone(), |k| k[member] = value), None)),
            ));
        }
        cases.push(case(
            "the keys document without its current public_key",
            full_pages.clone(),
            Some(shown(
                receipt(&one, won, t, None),
                with(keys.clone(), |k| {
                    k.as_object_mut().expect("an object").remove("public_key");
                }),
                None,
            )),
        ));
        // An event released before keys were committed: its head says which keys it vouches for.
        let old = sale(10, None, &[], Some(4));
        let old_pages = pages(&old.whole, 4);
        let old_head = head(&old, &one, Some(vec![one.public().id()]));
        // The keys document as published, changed by `change`.
        let old_keys = |change: &dyn Fn(&mut Value)| with(keys_doc(&one, &old.whole, Some(old_head.clone())), change);
        let old_case = |name: &str, receipt: &str, change: &dyn Fn(&mut Value)| {
            case(name, old_pages.clone(), Some(shown(receipt.to_owned(), old_keys(change), None)))
        };
        cases.extend([
            old_case("no committed keys: left out, its key one the head vouches for", &victim_receipt, &|_| {}),
            old_case(
                "no committed keys: left out, the keys document stating no key_id (each derived)",
                &victim_receipt,
                &|k| {
                    k.as_object_mut().expect("an object").remove("key_id");
                },
            ),
            old_case(
                "no committed keys: left out, signed by a key the keys document adds and no head names",
                &receipt(&stranger(), victim, t, None),
                &|k| {
                    k["next"] = json!({"key_id": stranger().public().id(), "public_key": stranger().public().encoded()})
                },
            ),
            old_case(
                "no committed keys: the keys document naming committed keys the draw does not",
                &victim_receipt,
                &|k| k["committed"] = json!([{"key_id": one.public().id(), "public_key": one.public().encoded()}]),
            ),
            old_case("no committed keys: the keys document's previous key of small order", &victim_receipt, &|k| {
                k["previous"] = json!({"public_key": B64.encode(identity())})
            }),
            old_case(
                "no committed keys: the keys document's previous key not in canonical form (its y + p)",
                &victim_receipt,
                &|k| k["previous"] = json!({"public_key": B64.encode(large_order_y_plus_p())}),
            ),
            old_case(
                "no committed keys: the keys document stating an id that is not its key's",
                &victim_receipt,
                &|k| k["key_id"] = json!(stranger().public().id()),
            ),
        ]);
        cases
    }

    pub fn generate() -> Vectors {
        let key = signer();
        let id = key.public().id();
        let payload = format!(r#"{{"k":"{id}","e":"ev-docs","l":"{}","t":"2027-03-01T09:30:00Z"}}"#, "ab".repeat(32));
        let head = format!(
            r#"{{"k":"{id}","e":"ev-docs","algorithm":"ticket-draw/v2","commitment":"{}","root":"{}","entrant_count":10,"entries_close":"{CLOSE}","drawn_at":"{DRAWN}","capacity":3,"receipt_keys":["{id}"]}}"#,
            commitment(&[0xcd; 32]),
            "ef".repeat(32)
        );
        let mut case = draw_cases();
        case.extend(receipt_cases());
        Vectors {
            version: VERSION.into(),
            signature: signature_vectors(&sha("ticket-grab receipt key"), &payload, &head),
            case,
        }
    }

    fn file() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/fairness-documents.json")
    }

    /// The file is what the code computes (`UPDATE_VECTORS=1` writes it afresh), and each verdict
    /// is the one the text gives.
    #[test]
    fn the_document_vectors_in_the_repository_are_the_codes() {
        let ours = generate();
        if std::env::var_os("UPDATE_VECTORS").is_some() {
            let text = serde_json::to_string_pretty(&ours).expect("vectors") + "\n";
            std::fs::write(file(), text).expect("the vectors written");
        }
        let text = std::fs::read_to_string(file()).expect("tests/vectors/fairness-documents.json");
        let theirs: Vectors = serde_json::from_str(&text).expect("the vectors' form");
        assert_eq!(theirs, ours);
        assert_eq!(check(&theirs), Ok(theirs.signature.len() + theirs.case.len()));
        let checks: Vec<(&str, bool)> = theirs.signature.iter().map(|v| (v.rule.as_str(), v.checks)).collect();
        let passing = |rule: &str| rule.contains("it checks");
        for (rule, checks) in checks {
            assert_eq!(checks, passing(rule), "{rule}");
        }
        let exits: Vec<(&str, u8)> = theirs.case.iter().map(|c| (c.name.as_str(), c.exit)).collect();
        println!("{exits:#?}");
    }
}
