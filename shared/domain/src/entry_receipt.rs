//! An entry's signed receipt (`ticket-entry-receipt/v1`, docs/FAIRNESS.md section 6a): given to
//! the entrant when their entry is accepted, naming the entry's leaf in the event's draw
//! (`super::draw`, `ticket-draw/v2`) and no user. A receipt whose leaf is missing from the
//! published draw proves the operator left out an entry it accepted; the entry key that hashes to
//! the leaf proves whose it is.
//!
//! Receipt: `TR1.<base64url payload>.<base64url signature>`, the payload a compact JSON object
//! `{"k":<key id>,"e":<event>,"l":<leaf>,"t":<entered at>}` (and `"r":<rank>` for a fair open's
//! late place), the signature Ed25519 over `"ticket-entry-receipt-v1\n" + payload`. The key is
//! the deployment's receipt key, of its own (derived under its own label, so it signs nothing
//! else and nothing else signs with it); its public halves are published per event
//! (`GET /events/{id}/receipt-key`), the key id as a pass's names its key.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use super::draw::CommittedKey;
use super::{EventId, key_rotation::Staged};

pub const ALGORITHM: &str = "ticket-entry-receipt/v1";
const PREFIX: &str = "TR1.";
const CONTEXT: &[u8] = b"ticket-entry-receipt-v1\n";
/// The draw's signed head (docs/FAIRNESS.md section 6b), by the same key.
const HEAD_PREFIX: &str = "TH1.";
const HEAD_CONTEXT: &[u8] = b"ticket-draw-head-v1\n";
/// Longer receipts are refused before any decoding (a real one is ~250 characters).
pub const MAX_RECEIPT_LEN: usize = 1_024;
/// Longer heads are refused before any decoding (the longest, with a beacon round, two committed
/// keys and a 64-character event id, is ~1,250).
pub const MAX_HEAD_LEN: usize = 4_096;

/// What a receipt says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    #[serde(rename = "k")]
    pub key_id: String,
    #[serde(rename = "e")]
    pub event: EventId,
    /// The entry's leaf, 64 lowercase hex digits.
    #[serde(rename = "l")]
    pub leaf: String,
    /// When the entry was accepted (RFC 3339).
    #[serde(rename = "t")]
    pub entered_at: String,
    /// A fair open's place accepted after its entries closed: its rank behind the shuffled ones,
    /// from 1 (present, it is a number: `null` and 0 are no rank).
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none", deserialize_with = "present_rank")]
    pub late: Option<std::num::NonZeroU64>,
}

fn present_rank<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<std::num::NonZeroU64>, D::Error> {
    present(d)
}

/// An optional member that is present: its value, never `null` (absent is `None`, by `default`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// What the draw's signed head says (docs/FAIRNESS.md section 6b): the terms every page of the
/// published draw carries, signed once the draw is complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawHead {
    #[serde(rename = "k")]
    pub key_id: String,
    #[serde(rename = "e")]
    pub event: EventId,
    pub algorithm: String,
    pub commitment: String,
    pub root: String,
    pub entrant_count: u64,
    pub entries_close: String,
    pub drawn_at: String,
    pub capacity: u32,
    /// Present, each optional member is of its kind: `null` is no value (docs/FAIRNESS.md section 8).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub admission_rate: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub beacon_round: Option<u64>,
    /// The beacon round's chain key and signature (hex): with the root and the secret they fix the
    /// order, not only the entrants.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub beacon_public_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub beacon_signature: Option<String>,
    /// The ids of the keys whose receipts this head vouches for: the keys its event committed to
    /// at release (an event that committed none: the keys published when it was signed). A key
    /// anyone adds to a keys document checks their own receipts, but no head names it.
    pub receipt_keys: Vec<String>,
}

impl DrawHead {
    /// The head of a whole published draw (its pages joined), as its key would sign it.
    pub fn of(draw: &super::draw::Published, key_id: &str) -> Option<Self> {
        Some(Self {
            key_id: key_id.to_owned(),
            event: EventId::parse(draw.event_id.as_deref()?).ok()?,
            algorithm: draw.algorithm.clone(),
            commitment: draw.commitment.clone(),
            root: draw.root.clone(),
            entrant_count: draw.order.len() as u64,
            entries_close: draw.entries_close.clone()?,
            drawn_at: draw.drawn_at.clone()?,
            capacity: draw.capacity?,
            admission_rate: draw.admission_rate,
            beacon_round: draw.beacon.as_ref().map(|b| b.round),
            beacon_public_key: draw.beacon.as_ref().map(|b| b.public_key.clone()),
            beacon_signature: draw.beacon.as_ref().map(|b| b.signature.clone()),
            receipt_keys: draw.receipt_keys.iter().map(|k| k.key_id.clone()).collect(),
        })
    }

