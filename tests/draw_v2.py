"""ticket-draw/v2 (private entrants) and ticket-entry-receipt/v1 (signed entry receipts), written
again from docs/FAIRNESS.md sections 2a and 6a alone, on the stream of split_v1.py and the shuffle of
draw_v1.py, with Ed25519 from ed25519_ref.py. Standard library only.

    python3 tests/draw_v2.py --vectors tests/vectors/fairness-v2.json
        recomputes every vector of fairness-v2.json (each leaf; each draw's entrants, root,
        commitment, randomness, seed, every j and the order; each proof; each receipt's key, key id,
        signature and text, and whether it checks) and exits 1 at the first that disagrees
    python3 tests/draw_v2.py <published.json>
        a whole published v2 draw (one object, or the list of GET /events/{id}/draw's pages):
        prints `root <hex>` of the entrants (the order's leaves, sorted), then the order the secret
        (and the beacon) derive from them, one leaf a line; exits 1 when the published commitment,
        root, entrant_count or order disagree. The beacon's randomness is SHA-256 of its signature;
        the BLS signature itself is not checked (no pairing library here), and it says so
    python3 tests/draw_v2.py --receipt <TR1...> --keys <receipt-key.json> --draw <published.json>
                             [--entry-key <hex>]
        checks a receipt against GET /events/{id}/receipt-key's keys and places its leaf in the draw.
        Exit 0: the receipt checks and its leaf is in the draw (its place printed, from 1), or it
        carries `r` (taken after the entries closed, so rightly not in the draw);
        3: the receipt checks, has no `r`, and its leaf is not among the published entrants (proof
        of exclusion, whether or not the rest of the published draw recomputes: what was published
        left it out); 1: the receipt does not check, the draw names another event, a leaf that is
        there sits in a draw that does not recompute, or the entry key does not give the leaf;
        2: unreadable input.
"""

import base64
import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ed25519_ref  # noqa: E402
from draw_v1 import sha, shuffle  # noqa: E402  (shuffle is section 2's Fisher-Yates, on any list)

ALGORITHM = b"ticket-draw/v2"
RECEIPT_PREFIX = "TR1."
# Section 6a: the signed bytes start with this line (a hyphen before v1, where the name has a slash).
RECEIPT_CONTEXT = b"ticket-entry-receipt-v1\n"
HEX64 = re.compile(r"[0-9a-f]{64}")
BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


class Unreadable(Exception):
    """Input that cannot be read as what it should be (exit 2)."""


# ---- Section 2a: leaves, tree, seed, shuffle --------------------------------------------------

def leaf(event, key):
    """Step 2: SHA-256(0x00 || event id || 0x00 || k)."""
    if len(key) != 32:
        raise ValueError("an entry key is 32 bytes")
    return sha(b"\x00", event.encode(), b"\x00", key)


def sort_entrants(leaves):
    # Each leaf once, by its bytes (the same order as by its lowercase hex).
    return sorted(set(leaves))


def levels(entrants):
    """Step 3: level 0 is the leaves as they are (not hashed again); a last node alone is carried up."""
    tree = [list(entrants)]
    while len(tree[-1]) > 1:
        below = tree[-1]
        tree.append([sha(b"\x01", below[i], below[i + 1]) if i + 1 < len(below) else below[i]
                     for i in range(0, len(below), 2)])
    return tree


def root(entrants):
    return levels(entrants)[-1][0] if entrants else sha()


def seed_of(root_, secret, randomness):
    """Step 4: SHA-256("ticket-draw/v2" || 0x00 || secret || root || randomness)."""
    return sha(ALGORITHM, b"\x00", secret, root_, randomness)


def draw(entrants, secret, randomness):
    """The whole of section 2a from the sorted entrants: root, seed, every j and the order."""
    r = root(entrants)
    seed = seed_of(r, secret, randomness)
    order, swaps = shuffle(entrants, seed)
    return {"root": r, "seed": seed, "swaps": swaps, "order": order}


def proof(entrants, the_leaf):
    """Section 3: the siblings from the leaf up, none at a level where the node is carried up."""
    index, steps = entrants.index(the_leaf), []
    for level in levels(entrants)[:-1]:
        sibling = index ^ 1
        if sibling < len(level):
            steps.append({"sibling": level[sibling].hex(), "left": sibling < index})
        index //= 2
    return steps


def proves(the_leaf, steps, root_):
    node = the_leaf
    for step in steps:
        sibling = bytes.fromhex(step["sibling"])
        node = sha(b"\x01", sibling, node) if step["left"] else sha(b"\x01", node, sibling)
    return node == root_


# ---- Section 6a: receipts ---------------------------------------------------------------------

