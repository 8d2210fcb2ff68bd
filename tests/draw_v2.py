"""ticket-draw/v2 (private entrants), ticket-entry-receipt/v1 (signed entry receipts) and
ticket-draw-head/v1 (the draw's signed head), written again from docs/FAIRNESS.md sections 2a, 3, 6a,
6b and 7 alone, on the stream of split_v1.py and the shuffle of draw_v1.py, with Ed25519 (strict:
no small-order A or R) from ed25519_ref.py. Standard library only.

    python3 tests/draw_v2.py --vectors tests/vectors/fairness-v2.json
        recomputes every vector of fairness-v2.json (each leaf; each draw's entrants, root,
        commitment, randomness, seed, every j and the order; each proof; each receipt's key, key id,
        signature and text, and whether it checks; each head's signature and text, and whether it
        checks) and exits 1 at the first that disagrees
    python3 tests/draw_v2.py <published.json or pages...>
        a whole published v2 draw (one object, or the list of GET /events/{id}/draw's pages, in one
        file or several): prints `root <hex>` of the entrants (the order's leaves, sorted), then the
        order the secret (and the beacon) derive from them, one leaf a line. Exit 0: it recomputes;
        1: the pages do not join (a gap, a page missing, other terms), or the published commitment,
        root, entrant_count or order disagree; 2: unreadable input (a file missing, not JSON, not
        an object or a list of objects). The beacon's randomness is SHA-256 of its signature; the
        BLS signature itself is not checked (no pairing library here), and it says so
    python3 tests/draw_v2.py --receipt <TR1...> --keys <receipt-key.json> --draw <published.json or pages...>
                             [--entry-key <hex>]
        checks a receipt against the keys its event committed to at release (the draw's
        `receipt_keys`, section 6a; a draw without them: GET /events/{id}/receipt-key's keys),
        with the reply's `draw_head` (a TH1. text, checked against the same keys) after the draw,
        and places its leaf in the draw. A keys reply whose `committed` is not the draw's
        `receipt_keys` contradicts it (exit 1).
        A head matches the draw when each of its members but `k` and `receipt_keys` is the draw's
        own (the beacon's round, public_key and signature against the draw's `beacon`); a member
        the head lacks, the draw lacks too.
        Exit 0: the receipt checks, the draw recomputes, and either the leaf is among the places
          (its place printed, from 1; a note when no signed head matches, or the receipt has `r`)
          or the receipt is a real late place: it has `r`, a head that checks and matches the draw
          has `admission_rate` (a fair open) and the receipt's `t` is at or after that head's
          `entries_close` (a receipt with `r` under a ballot's head, or timed before the close, is
          an ordinary entry); the terms are read from the signed head, never from a page;
        3: an exclusion proven: the receipt checks, its key is one the event committed to (a draw
          without committed keys: one among the head's `receipt_keys`; a head that vouches for other
          keys than the committed ones contradicts its own terms and disowns none of them),
          it is not a real late place, and its leaf is not among the places of a draw that
          recomputes, names the receipt's event as `event_id`, and matches a `draw_head` on the
          keys that checks against those keys and names that event;
        1: anything else: the receipt does not check (`r` other than an integer from 1 included),
          the entry key does not give the leaf, the pages do not join, the draw does not recompute
          or names another event, a missing leaf without a head that checks and matches (it then
          proves nothing: anyone with the revealed secret can make a draw without it, and without
          the head's terms a receipt with `r` cannot be told a late place), or a missing leaf whose
          receipt is signed by a key the head does not vouch for (not in its `receipt_keys`: anyone
          can add a key of their own to a keys document and sign a receipt with it);
        2: unreadable input (a file missing, not JSON, not an object; an --entry-key not 64 hex).
"""

import base64
import contextlib
import hashlib
import io
import json
import math
import os
import re
import sys
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ed25519_ref  # noqa: E402
from draw_v1 import sha, shuffle  # noqa: E402  (shuffle is section 2's Fisher-Yates, on any list)

ALGORITHM = b"ticket-draw/v2"
RECEIPT_PREFIX = "TR1."
# Section 6a: the signed bytes start with this line (a hyphen before v1, where the name has a slash).
RECEIPT_CONTEXT = b"ticket-entry-receipt-v1\n"
# Section 6b: the head's, alike.
HEAD_PREFIX = "TH1."
HEAD_CONTEXT = b"ticket-draw-head-v1\n"
HEX64 = re.compile(r"[0-9a-f]{64}")
BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
# Section 6a: an event id; the longest texts (strict rule 1).
EVENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_RECEIPT, MAX_HEAD = 1024, 4096
U64, U32 = 2**64, 2**32
# Section 5: the beacon's scheme, and drand's quicknet as the text pins it.
SCHEME = "bls-unchained-g1-rfc9380"
QUICKNET_KEY = ("83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758"
                "c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a")
QUICKNET_GENESIS, QUICKNET_PERIOD = 1692803367, 3


class Unreadable(Exception):
    """Input that cannot be read at all: a file missing, not JSON, not an object (exit 2)."""


class Fault(Exception):
    """Input that reads but does not check out: pages that do not join, a field that is not what
    the spec says it is (exit 1)."""


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


