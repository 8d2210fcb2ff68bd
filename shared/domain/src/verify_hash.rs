//! The verify hash: a per-user, per-event token that can only be had once the sale is (nearly)
//! open, and without which a grab is refused before Redis is touched.
//!
//! Token: `v1.<expiry epoch ms>.<base64url HMAC-SHA256(secret, "v1|event|user|expiry")>`. A fair
//! open's admission token has the same form under version `a1`.
//! The expiry travels in clear so a grab can check it; the MAC binds it to the event and user, so a
//! forged, foreign or stretched token fails. The comparison is constant-time (`Mac::verify_slice`).

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::ids::{EventId, UserId};

const VERSION: &str = "v1";
/// An admission to a fair open's sale (`handlers::draws::queue`): the same key and form, another
/// version, so neither token passes for the other.
const ADMISSION: &str = "a1";
const MIN_SECRET_BYTES: usize = 16;

/// The deployment's HMAC secret. Never printed.
#[derive(Clone)]
pub struct HashKey(Hmac<Sha256>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadHash {
    #[error("the hash is not of the expected form")]
    Malformed,
    #[error("the hash was not issued for this user and event")]
    Forged,
    #[error("the hash has expired")]
    Expired,
}

impl crate::key_rotation::NewerKeyMightPass for BadHash {
    fn newer_key_might_pass(&self) -> bool {
        matches!(self, BadHash::Forged)
    }
}

/// An HMAC-SHA256 key from a deployment secret, refusing one too short to be a secret (the verify
/// hash's key and the order seal's both come through here).
pub(crate) fn hmac_key(secret: &[u8]) -> Result<Hmac<Sha256>, &'static str> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err("the secret must be at least 16 bytes");
    }
    Hmac::<Sha256>::new_from_slice(secret).map_err(|_| "unusable secret")
}

impl HashKey {
    pub fn new(secret: &[u8]) -> Result<Self, &'static str> {
        hmac_key(secret).map(Self)
    }

    fn mac(&self, version: &str, event: &EventId, user: &UserId, expires_ms: i64) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        // '|' cannot appear in a validated event or user id, so the fields cannot run together.
        mac.update(format!("{version}|{event}|{user}|{expires_ms}").as_bytes());
        mac
    }

    fn issue_as(&self, version: &str, event: &EventId, user: &UserId, expires_ms: i64) -> String {
        let tag = self.mac(version, event, user, expires_ms).finalize().into_bytes();
        format!("{version}.{expires_ms}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    fn verify_as(
        &self,
        version: &str,
        token: &str,
        event: &EventId,
        user: &UserId,
        now_ms: i64,
    ) -> Result<(), BadHash> {
        let mut parts = token.splitn(3, '.');
        let (Some(v), Some(expiry), Some(tag)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(BadHash::Malformed);
        };
        if v != version {
            return Err(BadHash::Malformed);
        }
        let expires_ms: i64 = expiry.parse().map_err(|_| BadHash::Malformed)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| BadHash::Malformed)?;
        self.mac(version, event, user, expires_ms).verify_slice(&tag).map_err(|_| BadHash::Forged)?;
        if now_ms >= expires_ms {
            return Err(BadHash::Expired);
        }
        Ok(())
    }

    pub fn issue(&self, event: &EventId, user: &UserId, expires_ms: i64) -> String {
        self.issue_as(VERSION, event, user, expires_ms)
    }

    pub fn verify(&self, token: &str, event: &EventId, user: &UserId, now_ms: i64) -> Result<(), BadHash> {
        self.verify_as(VERSION, token, event, user, now_ms)
    }

    /// An admission token: `a1.<expiry epoch ms>.<base64url HMAC-SHA256(secret, "a1|event|user|expiry")>`.
    pub fn admit(&self, event: &EventId, user: &UserId, expires_ms: i64) -> String {
        self.issue_as(ADMISSION, event, user, expires_ms)
    }

    pub fn verify_admission(&self, token: &str, event: &EventId, user: &UserId, now_ms: i64) -> Result<(), BadHash> {
        self.verify_as(ADMISSION, token, event, user, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        /// Any token, and any single-character change of a real one: refused, never a panic.
        #[test]
        fn only_the_issued_hash_verifies(garbage in "\\PC{0,120}", at in 0usize..80, with in proptest::char::any()) {
            let (key, event, user) = ids();
            let real = key.issue(&event, &user, 2_000_000_000_000);
            proptest::prop_assert!(key.verify(&garbage, &event, &user, 0).is_err() || garbage == real);
            let mut chars: Vec<char> = real.chars().collect();
            let at = at % chars.len();
            if chars[at] != with {
                chars[at] = with;
                let changed: String = chars.into_iter().collect();
                proptest::prop_assert!(key.verify(&changed, &event, &user, 0).is_err(), "{changed}");
            }
        }
    }

    fn ids() -> (HashKey, EventId, UserId) {
        (
            HashKey::new(b"0123456789abcdef-test-secret").unwrap(),
            EventId::parse("ev1").unwrap(),
            UserId::parse("u1").unwrap(),
        )
    }

    #[test]
    fn a_hash_verifies_for_its_user_and_event_until_it_expires() {
        let (key, ev, user) = ids();
        let token = key.issue(&ev, &user, 2_000);
        assert_eq!(key.verify(&token, &ev, &user, 1_999), Ok(()));
        assert_eq!(key.verify(&token, &ev, &user, 2_000), Err(BadHash::Expired));
    }

    #[test]
    fn foreign_forged_and_stretched_hashes_fail() {
        let (key, ev, user) = ids();
        let token = key.issue(&ev, &user, 2_000);
        let other_user = UserId::parse("u2").unwrap();
        let other_event = EventId::parse("ev2").unwrap();
        assert_eq!(key.verify(&token, &ev, &other_user, 0), Err(BadHash::Forged));
        assert_eq!(key.verify(&token, &other_event, &user, 0), Err(BadHash::Forged));
        let stretched = token.replacen("2000", "9000", 1);
        assert_eq!(key.verify(&stretched, &ev, &user, 0), Err(BadHash::Forged));
        let other_key = HashKey::new(b"another-secret-of-16+bytes").unwrap();
        assert_eq!(other_key.verify(&token, &ev, &user, 0), Err(BadHash::Forged));
    }

    #[test]
    fn malformed_hashes_fail_without_panicking() {
        let (key, ev, user) = ids();
        for bad in ["", "v1", "v1.x.y", "v2.1.AAAA", "v1.1.!!!", "v1.-1."] {
            assert!(key.verify(bad, &ev, &user, 0).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_admission_and_a_hash_never_pass_for_each_other() {
        let (key, ev, user) = ids();
        let admission = key.admit(&ev, &user, 2_000);
        assert_eq!(key.verify_admission(&admission, &ev, &user, 1_999), Ok(()));
        assert_eq!(key.verify_admission(&admission, &ev, &user, 2_000), Err(BadHash::Expired));
        assert!(key.verify(&admission, &ev, &user, 0).is_err());
        assert!(key.verify_admission(&key.issue(&ev, &user, 2_000), &ev, &user, 0).is_err());
        let other = UserId::parse("u2").unwrap();
        assert_eq!(key.verify_admission(&admission, &ev, &other, 0), Err(BadHash::Forged));
    }

    #[test]
    fn short_secrets_are_refused() {
        assert!(HashKey::new(b"short").is_err());
    }
}
