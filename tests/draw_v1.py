"""ticket-draw/v1, written again from docs/FAIRNESS.md alone, with the stream and the split of
split_v1.py beside it. Standard library only.

    python3 tests/draw_v1.py <published.json>
        prints the root of the published entrants, then the order they and the secret (and the
        beacon) derive, one entrant a line
    python3 tests/draw_v1.py --vectors tests/vectors/fairness-v1.json
        recomputes every vector of docs/FAIRNESS.md (the stream, the draw, the proofs, the split,
        the proof of work, the beacon's message and randomness; not the BLS signature check, which
        needs a pairing library) and exits 1 at the first that disagrees

loadgen's test `a_second_implementation_agrees_on_the_root_and_the_order` compares it with the
product's draw.
"""

import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from split_v1 import Stream, split  # noqa: E402

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


def seed_of(entrants, secret, beacon):
    return sha(ALGORITHM, b"\x00", secret, root(entrants), beacon)


def shuffle(entrants, seed):
    """Section 2, step 4: the order, and every j drawn."""
    stream, out, swaps = Stream(seed), list(entrants), []
    for i in range(len(out) - 1, 0, -1):
        j = stream.below(i + 1)
        swaps.append(j)
        out[i], out[j] = out[j], out[i]
    return out, swaps


def order(entrants, secret, beacon):
    return shuffle(entrants, seed_of(entrants, secret, beacon))[0]


def sort_entrants(ids):
    return sorted(set(ids), key=lambda e: e.encode())


def proves(entrant, steps, root_hex):
    """Section 3: the path from the leaf up to the root."""
    node = sha(b"\x00", entrant.encode())
    for step in steps:
        sibling = bytes.fromhex(step["sibling"])
        node = sha(b"\x01", sibling, node) if step["left"] else sha(b"\x01", node, sibling)
    return node.hex() == root_hex


def work(event, user, nonce):
    """Section 6: the canonical form, then the digest's leading zero bits."""
    canonical = nonce.isascii() and nonce.isdigit() and str(int(nonce)) == nonce and int(nonce) < 1 << 64
    if not canonical:
        return {"event": event, "user": user, "nonce": nonce, "canonical": False, "digest": None, "zero_bits": None}
    digest = sha(f"ticket-pow/v1|{event}|{user}|{nonce}".encode())
    bits = 0
    for byte in digest:
        if byte:
            bits += 8 - byte.bit_length()
            break
        bits += 8
    return {"event": event, "user": user, "nonce": nonce, "canonical": True, "digest": digest.hex(), "zero_bits": bits}


def check_vectors(path):
    with open(path) as f:
        v = json.load(f)
    assert v["version"] == "fairness-vectors/v1", v["version"]
    checked = 0

    def agree(what, ok):
        nonlocal checked
        if not ok:
            print(f"FAILED: {what} disagrees")
            sys.exit(1)
        checked += 1

    for i, s in enumerate(v["stream"]):
        stream = Stream(bytes.fromhex(s["seed"]))
        agree(f"stream {i}", [str(stream.next_u64()) for _ in s["words"]] == s["words"])
    for i, b in enumerate(v["below"]):
        stream, m = Stream(bytes.fromhex(b["seed"])), int(b["m"])
        agree(f"below {i}", [str(stream.below(m)) for _ in b["draws"]] == b["draws"])
    for i, d in enumerate(v["draw"]):
        entrants = sort_entrants(d["registered"])
        secret = bytes.fromhex(d["secret"])
        randomness = hashlib.sha256(bytes.fromhex(d["beacon_signature"])).digest() if d["beacon_signature"] else b""
        seed = seed_of(entrants, secret, randomness)
        ordered, swaps = shuffle(entrants, seed)
        agree(f"draw {i}", entrants == d["entrants"]
              and [sha(b"\x00", e.encode()).hex() for e in entrants] == d["leaves"]
              and root(entrants).hex() == d["root"]
              and hashlib.sha256(secret).hexdigest() == d["commitment"]
              and randomness.hex() == d["randomness"]
              and seed.hex() == d["seed"] and swaps == d["swaps"] and ordered == d["order"])
    for i, p in enumerate(v["proof"]):
        agree(f"proof {i}", root(p["entrants"]).hex() == p["root"] and proves(p["id"], p["proof"], p["root"]))
    for i, s in enumerate(v["split"]):
        seed = bytes.fromhex(s["seed"])
        amounts = [str(a) for a in split(seed, int(s["total"]), s["n"])]
        agree(f"split {i}", amounts == s["amounts"] and hashlib.sha256(seed).hexdigest() == s["commitment"])
    for i, w in enumerate(v["proof_of_work"]):
        agree(f"proof of work {i}", work(w["event"], w["user"], w["nonce"]) == w)
    for i, b in enumerate(v["beacon"]):
        message = hashlib.sha256(int(b["round"]).to_bytes(8, "big")).hexdigest()
        randomness = hashlib.sha256(bytes.fromhex(b["signature"])).hexdigest() if b["signature"] else None
        agree(f"beacon {i}", message == b["message"] and randomness == b["randomness"])
    print(f"ok: {checked} vectors agree (the beacon's BLS signature not checked: no pairing library here)")


if __name__ == "__main__":
    if sys.argv[1] == "--vectors":
        check_vectors(sys.argv[2])
        sys.exit(0)
    with open(sys.argv[1]) as f:
        published = json.load(f)
    entrants = sorted(set(published["entrants"]), key=lambda e: e.encode())
    # A beacon round's randomness is SHA-256 of its signature (its signature is the verifier's to check).
    beacon = hashlib.sha256(bytes.fromhex(published["beacon"]["signature"])).digest() if published.get("beacon") else b""
    print(root(entrants).hex())
    for entrant in order(entrants, bytes.fromhex(published["secret"]), beacon):
        print(entrant)