# ---- Sections 6a and 6b: receipts and heads, the same signed text -----------------------------

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


def signed_bytes(payload_text, context=RECEIPT_CONTEXT):
    # The signature covers the payload's base64url text exactly as it stands in the text.
    return context + payload_text.encode()


def _make_signed(prefix, context, seed, payload):
    text = b64u(payload.encode())
    return f"{prefix}{text}.{b64u(ed25519_ref.sign(seed, signed_bytes(text, context)))}"


def make_receipt(seed, payload):
    return _make_signed(RECEIPT_PREFIX, RECEIPT_CONTEXT, seed, payload)


def make_head(seed, payload):
    return _make_signed(HEAD_PREFIX, HEAD_CONTEXT, seed, payload)


def _no_duplicates(pairs):
    # "A verifier reads the members by name": a name given twice has no one value, so it is refused.
    names = [name for name, _ in pairs]
    if len(names) != len(set(names)):
        raise ValueError("a member named twice")
    return dict(pairs)


def _no_constant(name):
    # NaN and Infinity are not JSON (RFC 8259); Python's reader would take them.
    raise ValueError(f"{name} is not JSON")


def _json_object(text):
    value = strict_json(text)
    if not isinstance(value, dict):
        raise ValueError("the payload is not a JSON object")
    return value


def is_int(value):
    # A JSON integer: not a bool (Python's True is an int), not a float such as 1.0.
    return type(value) is int


def _open_signed(text, prefix, context, keys, max_len):
    """Section 6a's text and signature (6b's "as section 6a's"): (True, payload) or (False, why).
    The key is chosen by the payload's `k`, read before the signature is checked."""
    if not isinstance(text, str) or not text.startswith(prefix):
        return False, f"not a {prefix} text"
    if len(text) > max_len:
        return False, f"longer than {max_len} characters"
    parts = text[len(prefix):].split(".")
    if len(parts) != 2:
        return False, f"not {prefix}<payload>.<signature>"
    payload_text, signature_text = parts
    try:
        payload = _json_object(unb64u(payload_text).decode("utf-8"))
        signature = unb64u(signature_text)
    except ValueError as e:  # also UnicodeDecodeError and JSONDecodeError
        return False, f"unreadable: {e}"
    k = payload.get("k")
    if not isinstance(k, str) or k not in keys:
        return False, f"key id {k!r} names no published key"
    if not ed25519_ref.verify(keys[k], signed_bytes(payload_text, context), signature):
        return False, f"the signature does not hold with key {k}"
    return True, payload


def check_receipt(receipt, keys):
    """Section 6a's "checks": (True, payload) or (False, why). `keys` maps key id to public key."""
    ok, payload = _open_signed(receipt, RECEIPT_PREFIX, RECEIPT_CONTEXT, keys, MAX_RECEIPT)
    if not ok:
        return ok, payload
    if not isinstance(payload.get("e"), str) or not EVENT_ID.fullmatch(payload["e"]):
        return False, "'e' is not an event id"
    if not isinstance(payload.get("t"), str):
        return False, "the payload has no 't' string"
    if not isinstance(payload.get("l"), str) or not HEX64.fullmatch(payload["l"]):
        return False, "'l' is not 64 lowercase hex digits"
    # "if present, `r` as an integer from 1 (not null, not 0)": nor a bool, nor 1.0.
    if "r" in payload and not (is_int(payload["r"]) and 1 <= payload["r"] < U64):
        return False, f"'r' is {json.dumps(payload['r'])}, not an integer from 1"
    return True, payload


HEAD_STRINGS = ("e", "algorithm", "commitment", "root", "entries_close", "drawn_at")
# Each integer member and the bound it stays below (section 6b, "Kinds").
HEAD_INTEGERS = {"entrant_count": U64, "capacity": U32}
HEAD_OPTIONAL_INTEGERS = {"admission_rate": U32, "beacon_round": U64}
HEAD_OPTIONAL_HEX = ("beacon_public_key", "beacon_signature")
LOWER_HEX = re.compile(r"(?:[0-9a-f]{2})+")


def check_head(head, keys):
    """Section 6b's head: its signature as section 6a's, and its members as 6b lists them (strings,
    integers; `admission_rate` and `beacon_round` integers when present, `beacon_public_key` and
    `beacon_signature` lowercase hex when present; `receipt_keys` a list of key ids, always).
    (True, payload) or (False, why)."""
    ok, payload = _open_signed(head, HEAD_PREFIX, HEAD_CONTEXT, keys, MAX_HEAD)
    if not ok:
        return ok, payload
    for name in HEAD_STRINGS:
        if not isinstance(payload.get(name), str):
            return False, f"the head has no {name!r} string"
    if not EVENT_ID.fullmatch(payload["e"]):
        return False, "the head's 'e' is not an event id"
    for name, bound in HEAD_INTEGERS.items():
        if not (is_int(payload.get(name)) and 0 <= payload[name] < bound):
            return False, f"the head's {name!r} is not an integer from 0 below {bound}"
    for name, bound in HEAD_OPTIONAL_INTEGERS.items():
        if name in payload and not (is_int(payload[name]) and 0 <= payload[name] < bound):
            return False, f"the head's {name!r} is present and not an integer from 0 below {bound}"
    for name in HEAD_OPTIONAL_HEX:
        if name in payload and not isinstance(payload[name], str):
            return False, f"the head's {name!r} is present and not a string"
    vouched = payload.get("receipt_keys")
    if not (isinstance(vouched, list) and all(isinstance(x, str) for x in vouched)):
        return False, "the head's 'receipt_keys' is not a list of key ids"
    return True, payload


