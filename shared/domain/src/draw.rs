//! A draw anyone can check (issue 27's ballot and fair open): the order of a list of entrants,
//! derived from a secret the organiser committed to before the list was known, the list itself,
//! and optionally a public randomness beacon's round. docs/FAIRNESS.md is the normative text of
//! every byte (sections 2, 2a and 3); this module is its implementation.
//!
//! Two versions: `ticket-draw/v1` shuffles the users' ids themselves (the draws released before
//! private entrants), `ticket-draw/v2` shuffles per-event leaves that reveal no user id, each
//! `SHA-256(0x00 || event || 0x00 || entry key)` with a random key only the entrant is given
//! ([`entry_leaf`]). An event's draw terms name the version it was released with, and
//! [`Published::verify`] checks either.
//!
//! What it does not stop: an organiser who knows the secret and can register accounts could try
//! many entrant lists (add or drop accounts of their own) until one gives an order they like. A
//! beacon round named at release, unknown to anyone until after the list is fixed, stops that.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{
    EventId,
    beacon::{Beacon, BeaconFault},
    hex::{decode as from_hex, encode as hex},
    stream::Stream,
};

pub type Hash = [u8; 32];

/// Which bytes a draw is made of (docs/FAIRNESS.md: a new name wherever a byte changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Algorithm {
    /// The entrants are user ids (draws released before private entrants).
    #[serde(rename = "ticket-draw/v1")]
    V1,
    /// The entrants are per-event leaves of random entry keys ([`entry_leaf`]).
    #[serde(rename = "ticket-draw/v2")]
    V2,
}

impl Algorithm {
    /// What a release names from now on.
    pub const CURRENT: Self = Self::V2;

    pub fn name(self) -> &'static str {
        match self {
            Self::V1 => "ticket-draw/v1",
            Self::V2 => "ticket-draw/v2",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        [Self::V1, Self::V2].into_iter().find(|a| a.name() == name)
    }

    /// An entrant's leaf: v1 hashes the user id, v2's entrant is its leaf already (hex); `None`
    /// for a v2 entrant that is not 64 lowercase hex digits.
    pub fn leaf(self, entrant: &str) -> Option<Hash> {
        match self {
            Self::V1 => Some(Sha256::new().chain_update([0u8]).chain_update(entrant.as_bytes()).finalize().into()),
            Self::V2 => from_hex::<32>(entrant),
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An entry's key: 32 random bytes given to the entrant alone (docs/FAIRNESS.md section 2a).
#[derive(Clone, PartialEq, Eq)]
pub struct EntryKey([u8; 32]);

impl std::fmt::Debug for EntryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EntryKey(<redacted>)")
    }
}

impl EntryKey {
    pub fn generate() -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the system's random source");
        Self(key)
    }

    pub fn from_hex(text: &str) -> Option<Self> {
        from_hex::<32>(text).map(Self)
    }

    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// This entry's leaf in `event`'s draw, hex.
    pub fn leaf(&self, event: &EventId) -> String {
        hex(&self.leaf_bytes(event))
    }

    pub fn leaf_bytes(&self, event: &EventId) -> Hash {
        entry_leaf(event, &self.0)
    }
}

/// A `ticket-draw/v2` leaf: `SHA-256(0x00 || event id || 0x00 || key)`.
pub fn entry_leaf(event: &EventId, key: &[u8; 32]) -> Hash {
    Sha256::new()
        .chain_update([0u8])
        .chain_update(event.as_str().as_bytes())
        .chain_update([0u8])
        .chain_update(key)
        .finalize()
        .into()
}

fn node(left: &Hash, right: &Hash) -> Hash {
    Sha256::new().chain_update([1u8]).chain_update(left).chain_update(right).finalize().into()
}

