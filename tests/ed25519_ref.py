"""Ed25519 (RFC 8032, pure Ed25519: no prehash, no context), written again from the RFC's section 5.1
and its section 6 reference, for the receipts of docs/FAIRNESS.md section 6a. Standard library only
(hashlib.sha512 and Python's integers).

    public_key(seed) -> 32 bytes        sign(seed, message) -> 64 bytes
    verify(public, message, signature) -> bool

Not constant time: it is a verifier's tool, and the seeds it signs with are the test vectors' own.

Verification is RFC 8032 section 5.1.7's, cofactorless (the section 6 reference's equation
[S]B = R + [k]A), and strict as docs/FAIRNESS.md section 6a asks: it rejects S >= L, an A or R
that does not decode (y >= p, or no square root, or x = 0 with the sign bit set), and an A or R of
small order (8 times the point is the identity: the eight points of the torsion subgroup, with
which a signature can be made to hold for any message or under several keys).
"""

import hashlib

P = 2**255 - 19                                               # the field's prime
L = 2**252 + 27742317777372353535851937790883648493           # the base point's order
D = -121665 * pow(121666, P - 2, P) % P                       # the curve's d
SQRT_M1 = pow(2, (P - 1) // 4, P)                             # a square root of -1


def _inv(x):
    return pow(x, P - 2, P)


# Points in extended homogeneous coordinates (X, Y, Z, T): x = X/Z, y = Y/Z, x*y = T/Z.
def _add(p, q):
    a = (p[1] - p[0]) * (q[1] - q[0]) % P
    b = (p[1] + p[0]) * (q[1] + q[0]) % P
    c = 2 * p[3] * q[3] * D % P
    d = 2 * p[2] * q[2] % P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def _mul(s, p):
    q = (0, 1, 1, 0)  # the neutral element
    while s > 0:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _equal(p, q):
    # Compare x and y without dividing: x1/z1 = x2/z2 iff x1*z2 = x2*z1.
    return (p[0] * q[2] - q[0] * p[2]) % P == 0 and (p[1] * q[2] - q[1] * p[2]) % P == 0


def _is_identity(p):
    # The neutral element (0, 1) in extended coordinates: X = 0 and Y = Z.
    return p[0] % P == 0 and (p[1] - p[2]) % P == 0


def _small_order(p):
    """8 * p is the identity: p lies in the torsion subgroup of order 8."""
    return _is_identity(_mul(8, p))


def _recover_x(y, sign):
    """Section 5.1.3, steps 2 to 4: x from y and x's low bit, or None when there is none."""
    if y >= P:
        return None
    x2 = (y * y - 1) * _inv(D * y * y + 1) % P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P != 0:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P != 0:
        return None
    if x & 1 != sign:
        x = P - x
    return x


_GY = 4 * _inv(5) % P
_GX = _recover_x(_GY, 0)
B = (_GX, _GY, 1, _GX * _GY % P)  # the base point


def _compress(p):
    zinv = _inv(p[2])
    x, y = p[0] * zinv % P, p[1] * zinv % P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def _decompress(s):
    if len(s) != 32:
        return None
    y = int.from_bytes(s, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    x = _recover_x(y, sign)
    return None if x is None else (x, y, 1, x * y % P)


def _sha512_mod_l(*parts):
    return int.from_bytes(hashlib.sha512(b"".join(parts)).digest(), "little") % L


def _expand(seed):
    """Section 5.1.5: the secret scalar (pruned) and the prefix that keys the nonce."""
    if len(seed) != 32:
        raise ValueError("an Ed25519 seed is 32 bytes")
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def public_key(seed):
    a, _ = _expand(seed)
    return _compress(_mul(a, B))


def sign(seed, message):
    """Section 5.1.6."""
    a, prefix = _expand(seed)
    a_enc = _compress(_mul(a, B))
    r = _sha512_mod_l(prefix, message)
    r_enc = _compress(_mul(r, B))
    k = _sha512_mod_l(r_enc, a_enc, message)
    s = (r + k * a) % L
    return r_enc + s.to_bytes(32, "little")


def verify(public, message, signature):
    """Section 5.1.7 (cofactorless), strict: A and R must decode and must not be of small order."""
    if len(public) != 32 or len(signature) != 64:
        return False
    a = _decompress(public)
    r = _decompress(signature[:32])
    if a is None or r is None:
        return False
    if _small_order(a) or _small_order(r):
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= L:
        return False
    k = _sha512_mod_l(signature[:32], public, message)
    return _equal(_mul(s, B), _add(r, _mul(k, a)))


# RFC 8032 section 7.1, TEST 1 (the empty message), so that a broken curve is caught by itself.
RFC8032_TEST_1 = {
    "seed": "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
    "public": "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    "message": "",
    "signature": "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
}


# The identity's encoding (y = 1, x = 0): with it as A and as R, and S = 0, the cofactorless equation
# [0]B = identity + [k]identity holds for every message; only the small-order check refuses it.
IDENTITY = (1).to_bytes(32, "little")
# A point of order exactly 8 (the self-test checks 8P is the identity and 4P is not).
ORDER_8 = bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05")


def self_test():
    t = RFC8032_TEST_1
    seed, message = bytes.fromhex(t["seed"]), bytes.fromhex(t["message"])
    public, signature = public_key(seed), sign(seed, message)
    order_8 = _decompress(ORDER_8)
    return (public.hex() == t["public"] and signature.hex() == t["signature"]
            and verify(public, message, signature)
            and not verify(public, message + b"x", signature)
            # Strictness: a small-order point is refused as A and as R.
            and order_8 is not None and _small_order(order_8) and not _is_identity(_mul(4, order_8))
            and not _small_order(_decompress(public))
            and not verify(IDENTITY, message, IDENTITY + bytes(32))
            and not verify(IDENTITY, b"any message", IDENTITY + bytes(32))
            and not verify(ORDER_8, message, IDENTITY + bytes(32)))


if __name__ == "__main__":
    print("ok: RFC 8032 test 1 agrees" if self_test() else "FAILED: RFC 8032 test 1 disagrees")
