//! A draw anyone can check (issue 27's ballot and fair open): the order of a list of entrants,
//! derived from a secret the organiser committed to before the list was known, the list itself,
//! and optionally a public randomness beacon's round.
//!
//! # `ticket-draw/v1`, precisely enough to write again
//!
//! 1. **Entrants.** User ids (UTF-8), each once, sorted by their bytes: the order they registered in
//!    plays no part.
//! 2. **Root.** A Merkle tree over the sorted list: a leaf is `SHA-256(0x00 || id)`, a node
//!    `SHA-256(0x01 || left || right)`; at each level a last node without a partner is carried up
//!    unchanged. The root of an empty list is `SHA-256()` of nothing.
//! 3. **Seed.** `SHA-256("ticket-draw/v1" || 0x00 || secret || root || beacon)`: the secret's 32
//!    bytes, the root's 32, and the beacon round's randomness, `SHA-256` of its signature's bytes
//!    (32 bytes; nothing without a beacon). The round's signature is checked against its chain's
//!    key first (`super::beacon`).
//! 4. **Order.** Fisher-Yates over the sorted list, driven by the stream of `super::stream` keyed
//!    by the seed (ChaCha20 of RFC 8439, zero nonce, little-endian words, draws by rejection): for
//!    `i` from `n - 1` down to 1, `j` = a draw below `i + 1`, swap positions `i` and `j`. The list
//!    as it then stands is the draw's order, first place first.
//!
//! Published after the draw: the algorithm's name, the commitment (`SHA-256(secret)`, published
//! before the list was fixed), the secret, the root, the beacon (if any), the sorted entrants and
//! the order. [`Published::verify`] recomputes everything and names the first fault.
//!
//! What it does not stop: an organiser who knows the secret and can register accounts could try
//! many entrant lists (add or drop accounts of their own) until one gives an order they like. A
//! beacon round named at release, unknown to anyone until after the list is fixed, stops that.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{
    beacon::{Beacon, BeaconFault},
    hex::{decode as from_hex, encode as hex},
    stream::Stream,
};

pub const ALGORITHM: &str = "ticket-draw/v1";

type Hash = [u8; 32];

fn leaf(id: &str) -> Hash {
    Sha256::new().chain_update([0u8]).chain_update(id.as_bytes()).finalize().into()
}

fn node(left: &Hash, right: &Hash) -> Hash {
    Sha256::new().chain_update([1u8]).chain_update(left).chain_update(right).finalize().into()
}

/// Step 1: each id once, sorted by its bytes.
pub fn entrants<I: IntoIterator<Item = String>>(ids: I) -> Vec<String> {
    let mut ids: Vec<String> = ids.into_iter().collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Step 2: the tree's levels, leaves first, root last.
fn levels(sorted: &[String]) -> Vec<Vec<Hash>> {
    let mut levels = vec![sorted.iter().map(|id| leaf(id)).collect::<Vec<_>>()];
    while levels.last().map_or(0, Vec::len) > 1 {
        let below = levels.last().expect("a level");
        let up = below.chunks(2).map(|pair| if pair.len() == 2 { node(&pair[0], &pair[1]) } else { pair[0] }).collect();
        levels.push(up);
    }
    levels
}

pub fn root(sorted: &[String]) -> Hash {
    match levels(sorted).last().and_then(|l| l.first()) {
        Some(root) => *root,
        None => Sha256::digest([]).into(),
    }
}

/// Step 3.
pub fn seed(secret: &Hash, root: &Hash, beacon: &[u8]) -> Hash {
    Sha256::new()
        .chain_update(ALGORITHM.as_bytes())
        .chain_update([0u8])
        .chain_update(secret)
        .chain_update(root)
        .chain_update(beacon)
        .finalize()
        .into()
}

/// Step 4: the sorted entrants in the draw's order.
pub fn order(sorted: &[String], seed: &Hash) -> Vec<String> {
    let mut list = sorted.to_vec();
    let mut stream = Stream::new(seed);
    for i in (1..list.len()).rev() {
        let j = stream.below(i as u64 + 1) as usize;
        list.swap(i, j);
    }
    list
}

/// The whole draw: the sorted entrants' order for this secret and beacon.
pub fn draw(sorted: &[String], secret: &Hash, beacon: &[u8]) -> Vec<String> {
    order(sorted, &seed(secret, &root(sorted), beacon))
}

/// The commitment to a secret, published before the list is fixed.
pub fn commitment(secret: &Hash) -> String {
    hex(&Sha256::digest(secret))
}

/// One step of an inclusion proof: the sibling's hash, and whether it stands on the left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofStep {
    pub sibling: String,
    pub left: bool,
}