    /// Whether the head is the one of `draw` (a whole draw, its pages joined): every member but
    /// its own key's id, the keys it vouches for included (a draw whose terms commit receipt keys;
    /// one published before they were committed names none, and the head's are not compared).
    pub fn matches(&self, draw: &super::draw::Published) -> bool {
        let mut head = self.clone();
        if draw.receipt_keys.is_empty() {
            head.receipt_keys.clear();
        }
        Self::of(draw, &self.key_id).as_ref() == Some(&head)
    }

    /// Whether the head fixes the same draw as `draw`: every member but the key ids (the root, the
    /// commitment, the beacon, the terms). A head that matches so but vouches for other keys than
    /// the draw's terms committed contradicts the operator's own release.
    pub fn matches_order(&self, draw: &super::draw::Published) -> bool {
        let of = Self::of(draw, &self.key_id).map(|h| Self { receipt_keys: Vec::new(), ..h });
        of.as_ref() == Some(&Self { receipt_keys: Vec::new(), ..self.clone() })
    }

    /// Whether the head vouches for receipts signed by the key `key_id`.
    pub fn vouches_for(&self, key_id: &str) -> bool {
        self.receipt_keys.iter().any(|k| k == key_id)
    }
}

/// The key of `keys` that signs for an event whose receipts may be signed only by `committed`:
/// the current one when it is committed, else the staged one, else the one before (a rotation
/// since the release moved the committed key there). `None`: every committed key has rotated out
/// (two rotations since the release); the event can sign nothing more.
pub fn committed_signer<'a>(keys: &'a Staged<ReceiptKey>, committed: &[CommittedKey]) -> Option<&'a ReceiptKey> {
    let is_committed = |k: &ReceiptKey| committed.iter().any(|c| c.key_id == k.public().id());
    std::iter::once(&keys.current).chain(keys.pending.as_ref()).chain(keys.previous.as_ref()).find(|k| is_committed(k))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadReceipt {
    #[error("not an entry receipt")]
    Malformed,
    #[error("the receipt's signature does not match")]
    Forged,
    #[error("the receipt names a key not published for this event")]
    UnknownKey,
}

/// The deployment's receipt key: signs, in the function that accepts entries. Never printed.
#[derive(Clone)]
pub struct ReceiptKey(SigningKey);

impl std::fmt::Debug for ReceiptKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReceiptKey(<redacted>)")
    }
}

impl ReceiptKey {
    /// The key from a deployment secret (at least 16 bytes); the Ed25519 seed is its SHA-256
    /// under this use's own label.
    pub fn new(secret: &[u8]) -> Result<Self, &'static str> {
        if secret.len() < 16 {
            return Err("must be at least 16 bytes");
        }
        let seed: [u8; 32] =
            Sha256::new().chain_update(b"ticket-entry-receipt-key-v1\n").chain_update(secret).finalize().into();
        Ok(Self(SigningKey::from_bytes(&seed)))
    }

    /// A key from its 32-byte Ed25519 seed (the test vectors).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self(SigningKey::from_bytes(seed))
    }

    pub fn public(&self) -> PublicReceiptKey {
        PublicReceiptKey(self.0.verifying_key())
    }

    /// The receipt of an entry with `leaf` in `event`, accepted at `entered_at`.
    pub fn issue(&self, event: &EventId, leaf: &str, entered_at: &str, late: Option<u64>) -> String {
        let receipt = Receipt {
            key_id: self.public().id(),
            event: event.clone(),
            leaf: leaf.to_owned(),
            entered_at: entered_at.to_owned(),
            late: late.and_then(std::num::NonZeroU64::new),
        };
        self.sign(&serde_json::to_vec(&receipt).expect("ids and strings always serialize"))
    }

    /// A receipt of any payload (the vectors' forgeries).
    pub fn sign(&self, payload: &[u8]) -> String {
        self.sign_as(PREFIX, CONTEXT, payload)
    }

    /// The draw's head, signed (its `k` set to this key's id; its `receipt_keys` as given).
    pub fn sign_head(&self, head: &DrawHead) -> String {
        let head = DrawHead { key_id: self.public().id(), ..head.clone() };
        self.sign_head_payload(&serde_json::to_vec(&head).expect("ids and strings always serialize"))
    }

    /// A head of any payload (the vectors').
    pub fn sign_head_payload(&self, payload: &[u8]) -> String {
        self.sign_as(HEAD_PREFIX, HEAD_CONTEXT, payload)
    }

    fn sign_as(&self, prefix: &str, context: &[u8], payload: &[u8]) -> String {
        let payload = URL_SAFE_NO_PAD.encode(payload);
        let signature = self.0.sign(&[context, payload.as_bytes()].concat());
        format!("{prefix}{payload}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes()))
    }
}