# ---- RFC 3339 instants (section 6a: a late place's `t` against the draw's `entries_close`) -------

RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)


def _days_from_civil(y, m, d):
    # Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's algorithm).
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def instant(text):
    """An RFC 3339 date-time (section 5.6) as an exact number of seconds since the epoch (UTC), or
    None when it is not one (section 8, "Times": up to nine fractional digits; an offset is applied;
    a leap second, :60, is not a time here)."""
    if not isinstance(text, str):
        return None
    m = RFC3339.fullmatch(text)
    if not m:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days_in = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    if not (1 <= month <= 12 and 1 <= day <= days_in[month - 1] and hour <= 23 and minute <= 59
            and second <= 59):
        return None
    offset = 0
    zone = m.group(8)
    if zone not in ("Z", "z"):
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 23 or om > 59:
            return None
        offset = (oh * 60 + om) * 60 * (1 if zone[0] == "+" else -1)
    fraction = Fraction(int(m.group(7)[1:]), 10 ** (len(m.group(7)) - 1)) if m.group(7) else Fraction(0)
    return (_days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
            - offset + fraction)


# ---- Section 2a, published: one object or its pages joined by `from` --------------------------

def _read_json(path):
    """A file's JSON, strictly (section 8): no member named twice, no NaN, no lone surrogate."""
    try:
        with open(path, encoding="utf-8") as f:
            return strict_json(f.read())
    except (OSError, ValueError) as e:
        raise Unreadable(f"{path}: {e}")


def _scalar_text(value):
    """Every string in `value` is Unicode scalar values (a lone surrogate escape is none)."""
    if isinstance(value, str):
        value.encode("utf-8")  # raises UnicodeEncodeError (a ValueError) on a lone surrogate
    elif isinstance(value, list):
        for x in value:
            _scalar_text(x)
    elif isinstance(value, dict):
        for name, x in value.items():
            _scalar_text(name)
            _scalar_text(x)


def strict_json(text):
    """RFC 8259 JSON as section 8 reads it; raises ValueError."""
    if text.startswith("\ufeff"):
        raise ValueError("a byte-order mark is not JSON")
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant,
                           parse_float=_finite, parse_int=_integer)
        too_deep = _depth(value) > MAX_DEPTH
    except RecursionError:
        too_deep = True
    if too_deep:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    _scalar_text(value)
    return value


# Section 8, "JSON": arrays and objects nest at most this deep (the outermost at depth 1).
MAX_DEPTH = 64


def _depth(value):
    if isinstance(value, list):
        return 1 + max((_depth(x) for x in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(x) for x in value.values()), default=0)
    return 0


def _integer(text):
    # `-0` is a double, -0.0 (section 8, "Numbers"); an integer too large for a double is not JSON
    # here.
    if text == "-0":
        return -0.0
    value = int(text)
    try:
        float(value)  # the nearest double, rounded as section 8 says; OverflowError past the largest
    except OverflowError:
        raise ValueError(f"{text[:20]}... is too large for a double")
    return value


def _finite(text):
    # A number too large for a double (1e400) is not JSON here (section 8, "Numbers").
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is too large for a double")
    return value


