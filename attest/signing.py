"""Keys, canonical JSON and DSSE signatures.

- Keys: Ed25519 (default) or ECDSA P-256, via ``cryptography``. Private keys are stored as
  encrypted PKCS#8 PEM (mode 0600); the passphrase comes from ``ATTEST_KEY_PASSPHRASE`` or a
  prompt, never from a command-line flag value.
- Key id: sha256 of the DER SubjectPublicKeyInfo, hex.
- Canonical JSON: RFC 8785 via the ``rfc8785`` package.
- DSSE: signatures over ``PAE(payloadType, payload)`` with byte lengths
  (secure-systems-lab/dsse protocol.md).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from attest._io import atomic_write_bytes
from attest.errors import InputError, KeyError_, SigningError

__all__ = [
    "PASSPHRASE_ENV",
    "Algorithm",
    "PrivateKey",
    "PublicKey",
    "b64decode_strict",
    "canonical_json",
    "dsse_envelope",
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


def verify_signature(public_key: PublicKey, signature: bytes, data: bytes) -> bool:
    """True if ``signature`` is valid for ``data`` under ``public_key``; never raises."""
    try:
        if isinstance(public_key, ed25519.Ed25519PublicKey):
            public_key.verify(signature, data)
        else:
            public_key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def _check_supported_public(key: object, source: str) -> PublicKey:
    if isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    raise KeyError_(
        f"{source}: unsupported key type {type(key).__name__}",
        hint="use an Ed25519 or ECDSA P-256 key (attest keygen makes one)",
    )


def load_public_key_pem(pem: str | bytes, *, source: str = "public key") -> PublicKey:
    """Parse a PEM SubjectPublicKeyInfo public key (Ed25519 or ECDSA P-256)."""
    data = pem.encode("ascii", "replace") if isinstance(pem, str) else pem
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm, TypeError):
        raise KeyError_(
            f"{source} is not a PEM public key", hint="pass the .pub file written by attest keygen"
        ) from None
    return _check_supported_public(key, source)


def load_public_key(path: str | Path) -> PublicKey:
    """Load a public key PEM file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise KeyError_(
            f"cannot read public key {p}: {exc.strerror}", hint="check the path"
        ) from None
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
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise KeyError_(
            f"private key {p} does not exist", hint="create one with: attest keygen --out DIR/NAME"
        ) from None
    except OSError as exc:
        raise KeyError_(f"cannot read private key {p}: {exc.strerror}") from None
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
        return PrivateKey(key=key, keyid=key_id(key.public_key()))
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
