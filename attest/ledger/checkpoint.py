"""Signed checkpoints: C2SP tlog-checkpoint bodies in C2SP signed-note envelopes, Ed25519.

A checkpoint (https://c2sp.org/tlog-checkpoint) is the note text::

    <origin>\\n<tree size>\\n<base64 root hash>\\n

signed as a note (https://c2sp.org/signed-note): the text, a blank line, then one line per
signature ``— <key name> base64(key ID || signature)``. For Ed25519 (signature type 0x01) the
4-byte key ID is ``SHA-256(key name || 0x0A || 0x01 || 32-byte public key)[:4]`` and the
signature is Ed25519 over the note text. The key name is the origin, as the checkpoint spec
recommends. Verifiers ignore signatures whose (name, key ID) they do not know, must verify the
ones they know, and reject the note when none verifies.

Hand-written (about 150 lines) because no maintained Python package implements signed notes;
the cryptography comes from ``cryptography``.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from pathlib import Path

from attest.certificate.note_keys import SIGNATURE_TYPE_ED25519, NoteKey, parse_note_key
from attest.certificate.note_keys import note_key_id as _note_key_id
from attest.certificate.signing import (
    MAX_KEY_BYTES,
    PrivateKey,
    PublicKey,
    load_public_key_pem,
    verify_signature,
)
from attest.core.files import read_bytes_checked
from attest.errors import KeyError_, LedgerError
from attest.ledger.merkle import HASH_SIZE

__all__ = [
    "SIGNATURE_TYPE_ED25519",
    "Checkpoint",
    "CheckpointError",
    "check_origin",
    "load_checkpoint_key",
    "note_key_id",
    "open_checkpoint",
    "open_note",
    "parse_verifier_key",
    "sign_checkpoint",
    "sign_note",
    "split_note",
    "verifier_key",
]

MAX_NOTE_BYTES = 1 << 20
MAX_SIGNATURES = 64
_EM_DASH = "\u2014"
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}")


class CheckpointError(LedgerError):
    """A checkpoint note is malformed (``code`` MALFORMED), not signed by the expected key
    (UNKNOWN_KEY), or signed by it with a signature that does not verify (SIGNATURE_INVALID)."""

    exit_code = 1

    def __init__(self, message: str, *, code: str = "MALFORMED", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code


@dataclass(frozen=True)
class Checkpoint:
    """A tree head claim: origin, tree size and root hash (plus optional extension lines)."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = field(default=())

    @property
    def body(self) -> str:
        """The note text that gets signed (every line ends in a newline)."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode("ascii")]
        return "".join(line + "\n" for line in (*lines, *self.extensions))

    @classmethod
    def parse_body(cls, text: str) -> Checkpoint:
        """Parse checkpoint note text strictly (tlog-checkpoint "Note text")."""
        if not text.endswith("\n"):
            raise CheckpointError("checkpoint text does not end in a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3 or any(not line for line in lines):
            raise CheckpointError("checkpoint text needs origin, size and root lines, none empty")
        origin, size_text, root_text, *extensions = lines
        if not _DECIMAL.fullmatch(size_text):
            raise CheckpointError(f"checkpoint tree size {size_text!r} is not a decimal number")
        try:
            root = base64.b64decode(root_text, validate=True)
        except (binascii.Error, ValueError):
            raise CheckpointError("checkpoint root hash is not base64") from None
        if len(root) != HASH_SIZE:
            raise CheckpointError(
                f"checkpoint root hash is {len(root)} bytes, expected {HASH_SIZE}"
            )
        return cls(origin=origin, size=int(size_text), root=root, extensions=tuple(extensions))


def check_origin(origin: str) -> str:
    """An origin usable as the signing key's name: non-empty, no spaces, no ``+``, printable."""
    if not origin or any(ch.isspace() or ch == "+" or not ch.isprintable() for ch in origin):
        raise LedgerError(
            f"checkpoint origin {origin!r} must be non-empty without spaces, '+' or control characters",
            hint="use a schema-less URL such as example.org/clinical-ledger",
        )
    return origin


def note_key_id(name: str, public_key: PublicKey) -> bytes:
    """The signed-note key ID: ``SHA-256(name || 0x0A || 0x01 || public key)[:4]``."""
    return _note_key_id(name, public_key, SIGNATURE_TYPE_ED25519)


def verifier_key(name: str, public_key: PublicKey) -> str:
    """The note verifier key string ``name+hex(key ID)+base64(0x01 || public key)``."""
    return NoteKey(name, public_key).text


def sign_note(text: str, key: PrivateKey, name: str) -> str:
    """A signed note: ``text`` (ending in a newline), a blank line, and one Ed25519 signature
    line ``— name base64(key ID || signature)``."""
    if not text.endswith("\n"):
        raise LedgerError("note text must end in a newline")
    signature = key.sign(text.encode("utf-8"))
    blob = base64.b64encode(note_key_id(name, key.public_key) + signature).decode("ascii")
    return f"{text}\n{_EM_DASH} {name} {blob}\n"