def _canonical(value):
    """A JSON value for comparing as JSON (section 8): a number not an integer from -2^63 to
    2^64 - 1 is a double; true is not 1; member order aside."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int):
        return ("int", value) if -2**63 <= value < U64 else ("float", float(value))
    if isinstance(value, float):
        return ("float", value)
    if isinstance(value, list):
        return ("list", tuple(_canonical(x) for x in value))
    return ("object", tuple(sorted((name, _canonical(x)) for name, x in value.items())))


def same_json(a, b):
    return _canonical(a) == _canonical(b)


def read_draw_pages(paths):
    """Each file one object (a page, or the whole draw) or a list of them: the pages, unjoined."""
    pages = []
    for path in paths:
        doc = _read_json(path)
        more = doc if isinstance(doc, list) else [doc]
        if not more or not all(isinstance(p, dict) for p in more):
            raise Unreadable(f"{path}: not a draw (an object, or a list of its pages)")
        pages += more
    return pages


def _is_str(v):
    return isinstance(v, str)


def _int_below(bound):
    return _int_from(0, bound)


def _int_from(low, bound):
    return lambda v: is_int(v) and low <= v < bound


def _list_of(kind):
    return lambda v: isinstance(v, list) and all(kind(x) for x in v)


def _object_of(kinds):
    return lambda v: isinstance(v, dict) and all(
        name in v and v[name] is not None and kind(v[name]) for name, kind in kinds.items())


# Section 8, "Kinds": a page's members and what each must be.
PAGE_KINDS = {
    "algorithm": _is_str, "commitment": _is_str, "secret": _is_str, "root": _is_str,
    "event_id": _is_str, "entries_close": _is_str, "drawn_at": _is_str,
    "entrant_count": _int_below(U64), "from": _int_below(U64), "next": _int_from(1, U64),
    "capacity": _int_from(1, U32), "admission_rate": _int_from(1, U32),
    "order": _list_of(_is_str), "entrants": _list_of(_is_str),
    "beacon": _object_of({"scheme": _is_str, "public_key": _is_str, "round": _int_below(U64), "signature": _is_str}),
    "receipt_keys": _list_of(_object_of({"key_id": _is_str, "public_key": _is_str})),
}
PAGE_REQUIRED = ("algorithm", "commitment", "secret", "root", "order")


def readable_pages(pages):
    """Section 8: each page an object, a `null` member as if absent, every member it names of its
    kind. The pages, nulls dropped; raises Unreadable (exit 2)."""
    if not isinstance(pages, list) or not pages:
        raise Unreadable("no page")
    read = []
    for i, page in enumerate(pages):
        if not isinstance(page, dict):
            raise Unreadable(f"page {i + 1} is not a JSON object")
        page = {name: v for name, v in page.items() if v is not None}
        for name in PAGE_REQUIRED:
            if name not in page:
                raise Unreadable(f"page {i + 1} has no {name!r}")
        for name, kind in PAGE_KINDS.items():
            if name in page and not kind(page[name]):
                raise Unreadable(f"page {i + 1}'s {name!r} is not of its kind (section 8)")
        read.append(page)
    return read


def _hex_bytes(value, what, length=32):
    if not isinstance(value, str) or len(value) != 2 * length or not re.fullmatch(r"[0-9a-f]*", value):
        raise Fault(f"{what} is not {length} bytes of lowercase hex")
    return bytes.fromhex(value)


def join_draw(pages):
    """The draw's terms and its whole order: pages are joined by `from`, their terms must agree.
    Raises Fault when they do not join."""
    def start(p):
        return p.get("from", 0) if is_int(p.get("from", 0)) else -1
    pages = sorted(pages, key=start)
    order, terms = [], None
    for page in pages:
        if page.get("from", 0) != len(order) or not is_int(page.get("from", 0)):
            raise Fault(f"a page from {page.get('from')!r} where place {len(order)} was due"
                        " (the pages do not join)")
        page_terms = {name: v for name, v in page.items() if name not in ("from", "next", "order")}
        if len(pages) > 1 and isinstance(page.get("order"), list) and not page["order"]:
            raise Fault(f"the page from {page.get('from', 0)} holds no place (only a whole draw of none may)")
        if terms is not None and not same_json(page_terms, terms):
            raise Fault(f"the page from {page.get('from')} has other terms than the first")
        terms = page_terms
        if not isinstance(page.get("order"), list):
            raise Fault(f"the page from {page.get('from', 0)} has no order")
        order += [_hex_bytes(x, "a leaf of the order") for x in page["order"]]
        following = page.get("next")
        if following is not None and following != len(order):
            raise Fault(f"a page whose next ({following!r}) is not where it ends ({len(order)})")
        if following is None and page is not pages[-1] and not (len(pages) == 1):
            raise Fault(f"a page follows the one from {page.get('from', 0)}, which names no next")
    if pages[-1].get("next") is not None:
        raise Fault(f"the page from {pages[-1].get('from')} says more follow; give every page")
    if terms.get("algorithm") != ALGORITHM.decode():
        raise Fault(f"algorithm {terms.get('algorithm')!r}, not ticket-draw/v2"
                    " (tests/draw_v1.py checks ticket-draw/v1)")
    return terms, order


def as_int(value):
    """A published integer: a JSON integer, or a u64 as a decimal string; None otherwise."""
    if is_int(value):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]+", value):
        return int(value)
    return None


def check_draw(terms, order):
    """Recomputes a published draw: (root, order, the first disagreement or None). Raises Fault on
    a secret or beacon signature that is not hex of its length."""
    secret = _hex_bytes(terms.get("secret"), "the secret")
    beacon = terms.get("beacon")
    if beacon:
        # Section 5: the randomness is SHA-256 of the signature's 48 bytes (its pairing check is not made here).
        randomness = hashlib.sha256(_hex_bytes(beacon.get("signature"), "the beacon's signature", 48)).digest()
    else:
        randomness = b""
    entrants = sort_entrants(order)
    result = draw(entrants, secret, randomness)
    count = as_int(terms.get("entrant_count"))
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
    problems += terms_problems(terms)
    return result["root"], result["order"], problems[0] if problems else None


def terms_problems(terms):
    """Section 7, a draw's verdict, step 3: drawn not before the close; the beacon's form; a
    quicknet round the first after the close (section 5)."""
    problems = []
    close = terms.get("entries_close")
    if close is not None:
        at_close, drawn = instant(close), terms.get("drawn_at")
        if at_close is None or (drawn is not None and instant(drawn) is None):
            problems.append("entries_close or drawn_at is not a time (section 8)")
        elif drawn is not None and instant(drawn) < at_close:
            problems.append(f"drawn at {drawn}, before the entries closed at {close}")
    beacon = terms.get("beacon")
    if beacon:
        if beacon["scheme"] != SCHEME:
            problems.append(f"the beacon's scheme is {beacon['scheme']!r}, not {SCHEME}")
        if not re.fullmatch(r"[0-9a-f]{192}", beacon["public_key"]):
            problems.append("the beacon's public key is not 96 bytes of lowercase hex")
        if beacon["public_key"] == QUICKNET_KEY and close is not None and instant(close) is not None:
            seconds = math.floor(instant(close))
            first = 1 if seconds < QUICKNET_GENESIS else (seconds - QUICKNET_GENESIS) // QUICKNET_PERIOD + 2
            if beacon["round"] != first:
                problems.append(f"the beacon round is {beacon['round']}, not quicknet's first after the close ({first})")
    return problems


BLS_NOTE = "note: the beacon's BLS signature is not checked (no pairing library here); its randomness is SHA-256 of it"


def main_draw(paths):
    try:
        pages = read_draw_pages(paths)
    except Unreadable as e:
        print(f"unreadable: {e}", file=sys.stderr)
        return 2
    return draw_verdict(pages)


def draw_verdict(pages):
    """Section 7, a draw's verdict, over its pages in memory: the exit code; the root and the order
    printed."""
    try:
        pages = readable_pages(pages)
    except Unreadable as e:
        print(f"unreadable: {e}", file=sys.stderr)
        return 2
    try:
        terms, order = join_draw(pages)
        root_, ordered, problem = check_draw(terms, order)
    except Fault as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    print(f"root {root_.hex()}")
    for x in ordered:
        print(x.hex())
    if terms.get("beacon"):
        print(BLS_NOTE, file=sys.stderr)
    if problem:
        print(f"FAILED: {problem}", file=sys.stderr)
        return 1
    return 0


# ---- Section 6b: does a head match the draw? --------------------------------------------------

ABSENT = object()  # a member the draw (or the head) does not have


def head_disagreements(head, terms, order):
    """Each member of the head but `k` and `receipt_keys` against the draw's own (section 6b's
    "matches"): the list of those that differ, empty when the head is the draw's. The optional
    members (`admission_rate`; `beacon_round`, `beacon_public_key` and `beacon_signature` against
    the draw's `beacon` object's `round`, `public_key` and `signature`) are the head's exactly when
    the draw has them: "a member the head lacks, the draw lacks too", and the other way round."""
    beacon = terms.get("beacon") if isinstance(terms.get("beacon"), dict) else {}

    def has(value, read=lambda x: x):
        return ABSENT if value is None else read(value)

    draws = {
        "e": terms.get("event_id"),
        "algorithm": terms.get("algorithm"),
        "commitment": terms.get("commitment"),
        "root": terms.get("root"),
        "entrant_count": len(order),  # the number of places
        "entries_close": terms.get("entries_close"),  # RFC 3339 as the pages carry it: the same text
        "drawn_at": terms.get("drawn_at"),
        "capacity": as_int(terms.get("capacity")),
        "admission_rate": has(terms.get("admission_rate"), as_int),
        "beacon_round": has(beacon.get("round"), as_int),
        "beacon_public_key": has(beacon.get("public_key")),
        "beacon_signature": has(beacon.get("signature")),
    }
    differ = []
    for name, ours in draws.items():
        theirs = head.get(name, ABSENT)
        if ours is ABSENT or theirs is ABSENT:
            if (ours is ABSENT) != (theirs is ABSENT):
                differ.append(f"{name}: the draw {'has none' if ours is ABSENT else 'has ' + json.dumps(ours)}, "
                              f"the head {'has none' if theirs is ABSENT else 'has ' + json.dumps(theirs)}")
            continue
        # A draw's value that is not of its kind (None) matches nothing; the head's types are check_head's.
        if ours is None or theirs != ours:
            differ.append(f"{name}: the head's {json.dumps(theirs)}, the draw's {json.dumps(ours)}")
    return differ


# ---- The receipt's verdict --------------------------------------------------------------------

def keys_kinds(doc):
    """Section 6a, "Public keys": the keys document's members of their kinds, `null` as absent,
    the current `public_key` required; raises Unreadable (exit 2)."""
    def strings(obj, names, where):
        for name in names:
            if obj.get(name) is not None and not isinstance(obj[name], str):
                raise Unreadable(f"the keys document's {where}{name} is not a string")
    strings(doc, ("key_id", "public_key", "event_id", "draw_head"), "")
    if doc.get("public_key") is None:
        raise Unreadable("the keys document has no public_key")
    for around in ("next", "previous"):
        if doc.get(around) is not None:
            if not isinstance(doc[around], dict):
                raise Unreadable(f"the keys document's {around} is not an object")
            strings(doc[around], ("key_id", "public_key"), f"{around}'s ")
    if doc.get("committed") is not None and not isinstance(doc["committed"], list):
        raise Unreadable("the keys document's committed is not a list")


def keys_of(doc, path):
    """GET /events/{id}/receipt-key: the current key, and `next` / `previous` around a rotation."""
    keys = {}
    for entry in (doc, doc.get("next"), doc.get("previous")):
        if entry is None:
            continue
        try:
            public = unb64u(entry.get("public_key")) if isinstance(entry, dict) else b""
        except ValueError as e:
            raise Fault(f"{path}: {e}")
        if not strict_key(public):
            raise Fault(f"{path}: a public_key that is not the canonical encoding of a point of large order")
        # The id is derived, never trusted; a published id that is not the key's own is a contradiction.
        if entry.get("key_id") is not None and entry["key_id"] != key_id(public):
            raise Fault(f"{path}: key_id {entry['key_id']!r} is not {key_id(public)!r}, its key's")
        keys[key_id(public)] = public
    return keys


def strict_key(public):
    """Section 6a's strict rules 2, 4 and 5 for a published key: 32 bytes, a point's canonical
    encoding, not of small order."""
    point = ed25519_ref._decompress(public) if len(public) == 32 else None
    return point is not None and not ed25519_ref._small_order(point)


def committed_keys(committed):
    """The draw's `receipt_keys` (section 6a): each `{key_id, public_key}` a key its event committed
    to at release; an id that is not its key's own is a contradiction."""
    keys = {}
    if not isinstance(committed, list):
        raise Fault("the draw's receipt_keys is not a list")
    if not 1 <= len(committed) <= 2:
        raise Fault(f"the draw's receipt_keys names {len(committed)} keys: one or two are committed (the signing key, and a staged one)")
    for entry in committed:
        try:
            public = unb64u(entry.get("public_key")) if isinstance(entry, dict) else b""
        except ValueError as e:
            raise Fault(f"the draw's receipt_keys: {e}")
        if len(public) != 32 or entry.get("key_id") != key_id(public):
            raise Fault("the draw's receipt_keys: a key that is not 32 bytes, or not the id it is listed under")
        if not strict_key(public):
            raise Fault("the draw's receipt_keys: a key that is not the canonical encoding of a point of large order")
        keys[key_id(public)] = public
    return keys