def b64u(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text):
    """RFC 4648 section 5 without padding, and only in its canonical form (zero spare bits), so that
    one value has one text."""
    if not isinstance(text, str) or not BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError(f"not unpadded base64url: {text!r:.40}")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if b64u(data) != text:
        raise ValueError(f"not canonical base64url: {text!r:.40}")
    return data


def key_id(public):
    """base64url of the first 8 bytes of SHA-256 of the 32-byte public key."""
    return b64u(hashlib.sha256(public).digest()[:8])


def signed_bytes(payload_text):
    # The signature covers the payload's base64url text exactly as it stands in the receipt.
    return RECEIPT_CONTEXT + payload_text.encode()


def make_receipt(seed, payload):
    text = b64u(payload.encode())
    return f"{RECEIPT_PREFIX}{text}.{b64u(ed25519_ref.sign(seed, signed_bytes(text)))}"


def _no_duplicates(pairs):
    # "A verifier reads the members by name": a name given twice has no one value, so it is refused.
    names = [name for name, _ in pairs]
    if len(names) != len(set(names)):
        raise ValueError("a member named twice")
    return dict(pairs)


def check_receipt(receipt, keys):
    """Section 6a's "checks": (True, payload) or (False, why). `keys` maps key id to public key."""
    if not isinstance(receipt, str) or not receipt.startswith(RECEIPT_PREFIX):
        return False, "not a TR1. receipt"
    parts = receipt[len(RECEIPT_PREFIX):].split(".")
    if len(parts) != 2:
        return False, "not TR1.<payload>.<signature>"
    payload_text, signature_text = parts
    try:
        payload = json.loads(unb64u(payload_text).decode("utf-8"), object_pairs_hook=_no_duplicates)
        signature = unb64u(signature_text)
    except ValueError as e:  # also UnicodeDecodeError and JSONDecodeError
        return False, f"unreadable: {e}"
    if not isinstance(payload, dict):
        return False, "the payload is not a JSON object"
    k = payload.get("k")
    if not isinstance(k, str) or k not in keys:
        return False, f"key id {k!r} names no published key"
    if not ed25519_ref.verify(keys[k], signed_bytes(payload_text), signature):
        return False, f"the signature does not hold with key {k}"
    for name in ("e", "l", "t"):
        if not isinstance(payload.get(name), str):
            return False, f"the payload has no {name!r}"
    # The spec asks only that these be present; a leaf that is not one, or a rank that is not one,
    # is refused too, since nothing could be proven with it.
    if not HEX64.fullmatch(payload["l"]):
        return False, "'l' is not 64 lowercase hex digits"
    if "r" in payload and not (type(payload["r"]) is int and payload["r"] >= 1):
        return False, "'r' is not a rank from 1"
    return True, payload


# ---- Section 2a, published: one object or its pages joined by `from` --------------------------

def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Unreadable(f"{path}: {e}")


def _hex_bytes(value, what, length=32):
    if not isinstance(value, str) or len(value) != 2 * length or not re.fullmatch(r"[0-9a-f]*", value):
        raise Unreadable(f"{what} is not {length} bytes of lowercase hex")
    return bytes.fromhex(value)


def load_draw(path):
    """The draw's terms and its whole order: pages are joined by `from`, their terms must agree."""
    doc = _read_json(path)
    pages = doc if isinstance(doc, list) else [doc]
    if not pages or not all(isinstance(p, dict) for p in pages):
        raise Unreadable(f"{path}: not a draw (an object, or a list of its pages)")
    pages = sorted(pages, key=lambda p: p.get("from", 0) if isinstance(p.get("from", 0), int) else -1)
    order, terms = [], None
    for page in pages:
        if page.get("from", 0) != len(order):
            raise Unreadable(f"{path}: a page from {page.get('from')!r} where place {len(order)} was due")
        page_terms = {name: v for name, v in page.items() if name not in ("from", "next", "order")}
        if terms is not None and page_terms != terms:
            raise Unreadable(f"{path}: the page from {page.get('from')} has other terms than the first")
        terms = page_terms
        if not isinstance(page.get("order"), list):
            raise Unreadable(f"{path}: a page without its order")
        order += [_hex_bytes(x, "a leaf of the order") for x in page["order"]]
        following = page.get("next")
        if following is not None and following != len(order):
            raise Unreadable(f"{path}: a page whose next ({following!r}) is not where it ends ({len(order)})")
    if pages[-1].get("next") is not None:
        raise Unreadable(f"{path}: the page from {pages[-1].get('from')} says more follow; give every page")
    if terms.get("algorithm") != ALGORITHM.decode():
        raise Unreadable(f"{path}: algorithm {terms.get('algorithm')!r}, not ticket-draw/v2"
                         " (tests/draw_v1.py checks ticket-draw/v1)")
    return terms, order


