//! Red packets: a total amount split once, at release, into one amount per ticket number, from a
//! seed committed to at release and revealed after the sale (docs/DESIGN.md section 11).
//!
//! # `red-packet-split/v1`, precisely enough to write again
//!
//! Inputs: a 32-byte `seed`, the `total` in the currency's smallest unit, and `n` ticket numbers
//! (`1 <= n <= total`). Output: `n` amounts, each at least 1, summing to `total` exactly.
//!
//! 1. **The stream.** ChaCha20 as RFC 8439 defines it, keyed by `seed`, with a nonce of 12 zero
//!    bytes and the block counter starting at 0; its keystream (what encrypting zeros yields) is
//!    read 8 bytes at a time, each a little-endian unsigned 64-bit integer `x`.
//! 2. **A uniform draw below `m`** (`m >= 1`): let `r = 2^64 mod m`; take the next `x`; if
//!    `r > 0` and `x >= 2^64 - r`, drop it and take the next; the draw is `x mod m`.
//! 3. **Cut points** (Floyd's algorithm): choose `k = n - 1` distinct points of `1..=total-1`.
//!    With `M = total - 1`, an empty set `S`, for `j` from `M - k + 1` to `M` in order: `t = 1 +`
//!    a draw below `j`; if `t` is in `S`, add `j`, else add `t`.
//! 4. **Amounts.** Sort `S` as `c_1 < ... < c_k`, with `c_0 = 0` and `c_n = total`; ticket number
//!    `i` gets `c_i - c_{i-1}`.
//!
//! **Why this method.** Every way of writing `total` as `n` positive parts in order is equally
//! likely (the cut points are a uniformly random subset), so every amount is at least the smallest
//! unit, the sum is exact, and every ticket number's amount has the same distribution: neither the
//! first grabbers nor the last are favoured. The "double mean" method used by apps that split at
//! grab time gives later grabs a wider spread, and depends on the order of the grabs; a split made
//! once from a committed seed costs the gate nothing and can be checked by anyone after the sale.
//!
//! The commitment is the lowercase hex of SHA-256 of the seed's 32 bytes; the seed is published as
//! lowercase hex once the sale has ended.

use std::collections::HashSet;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::stream::Stream;

/// The split's name and version, published with the event.
pub const ALGORITHM: &str = "red-packet-split/v1";
/// The largest total a release may split, in the smallest unit (10^15: ten trillion of a
/// two-digit currency's units).
pub const MAX_TOTAL: u64 = 1_000_000_000_000_000;

/// The secret the split is drawn from; published (as hex) only after the sale.
#[derive(Clone, PartialEq, Eq)]
pub struct AmountSeed([u8; 32]);

impl std::fmt::Debug for AmountSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AmountSeed(..)")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a red packet's seed is 64 lowercase hex digits")]
pub struct BadSeed;

impl AmountSeed {
    /// A fresh seed from the operating system's generator.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).expect("the operating system's random generator");
        Self(bytes)
    }

    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    pub fn from_hex(text: &str) -> Result<Self, BadSeed> {
        super::hex::decode(text).map(Self).ok_or(BadSeed)
    }

    pub fn to_hex(&self) -> String {
        super::hex::encode(&self.0)
    }

    /// What the event publishes at release: SHA-256 of the seed, as hex.
    pub fn commitment(&self) -> String {
        super::hex::encode(&Sha256::digest(self.0))
    }
}

/// An ISO 4217 code: three capital letters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Currency(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be an ISO 4217 code of three capital letters, such as CNY or EUR")]
pub struct BadCurrency;

impl Currency {
    pub fn parse(code: &str) -> Result<Self, BadCurrency> {
        if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
            Ok(Self(code.to_owned()))
        } else {
            Err(BadCurrency)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Digits after the decimal point (ISO 4217's minor unit): 0, 3 or 4 for the currencies
    /// listed, 2 for every other.
    pub fn minor_digits(&self) -> u32 {
        match self.0.as_str() {
            "BIF" | "CLP" | "DJF" | "GNF" | "ISK" | "JPY" | "KMF" | "KRW" | "PYG" | "RWF" | "UGX" | "UYI" | "VND"
            | "VUV" | "XAF" | "XOF" | "XPF" => 0,
            "BHD" | "IQD" | "JOD" | "KWD" | "LYD" | "OMR" | "TND" => 3,
            "CLF" | "UYW" => 4,
            _ => 2,
        }
    }

    /// `value` smallest units written as the currency is read: 1234 CNY is "12.34 CNY".
    pub fn display(&self, value: u64) -> String {
        let digits = self.minor_digits();
        if digits == 0 {
            return format!("{value} {}", self.0);
        }
        let unit = 10u64.pow(digits);
        format!("{}.{:0width$} {}", value / unit, value % unit, self.0, width = digits as usize)
    }
}

/// An event's red packets: the total, its currency and the seed of the split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedPacket {
    pub total: u64,
    pub currency: Currency,
    pub seed: AmountSeed,
}

/// What an event shows of its red packets while the seed is secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublicRedPacket<'a> {
    pub total: u64,
    pub currency: &'a Currency,
    pub commitment: String,
    pub algorithm: &'static str,
}