def is_late_place(payload, head):
    """Section 6a: a receipt with `r` is a place taken after the entries closed only on a fair open
    (the signed head has `admission_rate`) and when its `t` is at or after the signed head's
    `entries_close`, as instants; otherwise it is an entry that belongs in the draw. The terms are
    the head's (one that checks and matches the draw), never an unsigned page's. (True, why) or
    (False, why)."""
    if "r" not in payload:
        return False, "no r"
    if "admission_rate" not in head:
        return False, "it has r, but the signed head has no admission_rate (a ballot has no late places)"
    t, close = instant(payload["t"]), instant(head.get("entries_close"))
    if t is None or close is None:
        return False, (f"it has r, but its t {payload['t']!r} or the signed head's entries_close "
                       f"{head.get('entries_close')!r} is not an RFC 3339 time to compare")
    if t < close:
        return False, f"it has r, but its t {payload['t']} is before the signed head's entries_close {head['entries_close']}"
    return True, (f"rank {payload['r']} behind the draw, accepted at {payload['t']}, entries closed "
                  f"{head['entries_close']} (the signed head's)")


def where_it_stands(place, terms):
    capacity, rate = as_int(terms.get("capacity")), as_int(terms.get("admission_rate"))
    if terms.get("admission_rate") is not None and rate:
        return f"admitted {(place - 1) // rate} s after drawn_at {terms.get('drawn_at')}"
    if capacity is not None:
        return "won (among the first capacity places)" if place <= capacity else f"not won: {place - capacity} behind the {capacity} winners"
    return "no capacity published"