/// A public half: checks receipts, cannot sign one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicReceiptKey(VerifyingKey);

impl PublicReceiptKey {
    /// The key as published: 32 bytes, base64url without padding.
    pub fn encoded(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.as_bytes())
    }

    /// A key as published (docs/FAIRNESS.md section 6a's strict rules): 32 bytes in canonical
    /// base64url, the canonical encoding of a point of the curve (`y` below `p`; no sign bit on
    /// `x = 0`), not of small order (a small-order key makes a signature that holds for any message).
    pub fn decode(encoded: &str) -> Result<Self, BadReceipt> {
        let bytes: [u8; 32] =
            URL_SAFE_NO_PAD.decode(encoded).ok().and_then(|b| b.try_into().ok()).ok_or(BadReceipt::Malformed)?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| BadReceipt::Malformed)?;
        if key.is_weak() || key.to_edwards().compress().to_bytes() != bytes {
            return Err(BadReceipt::Malformed);
        }
        Ok(Self(key))
    }

    /// The key's id: the first 8 bytes of its SHA-256, base64url.
    pub fn id(&self) -> String {
        URL_SAFE_NO_PAD.encode(&Sha256::digest(self.0.as_bytes())[..8])
    }
}

/// The public receipt keys an event publishes: the current one, and around a rotation the next
/// and the previous, so a receipt signed just before or after it still checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptKeyRing {
    pub current: PublicReceiptKey,
    pub next: Option<PublicReceiptKey>,
    pub previous: Option<PublicReceiptKey>,
}

impl ReceiptKeyRing {
    pub fn of(keys: &Staged<ReceiptKey>) -> Self {
        let public = keys.map(ReceiptKey::public);
        Self { current: public.current, next: public.pending, previous: public.previous }
    }

    fn keys(&self) -> impl Iterator<Item = &PublicReceiptKey> {
        std::iter::once(&self.current).chain(self.next.as_ref()).chain(self.previous.as_ref())
    }

    /// The ids of every key in the ring.
    pub fn ids(&self) -> Vec<String> {
        self.keys().map(PublicReceiptKey::id).collect()
    }

    /// What an event released now commits to (docs/FAIRNESS.md section 6a): the key that signs,
    /// and the one a staged rotation will sign with.
    pub fn committed(&self) -> Vec<CommittedKey> {
        let key = |k: &PublicReceiptKey| CommittedKey { key_id: k.id(), public_key: k.encoded() };
        std::iter::once(&self.current).chain(self.next.as_ref()).map(key).collect()
    }

    /// The keys an event committed to, as a ring that checks its receipts and its head: `None` when
    /// it committed none (an event released before they were), or a key is malformed or not the
    /// id it is listed under.
    pub fn of_committed(committed: &[CommittedKey]) -> Option<Self> {
        let mut keys =
            committed.iter().map(|c| PublicReceiptKey::decode(&c.public_key).ok().filter(|k| k.id() == c.key_id));
        let current = keys.next()??;
        let next = keys.next().map(|k| k.ok_or(())).transpose().ok()?;
        if keys.next().is_some() {
            return None;
        }
        Some(Self { current, next, previous: None })
    }

    /// As `GET /events/{id}/receipt-key` shows it: the keys, and once the event's draw is
    /// complete its signed head (`draw_head`).
    pub fn published(&self, event: &EventId, draw_head: Option<String>) -> serde_json::Value {
        let key = |k: &PublicReceiptKey| serde_json::json!({ "key_id": k.id(), "public_key": k.encoded() });
        serde_json::json!({
            "event_id": event,
            "algorithm": ALGORITHM,
            "signature": "Ed25519",
            "key_id": self.current.id(),
            "public_key": self.current.encoded(),
            "next": self.next.as_ref().map(key),
            "previous": self.previous.as_ref().map(key),
            "draw_head": draw_head,
        })
    }

