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
        let key = G2PubkeyRfc::from_fixed(key).map_err(|_| BeaconFault::Encoding("public key"))?;
        match key.verify(self.round, b"", &signature) {
            Ok(true) => Ok(self.randomness(&signature)),
            _ => Err(BeaconFault::Signature(self.round)),
        }
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