def main_receipt(receipt, keys_path, draw_paths, entry_key):
    try:
        keys_doc = _read_json(keys_path)
        pages = read_draw_pages(draw_paths)
    except Unreadable as e:
        print(f"unreadable: {e}", file=sys.stderr)
        return 2
    shown = {"receipt": receipt, "keys": keys_doc}
    if entry_key is not None:
        shown["entry_key"] = entry_key
    return receipt_verdict(shown, pages)


def receipt_verdict(shown, pages):
    """Section 7, a receipt's verdict, over the entrant's file (`receipt`, `keys`, `entry_key`)
    and the draw's pages, in memory: the exit code, what it found printed."""
    try:
        if not (isinstance(shown, dict) and isinstance(shown.get("receipt"), str)
                and isinstance(shown.get("keys"), dict)):
            raise Unreadable("the entrant's file is not an object with a receipt string and a keys object")
        receipt, keys_doc, entry_key = shown["receipt"], shown["keys"], shown.get("entry_key")
        if entry_key is not None and not (isinstance(entry_key, str) and HEX64.fullmatch(entry_key)):
            raise Unreadable("the entry key is not 32 bytes of lowercase hex")
        keys_kinds(keys_doc)
        keys_doc = {name: v for name, v in keys_doc.items() if v is not None}
        pages = readable_pages(pages)
    except Unreadable as e:
        print(f"unreadable: {e}", file=sys.stderr)
        return 2
    # The keys the event committed to at release, in the draw's terms (section 6a): the receipt and
    # the head check against them alone. A draw without them (an event released before keys were
    # committed) is checked against the keys document.
    try:
        joined = join_draw(pages)
    except Fault as e:
        print(f"FAILED: the published draw does not check out: {e}")
        return 1
    committed = joined[0].get("receipt_keys", [])
    # The keys document the operator serves names the same commitment as the draw's terms (`[]`
    # when they commit none), or the inputs contradict each other; compared as JSON.
    if keys_doc.get("committed") is not None and not same_json(keys_doc["committed"], committed):
        print("FAILED: the keys document's committed keys are not the draw's receipt_keys")
        return 1
    try:
        if committed:
            keys = committed_keys(committed)
        else:
            keys = keys_of(keys_doc, "the keys document")
    except Fault as e:
        print(f"FAILED: the keys do not check: {e}")
        return 1
    ok, payload = check_receipt(receipt, keys)
    if not ok:
        print(f"FAILED: the receipt does not check: {payload}")
        return 1
    print(f"receipt checks: key {payload['k']}, event {payload['e']}, leaf {payload['l']}, accepted {payload['t']}"
          + (f", rank {payload['r']}" if "r" in payload else ""))
    if keys_doc.get("event_id") is not None and keys_doc["event_id"] != payload["e"]:
        print(f"FAILED: the keys are published for event {keys_doc['event_id']!r}; the receipt names {payload['e']!r}")
        return 1
    if entry_key is not None:
        if leaf(payload["e"], bytes.fromhex(entry_key)).hex() != payload["l"]:
            print("FAILED: SHA-256(0x00 || event || 0x00 || entry key) is not the receipt's leaf")
            return 1
        print("the entry key gives the leaf: the entry is its holder's")
    try:
        terms, order = joined
        _, _, problem = check_draw(terms, order)
    except Fault as e:
        print(f"FAILED: the published draw does not check out: {e}")
        return 1
    if problem:
        print(f"FAILED: the published draw does not recompute: {problem}")
        return 1
    print(f"the draw recomputes: {len(order)} places, root {terms.get('root')}")
    if terms.get("beacon"):
        print(BLS_NOTE)
    event = terms.get("event_id")
    if event is not None and event != payload["e"]:
        print(f"FAILED: the receipt is {payload['e']!r}'s, the draw {event!r}'s")
        return 1

    # The signed head (section 6b), beside the keys.
    head_text, head = keys_doc.get("draw_head"), None
    if head_text is None:
        head_ok, head_says = False, "the keys carry no draw_head"
    else:
        head_ok, head = check_head(head_text, keys)
        if not head_ok:
            head_says = f"the keys' draw_head does not check: {head}"
        elif head["e"] != payload["e"]:
            head_ok, head_says = False, f"the keys' draw_head is {head['e']!r}'s, not {payload['e']!r}'s"
        else:
            differ = head_disagreements(head, terms, order)
            head_ok = not differ
            head_says = (f"the keys' draw_head (key {head['k']}) checks and matches the draw" if head_ok
                         else "the keys' draw_head checks but is not this draw's: " + "; ".join(differ))
            if head_ok and committed and head["receipt_keys"] != [k["key_id"] for k in committed]:
                disowned = (f"the signed head vouches for {json.dumps(head['receipt_keys'])}, not the keys its event"
                            f" committed to at release {json.dumps([k['key_id'] for k in committed])}: the"
                            " operator's own signature contradicts its terms")
                head_says += "; but " + disowned
    print(head_says)

    leaf_bytes = bytes.fromhex(payload["l"])
    if event is None:
        print(f"(the draw names no event: that it is {payload['e']}'s is yours to know)")
    # Section 6b: the keys whose receipts the head vouches for (the keys document alone vouches for
    # nothing: anyone can add a key of their own to it).
    # With committed keys, the receipt's key is one the event committed to at release (it checked
    # against those alone): no head can disown it.
    vouched = head_ok and (bool(committed) or payload["k"] in head["receipt_keys"])
    not_vouched = (f"the receipt's key {payload['k']} is not among the signed head's receipt_keys "
                   f"{json.dumps(head['receipt_keys'])}" if head_ok and not vouched else None)
    if leaf_bytes in order:
        place = order.index(leaf_bytes) + 1
        if head_ok and is_late_place(payload, head)[0]:
            print(f"FAILED: the receipt is a late place's ({is_late_place(payload, head)[1]}), yet its leaf is"
                  f" drawn at place {place}")
            return 1
        print(f"in the draw: place {place} of {len(order)}; {where_it_stands(place, terms)}")
        if "r" in payload:
            print("note: the receipt has r, but by the signed head's terms it is no late place")
        if not head_ok:
            print("note: without a signed head that matches, this place is the place in these pages only")
        if not_vouched:
            print(f"note: {not_vouched}")
        return 0
    if event is None:
        print(f"FAILED: the leaf is not among the {len(order)} places, but the draw names no event: this proves nothing")
        return 1
    if not head_ok:
        if "r" in payload:
            print("the receipt has r: whether it is a place taken after the close is read from a signed head's"
                  " admission_rate and entries_close, and there is no head that checks and matches the draw")
        print(f"FAILED: the leaf is not among the {len(order)} places, but without a signed head that checks and"
              " matches the draw this proves nothing (anyone with the revealed secret can make a draw without it)")
        return 1
    late, why = is_late_place(payload, head)
    if late:
        print(f"not among the {len(order)} drawn places, as a place taken after the entries closed should not be: {why}")
        if not_vouched:
            print(f"note: {not_vouched}")
        return 0
    if "r" in payload:
        print(f"counted as an entry: {why}")
    if not vouched:
        print(f"FAILED: the leaf is not among the {len(order)} places, but {not_vouched}: this proves nothing"
              " (anyone can add a key of their own to a keys document and sign a receipt with it)")
        return 1
    if committed:
        print(f"EXCLUDED: the receipt checks with {payload['k']}, a key its event committed to at release, and its"
              f" leaf is not among the {len(order)} places of the draw of {payload['e']} that recomputes and that the"
              " signed head names")
        return 3
    print(f"EXCLUDED: the receipt checks, its key {payload['k']} is one the operator's signed head vouches for,"
          f" and its leaf is not among the {len(order)} places of the draw of {payload['e']} that recomputes"
          " and that the signed head names")
    return 3