def sign_checkpoint(checkpoint: Checkpoint, key: PrivateKey) -> str:
    """The signed note of ``checkpoint``, signed by ``key`` under the origin as key name."""
    return sign_note(checkpoint.body, key, check_origin(checkpoint.origin))


def split_note(note: str) -> tuple[str, list[tuple[str, bytes]]]:
    """A signed note's text and its ``(key name, key ID || signature)`` lines, checked for
    form only (size, characters, the blank line, base64)."""
    if len(note.encode("utf-8")) > MAX_NOTE_BYTES:
        raise CheckpointError(f"checkpoint note is over {MAX_NOTE_BYTES} bytes")
    if _CONTROL.search(note):
        raise CheckpointError("checkpoint note holds control characters")
    if not note.endswith("\n"):
        raise CheckpointError("checkpoint note does not end in a newline")
    split = note.rfind("\n\n")
    if split < 0:
        raise CheckpointError("checkpoint note has no blank line before its signatures")
    text, signature_block = note[: split + 1], note[split + 2 :]
    signatures: list[tuple[str, bytes]] = []
    for line in signature_block[:-1].split("\n"):
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != _EM_DASH or not parts[1]:
            raise CheckpointError(f"malformed signature line {line[:80]!r}")
        try:
            blob = base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError):
            raise CheckpointError("a checkpoint signature is not base64") from None
        if len(blob) < 5:
            raise CheckpointError("a checkpoint signature is too short")
        signatures.append((parts[1], blob))
    if not signatures or len(signatures) > MAX_SIGNATURES:
        raise CheckpointError(
            f"checkpoint note has {len(signatures)} signatures (1..{MAX_SIGNATURES} allowed)"
        )
    return text, signatures


def _verify_note(
    text: str, signatures: list[tuple[str, bytes]], public_key: PublicKey, name: str
) -> None:
    expected_id = note_key_id(name, public_key)
    known = [blob[4:] for signer, blob in signatures if signer == name and blob[:4] == expected_id]
    if not known:
        raise CheckpointError(
            f"note is not signed by the given key under the name {name!r}",
            code="UNKNOWN_KEY",
            hint="pass the public key of the ledger that signed it (--key) and check its origin",
        )
    message = text.encode("utf-8")
    if not all(verify_signature(public_key, sig, message) for sig in known):
        raise CheckpointError(
            "note signature is invalid: the note was altered or the key is wrong",
            code="SIGNATURE_INVALID",
        )


def open_note(note: str, public_key: PublicKey, key_name: str) -> str:
    """Verify a signed note signed by ``public_key`` under ``key_name``; returns its text.

    Signatures from other keys are ignored; a bad signature from the expected key, or none at
    all, raises :class:`CheckpointError`.
    """
    text, signatures = split_note(note)
    _verify_note(text, signatures, public_key, key_name)
    return text


def open_checkpoint(note: str, public_key: PublicKey, *, key_name: str | None = None) -> Checkpoint:
    """Verify a signed checkpoint note (key name: ``key_name``, default its origin) and
    return its checkpoint; see :func:`open_note`."""
    text, signatures = split_note(note)
    checkpoint = Checkpoint.parse_body(text)
    _verify_note(text, signatures, public_key, key_name or checkpoint.origin)
    return checkpoint


def parse_verifier_key(text: str) -> tuple[PublicKey, str]:
    """Parse a note verifier key ``name+hex(key ID)+base64(0x01 || public key)``."""
    key = parse_note_key(text, SIGNATURE_TYPE_ED25519)
    return key.public_key, key.name


def load_checkpoint_key(path: str | Path) -> tuple[PublicKey, str | None]:
    """A verification key: a PEM public key file, or a file holding a note verifier key
    (``name+keyid+base64``). Returns the key and the name a verifier key fixes (or None)."""
    p = Path(path)
    data = read_bytes_checked(p, what="key", max_bytes=MAX_KEY_BYTES, error=KeyError_)
    if b"-----BEGIN" in data:
        return load_public_key_pem(data, source=str(p)), None
    try:
        key, name = parse_verifier_key(data.decode("utf-8", "replace"))
    except KeyError_ as exc:
        if "key ID does not match" in exc.message:
            raise KeyError_(
                f"verifier key in {p}: the key ID does not match the name and key"
            ) from None
        if exc.message.startswith("note verifier key:"):  # a weak key, not a format error
            raise KeyError_(f"{p}: {exc.message}", hint=exc.hint) from None
    else:
        return key, name
    raise KeyError_(
        f"{p} is neither a PEM public key nor a note verifier key (name+keyid+base64)",
        hint="pass the .pub file written by attest keygen",
    )