/// That `id` is in the list whose root is published: the path from its leaf to the root.
pub fn proof(sorted: &[String], id: &str) -> Option<Vec<ProofStep>> {
    let mut index = sorted.binary_search_by(|e| e.as_str().cmp(id)).ok()?;
    let mut steps = Vec::new();
    for level in levels(sorted).iter().take_while(|l| l.len() > 1) {
        let sibling = index ^ 1;
        if sibling < level.len() {
            steps.push(ProofStep { sibling: hex(&level[sibling]), left: sibling < index });
        }
        index /= 2;
    }
    Some(steps)
}

/// Whether `proof` leads from `id` to `root` (hex).
pub fn proves(id: &str, proof: &[ProofStep], root: &str) -> bool {
    let mut at = leaf(id);
    for step in proof {
        let Some(sibling) = from_hex::<32>(&step.sibling) else { return false };
        at = if step.left { node(&sibling, &at) } else { node(&at, &sibling) };
    }
    hex(&at) == root
}

/// What an event publishes of its draw, for anyone to check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub algorithm: String,
    pub commitment: String,
    pub secret: String,
    pub root: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beacon: Option<Beacon>,
    pub entrants: Vec<String>,
    pub order: Vec<String>,
    /// The sale's terms the draw ran under, as its event fixed them at release: when entries
    /// closed (RFC 3339), when it was drawn, how many places win, and a fair open's admission
    /// rate. Checked against each other and the beacon round; absent from a draw published before
    /// they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries_close: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_rate: Option<u32>,
}

/// What is wrong with a published draw, the first fault found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrawFault {
    #[error("the algorithm is {0}, not {ALGORITHM}")]
    Algorithm(String),
    #[error("the secret is not 64 lowercase hex digits")]
    BadSecret,
    #[error(transparent)]
    Beacon(#[from] BeaconFault),
    #[error("the secret does not hash to the commitment")]
    Commitment,
    #[error("the entrants are not each once, in byte order")]
    Entrants,
    #[error("the entrants do not hash to the published root")]
    Root,
    #[error("the order is not the draw's: first difference at place {0}")]
    Order(usize),
    #[error("the draw is dated before its entries closed, or a date is not RFC 3339")]
    DrawnBeforeClose,
    #[error("the beacon round is not quicknet's first round after the entries closed ({0})")]
    NotTheFirstRound(u64),
}

impl Published {
    /// The draw of `entrants` with `secret` (and a beacon round, checked), as an event publishes it.
    pub fn new(entrants: Vec<String>, secret: &Hash, beacon: Option<Beacon>) -> Result<Self, BeaconFault> {
        let randomness = beacon.as_ref().map(Beacon::verify).transpose()?;
        let root = root(&entrants);
        let order = order(&entrants, &seed(secret, &root, randomness.as_ref().map_or(&[][..], |r| &r[..])));
        Ok(Self {
            algorithm: ALGORITHM.to_owned(),
            commitment: commitment(secret),
            secret: hex(secret),
            root: hex(&root),
            beacon,
            entrants,
            order,
            entries_close: None,
            drawn_at: None,
            capacity: None,
            admission_rate: None,
        })
    }

    /// Recomputes the draw from what is published.
    pub fn verify(&self) -> Result<(), DrawFault> {
        if self.algorithm != ALGORITHM {
            return Err(DrawFault::Algorithm(self.algorithm.clone()));
        }
        let secret = from_hex::<32>(&self.secret).ok_or(DrawFault::BadSecret)?;
        let beacon = match &self.beacon {
            Some(round) => round.verify()?.to_vec(),
            None => Vec::new(),
        };
        if commitment(&secret) != self.commitment {
            return Err(DrawFault::Commitment);
        }
        if self.entrants.windows(2).any(|w| w[0] >= w[1]) {
            return Err(DrawFault::Entrants);
        }
        let root = root(&self.entrants);
        if hex(&root) != self.root {
            return Err(DrawFault::Root);
        }
        let wanted = order(&self.entrants, &seed(&secret, &root, &beacon));
        if let Some(place) = (0..wanted.len().max(self.order.len())).find(|i| wanted.get(*i) != self.order.get(*i)) {
            return Err(DrawFault::Order(place + 1));
        }
        self.verify_terms()
    }

