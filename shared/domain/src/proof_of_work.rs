//! An optional cost per entry (issue 27, item 6): a sale that draws may ask each user to find a
//! nonce before entering its ballot or joining its queue, so that a thousand accounts cost a
//! thousand times the work.
//!
//! # `ticket-pow/v1`
//!
//! The work is a nonce `n`, an unsigned 64-bit integer written in its one canonical form (decimal
//! ASCII digits, no sign, no leading zero: `0`, `7`, `18446744073709551615`; `07`, `+7` and
//! 2^64 are no nonce), such that
//! `SHA-256("ticket-pow/v1|" || event id || "|" || user id || "|" || n)` begins with at least
//! `bits` zero bits (read from the first byte, most significant bit first). docs/FAIRNESS.md is
//! the normative text, with test vectors. The client tries
//! `n = 0, 1, 2, ...`: on average `2^bits` hashes; the server checks with one. The input names the
//! event and the user, so a solution serves one user's one entry (an entry is once per user:
//! it is single use by construction) and cannot be lent to another account.

use sha2::{Digest, Sha256};

use super::{EventId, UserId};

pub const ALGORITHM: &str = "ticket-pow/v1";
/// The hardest a release may ask: 2^28 hashes is minutes of a phone's time.
pub const MAX_BITS: u32 = 28;

fn digest(event: &EventId, user: &UserId, nonce: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(ALGORITHM.as_bytes())
        .chain_update(b"|")
        .chain_update(event.as_str().as_bytes())
        .chain_update(b"|")
        .chain_update(user.as_str().as_bytes())
        .chain_update(b"|")
        .chain_update(nonce.as_bytes())
        .finalize()
        .into()
}

/// Leading zero bits of a hash.
fn zeros(hash: &[u8; 32]) -> u32 {
    let mut bits = 0;
    for byte in hash {
        if *byte == 0 {
            bits += 8;
        } else {
            return bits + byte.leading_zeros();
        }
    }
    bits
}

/// Whether `nonce` is a nonce in its canonical form: the decimal of a `u64`, no leading zero.
pub fn canonical(nonce: &str) -> bool {
    nonce.bytes().all(|b| b.is_ascii_digit()) && nonce.parse::<u64>().is_ok_and(|n| n.to_string() == nonce)
}

/// Whether `nonce` is work of `bits` for this user's entry in this event.
pub fn verify(event: &EventId, user: &UserId, bits: u32, nonce: &str) -> bool {
    canonical(nonce) && zeros(&digest(event, user, nonce)) >= bits
}

/// The first nonce that is work of `bits` (what a client runs).
pub fn solve(event: &EventId, user: &UserId, bits: u32) -> String {
    (0u64..).map(|n| n.to_string()).find(|n| zeros(&digest(event, user, n)) >= bits).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (EventId, UserId) {
        (EventId::parse("ev-1").unwrap(), UserId::parse("u-1").unwrap())
    }

    #[test]
    fn a_solution_verifies_for_its_user_and_event_only() {
        let (event, user) = ids();
        let nonce = solve(&event, &user, 12);
        assert!(verify(&event, &user, 12, &nonce));
        assert!(verify(&event, &user, 0, "0"), "no work asked, any nonce");
        assert!(verify(&event, &user, 0, "18446744073709551615"));
        let other = UserId::parse("u-2").unwrap();
        // A nonce of 12 bits for one user is 12 bits for another with chance 2^-12: this pair is not.
        assert!(!verify(&event, &other, 12, &nonce) || nonce != solve(&event, &other, 12));
        // One form per number: a leading zero, a sign, or a value past 2^64 - 1 is no nonce.
        for bad in ["", "-1", "+1", "1.0", "x", "01", "00", "093", "18446744073709551616", "123456789012345678901"] {
            assert!(!verify(&event, &user, 0, bad), "{bad:?}");
        }
    }

    #[test]
    fn the_digest_is_the_written_one() {
        // printf 'ticket-pow/v1|ev-1|u-1|0' | sha256sum
        let (event, user) = ids();
        let hex: String = digest(&event, &user, "0").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "d8dcb6d28d01a7b48a61530682869e31cc2df15d6475ae4585e173920d929599");
        assert_eq!(zeros(&[0; 32]), 256);
        let mut one = [0u8; 32];
        one[1] = 0b0001_0000;
        assert_eq!(zeros(&one), 11);
    }

    #[test]
    fn the_work_grows_with_the_bits() {
        let (event, user) = ids();
        let tries = |bits| solve(&event, &user, bits).parse::<u64>().unwrap();
        // Averages over users: 2^bits tries each.
        let users: Vec<UserId> = (0..64).map(|i| UserId::parse(&format!("u{i}")).unwrap()).collect();
        let mean = |bits: u32| {
            users.iter().map(|u| solve(&event, u, bits).parse::<u64>().unwrap() + 1).sum::<u64>() as f64 / 64.0
        };
        let (at4, at8) = (mean(4), mean(8));
        assert!((8.0..32.0).contains(&at4), "{at4}");
        assert!((128.0..512.0).contains(&at8), "{at8}");
        assert!(tries(1) <= tries(10));
    }
}
