"""red-packet-split/v1, written again from its description alone (shared/domain/src/red_packet.rs),
so that an auditor with no Rust can recompute a sale's amounts. Standard library only.

    python3 tests/split_v1.py <seed hex> <total> <n>     prints the n amounts, one per line
    python3 tests/split_v1.py --commitment <seed hex>    prints SHA-256 of the seed, as hex

The integration test `red_packets::a_second_implementation_agrees` runs it on random seeds and
compares with the product's split.
"""

import hashlib
import struct
import sys

MASK = 0xFFFFFFFF


def _rotl(v, c):
    return ((v << c) & MASK) | (v >> (32 - c))


def _quarter(s, a, b, c, d):
    s[a] = (s[a] + s[b]) & MASK; s[d] = _rotl(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & MASK; s[b] = _rotl(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b]) & MASK; s[d] = _rotl(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & MASK; s[b] = _rotl(s[b] ^ s[c], 7)


def chacha20_block(key, counter, nonce):
    """RFC 8439 section 2.3: one 64-byte block."""
    state = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    state += list(struct.unpack("<8L", key)) + [counter] + list(struct.unpack("<3L", nonce))
    working = list(state)
    for _ in range(10):
        _quarter(working, 0, 4, 8, 12); _quarter(working, 1, 5, 9, 13)
        _quarter(working, 2, 6, 10, 14); _quarter(working, 3, 7, 11, 15)
        _quarter(working, 0, 5, 10, 15); _quarter(working, 1, 6, 11, 12)
        _quarter(working, 2, 7, 8, 13); _quarter(working, 3, 4, 9, 14)
    return struct.pack("<16L", *[(w + s) & MASK for w, s in zip(working, state)])


class Stream:
    """Step 1: the keystream for the seed, a zero nonce, counter from 0, read as little-endian u64s."""

    def __init__(self, seed):
        self.seed, self.counter, self.buffer = seed, 0, b""

    def next_u64(self):
        while len(self.buffer) < 8:
            self.buffer += chacha20_block(self.seed, self.counter, bytes(12))
            self.counter += 1
        value, self.buffer = struct.unpack("<Q", self.buffer[:8])[0], self.buffer[8:]
        return value

    def below(self, m):
        """Step 2: uniform below m by rejection."""
        r = (1 << 64) % m
        while True:
            x = self.next_u64()
            if r == 0 or x < (1 << 64) - r:
                return x % m


def split(seed, total, n):
    """Steps 3 and 4: Floyd's cut points, then the differences."""
    assert 1 <= n <= total
    k, m = n - 1, total - 1
    stream, cuts = Stream(seed), set()
    for j in range(m - k + 1, m + 1):
        t = 1 + stream.below(j)
        cuts.add(j if t in cuts else t)
    points = [0] + sorted(cuts) + [total]
    return [b - a for a, b in zip(points, points[1:])]


if __name__ == "__main__":
    if sys.argv[1] == "--commitment":
        print(hashlib.sha256(bytes.fromhex(sys.argv[2])).hexdigest())
    else:
        for amount in split(bytes.fromhex(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])):
            print(amount)