def check_draw(terms, order):
    """Recomputes a published draw: (root, order, the first disagreement or None)."""
    secret = _hex_bytes(terms.get("secret"), "the secret")
    beacon = terms.get("beacon")
    if beacon is not None and not isinstance(beacon, dict):
        raise Unreadable("the beacon is not an object")
    if beacon:
        # Section 5: the randomness is SHA-256 of the signature's 48 bytes (its pairing check is not made here).
        randomness = hashlib.sha256(_hex_bytes(beacon.get("signature"), "the beacon's signature", 48)).digest()
    else:
        randomness = b""
    entrants = sort_entrants(order)
    result = draw(entrants, secret, randomness)
    count = terms.get("entrant_count")
    if isinstance(count, str) and count.isdigit():
        count = int(count)  # a u64 may come as a decimal string
    problems = []
    if "commitment" in terms and terms["commitment"] != hashlib.sha256(secret).hexdigest():
        problems.append("the commitment is not SHA-256 of the secret")
    if terms.get("root") != result["root"].hex():
        problems.append(f"the published root {terms.get('root')} is not the entrants' {result['root'].hex()}")
    if count != len(entrants) or len(order) != len(entrants):
        problems.append(f"entrant_count {terms.get('entrant_count')!r}, {len(order)} places, "
                        f"{len(entrants)} distinct leaves")
    if result["order"] != order:
        place = next((i for i, (a, b) in enumerate(zip(result["order"], order)) if a != b),
                     min(len(order), len(result["order"])))
        problems.append(f"the published order disagrees from place {place + 1}")
    return result["root"], result["order"], problems[0] if problems else None


BLS_NOTE = "note: the beacon's BLS signature is not checked (no pairing library here); its randomness is SHA-256 of it"


def main_draw(path):
    try:
        terms, order = load_draw(path)
        root_, ordered, problem = check_draw(terms, order)
    except Unreadable as e:
        print(f"unreadable: {e}", file=sys.stderr)
        return 2
    print(f"root {root_.hex()}")
    for x in ordered:
        print(x.hex())
    if terms.get("beacon"):
        print(BLS_NOTE, file=sys.stderr)
    if problem:
        print(f"FAILED: {problem}", file=sys.stderr)
        return 1
    return 0


# ---- The receipt's verdict --------------------------------------------------------------------

def load_keys(path):
    """GET /events/{id}/receipt-key: the current key, and `next` / `previous` around a rotation."""
    doc = _read_json(path)
    if not isinstance(doc, dict):
        raise Unreadable(f"{path}: not a JSON object")
    keys = {}
    for entry in (doc, doc.get("next"), doc.get("previous")):
        if entry is None:
            continue
        try:
            public = unb64u(entry.get("public_key")) if isinstance(entry, dict) else b""
        except ValueError as e:
            raise Unreadable(f"{path}: {e}")
        if len(public) != 32:
            raise Unreadable(f"{path}: a public_key that is not 32 bytes")
        # The id is derived, never trusted; a published id that is not the key's own is a contradiction.
        if entry.get("key_id") is not None and entry["key_id"] != key_id(public):
            raise Unreadable(f"{path}: key_id {entry['key_id']!r} is not {key_id(public)!r}, its key's")
        keys[key_id(public)] = public
    return keys


def main_receipt(receipt, keys_path, draw_path, entry_key):
    try:
        keys = load_keys(keys_path)
        terms, order = load_draw(draw_path)
        key = None if entry_key is None else _hex_bytes(entry_key, "--entry-key")
        _, _, problem = check_draw(terms, order)
    except Unreadable as e:
        print(f"unreadable: {e}", file=sys.stderr)
        return 2
    ok, payload = check_receipt(receipt, keys)
    if not ok:
        print(f"FAILED: the receipt does not check: {payload}")
        return 1
    print(f"receipt checks: key {payload['k']}, event {payload['e']}, leaf {payload['l']}, accepted {payload['t']}"
          + (f", rank {payload['r']} after the entries closed" if "r" in payload else ""))
    if key is not None:
        if leaf(payload["e"], key).hex() != payload["l"]:
            print("FAILED: SHA-256(0x00 || event || 0x00 || entry key) is not the receipt's leaf")
            return 1
        print("the entry key gives the leaf: the entry is its holder's")
    if terms.get("event_id") not in (None, payload["e"]):
        print(f"FAILED: the receipt is {payload['e']}'s, the draw {terms['event_id']}'s")
        return 1
    if terms.get("event_id") is None:
        print(f"(the draw names no event: that it is {payload['e']}'s is yours to know)")
    if terms.get("beacon"):
        print(BLS_NOTE)
    leaf_bytes = bytes.fromhex(payload["l"])
    if problem and (leaf_bytes in order or "r" in payload):
        print(f"FAILED: the published draw does not recompute: {problem}")
        return 1
    if leaf_bytes in order:
        place = order.index(leaf_bytes) + 1
        print(f"in the draw: place {place} of {len(order)}")
        if "r" in payload:
            print("note: a place taken after the entries closed, yet its leaf is among the drawn entrants")
        return 0
    if "r" in payload:
        print(f"not among the {len(order)} drawn entrants, as an entry after the entries closed should not be:"
              f" rank {payload['r']} behind them")
        return 0
    print(f"EXCLUDED: the receipt checks and its leaf is not among the draw's {len(order)} entrants"
          + (f" (and the published draw does not recompute either: {problem})" if problem else ""))
    return 3


