//! A key in its rotation (docs/DEPLOY.md, "Rotating keys"): the version that signs and every
//! version a check still accepts, so a key is replaced while a sale runs without refusing what
//! the old one signed, or what the new one signs before every environment has read it.
//!
//! The stages are Secrets Manager's: a new value is first staged `AWSPENDING` (checked, never
//! used to sign), then made `AWSCURRENT` (signs), and the one it replaces becomes `AWSPREVIOUS`
//! (checked until the next rotation). Every environment reads the stages again within
//! `SECRETS_KEPT_SECONDS`, so waiting that long between the two steps means no environment signs
//! with a key another cannot check.

/// A check's refusal that a version staged since the keys were read could turn into a pass: a
/// signature no version in hand matches. An expired, malformed or missing one stays refused
/// whatever is read again, and costs no read.
pub trait NewerKeyMightPass {
    fn newer_key_might_pass(&self) -> bool;
}

/// The versions of one key, as staged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged<K> {
    /// `AWSCURRENT`: what signs.
    pub current: K,
    /// `AWSPENDING`: the next key, accepted before anything signs with it.
    pub pending: Option<K>,
    /// `AWSPREVIOUS`: the key before, accepted for what it signed.
    pub previous: Option<K>,
    /// When these stages were read from their secret, in ms since the epoch (0: never read, a
    /// fixed key). Of two views, the one read later shows the later step of a rotation, whatever
    /// the step was (a staging, a promotion, a staging withdrawn): what is published from a view
    /// (the pass key's public halves) is never replaced by a view read before it.
    pub read_ms: i64,
}

impl<K> Staged<K> {
    /// A key that is not rotating (a development value).
    pub fn only(current: K) -> Self {
        Self { current, pending: None, previous: None, read_ms: 0 }
    }

    /// The stages of a rotation, never read (tests).
    pub fn of(current: K, pending: Option<K>, previous: Option<K>) -> Self {
        Self { current, pending, previous, read_ms: 0 }
    }

    /// Every key a check accepts, the current one first.
    pub fn accepted(&self) -> impl Iterator<Item = &K> {
        std::iter::once(&self.current).chain(self.pending.as_ref()).chain(self.previous.as_ref())
    }

    /// The first check any accepted key passes, else the current key's refusal.
    pub fn check<E>(&self, check: impl Fn(&K) -> Result<(), E>) -> Result<(), E> {
        let refused = check(&self.current);
        if refused.is_ok() {
            return refused;
        }
        if self.pending.iter().chain(self.previous.as_ref()).any(|k| check(k).is_ok()) {
            return Ok(());
        }
        refused
    }

    /// The same stages of something made from each key (a private key's public half).
    pub fn map<T>(&self, f: impl Fn(&K) -> T) -> Staged<T> {
        Staged {
            current: f(&self.current),
            pending: self.pending.as_ref().map(&f),
            previous: self.previous.as_ref().map(&f),
            read_ms: self.read_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        EventId, UserId,
        verify_hash::{BadHash, HashKey},
    };

    fn key(s: &str) -> HashKey {
        HashKey::new(format!("0123456789abcdef-{s}").as_bytes()).unwrap()
    }

    #[test]
    fn a_rotation_refuses_nothing_either_side_signed() {
        let (event, user) = (EventId::parse("lecture-1").unwrap(), UserId::parse("u1").unwrap());
        let (old, new, stranger) = (key("old"), key("new"), key("stranger"));
        let by_old = old.issue(&event, &user, 10_000);
        let by_new = new.issue(&event, &user, 10_000);
        let verify = |s: &Staged<HashKey>, token: &str| s.check(|k| k.verify(token, &event, &user, 0));
        // Before: only the old key.
        let before = Staged::only(old.clone());
        assert!(verify(&before, &by_old).is_ok());
        assert!(verify(&before, &by_new).is_err());
        // Staged: the new key is checked while the old still signs.
        let staged = Staged::of(old.clone(), Some(new.clone()), None);
        assert!(verify(&staged, &by_old).is_ok() && verify(&staged, &by_new).is_ok());
        // Made current: what the old key signed still checks.
        let after = Staged::of(new.clone(), None, Some(old.clone()));
        assert!(verify(&after, &by_old).is_ok() && verify(&after, &by_new).is_ok());
        // A key never staged is refused, with the current key's reason.
        let forged = stranger.issue(&event, &user, 10_000);
        assert_eq!(verify(&after, &forged), Err(BadHash::Forged));
        // The next rotation drops the key before the previous one.
        let next = Staged::of(key("third"), None, Some(new));
        assert!(verify(&next, &by_old).is_err());
    }
}
