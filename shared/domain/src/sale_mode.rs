//! How an event hands out its tickets (docs/DESIGN.md section 11): first come; a ballot (users
//! register, then a draw anyone can recompute, `super::draw`, orders them: the first `capacity`
//! get orders through the ordinary order path, the rest wait in draw order); or a fair open (a
//! queue shuffled by the same draw at the open, admitted in that order at a rate). What a
//! release commits to, and the rules of the outcome.

use serde::{Deserialize, Serialize};

use super::{
    Email, EventId, UserId,
    beacon::{self, Beacon},
    draw::{self, Algorithm, EntryKey, Published},
    hex,
};

/// How an event hands out its tickets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SaleMode {
    /// First come, first served: the grab script decides in arrival order.
    #[default]
    FirstCome,
    /// Registration, then a draw: no grab ever takes a number.
    Ballot,
    /// A pre-queue shuffled by a draw at the open, then admitted in that order at a rate: the
    /// grab script still decides, among those admitted.
    FairOpen,
}

impl SaleMode {
    pub const NAMES: [&str; 3] = ["first_come", "ballot", "fair_open"];

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "first_come" => Some(Self::FirstCome),
            "ballot" => Some(Self::Ballot),
            "fair_open" => Some(Self::FairOpen),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::FirstCome => "first_come",
            Self::Ballot => "ballot",
            Self::FairOpen => "fair_open",
        }
    }
}

/// The most users a fair open admits per second.
pub const MAX_ADMISSION_RATE: u32 = 100_000;

/// A fair open's pre-queue: users join from `opens`; at the draw (from `sale_start`) the places
/// taken so far are shuffled, later ones follow in arrival order, and the queue admits
/// `admission_rate` users a second, in that order ([`admitted_at`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueTerms {
    #[serde(rename = "queue_opens", with = "time::serde::rfc3339")]
    pub opens: time::OffsetDateTime,
    pub admission_rate: u32,
}

/// When the user at `position` (1 is first) is admitted, the queue starting at `from`: in waves of
/// `rate` a second, so each second's wave is admitted at once.
pub fn admitted_at(from: time::OffsetDateTime, rate: u32, position: u64) -> time::OffsetDateTime {
    from + time::Duration::seconds(((position.max(1) - 1) / u64::from(rate.max(1))) as i64)
}

/// A beacon round named at release: its chain's key and the round, whose signature nobody knows
/// yet (the organiser gives it at the draw). The round is the chain's first after the entries
/// close ([`DrawTerms::check_round`]); a release may leave it out (0) and have it filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeaconRound {
    /// The chain's public key (`bls-unchained-g1-rfc9380`), hex.
    pub public_key: String,
    #[serde(default)]
    pub round: u64,
}

/// What a ballot or a fair open commits to at release: the draw's secret, and a beacon round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DrawTerms {
    /// The draw's version, fixed at release (`ticket-draw/v2` from private entrants on; an event
    /// released before them keeps `ticket-draw/v1`).
    pub algorithm: Algorithm,
    /// `SHA-256(secret)`, hex: the organiser's secret, revealed at the draw.
    pub commitment: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beacon: Option<BeaconRound>,
    /// The work each entry costs (`super::proof_of_work`, in bits); none by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof_of_work_bits: Option<u32>,
    /// When entries close, fixed at release (`sale_start` unless the organiser sets it earlier):
    /// no entry after it, no draw before it, and the named beacon round is the first after it.
    /// `None` only for an event released before this was kept (its close is its `sale_start`).
    #[serde(with = "time::serde::rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub entries_close: Option<time::OffsetDateTime>,
    /// The receipt keys its entries' receipts (and its draw's head) may be signed with, fixed at
    /// release before any entry (docs/FAIRNESS.md section 6a): published with the terms, so an
    /// operator cannot disown a key its receipts were signed with. Empty for an event released
    /// before they were committed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub receipt_keys: Vec<super::draw::CommittedKey>,
    /// How many partitions its entries are spread over, fixed at release (not published: where
    /// the entries are kept, not what the draw is).
    #[serde(skip)]
    pub entry_shards: EntryShards,
}

/// How many partitions an event's entries are spread over, fixed at release: a user's entry is
/// always in the same one ([`EntryShards::of`]), and the draw reads them all at once, each a
/// fraction of the list (a million entries in one partition are one long sequential read, and one
/// partition's write rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryShards(u32);

impl EntryShards {
    /// An event released before its entries were spread: one partition, under the first key.
    pub const ONE: Self = Self(1);
    /// Every event released now.
    pub const CURRENT: Self = Self(256);
    /// The most a stored event may name.
    pub const MAX: u32 = 4096;

    pub fn new(n: u32) -> Option<Self> {
        (1..=Self::MAX).contains(&n).then_some(Self(n))
    }