# ---- The vectors ------------------------------------------------------------------------------

def check_vectors(path):
    v = _read_json(path)
    assert v["version"] == "fairness-vectors/v2", v["version"]
    checked = 0

    def agree(what, ok):
        nonlocal checked
        if not ok:
            print(f"FAILED: {what} disagrees")
            sys.exit(1)
        checked += 1

    agree("Ed25519 against RFC 8032 section 7.1 test 1", ed25519_ref.self_test())
    for i, x in enumerate(v["leaf"]):
        agree(f"leaf {i}", leaf(x["event"], bytes.fromhex(x["entry_key"])).hex() == x["leaf"])
    for i, d in enumerate(v["draw"]):
        entrants = sort_entrants(leaf(d["event"], bytes.fromhex(k)) for k in d["entry_keys"])
        secret = bytes.fromhex(d["secret"])
        signature = d["beacon_signature"]
        randomness = hashlib.sha256(bytes.fromhex(signature)).digest() if signature else b""
        result = draw(entrants, secret, randomness)
        for name, ours in (("entrants", [e.hex() for e in entrants]),
                           ("root", result["root"].hex()),
                           ("commitment", hashlib.sha256(secret).hexdigest()),
                           ("randomness", randomness.hex()),
                           ("seed", result["seed"].hex()),
                           ("swaps", result["swaps"]),
                           ("order", [e.hex() for e in result["order"]])):
            agree(f"draw {i}'s {name}", ours == d[name])
    for i, p in enumerate(v["proof"]):
        entrants = [bytes.fromhex(e) for e in p["entrants"]]
        the_leaf = bytes.fromhex(p["leaf"])
        agree(f"proof {i}'s entrants (sorted, the leaf among them)",
              entrants == sort_entrants(entrants) and the_leaf in entrants)
        agree(f"proof {i}'s root", root(entrants).hex() == p["root"])
        agree(f"proof {i}'s steps", proof(entrants, the_leaf) == p["proof"])
        agree(f"proof {i}'s check", proves(the_leaf, p["proof"], bytes.fromhex(p["root"])))
    for i, r in enumerate(v["receipt"]):
        what = f"receipt {i} ({r['why']})"
        seed = bytes.fromhex(r["signing_seed"])
        public = ed25519_ref.public_key(seed)
        agree(f"{what}: its public key", b64u(public) == r["public_key"])
        agree(f"{what}: its key id", key_id(public) == r["key_id"])
        agree(f"{what}: its payload in its text",
              r["receipt"].split(".")[1] == b64u(r["payload"].encode()))
        if r["checks"]:
            agree(f"{what}: its text, signed again", make_receipt(seed, r["payload"]) == r["receipt"])
        published = unb64u(r["checked_with"])
        ok, _ = check_receipt(r["receipt"], {key_id(published): published})
        agree(f"{what}: whether it checks", ok == r["checks"])
    print(f"ok: {checked} vectors agree (Ed25519 signed and verified here; the beacon's BLS signature not checked: no pairing library here)")


def main(argv):
    if len(argv) == 2 and argv[0] == "--vectors":
        try:
            check_vectors(argv[1])
        except Unreadable as e:
            print(f"unreadable: {e}", file=sys.stderr)
            return 2
        return 0
    if len(argv) == 1 and not argv[0].startswith("--"):
        return main_draw(argv[0])
    options = dict(zip(argv[0::2], argv[1::2]))
    if len(argv) % 2 == 0 and {"--receipt", "--keys", "--draw"} <= set(options) <= {
            "--receipt", "--keys", "--draw", "--entry-key"} and len(options) * 2 == len(argv):
        return main_receipt(options["--receipt"], options["--keys"], options["--draw"], options.get("--entry-key"))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
