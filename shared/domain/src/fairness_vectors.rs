//! The test vectors of docs/FAIRNESS.md (`tests/vectors/fairness-v1.json`): fixed inputs run
//! through the stream, the draw, its proofs, the red-packet split, the proof of work and the beacon
//! message, with every intermediate a second implementation needs to find where it went wrong.
//! Three implementations check them: this crate (its test compares [`generate`] with the file),
//! `ticketgrab-verify vectors`, and `tests/draw_v1.py --vectors` (written from FAIRNESS.md alone).
//! Large integers are decimal strings, so a reader whose JSON numbers are doubles loses nothing.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{
    EventId, UserId,
    beacon::Beacon,
    draw,
    hex::{decode, encode as hex},
    proof_of_work,
    red_packet::{self, AmountSeed},
    stream::Stream,
};

const V1: draw::Algorithm = draw::Algorithm::V1;

/// The file's name for this version of the algorithms.
pub const VERSION: &str = "fairness-vectors/v1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vectors {
    pub version: String,
    pub stream: Vec<StreamVector>,
    pub below: Vec<BelowVector>,
    pub draw: Vec<DrawVector>,
    pub proof: Vec<ProofVector>,
    pub split: Vec<SplitVector>,
    pub proof_of_work: Vec<WorkVector>,
    pub beacon: Vec<BeaconVector>,
}

/// The first words of the stream keyed by `seed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamVector {
    pub seed: String,
    pub words: Vec<String>,
}