# ---- The vectors ------------------------------------------------------------------------------

def check_vectors(path):
    v = _read_json(path)
    if not isinstance(v, dict) or v.get("version") != "fairness-vectors/v2":
        raise Unreadable(f"{path}: not fairness-vectors/v2")
    checked = 0

    def agree(what, ok):
        nonlocal checked
        if not ok:
            print(f"FAILED: {what} disagrees")
            sys.exit(1)
        checked += 1

    agree("Ed25519 against RFC 8032 section 7.1 test 1 (and small-order points refused)", ed25519_ref.self_test())
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
    heads = v.get("head")
    agree("the head list (section 6b's vectors), present and not empty", isinstance(heads, list) and heads)
    for i, h in enumerate(heads):
        what = f"head {i} ({h['why']})"
        seed = bytes.fromhex(h["signing_seed"])
        agree(f"{what}: a TH1. text", h["head"].startswith(HEAD_PREFIX) and h["head"].count(".") == 2)
        agree(f"{what}: its payload in its text",
              h["head"][len(HEAD_PREFIX):].split(".")[0] == b64u(h["payload"].encode()))
        if h["checks"]:
            agree(f"{what}: its text, signed again", make_head(seed, h["payload"]) == h["head"])
        published = unb64u(h["checked_with"])
        ok, _ = check_head(h["head"], {key_id(published): published})
        agree(f"{what}: whether it checks", ok == h["checks"])
    print(f"ok: {checked} vectors agree (Ed25519 signed and verified here; the beacon's BLS signature not checked: no pairing library here)")


