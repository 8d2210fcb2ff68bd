//! Public randomness for a draw: a round of a drand beacon chain, named before the entrants are
//! known and mixed into the draw's seed (`super::draw`), so that not even the organiser, who knows
//! the secret, can try entrant lists until one orders them as they like.
//!
//! The scheme is drand's `bls-unchained-g1-rfc9380` (the League of Entropy's "quicknet"): the
//! chain's public key is a BLS12-381 G2 point (96 bytes compressed); round `r`'s signature is a G1
//! point (48 bytes) on the message `SHA-256(r as 8 big-endian bytes)`, hashed to G1 with RFC 9380
//! (`BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_`); the round's randomness is `SHA-256(signature)`.
//! The signature is checked with drand-verify. [`LocalChain`] signs rounds the same way with a key
//! of its own: a chain made locally, for tests and a laptop, which reaches no drand server.

use bls12_381::{
    G1Affine, G1Projective, G2Affine, G2Projective, Scalar,
    hash_to_curve::{ExpandMsgXmd, HashToCurve},
};
use drand_verify::{G2PubkeyRfc, Pubkey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::hex::{decode, encode as hex};

pub const SCHEME: &str = "bls-unchained-g1-rfc9380";
const DOMAIN: &[u8] = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_";

/// A chain a draw may name: its key, when its round 1 was out, and how often a round follows.
/// drand's quicknet ([`QUICKNET`]) is pinned here; another chain only by the deployment's
/// configuration (`BEACON_CHAIN`), never by a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub name: String,
    /// `bls-unchained-g1-rfc9380`: a G2 point, 96 bytes compressed, hex.
    pub public_key: String,
    /// Unix seconds of round 1.
    pub genesis: i64,
    /// Seconds between rounds.
    pub period: i64,
}

/// quicknet's chain hash, as drand names the chain (`/52db.../info`).
pub const QUICKNET_CHAIN_HASH: &str = "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971";

/// The League of Entropy's quicknet ([`QUICKNET_CHAIN_HASH`]): a round every 3 s since
/// 2023-08-23 15:09:27 UTC.
pub fn quicknet() -> Chain {
    Chain {
        name: "quicknet".into(),
        public_key: "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a".into(),
        genesis: 1_692_803_367,
        period: 3,
    }
}

/// Whether `key` (hex) is a point of the scheme's group other than the identity: a key that is
/// not can sign nothing, and a draw naming it could never be made; the identity "signs" every
/// round with the identity, whose randomness anyone knows in advance.
pub fn is_point(key: &str) -> bool {
    decode::<96>(key).is_some_and(|k| {
        G2PubkeyRfc::from_fixed(k).is_ok()
            && Option::<G2Affine>::from(G2Affine::from_compressed(&k)).is_some_and(|p| !bool::from(p.is_identity()))
    })
}

impl Chain {
    /// `name,public key hex,genesis unix seconds,period seconds` (the deployment's `BEACON_CHAIN`).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
        let [name, key, genesis, period] = parts[..] else {
            return Err("a chain is name,public key,genesis,period".into());
        };
        let number = |v: &str| v.parse::<i64>().ok().filter(|n| *n > 0);
        let (Some(genesis), Some(period)) = (number(genesis), number(period)) else {
            return Err("a chain's genesis and period are positive whole seconds".into());
        };
        if !is_point(key) {
            return Err(format!("the chain's key is not a {SCHEME} key (a G2 point)"));
        }
        Ok(Self { name: name.to_owned(), public_key: key.to_owned(), genesis, period })
    }

    /// When round `round` (from 1) is out, unix seconds.
    pub fn time_of(&self, round: u64) -> i64 {
        self.genesis + (round.max(1) as i64 - 1) * self.period
    }

    /// The first round out strictly after `at` (unix seconds): nobody knows its randomness until
    /// then.
    pub fn first_round_after(&self, at: i64) -> u64 {
        if at < self.genesis { 1 } else { ((at - self.genesis) / self.period) as u64 + 2 }
    }
}