    /// The ring as published (the verifier's input): the current key, and `next` and `previous`
    /// each a key or `null` (absent).
    pub fn from_published(doc: &serde_json::Value) -> Result<Self, BadReceipt> {
        // A key's id is derived, never trusted: a stated id that is not its key's own contradicts it.
        let key = |v: &serde_json::Value| -> Result<PublicReceiptKey, BadReceipt> {
            let k = v.get("public_key").and_then(serde_json::Value::as_str).ok_or(BadReceipt::Malformed)?;
            let key = PublicReceiptKey::decode(k)?;
            match v.get("key_id") {
                None | Some(serde_json::Value::Null) => Ok(key),
                Some(id) if id.as_str() == Some(key.id().as_str()) => Ok(key),
                Some(_) => Err(BadReceipt::Malformed),
            }
        };
        let around = |name: &str| match doc.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => key(v).map(Some),
        };
        Ok(Self { current: key(doc)?, next: around("next")?, previous: around("previous")? })
    }

    /// Checks a receipt's signature with the key it names and reads it.
    pub fn verify(&self, receipt: &str) -> Result<Receipt, BadReceipt> {
        let said: Receipt = self.open(PREFIX, CONTEXT, MAX_RECEIPT_LEN, receipt, |r: &Receipt| &r.key_id)?;
        if super::hex::decode::<32>(&said.leaf).is_none() {
            return Err(BadReceipt::Malformed);
        }
        Ok(said)
    }

    /// Checks a draw's signed head with the key it names and reads it.
    pub fn verify_head(&self, head: &str) -> Result<DrawHead, BadReceipt> {
        self.open(HEAD_PREFIX, HEAD_CONTEXT, MAX_HEAD_LEN, head, |h: &DrawHead| &h.key_id)
    }

    fn open<T: serde::de::DeserializeOwned>(
        &self,
        prefix: &str,
        context: &[u8],
        max_len: usize,
        text: &str,
        key_id: impl Fn(&T) -> &String,
    ) -> Result<T, BadReceipt> {
        if text.len() > max_len {
            return Err(BadReceipt::Malformed);
        }
        let rest = text.strip_prefix(prefix).ok_or(BadReceipt::Malformed)?;
        let (payload, signature) = rest.split_once('.').ok_or(BadReceipt::Malformed)?;
        let signature: [u8; 64] =
            URL_SAFE_NO_PAD.decode(signature).ok().and_then(|s| s.try_into().ok()).ok_or(BadReceipt::Malformed)?;
        let json = URL_SAFE_NO_PAD.decode(payload).map_err(|_| BadReceipt::Malformed)?;
        // Read before its signature is checked only to learn which key to check it with.
        let said: T =
            super::strict_json::parse(&json).and_then(serde_json::from_value).map_err(|_| BadReceipt::Malformed)?;
        let key = self.keys().find(|k| k.id() == *key_id(&said)).ok_or(BadReceipt::UnknownKey)?;
        // Strict: no small-order key or R (a key that could disown what it signed).
        key.0
            .verify_strict(&[context, payload.as_bytes()].concat(), &ed25519_dalek::Signature::from_bytes(&signature))
            .map_err(|_| BadReceipt::Forged)?;
        Ok(said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::EntryKey;

    fn event() -> EventId {
        EventId::parse("evt-receipts").unwrap()
    }

    #[test]
    fn a_receipt_checks_with_its_key_and_names_the_leaf_of_its_entry_key() {
        let key = ReceiptKey::new(b"0123456789abcdef-receipts").unwrap();
        let ring = ReceiptKeyRing::of(&Staged::only(key.clone()));
        let entry = EntryKey::generate();
        let receipt = key.issue(&event(), &entry.leaf(&event()), "2026-11-27T10:00:00Z", None);
        let said = ring.verify(&receipt).unwrap();
        assert_eq!((said.event, said.leaf.as_str()), (event(), entry.leaf(&event()).as_str()));
        // The ring read back from what the route publishes checks it too.
        let published = ReceiptKeyRing::from_published(&ring.published(&event(), None)).unwrap();
        assert_eq!(published.verify(&receipt).unwrap().leaf, said.leaf);
    }

    #[test]
    fn a_changed_or_foreign_receipt_is_refused() {
        let key = ReceiptKey::new(b"0123456789abcdef-receipts").unwrap();
        let ring = ReceiptKeyRing::of(&Staged::only(key.clone()));
        let receipt = key.issue(&event(), &"ab".repeat(32), "2026-11-27T10:00:00Z", Some(3));
        let (head, signature) = receipt.rsplit_once('.').unwrap();
        let other = key.issue(&event(), &"cd".repeat(32), "2026-11-27T10:00:00Z", Some(3));
        let (other_head, _) = other.rsplit_once('.').unwrap();
        assert_eq!(ring.verify(&format!("{other_head}.{signature}")), Err(BadReceipt::Forged));
        assert_eq!(ring.verify(&format!("{head}.AAAA")), Err(BadReceipt::Malformed));
        // Signed by a key whose id the ring does not know.
        let stranger = ReceiptKey::new(b"another-secret-of-16+bytes").unwrap();
        let foreign = stranger.issue(&event(), &"ab".repeat(32), "2026-11-27T10:00:00Z", None);
        assert_eq!(ring.verify(&foreign), Err(BadReceipt::UnknownKey));
        // A stranger naming the ring's key id still fails on the signature.
        let payload = serde_json::json!({"k": key.public().id(), "e": event(), "l": "ab".repeat(32), "t": "x"});
        let forged = stranger.sign(payload.to_string().as_bytes());
        assert_eq!(ring.verify(&forged), Err(BadReceipt::Forged));
        assert_eq!(ring.verify(&"TR1.".repeat(300)), Err(BadReceipt::Malformed));
        assert!(ReceiptKey::new(b"short").is_err());
    }

    #[test]
    fn the_receipt_key_is_not_the_pass_key_of_the_same_secret() {
        let secret = b"0123456789abcdef-one-secret";
        let receipt = ReceiptKey::new(secret).unwrap().public().encoded();
        let pass = crate::ticket_pass::PassKey::new(secret).unwrap().public().encoded();
        assert_ne!(receipt, pass);
    }

    #[test]
    fn a_rotation_voids_no_receipt_either_side_signed() {
        let (old, new) =
            (ReceiptKey::new(b"0123456789abcdef-old").unwrap(), ReceiptKey::new(b"0123456789abcdef-new").unwrap());
        let before = old.issue(&event(), &"ab".repeat(32), "2026-11-27T10:00:00Z", None);
        let after = new.issue(&event(), &"cd".repeat(32), "2026-11-27T10:05:00Z", None);
        // Staged: the old key signs, the new one is published as next (an environment that read
        // the new key first signs with it); promoted: the old one stays published as previous.
        let staged = ReceiptKeyRing::of(&Staged::of(old.clone(), Some(new.clone()), None));
        let promoted = ReceiptKeyRing::of(&Staged::of(new.clone(), None, Some(old.clone())));
        for ring in [&staged, &promoted] {
            assert!(ring.verify(&before).is_ok() && ring.verify(&after).is_ok());
        }
        // Two rotations later the first key is gone, and so is what it signed: keep the published
        // keys with the receipt (ticketgrab-verify reads them from the file).
        let later = ReceiptKeyRing::of(&Staged::only(new));
        assert_eq!(later.verify(&before), Err(BadReceipt::UnknownKey));
    }

    #[test]
    fn an_event_signs_only_with_the_keys_it_committed_to_and_checks_against_them_alone() {
        let key = |n: &str| ReceiptKey::new(format!("0123456789abcdef-{n}").as_bytes()).unwrap();
        let (first, second, third) = (key("first"), key("second"), key("third"));
        // Released with a rotation staged: the current key and the staged one are committed.
        let committed = ReceiptKeyRing::of(&Staged::of(first.clone(), Some(second.clone()), None)).committed();
        assert_eq!(committed.len(), 2);
        // Promoted since: the committed key that signs is the new current one.
        let promoted = Staged::of(second.clone(), None, Some(first.clone()));
        assert_eq!(committed_signer(&promoted, &committed).map(|k| k.public()), Some(second.public()));
        // A rotation after the release: the current key is not committed, the one before is.
        let rotated = Staged::of(third.clone(), None, Some(second.clone()));
        assert_eq!(committed_signer(&rotated, &committed).map(|k| k.public()), Some(second.public()));
        // Two rotations past every committed key: nothing signs.
        let gone = Staged::of(third.clone(), None, None);
        assert!(committed_signer(&gone, &committed).is_none());
        // The committed keys check their receipts whatever the keys document says; a key not
        // committed checks none, and a list whose id is not its key's own is refused.
        let ring = ReceiptKeyRing::of_committed(&committed).unwrap();
        let signed = second.issue(&event(), &"ab".repeat(32), "2026-11-27T10:00:00Z", None);
        assert!(ring.verify(&signed).is_ok());
        let foreign = third.issue(&event(), &"ab".repeat(32), "2026-11-27T10:00:00Z", None);
        assert_eq!(ring.verify(&foreign), Err(BadReceipt::UnknownKey));
        let mut lying = committed.clone();
        lying[0].key_id = third.public().id();
        assert!(ReceiptKeyRing::of_committed(&lying).is_none());
        assert!(ReceiptKeyRing::of_committed(&[]).is_none());
    }
}
