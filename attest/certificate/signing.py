"""Keys, canonical JSON and DSSE signatures.

- Keys: Ed25519 (default) or ECDSA P-256, via ``cryptography``. Private keys are stored as
  encrypted PKCS#8 PEM (mode 0600); the passphrase comes from ``ATTEST_KEY_PASSPHRASE`` or a
  prompt, never from a command-line flag value.
- Weak keys are refused wherever a public key is read (:func:`check_public_key`): Ed25519
  points of small order, non-canonical encodings and points off the curve; cryptography itself
  refuses ECDSA points off P-256 or at infinity. :func:`verify_signature` refuses them again.
- Key id: sha256 of the DER SubjectPublicKeyInfo, hex.
- Canonical JSON: RFC 8785 via the ``rfc8785`` package (:func:`canonical_json_text`: the same
  bytes for values without numbers, faster).
- DSSE: signatures over ``PAE(payloadType, payload)`` with byte lengths
  (secure-systems-lab/dsse protocol.md).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from attest.core.files import read_bytes_checked
from attest.core.io import atomic_write_bytes
from attest.errors import InputError, KeyError_, SigningError

__all__ = [
    "ED25519_SMALL_ORDER",
    "MAX_KEY_BYTES",
    "PASSPHRASE_ENV",
    "Algorithm",
    "PrivateKey",
    "PublicKey",
    "b64decode_strict",
    "canonical_json",
    "check_public_key",
    "dsse_envelope",
    "ed25519_point_problem",
    "ed25519_r_refused_before_verify",
    "generate_keypair",
    "key_id",
    "load_private_key",
    "load_public_key",
    "load_public_key_pem",
    "pae",
    "sign_bytes",
    "verify_signature",
]

PASSPHRASE_ENV = "ATTEST_KEY_PASSPHRASE"
MAX_KEY_BYTES = 64 * 1024  # a PEM key file (an encrypted P-256 key is under 1 KiB)
Algorithm = Literal["ed25519", "ecdsa-p256"]
PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey
PrivateKeyObj = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey


def canonical_json(obj: Any) -> bytes:
    """RFC 8785 (JCS) canonical bytes of a JSON value; the only serializer for signed bytes."""
    import rfc8785  # imported here: the verifier checks signed bytes as they are, never re-encodes

    try:
        return rfc8785.dumps(obj)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise SigningError(f"value cannot be canonicalized as JSON: {exc}") from None


def canonical_json_text(obj: Any) -> bytes:
    """:func:`canonical_json` of a value holding no numbers: objects with ASCII keys, arrays,
    strings, booleans and null (a ledger entry, a ledger write's signed fields).

    For such values the standard library's sorted, compact, non-ASCII-preserving encoding is
    byte-identical to RFC 8785: both escape exactly ``"``, ``\\`` and the controls below
    U+0020 (``\\b \\t \\n \\f \\r``, the rest as lowercase ``\\u00xx``), write every other
    character as UTF-8, and ASCII keys sort the same by code point as by UTF-16 unit. It is
    several times faster than the ``rfc8785`` package, which the ledger service felt on every
    write. A string that is not valid Unicode (a lone surrogate) goes to :func:`canonical_json`,
    which refuses it as before. Numbers are the caller's to keep out: Python writes floats
    differently (tests/unit/ledger/test_ledger_entries.py holds the two encoders equal).
    """
    try:
        return json.dumps(
            obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except UnicodeEncodeError:
        return canonical_json(obj)


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: ``DSSEv1 LEN(type) type LEN(body) body``."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


def b64decode_strict(text: str) -> bytes:
    """Standard base64 with padding, rejecting anything else (DSSE also allows URL-safe)."""
    if not isinstance(text, str):
        raise ValueError("base64 value is not a string")
    s = text.strip()
    if "-" in s or "_" in s:
        s = s.replace("-", "+").replace("_", "/")
    if len(s) % 4:
        s += "=" * (-len(s) % 4)
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not valid base64") from None


def key_id(public_key: PublicKey) -> str:
    """sha256 of the DER SubjectPublicKeyInfo, hex."""
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


def algorithm_of(public_key: PublicKey) -> Algorithm:
    """The algorithm name of a supported public key."""
    if isinstance(public_key, ed25519.Ed25519PublicKey):
        return "ed25519"
    return "ecdsa-p256"


def public_key_pem(public_key: PublicKey) -> str:
    """PEM (SubjectPublicKeyInfo) text of a public key."""
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


@dataclass(frozen=True)
class PrivateKey:
    """A loaded signing key. The key material is never printed or logged."""

    key: PrivateKeyObj
    keyid: str

    @property
    def public_key(self) -> PublicKey:
        return self.key.public_key()

    @property
    def algorithm(self) -> Algorithm:
        return algorithm_of(self.public_key)

    def sign(self, data: bytes) -> bytes:
        return sign_bytes(self.key, data)

    def __repr__(self) -> str:  # never show key material
        return f"PrivateKey(keyid={self.keyid[:16]}..., algorithm={self.algorithm})"


def sign_bytes(key: PrivateKeyObj, data: bytes) -> bytes:
    """Sign raw bytes: Ed25519, or ECDSA P-256 with SHA-256 (DER signature)."""
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(data)
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


# --- weak keys ---------------------------------------------------------------------------------
# cryptography (OpenSSL) loads any 32 bytes as an Ed25519 public key: it checks neither that the
# point has large order nor that its encoding is canonical, and with the identity as key the
# signature ``identity || 0^32`` verifies every message (cofactorless verification: [0]B = R +
# [k]A). RFC 8032 leaves such keys to the application and cryptography has no check for them,
# so the few lines below do it by hand. ECDSA P-256 needs none: cryptography refuses points off
# the curve, the point at infinity and coordinates >= p when it loads SubjectPublicKeyInfo or
# SEC1 bytes, and P-256 has cofactor 1, so every other point has the full prime order
# (tests/unit/verification/test_weak_keys.py checks that cryptography still refuses them).

_ED25519_P = 2**255 - 19
_ED25519_D = -121665 * pow(121666, -1, _ED25519_P) % _ED25519_P
# The 32-byte encodings of the 8 points of small order (the torsion subgroup) and their
# non-canonical twins, as in libsodium's blocklist: each y below with the sign bit of x clear
# and set. y = 1 and y = p - 1 have x = 0, so their sign-bit-set forms are non-canonical; y = p
# and y = p + 1 are the non-canonical encodings of y = 0 and y = 1.
_ED25519_SMALL_ORDER_Y = (
    "0000000000000000000000000000000000000000000000000000000000000000",  # y = 0: order 4
    "0100000000000000000000000000000000000000000000000000000000000000",  # identity
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p - 1: order 2
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",  # order 8
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",  # order 8
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p (0)
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p + 1 (1)
)
ED25519_SMALL_ORDER = frozenset(
    bytes.fromhex(y[:62] + f"{int(y[62:], 16) | sign:02x}")
    for y in _ED25519_SMALL_ORDER_Y
    for sign in (0x00, 0x80)
)


def ed25519_point_problem(encoded: bytes) -> str | None:
    """Why the 32 bytes ``encoded`` are not a usable Ed25519 point (a public key or the R half
    of a signature): small order, non-canonical, not on the curve; ``None`` when usable."""
    if len(encoded) != 32:
        return f"is {len(encoded)} bytes, not 32"
    if encoded in ED25519_SMALL_ORDER:
        return "is a point of small order, under which anyone can forge signatures"
    y = int.from_bytes(encoded, "little") & ((1 << 255) - 1)
    if y >= _ED25519_P:
        return "is not canonically encoded (y >= 2^255 - 19)"
    # x^2 = u / v with u = y^2 - 1, v = d y^2 + 1 must be a square mod p. v is never 0 (-1/d
    # is not a square), so u / v is a square exactly when u v = (u / v) v^2 is. x = 0 (u = 0)
    # only for y = 1 and y = p - 1, both of small order and refused above with either sign bit.
    # The Jacobi symbol (equal to the Legendre symbol for the prime p) costs about a quarter
    # of Euler's criterion pow(uv, (p - 1) / 2, p) and needs no modular inverse; the server
    # checks every signature's R with it (tests compare the two on random and edge values).
    yy = y * y
    if _jacobi((yy - 1) * (_ED25519_D * yy + 1), _ED25519_P) == -1:
        return "is not a point on the Ed25519 curve"
    return None


def ed25519_r_refused_before_verify(encoded: bytes) -> bool:
    """True when the R half of an Ed25519 signature is refused whatever the verification says:
    of small order, or not canonically encoded (y >= p). The third check of
    :func:`ed25519_point_problem`, that R is a point of the curve, is left to the verification
    itself for a hot path (the ledger service's writes): OpenSSL (and BoringSSL, AWS-LC)
    recompute R' = sB - hA and accept only when the canonical encoding of the point R' equals
    the 32 bytes given, so a signature that verifies has an R on the curve. The same signatures
    pass as with :func:`ed25519_point_problem` first, without its Jacobi symbol (about a
    quarter of a write's Python CPU after the verification)."""
    if len(encoded) != 32 or encoded in ED25519_SMALL_ORDER:
        return True
    return int.from_bytes(encoded, "little") & ((1 << 255) - 1) >= _ED25519_P


def _jacobi(a: int, n: int) -> int:
    """The Jacobi symbol (a/n) for odd n > 0: -1, 0 or 1 (binary algorithm, quadratic
    reciprocity); for a prime n it is the Legendre symbol: 1 when a is a non-zero square."""
    a %= n
    result = 1
    while a:
        twos = (a & -a).bit_length() - 1
        a >>= twos
        if twos & 1 and n & 7 in (3, 5):  # (2/n) = -1 for n = 3, 5 mod 8
            result = -result
        a, n = n, a
        if a & 3 == 3 and n & 3 == 3:  # reciprocity: both 3 mod 4 flips the sign
            result = -result
        a %= n
    return result if n == 1 else 0


def _raw(public_key: ed25519.Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def verify_signature(public_key: PublicKey, signature: bytes, data: bytes) -> bool:
    """True if ``signature`` is valid for ``data`` under ``public_key``; never raises.

    False, too, for an Ed25519 key or signature R that is of small order or not canonically
    encoded, even if such a key got past :func:`check_public_key` (defence in depth)."""
    try:
        if isinstance(public_key, ed25519.Ed25519PublicKey):
            if ed25519_point_problem(_raw(public_key)) is not None:
                return False
            if len(signature) != 64 or ed25519_point_problem(signature[:32]) is not None:
                return False
            public_key.verify(signature, data)
        elif isinstance(public_key, ec.EllipticCurvePublicKey) and isinstance(
            public_key.curve, ec.SECP256R1
        ):
            public_key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
        else:
            return False
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def check_public_key(key: object, source: str) -> PublicKey:
    """``key`` if it is a usable Ed25519 or ECDSA P-256 public key, else :class:`KeyError_`
    saying what is wrong (unsupported type, small order, non-canonical, off the curve)."""
    if isinstance(key, ed25519.Ed25519PublicKey):
        problem = ed25519_point_problem(_raw(key))
        if problem is not None:
            raise KeyError_(
                f"{source}: the Ed25519 public key {problem}; refusing this weak key",
                hint="attest keygen never makes such a key: get the .pub file attest keygen "
                "wrote from the key's owner, and do not trust a key whose origin you cannot check",
            )
        return key
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key  # cryptography refused points off the curve and at infinity when loading
    raise KeyError_(
        f"{source}: unsupported key type {type(key).__name__}",
        hint="use an Ed25519 or ECDSA P-256 key (attest keygen makes one)",
    )


_EC_PUBLIC_KEY_OID = bytes.fromhex("06072a8648ce3d0201")  # DER of id-ecPublicKey


def _is_ec_spki(pem: bytes) -> bool:
    """Whether PEM text holds an EC SubjectPublicKeyInfo (to explain why loading failed)."""
    match = re.search(rb"-----BEGIN PUBLIC KEY-----(.{0,4096}?)-----END", pem, re.DOTALL)
    if match is None:
        return False
    try:
        der = base64.b64decode(b"".join(match.group(1).split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    return _EC_PUBLIC_KEY_OID in der[:32]


def load_public_key_pem(pem: str | bytes, *, source: str = "public key") -> PublicKey:
    """Parse a PEM SubjectPublicKeyInfo public key (Ed25519 or ECDSA P-256)."""
    data = pem.encode("ascii", "replace") if isinstance(pem, str) else pem
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm, TypeError) as exc:
        if _is_ec_spki(data):  # an EC key whose point cryptography refused
            raise KeyError_(
                f"{source}: the ECDSA public key is not a usable P-256 point (off the curve, "
                f"the point at infinity or badly encoded: {str(exc)[:120]})",
                hint="get the .pub file attest keygen wrote from the key's owner",
            ) from None
        raise KeyError_(
            f"{source} is not a PEM public key", hint="pass the .pub file written by attest keygen"
        ) from None
    return check_public_key(key, source)


def load_public_key(path: str | Path) -> PublicKey:
    """Load a public key PEM file."""
    p = Path(path)
    data = read_bytes_checked(p, what="public key", max_bytes=MAX_KEY_BYTES, error=KeyError_)
    return load_public_key_pem(data, source=str(p))


def _passphrase(prompt: bool) -> bytes | None:
    env = os.environ.get(PASSPHRASE_ENV)
    if env is not None:
        return env.encode("utf-8")
    if prompt and sys.stdin is not None and sys.stdin.isatty():
        import getpass  # only when prompting (it pulls in termios)

        return getpass.getpass("Key passphrase: ").encode("utf-8")
    return None


def load_private_key(path: str | Path, *, prompt: bool = True) -> PrivateKey:
    """Load an (encrypted) PKCS#8 PEM private key, reading the file once.

    The passphrase comes from ``ATTEST_KEY_PASSPHRASE`` or, on a terminal, a prompt.
    """
    p = Path(path)
    data = read_bytes_checked(
        p,
        what="private key",
        max_bytes=MAX_KEY_BYTES,
        error=KeyError_,
        missing_hint="create one with: attest keygen --out DIR/NAME",
    )
    encrypted = b"ENCRYPTED" in data
    password = _passphrase(prompt) if encrypted else None
    if encrypted and password is None:
        raise KeyError_(
            f"private key {p} is encrypted and no passphrase was given",
            hint=f"set {PASSPHRASE_ENV} or run on a terminal to be prompted",
        )
    try:
        key = serialization.load_pem_private_key(data, password=password)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise KeyError_(
            f"cannot load private key {p}: wrong passphrase or not a PEM private key",
            hint=f"check {PASSPHRASE_ENV}; attest keygen writes NAME.key",
        ) from None
    if isinstance(key, ed25519.Ed25519PrivateKey) or (
        isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)
    ):
        public = check_public_key(key.public_key(), f"private key {p}")
        return PrivateKey(key=key, keyid=key_id(public))
    raise KeyError_(
        f"private key {p}: unsupported key type", hint="use an Ed25519 or ECDSA P-256 key"
    )


def generate_keypair(
    out: str | Path,
    *,
    algorithm: Algorithm = "ed25519",
    passphrase: bytes | None,
) -> tuple[Path, Path, str]:
    """Write ``OUT.key`` (PKCS#8 PEM, encrypted unless ``passphrase`` is None, mode 0600) and ``OUT.pub``.

    Refuses to overwrite either file. Returns the two paths and the key id.
    """
    base = Path(out)
    key_path = base.with_name(base.name + ".key")
    pub_path = base.with_name(base.name + ".pub")
    for existing in (key_path, pub_path):
        if existing.exists():
            raise InputError(
                f"{existing} already exists; refusing to overwrite a key",
                hint="choose another --out name or move the old key away first",
            )
    private: PrivateKeyObj
    if algorithm == "ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
    elif algorithm == "ecdsa-p256":
        private = ec.generate_private_key(ec.SECP256R1())
    else:
        raise InputError(f"unknown algorithm {algorithm!r}", hint="use ed25519 or ecdsa-p256")
    encryption: serialization.KeySerializationEncryption
    if passphrase:
        encryption = serialization.BestAvailableEncryption(passphrase)
    else:
        encryption = serialization.NoEncryption()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    atomic_write_bytes(key_path, pem, mode=0o600)
    atomic_write_bytes(pub_path, public_key_pem(private.public_key()).encode("ascii"), mode=0o644)
    return key_path, pub_path, key_id(private.public_key())


def dsse_envelope(payload: bytes, payload_type: str, keys: list[PrivateKey]) -> dict[str, Any]:
    """A DSSE envelope: ``{"payload", "payloadType", "signatures": [{"keyid", "sig"}]}``."""
    if not keys:
        raise SigningError("no signing key given")
    message = pae(payload_type, payload)
    return {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": payload_type,
        "signatures": [
            {"keyid": k.keyid, "sig": base64.b64encode(k.sign(message)).decode("ascii")}
            for k in keys
        ],
    }