/// Step 1: each entrant once, sorted by its bytes (v2's hex leaves sort as their bytes do).
pub fn entrants<I: IntoIterator<Item = String>>(ids: I) -> Vec<String> {
    let mut ids: Vec<String> = ids.into_iter().collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Step 2: the tree's levels, leaves first, root last. A v2 entrant that is no leaf hashes as
/// none (zeros): its list fails the check of its entrants first.
fn levels(algorithm: Algorithm, sorted: &[String]) -> Vec<Vec<Hash>> {
    tree(sorted.iter().map(|e| algorithm.leaf(e).unwrap_or_default()).collect())
}

/// The levels above `leaves` (a last node without a partner carried up), leaves first.
fn tree(leaves: Vec<Hash>) -> Vec<Vec<Hash>> {
    let mut levels = vec![leaves];
    while levels.last().map_or(0, Vec::len) > 1 {
        let below = levels.last().expect("a level");
        let up = below.chunks(2).map(|pair| if pair.len() == 2 { node(&pair[0], &pair[1]) } else { pair[0] }).collect();
        levels.push(up);
    }
    levels
}

fn top(levels: &[Vec<Hash>]) -> Hash {
    match levels.last().and_then(|l| l.first()) {
        Some(root) => *root,
        None => Sha256::digest([]).into(),
    }
}

pub fn root(algorithm: Algorithm, sorted: &[String]) -> Hash {
    top(&levels(algorithm, sorted))
}

/// Step 3.
pub fn seed(algorithm: Algorithm, secret: &Hash, root: &Hash, beacon: &[u8]) -> Hash {
    Sha256::new()
        .chain_update(algorithm.name().as_bytes())
        .chain_update([0u8])
        .chain_update(secret)
        .chain_update(root)
        .chain_update(beacon)
        .finalize()
        .into()
}

/// Step 4: the sorted entrants in the draw's order.
pub fn order(sorted: &[String], seed: &Hash) -> Vec<String> {
    shuffled(sorted.len(), seed).into_iter().map(|i| sorted[i as usize].clone()).collect()
}

/// Step 4 on places: each place's entrant, by its index in the sorted list.
fn shuffled(n: usize, seed: &Hash) -> Vec<u32> {
    let mut list: Vec<u32> = (0..n as u32).collect();
    let mut stream = Stream::new(seed);
    for i in (1..list.len()).rev() {
        let j = stream.below(i as u64 + 1) as usize;
        list.swap(i, j);
    }
    list
}

/// A draw as the server keeps it: 32 bytes and two indices an entrant, not strings (a million
/// entrants are some 110 MB here against some 400 MB as text). Its entrants are indices into the
/// sorted list; a page of the published draw is made from it on demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compact {
    pub algorithm: Algorithm,
    /// The tree: level 0 is each entrant's leaf in entrant (sorted) order; the root last.
    levels: Vec<Vec<Hash>>,
    /// Place (from 0) -> entrant index, and back.
    order: Vec<u32>,
    place_of: Vec<u32>,
}