    /// The terms against each other: drawn after the entries closed, and a quicknet round the
    /// first after the close (another chain's timing is the deployment's, not known here).
    fn verify_terms(&self) -> Result<(), DrawFault> {
        let Some(close) = &self.entries_close else { return Ok(()) };
        let time = |t: &str| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                .map_err(|_| DrawFault::DrawnBeforeClose)
        };
        let close = time(close)?;
        if let Some(drawn) = &self.drawn_at
            && time(drawn)? < close
        {
            return Err(DrawFault::DrawnBeforeClose);
        }
        let quicknet = super::beacon::quicknet();
        if let Some(b) = &self.beacon
            && b.public_key == quicknet.public_key
        {
            let first = quicknet.first_round_after(close.unix_timestamp());
            if b.round != first {
                return Err(DrawFault::NotTheFirstRound(first));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn ids(n: usize) -> Vec<String> {
        entrants((0..n).map(|i| format!("user-{i}")))
    }

    #[test]
    fn a_published_draw_checks_out_and_every_tampering_is_named() {
        let published = Published::new(ids(40), &[9; 32], None).unwrap();
        assert_eq!(published.verify(), Ok(()));
        assert_eq!(published.order.len(), 40);

        let mut swapped = published.clone();
        swapped.order.swap(3, 7);
        assert_eq!(swapped.verify(), Err(DrawFault::Order(4)));
        let mut short = published.clone();
        short.order.pop();
        assert_eq!(short.verify(), Err(DrawFault::Order(40)));
        let mut changed = published.clone();
        changed.entrants[5] = format!("{}x", changed.entrants[5]);
        assert_eq!(changed.verify(), Err(DrawFault::Root));
        let mut dropped = published.clone();
        dropped.entrants.remove(0);
        assert_eq!(dropped.verify(), Err(DrawFault::Root));
        let mut twice = published.clone();
        twice.entrants.insert(1, twice.entrants[0].clone());
        assert_eq!(twice.verify(), Err(DrawFault::Entrants));
        let mut wrong = published.clone();
        wrong.secret = hex(&[8; 32]);
        assert_eq!(wrong.verify(), Err(DrawFault::Commitment));
        // A secret that matches a forged commitment still fails on the order.
        let mut forged = published.clone();
        forged.secret = hex(&[8; 32]);
        forged.commitment = commitment(&[8; 32]);
        assert!(matches!(forged.verify(), Err(DrawFault::Order(_))));
    }

    #[test]
    fn a_beacon_round_changes_the_order_and_is_checked() {
        let chain = crate::domain::beacon::LocalChain::new(&[2; 32]);
        let plain = Published::new(ids(30), &[1; 32], None).unwrap();
        let beaconed = Published::new(ids(30), &[1; 32], Some(chain.round(77))).unwrap();
        assert_ne!(plain.order, beaconed.order);
        assert_eq!(beaconed.verify(), Ok(()));
        let mut other = beaconed.clone();
        other.beacon = Some(chain.round(78));
        assert!(matches!(other.verify(), Err(DrawFault::Order(_))), "another round: another order");
        let mut forged = beaconed.clone();
        forged.beacon.as_mut().unwrap().round = 78;
        assert_eq!(forged.verify(), Err(DrawFault::Beacon(BeaconFault::Signature(78))));
        let mut unsigned = chain.round(77);
        unsigned.round = 78;
        assert!(Published::new(ids(30), &[1; 32], Some(unsigned)).is_err(), "a round that does not verify is refused");
    }

    #[test]
    fn every_entrant_proves_membership_and_no_one_else_can() {
        for n in 1..=33 {
            let list = ids(n);
            let root = hex(&root(&list));
            for id in &list {
                let path = proof(&list, id).expect("a member");
                assert!(proves(id, &path, &root), "{id} of {n}");
                assert!(!proves("intruder", &path, &root));
            }
            assert_eq!(proof(&list, "intruder"), None);
        }
    }

    #[test]
    fn the_shuffle_is_uniform() {
        let list = ids(3);
        let mut seen: HashMap<Vec<String>, u32> = HashMap::new();
        let runs = 6_000u32;
        for run in 0..runs {
            let mut secret = [0u8; 32];
            secret[..4].copy_from_slice(&run.to_le_bytes());
            *seen.entry(draw(&list, &secret, b"")).or_default() += 1;
        }
        assert_eq!(seen.len(), 6);
        for (order, count) in seen {
            // 1,000 expected each; 5 standard deviations is about 150.
            assert!((850..1_150).contains(&count), "{order:?}: {count}");
        }
    }

    #[test]
    fn registration_order_and_duplicates_play_no_part() {
        let a = entrants(["b".to_string(), "a".into(), "c".into(), "a".into()]);
        assert_eq!(a, ["a", "b", "c"]);
        assert_eq!(root(&[]), <[u8; 32]>::from(Sha256::digest([])));
    }
}
