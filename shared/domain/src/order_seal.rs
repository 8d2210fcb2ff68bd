//! The order seal: an HMAC-SHA256 over an order message's exact body, with a key that only grab,
//! reconcile (which send orders) and mail (which stores them) hold. It travels as the SQS message
//! attribute `seal`. mail stores nothing a seal does not vouch for, so a message put on the queue
//! by anyone else (a ticket nobody grabbed, another user's address) fails alone and ends in the DLQ.
//!
//! Seal: `v1.<base64url HMAC-SHA256(key, "order-v1\n" + body)>`. The prefix keeps this key's MACs
//! apart from any other use of HMAC; the seal is deterministic, so a re-drive of the same outbox
//! entry carries the same seal.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const VERSION: &str = "v1";
const CONTEXT: &[u8] = b"order-v1\n";

/// The message attribute that carries the seal.
pub const SEAL_ATTRIBUTE: &str = "seal";

/// The deployment's order-sealing key. Never printed.
#[derive(Clone)]
pub struct SealKey(Hmac<Sha256>);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(<redacted>)")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadSeal {
    #[error("the message carries no seal")]
    Missing,
    #[error("the seal is not of the expected form")]
    Malformed,
    #[error("the seal does not match the message")]
    Forged,
}

impl crate::key_rotation::NewerKeyMightPass for BadSeal {
    fn newer_key_might_pass(&self) -> bool {
        matches!(self, BadSeal::Forged)
    }
}

impl SealKey {
    pub fn new(secret: &[u8]) -> Result<Self, &'static str> {
        super::verify_hash::hmac_key(secret).map(Self)
    }

    fn mac(&self, body: &str) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        mac.update(CONTEXT);
        mac.update(body.as_bytes());
        mac
    }

    pub fn seal(&self, body: &str) -> String {
        format!("{VERSION}.{}", URL_SAFE_NO_PAD.encode(self.mac(body).finalize().into_bytes()))
    }

    /// Checks a seal against the exact body, in constant time.
    pub fn check(&self, body: &str, seal: Option<&str>) -> Result<(), BadSeal> {
        let seal = seal.ok_or(BadSeal::Missing)?;
        let tag = seal.strip_prefix("v1.").ok_or(BadSeal::Malformed)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| BadSeal::Malformed)?;
        self.mac(body).verify_slice(&tag).map_err(|_| BadSeal::Forged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        #[test]
        fn no_seal_but_the_bodys_own_passes(body in "\\PC{0,100}", seal in "\\PC{0,80}|v1\\.[A-Za-z0-9_-]{0,60}") {
            let key = SealKey::new(b"0123456789abcdef-order-key").unwrap();
            proptest::prop_assert!(key.check(&body, Some(&seal)).is_err() || seal == key.seal(&body));
            proptest::prop_assert!(key.check(&body, Some(&key.seal(&body))).is_ok());
        }
    }

    #[test]
    fn a_seal_vouches_for_its_exact_body_and_key_only() {
        let key = SealKey::new(b"0123456789abcdef-order-key").unwrap();
        let other = SealKey::new(b"0123456789abcdef-other-key").unwrap();
        let body = r#"{"v":1,"order_id":"x","ticket_no":1}"#;
        let seal = key.seal(body);
        assert_eq!(key.check(body, Some(&seal)), Ok(()));
        assert_eq!(key.seal(body), seal, "deterministic: a re-drive carries the same seal");
        assert_eq!(key.check(&body.replace("1}", "2}"), Some(&seal)), Err(BadSeal::Forged));
        assert_eq!(key.check(&format!("{body} "), Some(&seal)), Err(BadSeal::Forged));
        assert_eq!(other.check(body, Some(&seal)), Err(BadSeal::Forged));
        assert_eq!(key.check(body, None), Err(BadSeal::Missing));
        for bad in ["", "v1.", "v2.abc", "v1.!!!", &seal[3..]] {
            assert!(key.check(body, Some(bad)).is_err(), "{bad:?} accepted");
        }
        assert!(SealKey::new(b"short").is_err());
        assert_eq!(format!("{key:?}"), "SealKey(<redacted>)");
    }
}