impl Compact {
    /// The draw of the entrants whose leaves are `leaves` (in entrant order: v1's the user ids'
    /// hashes in the ids' order, v2's sorted), with the revealed secret and the round's
    /// randomness (empty without a round).
    pub fn draw(algorithm: Algorithm, leaves: Vec<Hash>, secret: &Hash, randomness: &[u8]) -> Self {
        let levels = tree(leaves);
        let order = shuffled(levels[0].len(), &seed(algorithm, secret, &top(&levels), randomness));
        let mut place_of = vec![0u32; order.len()];
        for (place, &entrant) in order.iter().enumerate() {
            place_of[entrant as usize] = place as u32;
        }
        Self { algorithm, levels, order, place_of }
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn root(&self) -> Hash {
        top(&self.levels)
    }

    /// The entrants' leaves, in entrant order.
    pub fn leaves(&self) -> &[Hash] {
        &self.levels[0]
    }

    /// The entrant at `place` (from 0), by index.
    pub fn at(&self, place: usize) -> Option<usize> {
        self.order.get(place).map(|&i| i as usize)
    }

    /// Entrant `index`'s place, from 0.
    pub fn place_of(&self, index: usize) -> Option<usize> {
        self.place_of.get(index).map(|&p| p as usize)
    }

    /// The path from entrant `index`'s leaf to the root.
    pub fn proof(&self, mut index: usize) -> Option<Vec<ProofStep>> {
        if index >= self.len() {
            return None;
        }
        let mut steps = Vec::new();
        for level in self.levels.iter().take_while(|l| l.len() > 1) {
            let sibling = index ^ 1;
            if sibling < level.len() {
                steps.push(ProofStep { sibling: hex(&level[sibling]), left: sibling < index });
            }
            index /= 2;
        }
        Some(steps)
    }
}

/// The whole draw: the sorted entrants' order for this secret and beacon.
pub fn draw(algorithm: Algorithm, sorted: &[String], secret: &Hash, beacon: &[u8]) -> Vec<String> {
    order(sorted, &seed(algorithm, secret, &root(algorithm, sorted), beacon))
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

/// That `entrant` is in the list whose root is published: the path from its leaf to the root.
pub fn proof(algorithm: Algorithm, sorted: &[String], entrant: &str) -> Option<Vec<ProofStep>> {
    let mut index = sorted.binary_search_by(|e| e.as_str().cmp(entrant)).ok()?;
    let mut steps = Vec::new();
    for level in levels(algorithm, sorted).iter().take_while(|l| l.len() > 1) {
        let sibling = index ^ 1;
        if sibling < level.len() {
            steps.push(ProofStep { sibling: hex(&level[sibling]), left: sibling < index });
        }
        index /= 2;
    }
    Some(steps)
}

/// Whether `proof` leads from `entrant` (a v1 user id, a v2 leaf) to `root` (hex).
pub fn proves(algorithm: Algorithm, entrant: &str, proof: &[ProofStep], root: &str) -> bool {
    let Some(mut at) = algorithm.leaf(entrant) else { return false };
    for step in proof {
        let Some(sibling) = from_hex::<32>(&step.sibling) else { return false };
        at = if step.left { node(&sibling, &at) } else { node(&at, &sibling) };
    }
    hex(&at) == root
}

/// The most places one page of a published draw holds (docs/FAIRNESS.md section 2a): 10,000
/// leaves are some 670 KB of JSON, far below a Lambda reply's 6 MB.
pub const PAGE_PLACES: usize = 10_000;

/// The page of `len` places from `from`: its first place, the one after its last, and the next
/// page's first (none after the last page).
pub fn page_bounds(from: usize, len: usize) -> (usize, usize, Option<usize>) {
    let from = from.min(len);
    let to = (from + PAGE_PLACES).min(len);
    (from, to, (to < len).then_some(to))
}

/// A receipt key an event's receipts may be signed with, fixed at release before its first entry
/// (docs/FAIRNESS.md section 6a): its id and its public half, in the event's published terms and
/// on every page of its draw. A receipt, and the draw's head, check against these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedKey {
    pub key_id: String,
    pub public_key: String,
}

/// What an event publishes of its draw, for anyone to check. A `ticket-draw/v1` draw is one
/// document with its entrants (user ids); a `ticket-draw/v2` draw is published in pages of
/// [`PAGE_PLACES`] places of its order (leaves), its entrants being those leaves sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub algorithm: String,
    /// The event drawn (v2: a receipt names it; absent from a draw published before it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    pub commitment: String,
    pub secret: String,
    pub root: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beacon: Option<Beacon>,
    /// v1's entrants, sorted; v2 publishes none (they are the order's leaves sorted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entrants: Vec<String>,
    /// How many entered (v2: the length of the whole order, over every page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrant_count: Option<u64>,
    /// A page's first place (an index from 0) and the next page's; absent when the document is
    /// the whole draw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
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
    /// The receipt keys the event committed to at release (docs/FAIRNESS.md section 6a): a
    /// receipt and the draw's head check against these; absent from a draw whose event committed
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub receipt_keys: Vec<CommittedKey>,
}

/// What is wrong with a published draw, the first fault found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrawFault {
    #[error("the algorithm is {0}, not ticket-draw/v1 or ticket-draw/v2")]
    Algorithm(String),
    #[error("the secret is not 64 lowercase hex digits")]
    BadSecret,
    #[error(transparent)]
    Beacon(#[from] BeaconFault),
    #[error("the secret does not hash to the commitment")]
    Commitment,
    #[error("the entrants are not each once, in byte order (v2: each a leaf of 64 lowercase hex digits)")]
    Entrants,
    #[error("the entrants do not hash to the published root")]
    Root,
    #[error("the order is not the draw's: first difference at place {0}")]
    Order(usize),
    #[error("the draw is dated before its entries closed, or a date is not RFC 3339")]
    DrawnBeforeClose,
    #[error("the beacon round is not quicknet's first round after the entries closed ({0})")]
    NotTheFirstRound(u64),
    #[error("the pages do not make one draw: {0}")]
    Pages(String),
}