    pub fn get(self) -> u32 {
        self.0
    }

    /// The user's shard: the first four bytes of SHA-256 of their id, modulo the count.
    pub fn of(self, user: &UserId) -> u32 {
        use sha2::Digest;
        let hash = sha2::Sha256::digest(user.as_str().as_bytes());
        u32::from_be_bytes([hash[0], hash[1], hash[2], hash[3]]) % self.0
    }

    /// Every shard, in order.
    pub fn all(self) -> std::ops::Range<u32> {
        0..self.0
    }
}

impl Default for EntryShards {
    fn default() -> Self {
        Self::ONE
    }
}

impl DrawTerms {
    /// Checks a release's terms: a commitment of 64 lowercase hex digits, and a beacon's key of the
    /// scheme's length. Each problem is named by its field.
    pub fn new(commitment: &str, beacon: Option<BeaconRound>) -> Result<Self, (&'static str, String)> {
        if hex::decode::<32>(commitment).is_none() {
            return Err(("draw_commitment", "must be SHA-256 of the secret: 64 lowercase hex digits".into()));
        }
        if let Some(b) = &beacon
            && hex::decode::<96>(&b.public_key).is_none()
        {
            return Err((
                "draw_beacon",
                format!("public_key must be a {} chain's key: 192 lowercase hex digits", beacon::SCHEME),
            ));
        }
        Ok(Self {
            algorithm: Algorithm::CURRENT,
            commitment: commitment.to_owned(),
            beacon,
            proof_of_work_bits: None,
            entries_close: None,
            receipt_keys: Vec::new(),
            entry_shards: EntryShards::CURRENT,
        })
    }

    /// The named beacon round against the chains this deployment knows, at release (`now`, unix
    /// seconds), with the entries closing at `close`: the chain must be one of `chains`, the round
    /// the chain's first after `close` (filled in when the release left it out), and not out yet.
    /// The round, or the problem.
    pub fn check_round(&self, chains: &[beacon::Chain], close: i64, now: i64) -> Result<Option<u64>, String> {
        let Some(named) = &self.beacon else { return Ok(None) };
        let Some(chain) = chains.iter().find(|c| c.public_key == named.public_key) else {
            let known: Vec<&str> = chains.iter().map(|c| c.name.as_str()).collect();
            return Err(format!(
                "names a chain this deployment does not know (it knows {}): a chain whose key the organiser holds would let them know every round",
                known.join(", ")
            ));
        };
        let first = chain.first_round_after(close);
        if named.round != 0 && named.round != first {
            return Err(format!(
                "round must be {first}, {}'s first round after the entries close (leave it out to have it filled in)",
                chain.name
            ));
        }
        if chain.time_of(first) <= now {
            return Err(format!("round {first} of {} is out already: its randomness is known", chain.name));
        }
        Ok(Some(first))
    }

    /// The draw of `entrants` (v1: user ids, v2: leaves: [`Entrant::drawn_as`]) with the revealed `secret` (and the named round's signature): the
    /// secret must hash to the commitment, the signature be the named round's on the named chain.
    pub fn draw(&self, entrants: Vec<String>, secret: &str, signature: Option<&str>) -> Result<Published, DrawRefused> {
        let revealed = self.reveal(secret, signature)?;
        Published::new(self.algorithm, draw::entrants(entrants), &revealed.secret, revealed.beacon)
            .map_err(|e| DrawRefused::Beacon(e.to_string()))
    }

    /// The organiser's reveal checked: the secret hashes to the commitment, and the signature is
    /// the named round's on the named chain (its randomness then mixed into the seed).
    pub fn reveal(&self, secret: &str, signature: Option<&str>) -> Result<Revealed, DrawRefused> {
        let secret = hex::decode::<32>(secret).ok_or(DrawRefused::BadSecret)?;
        if draw::commitment(&secret) != self.commitment {
            return Err(DrawRefused::NotCommitted);
        }
        let beacon = match (&self.beacon, signature) {
            (None, None) => None,
            (None, Some(_)) => return Err(DrawRefused::NoBeaconNamed),
            (Some(_), None) => return Err(DrawRefused::BeaconMissing),
            (Some(named), Some(signature)) => Some(Beacon {
                scheme: beacon::SCHEME.into(),
                public_key: named.public_key.clone(),
                round: named.round,
                signature: signature.to_owned(),
            }),
        };
        let randomness = match &beacon {
            Some(b) => b.verify().map_err(|e| DrawRefused::Beacon(e.to_string()))?.to_vec(),
            None => Vec::new(),
        };
        Ok(Revealed { secret, beacon, randomness })
    }
}

/// A reveal that checked out: the secret, the round (as published) and its randomness.
#[derive(Debug, Clone)]
pub struct Revealed {
    pub secret: [u8; 32],
    pub beacon: Option<Beacon>,
    pub randomness: Vec<u8>,
}

