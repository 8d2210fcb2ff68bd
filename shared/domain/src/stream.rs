//! The random stream both checkable draws read (`red-packet-split/v1`, `ticket-draw/v1`): ChaCha20
//! as RFC 8439 defines it, keyed by a 32-byte seed, with a nonce of 12 zero bytes and the block
//! counter from 0; its keystream read 8 bytes at a time as little-endian unsigned 64-bit integers;
//! a uniform draw below `m` by rejection (with `r = 2^64 mod m`, a word `x >= 2^64 - r` is dropped
//! when `r > 0`; the draw is `x mod m`). A well-known, specified generator, never the language's.

use chacha20::{ChaCha20, KeyIvInit, cipher::StreamCipher};

pub struct Stream {
    cipher: ChaCha20,
}

impl Stream {
    pub fn new(seed: &[u8; 32]) -> Self {
        Self { cipher: ChaCha20::new(&(*seed).into(), &[0u8; 12].into()) }
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut block = [0u8; 8];
        self.cipher.apply_keystream(&mut block);
        u64::from_le_bytes(block)
    }

    /// Uniform below `m` (at least 1), by rejection.
    pub fn below(&mut self, m: u64) -> u64 {
        assert!(m >= 1, "a draw below 0");
        let r = (u64::MAX % m + 1) % m;
        loop {
            let x = self.next_u64();
            if r == 0 || x < 0u64.wrapping_sub(r) {
                return x % m;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8439 section 2.4.2's key, its nonce and counter 1: the first keystream bytes of its
    /// sunscreen example, through the cipher the stream uses.
    #[test]
    fn the_stream_is_rfc_8439_chacha20() {
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        let nonce = [0, 0, 0, 0, 0, 0, 0, 0x4a, 0, 0, 0, 0];
        let mut cipher = ChaCha20::new(&key.into(), &nonce.into());
        chacha20::cipher::StreamCipherSeek::seek(&mut cipher, 64u64);
        let mut block = [0u8; 16];
        cipher.apply_keystream(&mut block);
        assert_eq!(super::super::hex::encode(&block), "224f51f3401bd9e12fde276fb8631ded");
    }

    #[test]
    fn draws_stay_below_their_bound() {
        let mut s = Stream::new(&[3; 32]);
        for m in [1, 2, 3, 7, 1 << 40, u64::MAX] {
            for _ in 0..100 {
                assert!(s.below(m) < m);
            }
        }
    }
}