impl Published {
    /// The draw of `entrants` (sorted, each once) with `secret` (and a beacon round, checked), as
    /// an event publishes it whole; v2's entrants are left out of what it shows
    /// ([`Published::page`]).
    pub fn new(
        algorithm: Algorithm,
        entrants: Vec<String>,
        secret: &Hash,
        beacon: Option<Beacon>,
    ) -> Result<Self, BeaconFault> {
        let randomness = beacon.as_ref().map(Beacon::verify).transpose()?;
        let root = root(algorithm, &entrants);
        let seed = seed(algorithm, secret, &root, randomness.as_ref().map_or(&[][..], |r| &r[..]));
        let order = order(&entrants, &seed);
        Ok(Self {
            algorithm: algorithm.name().to_owned(),
            event_id: None,
            commitment: commitment(secret),
            secret: hex(secret),
            root: hex(&root),
            beacon,
            entrant_count: Some(entrants.len() as u64),
            entrants,
            from: None,
            next: None,
            order,
            entries_close: None,
            drawn_at: None,
            capacity: None,
            admission_rate: None,
            receipt_keys: Vec::new(),
        })
    }

    /// The draw's algorithm, if it is one this code knows.
    pub fn algorithm(&self) -> Result<Algorithm, DrawFault> {
        Algorithm::parse(&self.algorithm).ok_or_else(|| DrawFault::Algorithm(self.algorithm.clone()))
    }

    /// What is published of a whole draw from place `from` (an index from 0): v1 whole, as it
    /// always was; v2 the page of up to [`PAGE_PLACES`] places there, without the entrants.
    pub fn page(&self, from: usize) -> Self {
        if self.algorithm() != Ok(Algorithm::V2) {
            return self.clone();
        }
        let (from, to, next) = page_bounds(from, self.order.len());
        Self {
            entrants: Vec::new(),
            entrant_count: Some(self.order.len() as u64),
            from: Some(from as u64),
            next: next.map(|n| n as u64),
            order: self.order[from..to].to_vec(),
            ..self.clone()
        }
    }

    /// Pages read back (in any order) joined into the whole draw: each page's terms the same, the
    /// places contiguous from 0 to `entrant_count`.
    pub fn join(mut pages: Vec<Self>) -> Result<Self, DrawFault> {
        let fault = |why: String| Err(DrawFault::Pages(why));
        pages.sort_by_key(|p| p.from.unwrap_or(0));
        let Some(first) = pages.first() else { return fault("no page".into()) };
        let terms = |p: &Self| Self { order: Vec::new(), from: None, next: None, ..p.clone() };
        let head = terms(first);
        let mut whole = Vec::new();
        for (i, page) in pages.iter().enumerate() {
            if terms(page) != head {
                return fault(format!("the page from place {} has other terms", page.from.unwrap_or(0)));
            }
            // A page of no places is a whole draw of none, never a part of one.
            if page.order.is_empty() && pages.len() > 1 {
                return fault(format!("the page from place {} holds no place", page.from.unwrap_or(0)));
            }
            if page.from.unwrap_or(0) != whole.len() as u64 {
                return fault(format!("a page starts at {}, where {} was due", page.from.unwrap_or(0), whole.len()));
            }
            whole.extend(page.order.iter().cloned());
            // Each page names the next one's start, and the last names none.
            let due = pages.get(i + 1).map(|p| p.from.unwrap_or(0));
            if page.next != due {
                return fault(format!(
                    "the page from place {} names {:?} as next, not {due:?}",
                    page.from.unwrap_or(0),
                    page.next
                ));
            }
        }
        if let Some(count) = head.entrant_count
            && count != whole.len() as u64
        {
            return fault(format!("{} places of the {count} entrants it names", whole.len()));
        }
        Ok(Self { order: whole, ..head })
    }