/// One round of a chain, as a draw publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Beacon {
    pub scheme: String,
    /// The chain's public key, hex.
    pub public_key: String,
    pub round: u64,
    /// The round's signature, hex.
    pub signature: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BeaconFault {
    #[error("the beacon's scheme is {0}, not {SCHEME}")]
    Scheme(String),
    #[error("the beacon's {0} is not hex of the right length")]
    Encoding(&'static str),
    #[error("the beacon's signature is not the chain's for round {0}")]
    Signature(u64),
}

fn bytes<const N: usize>(text: &str, what: &'static str) -> Result<[u8; N], BeaconFault> {
    decode(text).ok_or(BeaconFault::Encoding(what))
}

impl Beacon {
    /// The round's randomness, once its signature is the chain's.
    pub fn verify(&self) -> Result<[u8; 32], BeaconFault> {
        if self.scheme != SCHEME {
            return Err(BeaconFault::Scheme(self.scheme.clone()));
        }
        let key = bytes::<96>(&self.public_key, "public key")?;
        let signature = bytes::<48>(&self.signature, "signature")?;
        // The identity as key and signature satisfies the pairing for every round
        // (docs/FAIRNESS.md section 5): neither is a signature that holds.
        let signs = Option::<G1Affine>::from(G1Affine::from_compressed(&signature))
            .is_some_and(|p| !bool::from(p.is_identity()));
        if !is_point(&self.public_key) || !signs {
            return Err(BeaconFault::Signature(self.round));
        }
        let key = G2PubkeyRfc::from_fixed(key).map_err(|_| BeaconFault::Encoding("public key"))?;
        match key.verify(self.round, b"", &signature) {
            Ok(true) => Ok(self.randomness(&signature)),
            _ => Err(BeaconFault::Signature(self.round)),
        }
    }

    /// The round's randomness from its signature's bytes, the signature itself not checked (the
    /// scheme and the lengths are): what a receipt's verdict recomputes an order with, whoever's
    /// round it was (docs/FAIRNESS.md section 7).
    pub fn randomness_unverified(&self) -> Result<[u8; 32], BeaconFault> {
        if self.scheme != SCHEME {
            return Err(BeaconFault::Scheme(self.scheme.clone()));
        }
        bytes::<96>(&self.public_key, "public key")?;
        Ok(self.randomness(&bytes::<48>(&self.signature, "signature")?))
    }

    fn randomness(&self, signature: &[u8]) -> [u8; 32] {
        drand_verify::derive_randomness(signature)
    }
}

/// A beacon chain made here: a key of its own, rounds signed as drand signs them.
pub struct LocalChain {
    secret: Scalar,
}

impl LocalChain {
    /// The local runner's own chain (tests, a laptop): a key from a fixed seed, rounds timed as
    /// quicknet's. A deployment never knows it.
    pub fn development() -> Self {
        Self::new(&[11; 32])
    }

    /// This chain as a draw names it, timed as quicknet's rounds.
    pub fn chain(&self, name: &str) -> Chain {
        let timing = quicknet();
        Chain { name: name.to_owned(), public_key: self.public_key(), genesis: timing.genesis, period: timing.period }
    }

    /// A chain whose key derives from `seed`.
    pub fn new(seed: &[u8; 32]) -> Self {
        let wide: [u8; 64] = std::array::from_fn(|i| Sha256::digest([&[i as u8 / 32][..], seed].concat())[i % 32]);
        Self { secret: Scalar::from_bytes_wide(&wide) }
    }

    pub fn public_key(&self) -> String {
        hex(&G2Affine::from(G2Projective::generator() * self.secret).to_compressed())
    }

    /// Round `round`, signed.
    pub fn round(&self, round: u64) -> Beacon {
        let message = Sha256::digest(round.to_be_bytes());
        let point = <G1Projective as HashToCurve<ExpandMsgXmd<sha2_09::Sha256>>>::hash_to_curve(message, DOMAIN);
        let signature = G1Affine::from(point * self.secret).to_compressed();
        Beacon { scheme: SCHEME.into(), public_key: self.public_key(), round, signature: hex(&signature) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test vectors of the scheme (drand's, as drand-verify carries them): a chain's key and its round 3.
    #[test]
    fn a_published_round_of_the_scheme_verifies() {
        let beacon = Beacon {
            scheme: SCHEME.into(),
            public_key: "a1ee12542360bf75742bcade13d6134e7d5283d9eb782887c47d3d9725f05805d37b0106b7f744395bf82c175dd7434a169e998f188a657a030d588892c0cd2c01f996aaf331c4d8bc5b9734bbe261d09e7d2d39ef88b635077f262bd7bbb30f".into(),
            round: 3,
            signature: "b98dae74f6a9d2ec79d75ba273dcfda86a45d589412860eb4c0fd056b00654dbf667c1b6884987c9aee0d43f8ba9db52".into(),
        };
        assert!(beacon.verify().is_ok());
        assert_eq!(Beacon { round: 4, ..beacon }.verify(), Err(BeaconFault::Signature(4)));
    }

    /// Quicknet's own round 123 (api.drand.sh, as drand-verify's tests carry it) verifies under the
    /// pinned key; the rounds' times are genesis plus 3 s each.
    #[test]
    fn quicknet_is_pinned_and_its_rounds_are_timed() {
        let chain = quicknet();
        let round = Beacon {
            scheme: SCHEME.into(),
            public_key: chain.public_key.clone(),
            round: 123,
            signature:
                "b75c69d0b72a5d906e854e808ba7e2accb1542ac355ae486d591aa9d43765482e26cd02df835d3546d23c4b13e0dfc92"
                    .into(),
        };
        assert!(round.verify().is_ok());
        assert_eq!(chain.time_of(1), 1_692_803_367);
        assert_eq!(chain.time_of(123), 1_692_803_367 + 122 * 3);
        let at = chain.time_of(123);
        assert_eq!(chain.first_round_after(at), 124, "round 123 is out at that second: not after it");
        assert_eq!(chain.first_round_after(at - 1), 123);
        assert_eq!(chain.first_round_after(0), 1);
        assert!(is_point(&chain.public_key));
        assert!(!is_point(&"11".repeat(96)), "96 bytes that are no point");
        assert!(Chain::parse(&format!("local,{},1700000000,3", LocalChain::new(&[9; 32]).public_key())).is_ok());
        assert!(Chain::parse(&format!("bad,{},1700000000,3", "11".repeat(96))).is_err());
        assert!(Chain::parse("short").is_err());
    }

    /// docs/FAIRNESS.md section 5 gives the keys a verifier needs in full, as the code pins them.
    #[test]
    fn fairness_gives_quicknet_and_the_development_chain_in_full() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/FAIRNESS.md")).unwrap();
        let text: String = text.split_whitespace().collect();
        for (what, value) in [
            ("quicknet's key", quicknet().public_key),
            ("quicknet's chain hash", QUICKNET_CHAIN_HASH.to_owned()),
            ("the development chain's key", LocalChain::development().public_key()),
        ] {
            assert!(text.contains(&value), "docs/FAIRNESS.md lacks {what}: {value}");
        }
    }

    /// The identity as key and signature satisfies the pairing for every round: refused as a
    /// chain's key and as a round (docs/FAIRNESS.md section 5).
    #[test]
    fn the_identity_is_no_key_and_no_signature() {
        let identity_g2 = hex(&G2Affine::identity().to_compressed());
        let identity_g1 = hex(&G1Affine::identity().to_compressed());
        assert!(!is_point(&identity_g2));
        assert!(Chain::parse(&format!("nobody,{identity_g2},1700000000,3")).is_err());
        let round = Beacon { scheme: SCHEME.into(), public_key: identity_g2, round: 7, signature: identity_g1 };
        assert_eq!(round.verify(), Err(BeaconFault::Signature(7)));
        // A real key with the identity as its round's signature is refused too.
        let chain = LocalChain::development();
        let forged = Beacon { signature: hex(&G1Affine::identity().to_compressed()), ..chain.round(7) };
        assert_eq!(forged.verify(), Err(BeaconFault::Signature(7)));
        assert!(chain.round(7).verify().is_ok());
    }

    #[test]
    fn a_local_chain_signs_rounds_that_verify_and_nothing_else_does() {
        let chain = LocalChain::new(&[5; 32]);
        let round = chain.round(1_234);
        let randomness = round.verify().expect("the chain's own round");
        assert_eq!(randomness, <[u8; 32]>::from(Sha256::digest(bytes::<48>(&round.signature, "s").unwrap())));
        assert_ne!(chain.round(1_235).verify().unwrap(), randomness, "each round its own randomness");

        let another = LocalChain::new(&[6; 32]).round(1_234);
        let forged = Beacon { public_key: round.public_key.clone(), ..another };
        assert_eq!(forged.verify(), Err(BeaconFault::Signature(1_234)), "another chain's signature");
        assert_eq!(Beacon { round: 1_233, ..round.clone() }.verify(), Err(BeaconFault::Signature(1_233)));
        let mut flipped = round.clone();
        flipped.signature.replace_range(10..12, if &flipped.signature[10..12] == "00" { "01" } else { "00" });
        assert!(flipped.verify().is_err());
        assert_eq!(
            Beacon { scheme: "pedersen-bls-chained".into(), ..round.clone() }.verify(),
            Err(BeaconFault::Scheme("pedersen-bls-chained".into()))
        );
        assert_eq!(Beacon { signature: "zz".into(), ..round }.verify(), Err(BeaconFault::Encoding("signature")));
    }
}
