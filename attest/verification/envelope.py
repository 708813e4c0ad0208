"""Steps 1-2 of the verifier: read the certificate and parse its DSSE envelope strictly
(step 3, the signatures, is :mod:`attest.verification.signatures`).

A signature is ``{keyid, sig}`` as DSSE has it, plus an optional ``signer`` block (the signer
attestation and its timestamp token, :mod:`attest.certificate.signers`). Nothing here looks at
the payload beyond its bytes.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attest.certificate.bundle import BundleError, envelope_of
from attest.core.files import read_bytes_checked
from attest.core.io import MAX_JSON_BYTES, StrictJSONError, loads_strict

__all__ = [
    "MAX_SIGNATURES",
    "Envelope",
    "EnvelopeSignature",
    "Rejected",
    "SignerBlock",
    "parse_envelope",
    "read_certificate",
]

MAX_SIGNATURES = 32
MAX_ATTESTATION_BYTES = 16 * 1024
MAX_TOKEN_BYTES = 64 * 1024  # an RFC 3161 response with its certificate chain
_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}|[A-Za-z0-9_-]*={0,2}")


class Rejected(Exception):
    """A gate step of the verifier failed with one reason code and sentence."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def read_certificate(path: Path) -> bytes:
    """The certificate's bytes (a regular file only). An unusable path is the caller's
    :class:`~attest.errors.InputError`; a file over the size limit is a rejected
    certificate (MALFORMED)."""
    return read_bytes_checked(
        path,
        what="certificate",
        max_bytes=MAX_JSON_BYTES,
        regular_only=True,
        too_large=lambda: Rejected(
            "MALFORMED", f"the certificate is over the {MAX_JSON_BYTES}-byte limit"
        ),
    )


def _b64(value: Any, what: str) -> bytes:
    """Canonical base64 (standard or URL-safe alphabet, padding optional): anything that would
    not re-encode to the same text is refused, so one byte string has one spelling."""
    if not isinstance(value, str) or not _B64.fullmatch(value):
        raise Rejected("MALFORMED", f"{what} is not base64")
    text = value.rstrip("=")
    urlsafe = "-" in text or "_" in text
    if len(text) % 4 == 1:
        raise Rejected("MALFORMED", f"{what} is not base64 (bad length)")
    padded = text + "=" * (-len(text) % 4)
    try:
        raw = (base64.urlsafe_b64decode if urlsafe else base64.b64decode)(padded)
    except ValueError:
        raise Rejected("MALFORMED", f"{what} is not base64") from None
    again = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode("ascii")
    if again.rstrip("=") != text:
        raise Rejected("MALFORMED", f"{what} is not canonical base64 (stray bits)")
    return raw


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class SignerBlock:
    """A signature's ``signer`` block, decoded but not yet checked."""

    attestation: bytes
    sig: bytes
    timestamp: bytes | None = None


@dataclass(frozen=True)
class EnvelopeSignature:
    hint: str  # the keyid field: unsigned, only orders the key search
    sig: bytes
    signer: SignerBlock | None = None


@dataclass
class Envelope:
    payload: bytes
    payload_type: str
    signatures: list[EnvelopeSignature]


def _signer_block(raw: Any, where: str) -> SignerBlock:
    if not isinstance(raw, dict) or not {"attestation", "sig"} <= set(raw) <= _SIGNER_FIELDS:
        raise Rejected("MALFORMED", f"{where} is not {{attestation, sig[, timestamp]}}")
    attestation = _b64(raw["attestation"], f"{where}.attestation")
    if len(attestation) > MAX_ATTESTATION_BYTES:
        raise Rejected("MALFORMED", f"{where}.attestation is over {MAX_ATTESTATION_BYTES} bytes")
    token = None
    if "timestamp" in raw:
        token = _b64(raw["timestamp"], f"{where}.timestamp")
        if not token or len(token) > MAX_TOKEN_BYTES:
            raise Rejected(
                "MALFORMED", f"{where}.timestamp is empty or over {MAX_TOKEN_BYTES} bytes"
            )
    return SignerBlock(attestation, _b64(raw["sig"], f"{where}.sig"), token)


_SIGNER_FIELDS = {"attestation", "sig", "timestamp"}


def parse_envelope(data: bytes, what: str = "the certificate") -> Envelope:
    """The DSSE envelope in ``data`` (``what`` names the document in messages), or
    :class:`Rejected` (MALFORMED) saying what is wrong with its shape."""
    try:
        doc = loads_strict(data)
    except StrictJSONError as exc:
        raise Rejected("MALFORMED", f"{what} is not strict JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise Rejected("MALFORMED", f"{what} is not a JSON object (a DSSE envelope)")
    try:  # the Sigstore bundle form carries the same envelope (attest.certificate.bundle)
        doc = envelope_of(doc)
    except BundleError as exc:
        raise Rejected("MALFORMED", f"not a usable Sigstore bundle: {exc}") from None
    expected = {"payload", "payloadType", "signatures"}
    if set(doc) != expected:
        extra, missing = sorted(set(doc) - expected), sorted(expected - set(doc))
        raise Rejected(
            "MALFORMED",
            f"not a DSSE envelope: missing {missing or 'nothing'}, unexpected {extra or 'nothing'}",
        )
    if not isinstance(doc["payloadType"], str) or not doc["payloadType"]:
        raise Rejected("MALFORMED", "payloadType is not a non-empty string")
    if not _encodable(doc["payloadType"]):  # PAE needs its UTF-8 bytes
        raise Rejected("MALFORMED", "payloadType is not valid Unicode (a lone surrogate)")
    payload = _b64(doc["payload"], "payload")
    sigs = doc["signatures"]
    if not isinstance(sigs, list) or not sigs:
        raise Rejected("MALFORMED", "the envelope has no signatures")
    if len(sigs) > MAX_SIGNATURES:
        raise Rejected("MALFORMED", f"{len(sigs)} signatures is over the limit of {MAX_SIGNATURES}")
    parsed: list[EnvelopeSignature] = []
    for index, sig in enumerate(sigs):
        fields = {"keyid", "sig", "signer"}
        if not isinstance(sig, dict) or "sig" not in sig or not set(sig) <= fields:
            raise Rejected("MALFORMED", f"signatures[{index}] is not {{keyid, sig[, signer]}}")
        hint = sig.get("keyid", "")
        if not isinstance(hint, str):
            raise Rejected("MALFORMED", f"signatures[{index}].keyid is not a string")
        signer = None
        if "signer" in sig:
            signer = _signer_block(sig["signer"], f"signatures[{index}].signer")
        parsed.append(EnvelopeSignature(hint, _b64(sig["sig"], f"signatures[{index}].sig"), signer))
    return Envelope(payload, doc["payloadType"], parsed)