    /// The entrants, sorted: v1's as published, v2's the order's leaves sorted.
    pub fn sorted_entrants(&self) -> Result<Vec<String>, DrawFault> {
        Ok(match self.algorithm()? {
            Algorithm::V1 => self.entrants.clone(),
            Algorithm::V2 => {
                let mut leaves = self.order.clone();
                leaves.sort_unstable();
                leaves
            }
        })
    }

    /// Recomputes the draw from what is published (a whole draw: pages [`Published::join`]ed).
    pub fn verify(&self) -> Result<(), DrawFault> {
        self.recompute(true)
    }

    /// [`Published::verify`] but for the beacon round's signature (its randomness is still its
    /// signature's hash): the order the operator published, whoever's round it names. A receipt's
    /// verdict needs no more, so a verifier without BLS12-381 gives the same one.
    pub fn verify_order(&self) -> Result<(), DrawFault> {
        self.recompute(false)
    }

    fn recompute(&self, beacon_signature: bool) -> Result<(), DrawFault> {
        let algorithm = self.algorithm()?;
        let secret = from_hex::<32>(&self.secret).ok_or(DrawFault::BadSecret)?;
        let beacon = match &self.beacon {
            Some(round) if beacon_signature => round.verify()?.to_vec(),
            Some(round) => round.randomness_unverified()?.to_vec(),
            None => Vec::new(),
        };
        if commitment(&secret) != self.commitment {
            return Err(DrawFault::Commitment);
        }
        let entrants = self.sorted_entrants()?;
        if entrants.windows(2).any(|w| w[0] >= w[1])
            || (algorithm == Algorithm::V2 && entrants.iter().any(|e| algorithm.leaf(e).is_none()))
            || self.entrant_count.is_some_and(|n| n != entrants.len() as u64)
            || (algorithm == Algorithm::V2 && self.entrant_count.is_none())
        {
            return Err(DrawFault::Entrants);
        }
        let root = root(algorithm, &entrants);
        if hex(&root) != self.root {
            return Err(DrawFault::Root);
        }
        let wanted = order(&entrants, &seed(algorithm, &secret, &root, &beacon));
        if let Some(place) = (0..wanted.len().max(self.order.len())).find(|i| wanted.get(*i) != self.order.get(*i)) {
            return Err(DrawFault::Order(place + 1));
        }
        self.verify_terms()
    }

    /// The terms against each other: drawn after the entries closed, and a quicknet round the
    /// first after the close (another chain's timing is the deployment's, not known here).
    fn verify_terms(&self) -> Result<(), DrawFault> {
        let Some(close) = &self.entries_close else { return Ok(()) };
        let time = |t: &str| super::instant::instant(t).ok_or(DrawFault::DrawnBeforeClose);
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
        let published = Published::new(Algorithm::V1, ids(40), &[9; 32], None).unwrap();
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
        assert_eq!(dropped.verify(), Err(DrawFault::Entrants), "the count names the drop");
        dropped.entrant_count = None;
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
        let chain = crate::beacon::LocalChain::new(&[2; 32]);
        let plain = Published::new(Algorithm::V1, ids(30), &[1; 32], None).unwrap();
        let beaconed = Published::new(Algorithm::V1, ids(30), &[1; 32], Some(chain.round(77))).unwrap();
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
        assert!(
            Published::new(Algorithm::V1, ids(30), &[1; 32], Some(unsigned)).is_err(),
            "a round that does not verify is refused"
        );
    }