USAGE_OPTIONS = {"--receipt", "--keys", "--draw", "--entry-key"}


def parse_receipt_options(argv):
    """--receipt X --keys Y --draw P [P...] [--entry-key Z], in any order, each once; None if not."""
    options, i = {}, 0
    while i < len(argv):
        name = argv[i]
        if name not in USAGE_OPTIONS or name in options:
            return None
        values = []
        i += 1
        while i < len(argv) and argv[i] not in USAGE_OPTIONS and (name == "--draw" or not values):
            values.append(argv[i])
            i += 1
        if not values:
            return None
        options[name] = values
    if not {"--receipt", "--keys", "--draw"} <= set(options):
        return None
    return options


def check_documents(path):
    """tests/vectors/fairness-documents.json: each signature's `checks` and each case's `exit`, by
    this file's own checks and verdicts (their printing silenced)."""
    v = _read_json(path)
    if not isinstance(v, dict) or v.get("version") != "fairness-documents/v1":
        raise Unreadable(f"{path}: not fairness-documents/v1")
    checked = 0
    for i, x in enumerate(v["signature"]):
        try:
            public = unb64u(x["public_key"])
        except ValueError:
            public = b""
        keys = {key_id(public): public} if strict_key(public) else {}
        check = check_head if x["text"].startswith(HEAD_PREFIX) else check_receipt
        ok, _ = check(x["text"], keys)
        if ok != x["checks"]:
            print(f"FAILED: signature {i} ({x['rule']}) disagrees: checks {ok}")
            sys.exit(1)
        checked += 1
    for i, case in enumerate(v["case"]):
        said = io.StringIO()
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            if case["check"] == "draw":
                code = draw_verdict(case["pages"])
            else:
                code = receipt_verdict(case["shown"], case["pages"])
        if code != case["exit"]:
            print(f"FAILED: case {i} ({case['name']}) disagrees: exit {code}, not {case['exit']}:\n{said.getvalue()}")
            sys.exit(1)
        checked += 1
    print(f"ok: {checked} vectors of fairness-documents/v1 agree")


def main(argv):
    if len(argv) == 2 and argv[0] == "--vectors":
        try:
            if isinstance(doc := _read_json(argv[1]), dict) and doc.get("version") == "fairness-documents/v1":
                check_documents(argv[1])
                return 0
            check_vectors(argv[1])
        except Unreadable as e:
            print(f"unreadable: {e}", file=sys.stderr)
            return 2
        return 0
    if argv and not any(a.startswith("--") for a in argv):
        return main_draw(argv)
    options = parse_receipt_options(argv)
    if options is not None:
        return main_receipt(options["--receipt"][0], options["--keys"][0], options["--draw"],
                            options.get("--entry-key", [None])[0])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