/// Why a draw's reveal is refused (nothing is drawn).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrawRefused {
    #[error("the secret must be 64 lowercase hex digits")]
    BadSecret,
    #[error("the secret does not hash to the commitment published at release")]
    NotCommitted,
    #[error("the release named a beacon round: give its signature (beacon_signature)")]
    BeaconMissing,
    #[error("the release named no beacon round: give no beacon_signature")]
    NoBeaconNamed,
    #[error("{0}")]
    Beacon(String),
}

/// A registered user: their address is kept for their order's or their place's mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entrant {
    pub user: UserId,
    pub email: Email,
    /// A fair open's late arrival (joined after the draw): its rank among them, 1 first. `None`
    /// for the entrants the draw shuffled.
    pub late: Option<u64>,
    /// The entry's key (`ticket-draw/v2`), given to the entrant alone; `None` for an entry made
    /// before private entrants.
    pub key: Option<EntryKey>,
    /// The entry's signed receipt, as given when it was accepted.
    pub receipt: Option<String>,
}

impl Entrant {
    /// What the draw shuffles of this entrant: v1 its user id, v2 its leaf (`None`: an entry
    /// without a key, which a v2 draw cannot place).
    pub fn drawn_as(&self, algorithm: Algorithm, event: &EventId) -> Option<String> {
        match algorithm {
            Algorithm::V1 => Some(self.user.as_str().to_owned()),
            Algorithm::V2 => self.key.as_ref().map(|k| k.leaf(event)),
        }
    }
}

/// How a draw's order splits: the first `capacity` win, the rest wait, in that order.
pub fn split(order: &[String], capacity: u32) -> (&[String], &[String]) {
    order.split_at(order.len().min(capacity as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_terms_and_the_reveal_are_checked() {
        let secret = [7u8; 32];
        let terms = DrawTerms { algorithm: Algorithm::V1, ..DrawTerms::new(&draw::commitment(&secret), None).unwrap() };
        assert_eq!(DrawTerms::new("ABC", None).unwrap_err().0, "draw_commitment");
        let bad_key = BeaconRound { public_key: "00".into(), round: 1 };
        assert_eq!(DrawTerms::new(&terms.commitment, Some(bad_key)).unwrap_err().0, "draw_beacon");

        let entrants = vec!["b".to_owned(), "a".to_owned(), "c".to_owned()];
        let drawn = terms.draw(entrants.clone(), &hex::encode(&secret), None).unwrap();
        assert_eq!(drawn.entrants, ["a", "b", "c"]);
        assert_eq!(drawn.verify(), Ok(()));
        assert_eq!(terms.draw(entrants.clone(), &hex::encode(&[8; 32]), None), Err(DrawRefused::NotCommitted));
        assert_eq!(terms.draw(entrants.clone(), "zz", None), Err(DrawRefused::BadSecret));
        assert_eq!(terms.draw(entrants, &hex::encode(&secret), Some("00")), Err(DrawRefused::NoBeaconNamed));
    }

    #[test]
    fn a_named_round_must_be_revealed_and_be_the_chains() {
        let chain = beacon::LocalChain::new(&[3; 32]);
        let secret = [1u8; 32];
        let named = BeaconRound { public_key: chain.public_key(), round: 42 };
        let terms =
            DrawTerms { algorithm: Algorithm::V1, ..DrawTerms::new(&draw::commitment(&secret), Some(named)).unwrap() };
        let entrants = vec!["x".to_owned(), "y".to_owned()];
        let secret = hex::encode(&secret);
        assert_eq!(terms.draw(entrants.clone(), &secret, None), Err(DrawRefused::BeaconMissing));
        let wrong_round = chain.round(43).signature;
        assert!(matches!(terms.draw(entrants.clone(), &secret, Some(&wrong_round)), Err(DrawRefused::Beacon(_))));
        let drawn = terms.draw(entrants, &secret, Some(&chain.round(42).signature)).unwrap();
        assert_eq!(drawn.verify(), Ok(()));
    }

    #[test]
    fn the_queue_admits_a_wave_a_second_in_its_order() {
        let t0 = time::OffsetDateTime::UNIX_EPOCH;
        let at = |p| (admitted_at(t0, 100, p) - t0).whole_seconds();
        assert_eq!([at(1), at(100), at(101), at(200), at(201), at(0)], [0, 0, 1, 1, 2, 0]);
    }

    #[test]
    fn the_first_capacity_win() {
        let order: Vec<String> = (0..5).map(|i| i.to_string()).collect();
        assert_eq!(split(&order, 2), (&order[..2], &order[2..]));
        assert_eq!(split(&order, 9), (&order[..], &[][..]));
    }
}