/// The first draws below `m` of a fresh stream keyed by `seed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BelowVector {
    pub seed: String,
    pub m: String,
    pub draws: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawVector {
    /// As registered: in any order, a user possibly twice.
    pub registered: Vec<String>,
    /// Step 1: each once, by their UTF-8 bytes.
    pub entrants: Vec<String>,
    /// Step 2: each entrant's leaf, then the root.
    pub leaves: Vec<String>,
    pub root: String,
    pub secret: String,
    pub commitment: String,
    /// A beacon round's signature (its randomness is SHA-256 of its bytes), or none.
    pub beacon_signature: Option<String>,
    pub randomness: String,
    /// Step 3.
    pub seed: String,
    /// Step 4: the draws of the shuffle (`j` for `i` from `n - 1` down to 1), then the order.
    pub swaps: Vec<u64>,
    pub order: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofVector {
    pub entrants: Vec<String>,
    pub id: String,
    pub proof: Vec<draw::ProofStep>,
    pub root: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitVector {
    pub seed: String,
    pub commitment: String,
    pub total: String,
    pub n: u32,
    pub amounts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkVector {
    pub event: String,
    pub user: String,
    pub nonce: String,
    /// Whether the nonce is in its one canonical form (else no work, whatever it hashes to).
    pub canonical: bool,
    /// `SHA-256` of the work's input, and its leading zero bits (for a canonical nonce).
    pub digest: Option<String>,
    pub zero_bits: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeaconVector {
    pub round: String,
    /// What the round's signature signs: `SHA-256` of the round as 8 big-endian bytes.
    pub message: String,
    /// A real round of the scheme, where one is given: its chain's key, its signature (valid), and
    /// the randomness it gives.
    pub public_key: Option<String>,
    pub signature: Option<String>,
    pub randomness: Option<String>,
}

/// drand's test round of `bls-unchained-g1-rfc9380` (as drand-verify carries it): round 3.
const DRAND_KEY: &str = "a1ee12542360bf75742bcade13d6134e7d5283d9eb782887c47d3d9725f05805d37b0106b7f744395bf82c175dd7434a169e998f188a657a030d588892c0cd2c01f996aaf331c4d8bc5b9734bbe261d09e7d2d39ef88b635077f262bd7bbb30f";
const DRAND_ROUND_3: &str =
    "b98dae74f6a9d2ec79d75ba273dcfda86a45d589412860eb4c0fd056b00654dbf667c1b6884987c9aee0d43f8ba9db52";

fn sha(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn seeds() -> [[u8; 32]; 3] {
    [[0; 32], [7; 32], sha(b"ticket-grab fairness vectors")]
}

fn leaf(id: &str) -> String {
    hex(&<[u8; 32]>::from(Sha256::new().chain_update([0u8]).chain_update(id.as_bytes()).finalize()))
}

fn draw_vector(registered: &[&str], secret: [u8; 32], signature: Option<&str>) -> DrawVector {
    let entrants = draw::entrants(registered.iter().map(|s| (*s).to_owned()));
    let root = draw::root(V1, &entrants);
    let randomness = signature.map(|s| sha(&decode::<48>(s).expect("a signature's 48 bytes")));
    let seed = draw::seed(V1, &secret, &root, randomness.as_ref().map_or(&[][..], |r| &r[..]));
    let mut stream = Stream::new(&seed);
    let swaps = (1..entrants.len() as u64).rev().map(|i| stream.below(i + 1)).collect();
    DrawVector {
        registered: registered.iter().map(|s| (*s).to_owned()).collect(),
        leaves: entrants.iter().map(|e| leaf(e)).collect(),
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

fn work(event: &str, user: &str, nonce: &str) -> WorkVector {
    let canonical = proof_of_work::canonical(nonce);
    let digest = canonical.then(|| {
        <[u8; 32]>::from(Sha256::digest(format!("{}|{event}|{user}|{nonce}", proof_of_work::ALGORITHM).as_bytes()))
    });
    let zeros = digest.map(|d| {
        let mut bits = 0;
        for b in d {
            bits += b.leading_zeros();
            if b != 0 {
                break;
            }
        }
        bits
    });
    WorkVector {
        event: event.into(),
        user: user.into(),
        nonce: nonce.into(),
        canonical,
        digest: digest.map(|d| hex(&d)),
        zero_bits: zeros,
    }
}

/// The vectors, computed by this crate's code.
pub fn generate() -> Vectors {
    let [zero, sevens, other] = seeds();
    let stream = seeds()
        .iter()
        .map(|seed| {
            let mut s = Stream::new(seed);
            StreamVector { seed: hex(seed), words: (0..10).map(|_| s.next_u64().to_string()).collect() }
        })
        .collect();
    let below = [
        (sevens, 1),
        (sevens, 2),
        (sevens, 3),
        (sevens, 7),
        (other, 1 << 40),
        (other, u64::MAX - 2),
        (other, (1 << 63) + 1),
    ]
    .into_iter()
    .map(|(seed, m)| {
        let mut s = Stream::new(&seed);
        BelowVector { seed: hex(&seed), m: m.to_string(), draws: (0..8).map(|_| s.below(m).to_string()).collect() }
    })
    .collect();
    let ten: Vec<String> = (1..=10).map(|i| format!("user-{i}")).collect();
    let ten: Vec<&str> = ten.iter().map(String::as_str).collect();
    let mixed = ["zoë", "Zoe", "zoe", "ÅSA", "asa", "0193a0f2-7c4e-7000-8000-00000000000a", "zoe", "a"];
    let draw = vec![
        draw_vector(&[], [1; 32], None),
        draw_vector(&["only"], [1; 32], None),
        draw_vector(&["b", "a"], [1; 32], None),
        draw_vector(&["c", "a", "b"], [0xab; 32], None),
        draw_vector(&ten, [0xab; 32], None),
        draw_vector(&mixed, other, None),
        draw_vector(&ten, [0xab; 32], Some(DRAND_ROUND_3)),
    ];
    let sorted = draw::entrants(ten.iter().map(|s| (*s).to_owned()));
    let root = hex(&draw::root(V1, &sorted));
    let proof = ["user-1", "user-10", "user-9", "user-5"]
        .into_iter()
        .map(|id| ProofVector {
            entrants: sorted.clone(),
            id: id.into(),
            proof: draw::proof(V1, &sorted, id).expect("an entrant"),
            root: root.clone(),
        })
        .collect();
    let split =
        [(sevens, 10_000, 5), (zero, 100, 100), (other, 2, 1), (other, 1_000_003, 17), (sevens, 9_999_999_999, 3)]
            .into_iter()
            .map(|(seed, total, n)| {
                let seed = AmountSeed::from_bytes(seed);
                SplitVector {
                    seed: seed.to_hex(),
                    commitment: seed.commitment(),
                    total: total.to_string(),
                    n,
                    amounts: red_packet::split(&seed, total, n).iter().map(u64::to_string).collect(),
                }
            })
            .collect();
    let (event, user) = (EventId::parse("ev-1").expect("an id"), UserId::parse("u-1").expect("an id"));
    let solved = proof_of_work::solve(&event, &user, 8);
    let proof_of_work = ["0", &solved, "093", "0028", "28", "18446744073709551615", "18446744073709551616", "+1", ""]
        .into_iter()
        .map(|nonce| work("ev-1", "u-1", nonce))
        .collect();
    let beacon = [1u64, 3, 1 << 40]
        .into_iter()
        .map(|round| {
            let real = (round == 3).then(|| Beacon {
                scheme: super::beacon::SCHEME.into(),
                public_key: DRAND_KEY.into(),
                round,
                signature: DRAND_ROUND_3.into(),
            });
            BeaconVector {
                round: round.to_string(),
                message: hex(&sha(&round.to_be_bytes())),
                randomness: real.as_ref().map(|b| hex(&b.verify().expect("drand's own round"))),
                public_key: real.as_ref().map(|b| b.public_key.clone()),
                signature: real.map(|b| b.signature),
            }
        })
        .collect();
    Vectors { version: VERSION.into(), stream, below, draw, proof, split, proof_of_work, beacon }
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
    let seed32 = |hex: &str| decode::<32>(hex).ok_or_else(|| format!("a seed that is not 32 bytes of hex: {hex}"));
    let number = |s: &str| s.parse::<u64>().map_err(|_| format!("not a number: {s}"));
    for (i, v) in given.stream.iter().enumerate() {
        let mut s = Stream::new(&seed32(&v.seed)?);
        let words: Vec<String> = v.words.iter().map(|_| s.next_u64().to_string()).collect();
        agree(format!("stream {i}"), words == v.words)?;
    }
    for (i, v) in given.below.iter().enumerate() {
        let (mut s, m) = (Stream::new(&seed32(&v.seed)?), number(&v.m)?);
        let draws: Vec<String> = v.draws.iter().map(|_| s.below(m).to_string()).collect();
        agree(format!("below {i}"), draws == v.draws)?;
    }
    for (i, v) in given.draw.iter().enumerate() {
        let registered: Vec<&str> = v.registered.iter().map(String::as_str).collect();
        let ours = draw_vector(&registered, seed32(&v.secret)?, v.beacon_signature.as_deref());
        agree(format!("draw {i}"), &ours == v)?;
    }
    for (i, v) in given.proof.iter().enumerate() {
        let ok = draw::proof(V1, &v.entrants, &v.id).as_ref() == Some(&v.proof)
            && hex(&draw::root(V1, &v.entrants)) == v.root
            && draw::proves(V1, &v.id, &v.proof, &v.root);
        agree(format!("proof {i}"), ok)?;
    }
    for (i, v) in given.split.iter().enumerate() {
        let seed = AmountSeed::from_hex(&v.seed).map_err(|e| e.to_string())?;
        let amounts: Vec<String> =
            red_packet::split(&seed, number(&v.total)?, v.n).iter().map(u64::to_string).collect();
        agree(format!("split {i}"), amounts == v.amounts && seed.commitment() == v.commitment)?;
    }
    for (i, v) in given.proof_of_work.iter().enumerate() {
        agree(format!("proof of work {i}"), &work(&v.event, &v.user, &v.nonce) == v)?;
    }
    for (i, v) in given.beacon.iter().enumerate() {
        let round = number(&v.round)?;
        let mut ok = hex(&sha(&round.to_be_bytes())) == v.message;
        if let (Some(key), Some(signature)) = (&v.public_key, &v.signature) {
            let real = Beacon {
                scheme: super::beacon::SCHEME.into(),
                public_key: key.clone(),
                round,
                signature: signature.clone(),
            };
            ok &= real.verify().ok().map(|r| hex(&r)) == v.randomness;
        }
        agree(format!("beacon {i}"), ok)?;
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/fairness-v1.json")
    }

    /// The file is what the code computes: a change of any byte of the algorithms shows here (and
    /// then needs a new version name). `UPDATE_VECTORS=1` writes the file afresh.
    #[test]
    fn the_vectors_in_the_repository_are_the_codes() {
        let ours = generate();
        if std::env::var_os("UPDATE_VECTORS").is_some() {
            let text = serde_json::to_string_pretty(&ours).expect("vectors") + "\n";
            std::fs::write(file(), text).expect("the vectors written");
        }
        let text = std::fs::read_to_string(file()).expect("tests/vectors/fairness-v1.json");
        let theirs: Vectors = serde_json::from_str(&text).expect("the vectors' form");
        assert_eq!(theirs, ours);
        assert_eq!(check(&theirs), Ok(3 + 7 + 7 + 4 + 5 + 9 + 3));
    }

    #[test]
    fn a_vector_changed_by_one_byte_is_caught() {
        let mut v = generate();
        v.draw[4].order.swap(0, 1);
        assert_eq!(check(&v), Err("draw 4 disagrees".into()));
        let mut v = generate();
        v.proof_of_work[2].canonical = true;
        assert!(check(&v).is_err());
    }
}
