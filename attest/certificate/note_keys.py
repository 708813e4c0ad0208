"""C2SP signed-note verifier keys ("vkeys"): key IDs and the ``name+hex(key ID)+base64(type ||
public key)`` text form, for Ed25519 checkpoint signers (type 0x01, https://c2sp.org/signed-note)
and Ed25519 cosigners (type 0x04, https://c2sp.org/tlog-cosignature).

Here, below both the ledger and the verifier, because the log writes and reads these keys and
the trust store names its log and witnesses with them. Hand-written (a few lines) because no
maintained Python package implements signed notes; the cryptography comes from ``cryptography``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from attest.certificate.signing import PublicKey, check_public_key
from attest.errors import KeyError_

__all__ = [
    "SIGNATURE_TYPE_COSIGNATURE",
    "SIGNATURE_TYPE_ED25519",
    "NoteKey",
    "note_key_id",
    "parse_note_key",
    "raw_ed25519",
]

SIGNATURE_TYPE_ED25519 = b"\x01"
SIGNATURE_TYPE_COSIGNATURE = b"\x04"  # tlog-cosignature/v1, Ed25519
_TYPE_NAMES = {
    SIGNATURE_TYPE_ED25519: "Ed25519 checkpoint (type 0x01)",
    SIGNATURE_TYPE_COSIGNATURE: "Ed25519 cosignature/v1 (type 0x04)",
}


def raw_ed25519(public_key: PublicKey) -> bytes:
    """The 32 raw bytes of an Ed25519 public key (an ECDSA key is refused)."""
    if not isinstance(public_key, ed25519.Ed25519PublicKey):
        raise KeyError_(
            "signed notes are signed with Ed25519 (signed-note types 0x01 and 0x04); this key"
            " is ECDSA",
            hint="create an Ed25519 key with attest keygen --algorithm ed25519",
        )
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def note_key_id(
    name: str, public_key: PublicKey, signature_type: bytes = SIGNATURE_TYPE_ED25519
) -> bytes:
    """The signed-note key ID: ``SHA-256(name || 0x0A || type || public key)[:4]``."""
    material = name.encode("utf-8") + b"\n" + signature_type + raw_ed25519(public_key)
    return hashlib.sha256(material).digest()[:4]


@dataclass(frozen=True)
class NoteKey:
    """A verifier key: its name (a log's origin, a witness's name), type and public key."""

    name: str
    public_key: PublicKey
    signature_type: bytes = SIGNATURE_TYPE_ED25519

    @property
    def key_id(self) -> bytes:
        return note_key_id(self.name, self.public_key, self.signature_type)

    @property
    def text(self) -> str:
        """The vkey ``name+hex(key ID)+base64(type || public key)``."""
        raw = self.signature_type + raw_ed25519(self.public_key)
        return f"{self.name}+{self.key_id.hex()}+{base64.b64encode(raw).decode('ascii')}"


def parse_note_key(text: str, signature_type: bytes = SIGNATURE_TYPE_ED25519) -> NoteKey:
    """Parse a vkey ``name+hex(key ID)+base64(type || public key)`` of ``signature_type``."""
    name, _, rest = text.strip().partition("+")
    hex_id, _, material = rest.partition("+")
    try:
        raw = base64.b64decode(material, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not name or len(raw) != 33 or raw[:1] != signature_type:
        raise KeyError_(
            f"not an {_TYPE_NAMES[signature_type]} note verifier key (name+keyid+base64)"
        )
    # cryptography takes any 32 bytes as a key: refuse small-order and non-canonical points.
    key = check_public_key(ed25519.Ed25519PublicKey.from_public_bytes(raw[1:]), "note verifier key")
    parsed = NoteKey(name, key, signature_type)
    if parsed.key_id.hex() != hex_id.lower():
        raise KeyError_("note verifier key: the key ID does not match the name and key")
    return parsed
