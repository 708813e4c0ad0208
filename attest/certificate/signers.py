"""Who signed a certificate and what the signature means, bound by the signer's own key.

A DSSE signature proves that a key signed the payload, nothing more. 21 CFR Part 11 §11.50
also asks for the signer's printed name, the date and time and the meaning of the signature,
and §11.70 for a link that cannot be excised or copied to another record. So every signature
``attest certify``, ``attest sign`` and ``attest cosign`` make carries a *signer attestation*
next to the DSSE ``keyid``/``sig`` pair (DSSE readers such as securesystemslib keep unknown
signature fields and still verify ``sig``)::

    {"keyid": "...", "sig": "<DSSE signature over PAE(payloadType, payload)>",
     "signer": {"attestation": "<base64 of the RFC 8785 JSON below>",
                "sig": "<signature by the same key over PAE(SIGNER_PAYLOAD_TYPE, attestation)>",
                "timestamp": "<base64 DER RFC 3161 TimeStampResp over sha256(signer.sig)>"}}

    attestation = {"_type": SIGNER_TYPE, "payload_type": ..., "payload_sha256": ...,
                   "keyid": ..., "name": ..., "role": ..., "meaning": ..., "signed_at": ...,
                   "comment": ...}

The attestation names the payload by its sha256 and the key by its id, and it is signed by that
key: a meaning edited, a name changed or a signature block moved to another certificate no
longer verifies. The optional timestamp token (``timestamp``) covers the attestation's
signature, so it proves when the signer bound *this* meaning to *this* payload.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Final

from attest.certificate.signing import PrivateKey, canonical_json, pae
from attest.core.times import format_timestamp
from attest.errors import InputError, SigningError

__all__ = [
    "MAX_COMMENT",
    "MEANINGS",
    "SIGNER_PAYLOAD_TYPE",
    "SIGNER_TYPE",
    "SignerIdentity",
    "add_signature",
    "default_identity",
    "sign_payload",
    "signature_entry",
    "timestamp_message",
]

SIGNER_TYPE: Final = "https://gradient-attest.dev/signer/v1"
SIGNER_PAYLOAD_TYPE: Final = "application/vnd.gradient-attest.signer+json"
MEANINGS: Final = ("authorship", "review", "approval", "responsibility")
MAX_NAME: Final = 200
MAX_COMMENT: Final = 2000

Timestamper = Callable[[bytes], bytes]  # message -> DER TimeStampResp over sha256(message)


def _printable(text: str, what: str, limit: int, *, required: bool = True) -> str:
    if not isinstance(text, str) or (required and not text.strip()):
        raise InputError(f"the signer's {what} must be non-empty text")
    if len(text) > limit:
        raise InputError(f"the signer's {what} is over {limit} characters")
    if any((ord(c) < 0x20 and c not in "\n\t") or ord(c) == 0x7F for c in text):
        raise InputError(f"the signer's {what} holds control characters")
    return text


@dataclass(frozen=True)
class SignerIdentity:
    """The printed name, role and meaning a signer states (validated on creation)."""

    name: str
    role: str
    meaning: str
    comment: str = ""

    def __post_init__(self) -> None:
        _printable(self.name, "name", MAX_NAME)
        _printable(self.role, "role", MAX_NAME)
        _printable(self.comment, "comment", MAX_COMMENT, required=False)
        if self.meaning not in MEANINGS:
            raise InputError(
                f"the signature meaning {self.meaning!r} is not one of {', '.join(MEANINGS)}",
                hint="--meaning authorship | review | approval | responsibility",
            )


def timestamp_message(attestation_sig: bytes) -> bytes:
    """The bytes an RFC 3161 token covers (its imprint is their SHA-256): the attestation's
    signature, which itself covers the payload digest, the key and the meaning."""
    return attestation_sig


def _attestation(
    payload: bytes, payload_type: str, keyid: str, who: SignerIdentity, signed_at: datetime
) -> bytes:
    return canonical_json(
        {
            "_type": SIGNER_TYPE,
            "payload_type": payload_type,
            "payload_sha256": hashlib.sha256(payload).hexdigest(),
            "keyid": keyid,
            "name": who.name,
            "role": who.role,
            "meaning": who.meaning,
            "signed_at": format_timestamp(signed_at),
            "comment": who.comment,
        }
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def signature_entry(
    payload: bytes,
    payload_type: str,
    key: PrivateKey,
    who: SignerIdentity,
    *,
    signed_at: datetime | None = None,
    timestamper: Timestamper | None = None,
) -> dict[str, Any]:
    """One DSSE signature with its signer attestation (and timestamp token, with a TSA)."""
    moment = (signed_at or datetime.now(timezone.utc)).replace(microsecond=0)
    attestation = _attestation(payload, payload_type, key.keyid, who, moment)
    attestation_sig = key.sign(pae(SIGNER_PAYLOAD_TYPE, attestation))
    signer: dict[str, str] = {"attestation": _b64(attestation), "sig": _b64(attestation_sig)}
    if timestamper is not None:
        signer["timestamp"] = _b64(timestamper(timestamp_message(attestation_sig)))
    return {
        "keyid": key.keyid,
        "sig": _b64(key.sign(pae(payload_type, payload))),
        "signer": signer,
    }


def default_identity(meaning: str = "authorship", role: str = "release-engineer") -> SignerIdentity:
    """The identity stated when none is given: the account name (``ATTEST_ACTOR`` overrides it)."""
    import getpass
    import os

    name = os.environ.get("ATTEST_ACTOR", "").strip()
    if not name:
        try:
            name = getpass.getuser()
        except (OSError, KeyError, ImportError):
            name = "unknown signer"
    return SignerIdentity(name=name[:MAX_NAME], role=role, meaning=meaning)


def sign_payload(
    payload: bytes,
    payload_type: str,
    keys: list[PrivateKey],
    identities: list[SignerIdentity],
    *,
    timestamper: Timestamper | None = None,
) -> dict[str, Any]:
    """A DSSE envelope whose every signature carries its signer attestation."""
    if not keys:
        raise SigningError("no signing key given", hint="pass at least one --key")
    if len(identities) != len(keys):
        raise SigningError("one signer identity per key is needed")
    return {
        "payload": _b64(payload),
        "payloadType": payload_type,
        "signatures": [
            signature_entry(payload, payload_type, k, who, timestamper=timestamper)
            for k, who in zip(keys, identities, strict=True)
        ],
    }


def add_signature(
    envelope: Mapping[str, Any],
    key: PrivateKey,
    who: SignerIdentity,
    *,
    timestamper: Timestamper | None = None,
) -> dict[str, Any]:
    """A copy of ``envelope`` with one more signature by ``key`` (refused if the envelope
    already holds a signature naming that key). The payload is never touched."""
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
        payload_type = str(envelope["payloadType"])
        existing = list(envelope["signatures"])
    except (KeyError, TypeError, ValueError):
        raise SigningError("not a DSSE envelope: cannot add a signature") from None
    if any(isinstance(s, Mapping) and s.get("keyid") == key.keyid for s in existing):
        raise InputError(
            f"the certificate is already signed by key {key.keyid[:16]}",
            hint="a key counts once; co-sign with another person's key",
        )
    entry = signature_entry(payload, payload_type, key, who, timestamper=timestamper)
    return {
        "payload": envelope["payload"],
        "payloadType": payload_type,
        "signatures": [*existing, entry],
    }