    #[test]
    fn every_entrant_proves_membership_and_no_one_else_can() {
        for n in 1..=33 {
            let list = ids(n);
            let root = hex(&root(Algorithm::V1, &list));
            for id in &list {
                let path = proof(Algorithm::V1, &list, id).expect("a member");
                assert!(proves(Algorithm::V1, id, &path, &root), "{id} of {n}");
                assert!(!proves(Algorithm::V1, "intruder", &path, &root));
            }
            assert_eq!(proof(Algorithm::V1, &list, "intruder"), None);
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
            *seen.entry(draw(Algorithm::V1, &list, &secret, b"")).or_default() += 1;
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
        assert_eq!(root(Algorithm::V1, &[]), <[u8; 32]>::from(Sha256::digest([])));
        assert_eq!(root(Algorithm::V2, &[]), <[u8; 32]>::from(Sha256::digest([])));
    }

    fn leaves(n: usize) -> Vec<String> {
        let event = EventId::parse("evt-private").unwrap();
        entrants((0..n).map(|i| EntryKey::from_bytes([i as u8; 32]).leaf(&event)))
    }

    #[test]
    fn a_v2_draw_publishes_leaves_in_pages_that_join_and_check_out() {
        let whole = Published::new(Algorithm::V2, leaves(25), &[7; 32], None).unwrap();
        assert_eq!(whole.verify(), Ok(()));
        // Pages of PAGE_PLACES: one here; its entrants are not shown twice.
        let page = whole.page(0);
        assert!(page.entrants.is_empty() && page.next.is_none() && page.order.len() == 25);
        let joined = Published::join(vec![page.clone()]).unwrap();
        assert_eq!(joined.verify(), Ok(()));
        let mut swapped = joined.clone();
        swapped.order.swap(0, 1);
        assert!(matches!(swapped.verify(), Err(DrawFault::Order(_))));
        let mut dropped = joined.clone();
        dropped.order.pop();
        assert_eq!(dropped.verify(), Err(DrawFault::Entrants), "the count names the drop");
        dropped.entrant_count = Some(24);
        assert_eq!(dropped.verify(), Err(DrawFault::Root));
        let mut not_a_leaf = joined.clone();
        not_a_leaf.order[3] = "user-3".into();
        assert_eq!(not_a_leaf.verify(), Err(DrawFault::Entrants));
        // The same list drawn as v1 is another order: the version is in the seed.
        let v1 = Published::new(Algorithm::V1, leaves(25), &[7; 32], None).unwrap();
        assert_ne!(v1.order, whole.order);
    }

    #[test]
    fn pages_must_be_whole_contiguous_and_of_one_draw() {
        let whole = Published::new(Algorithm::V2, leaves(3), &[7; 32], None).unwrap();
        let mut pages: Vec<Published> = (0..3)
            .map(|i| Published {
                from: Some(i),
                next: (i < 2).then_some(i + 1),
                order: vec![whole.order[i as usize].clone()],
                ..whole.page(0)
            })
            .collect();
        pages.reverse();
        assert_eq!(Published::join(pages.clone()).unwrap().verify(), Ok(()));
        let mut missing = pages.clone();
        missing.remove(1);
        assert!(matches!(Published::join(missing), Err(DrawFault::Pages(_))));
        let mut other = pages.clone();
        other[0].secret = hex(&[8; 32]);
        assert!(matches!(Published::join(other), Err(DrawFault::Pages(_))));
    }

    #[test]
    fn a_v2_leaf_proves_its_place_and_reveals_no_user() {
        let event = EventId::parse("evt-private").unwrap();
        let key = EntryKey::generate();
        let mine = key.leaf(&event);
        let mut list = leaves(9);
        list.push(mine.clone());
        let list = entrants(list);
        let root = hex(&root(Algorithm::V2, &list));
        let path = proof(Algorithm::V2, &list, &mine).unwrap();
        assert!(proves(Algorithm::V2, &mine, &path, &root));
        assert!(!proves(Algorithm::V2, &leaves(1)[0], &path, &root));
        // One key, two events: two unrelated leaves.
        assert_ne!(key.leaf(&EventId::parse("evt-other").unwrap()), mine);
    }

    #[test]
    fn the_compact_draw_is_the_published_one() {
        for (algorithm, list) in [(Algorithm::V1, ids(37)), (Algorithm::V2, leaves(37)), (Algorithm::V2, leaves(1))] {
            let published = Published::new(algorithm, list.clone(), &[5; 32], None).unwrap();
            let leaves = list.iter().map(|e| algorithm.leaf(e).unwrap()).collect();
            let compact = Compact::draw(algorithm, leaves, &[5; 32], b"");
            assert_eq!(hex(&compact.root()), published.root);
            let order: Vec<&String> = (0..compact.len()).map(|p| &list[compact.at(p).unwrap()]).collect();
            assert_eq!(order, published.order.iter().collect::<Vec<_>>());
            for (index, entrant) in list.iter().enumerate() {
                assert_eq!(compact.proof(index), proof(algorithm, &list, entrant));
                assert_eq!(compact.at(compact.place_of(index).unwrap()), Some(index));
            }
        }
    }
}
