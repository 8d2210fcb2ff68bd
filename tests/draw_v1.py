"""ticket-draw/v1, written again from its description alone (shared/src/domain/draw.rs), with the
stream of split_v1.py beside it. Standard library only.

    python3 tests/draw_v1.py <published.json>
        prints the root of the published entrants, then the order they and the secret (and the
        beacon) derive, one entrant a line

loadgen's test `a_second_implementation_agrees_on_the_root_and_the_order` compares it with the
product's draw.
"""

import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from split_v1 import Stream  # noqa: E402

ALGORITHM = b"ticket-draw/v1"


def sha(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.digest()


def root(entrants):
    level = [sha(b"\x00", e.encode()) for e in entrants]
    if not level:
        return sha()
    while len(level) > 1:
        level = [sha(b"\x01", level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]


def order(entrants, secret, beacon):
    seed = sha(ALGORITHM, b"\x00", secret, root(entrants), beacon)
    stream, out = Stream(seed), list(entrants)
    for i in range(len(out) - 1, 0, -1):
        j = stream.below(i + 1)
        out[i], out[j] = out[j], out[i]
    return out


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        published = json.load(f)
    entrants = sorted(set(published["entrants"]), key=lambda e: e.encode())
    # A beacon round's randomness is SHA-256 of its signature (its signature is the verifier's to check).
    beacon = hashlib.sha256(bytes.fromhex(published["beacon"]["signature"])).digest() if published.get("beacon") else b""
    print(root(entrants).hex())
    for entrant in order(entrants, bytes.fromhex(published["secret"]), beacon):
        print(entrant)