impl RedPacket {
    pub fn public(&self) -> PublicRedPacket<'_> {
        PublicRedPacket {
            total: self.total,
            currency: &self.currency,
            commitment: self.seed.commitment(),
            algorithm: ALGORITHM,
        }
    }

    /// The amount of every ticket number `1..=n`, in order.
    pub fn split(&self, n: u32) -> Vec<u64> {
        split(&self.seed, self.total, n)
    }
}

/// One ticket's amount, as replies, orders, mails and reports carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Amount {
    /// In the currency's smallest unit.
    pub value: u64,
    pub currency: Currency,
}

impl Amount {
    pub fn display(&self) -> String {
        self.currency.display(self.value)
    }
}

/// `red-packet-split/v1` (the module's description). `n` must be from 1 to `total`.
pub fn split(seed: &AmountSeed, total: u64, n: u32) -> Vec<u64> {
    assert!(n >= 1 && u64::from(n) <= total, "a split needs 1 <= n <= total");
    let k = u64::from(n) - 1;
    let m = total - 1;
    let mut stream = Stream::new(&seed.0);
    let mut cuts: HashSet<u64> = HashSet::with_capacity(k as usize);
    for j in (m - k + 1)..=m {
        let t = 1 + stream.below(j);
        if !cuts.insert(t) {
            cuts.insert(j);
        }
    }
    let mut cuts: Vec<u64> = cuts.into_iter().collect();
    cuts.sort_unstable();
    cuts.push(total);
    let mut previous = 0;
    cuts.into_iter()
        .map(|c| {
            let amount = c - previous;
            previous = c;
            amount
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned, so a change of the split (or of the crate under it) is seen here: the second
    /// implementation (tests/split_v1.py) prints the same.
    #[test]
    fn a_known_split() {
        let seed = AmountSeed::from_bytes([7; 32]);
        let amounts = split(&seed, 10_000, 5);
        assert_eq!(amounts.iter().sum::<u64>(), 10_000);
        assert_eq!(amounts, KNOWN_SPLIT);
        assert_eq!(seed.commitment().len(), 64);
        assert_eq!(AmountSeed::from_hex(&seed.to_hex()), Ok(seed));
    }

    const KNOWN_SPLIT: [u64; 5] = [1741, 29, 431, 5403, 2396];

    #[test]
    fn edge_sizes() {
        let seed = AmountSeed::from_bytes([1; 32]);
        assert_eq!(split(&seed, 1, 1), [1]);
        assert_eq!(split(&seed, 9, 1), [9]);
        assert_eq!(split(&seed, 5, 5), [1; 5]);
        assert_eq!(split(&seed, u64::MAX, 3).iter().map(|a| u128::from(*a)).sum::<u128>(), u128::from(u64::MAX));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1_000))]
        /// 1,000 seeded releases: every split exact to the unit, every amount at least one unit.
        #[test]
        fn every_split_sums_exactly_with_each_amount_at_least_the_unit(
            seed in proptest::array::uniform32(0u8..),
            n in 1u32..=2_000,
            extra in 0u64..1_000_000,
        ) {
            let total = u64::from(n) + extra;
            let amounts = split(&AmountSeed::from_bytes(seed), total, n);
            proptest::prop_assert_eq!(amounts.len(), n as usize);
            proptest::prop_assert_eq!(amounts.iter().sum::<u64>(), total);
            proptest::prop_assert!(amounts.iter().all(|a| *a >= 1));
        }
    }

    /// Every position has the same distribution: over many seeds the first, a middle and the last
    /// ticket's mean amounts agree with total / n within a few standard errors.
    #[test]
    fn every_position_has_the_same_mean() {
        let (total, n, runs) = (1_000u64, 10u32, 4_000u32);
        let mut sums = vec![0f64; n as usize];
        for run in 0..runs {
            let mut bytes = [0u8; 32];
            bytes[..4].copy_from_slice(&run.to_le_bytes());
            for (s, a) in sums.iter_mut().zip(split(&AmountSeed::from_bytes(bytes), total, n)) {
                *s += a as f64;
            }
        }
        // A part of a uniform composition of 1,000 into 10 has a standard deviation of about 90.
        let tolerance = 4.0 * 90.0 / f64::from(runs).sqrt();
        for (i, s) in sums.iter().enumerate() {
            let mean = s / f64::from(runs);
            assert!((mean - 100.0).abs() < tolerance, "position {}: mean {mean}", i + 1);
        }
    }

    #[test]
    fn currencies_are_iso_codes_written_with_their_minor_unit() {
        for bad in ["cny", "CN", "CNYY", "C1Y", ""] {
            assert_eq!(Currency::parse(bad), Err(BadCurrency), "{bad}");
        }
        let cny = Currency::parse("CNY").unwrap();
        assert_eq!(cny.display(1234), "12.34 CNY");
        assert_eq!(cny.display(5), "0.05 CNY");
        assert_eq!(Currency::parse("JPY").unwrap().display(500), "500 JPY");
        assert_eq!(Currency::parse("KWD").unwrap().display(1_005), "1.005 KWD");
    }
}
