"""Steps 1-3 of the verifier: read the certificate, parse its DSSE envelope strictly, and count
the signatures of trusted keys.

The key id in a signature is only a hint that orders the search: every trusted key is tried,
each key counts once toward the threshold, and revoked keys and keys outside their validity
window never count. Nothing here looks at the payload beyond its bytes.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from attest.certificate.signing import pae, verify_signature
from attest.core.files import read_bytes_checked
from attest.core.io import MAX_JSON_BYTES, StrictJSONError, loads_strict
from attest.core.text import safe_text
from attest.core.times import format_timestamp
from attest.verification.trust import TrustedKey, TrustStore

__all__ = [
    "MAX_SIGNATURES",
    "Envelope",
    "Rejected",
    "check_signatures",
    "parse_envelope",
    "read_certificate",
]

MAX_SIGNATURES = 32
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


@dataclass
class Envelope:
    payload: bytes
    payload_type: str
    signatures: list[tuple[str, bytes]]  # (keyid hint, signature bytes)


def parse_envelope(data: bytes) -> Envelope:
    try:
        doc = loads_strict(data)
    except StrictJSONError as exc:
        raise Rejected("MALFORMED", f"the certificate is not strict JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise Rejected("MALFORMED", "the certificate is not a JSON object (a DSSE envelope)")
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
    parsed: list[tuple[str, bytes]] = []
    for index, sig in enumerate(sigs):
        if not isinstance(sig, dict) or "sig" not in sig or not set(sig) <= {"keyid", "sig"}:
            raise Rejected("MALFORMED", f"signatures[{index}] is not {{keyid, sig}}")
        hint = sig.get("keyid", "")
        if not isinstance(hint, str):
            raise Rejected("MALFORMED", f"signatures[{index}].keyid is not a string")
        parsed.append((hint, _b64(sig["sig"], f"signatures[{index}].sig")))
    return Envelope(payload, doc["payloadType"], parsed)


# ---------------------------------------------------------------------------- step 3


def check_signatures(
    env: Envelope, trust: TrustStore, at: datetime, skew: timedelta
) -> tuple[list[TrustedKey], list[tuple[str, str]], list[str]]:
    """(distinct keys that count, problems, notes). The hint only orders the search."""
    message = pae(env.payload_type, env.payload)
    counted: dict[str, TrustedKey] = {}
    problems: list[tuple[str, str]] = []
    notes: list[str] = []
    for index, (hint, sig) in enumerate(env.signatures):
        order = sorted(trust.keys, key=lambda k: k.keyid != hint)  # hinted key first
        signer = next((k for k in order if verify_signature(k.public_key, sig, message)), None)
        what = f"signature {index}"
        shown = safe_text(hint[:16])  # unsigned: escaped before it reaches any output
        if signer is None:
            if trust.is_revoked(hint):
                problems.append(("KEY_REVOKED", f"{what} names revoked key {shown}"))
            elif trust.key(hint) is not None:
                label = trust.key(hint).label()  # type: ignore[union-attr]
                problems.append(("SIGNATURE_INVALID", f"{what} does not verify under {label}"))
            elif hint:
                problems.append(
                    (
                        "UNTRUSTED_KEY",
                        f"{what} is by key {shown}, which is not in the trust store",
                    )
                )
            else:
                problems.append(("SIGNATURE_INVALID", f"{what} verifies under no trusted key"))
            continue
        revocation = trust.revocation(signer.keyid)
        if revocation is not None:
            when = f" on {format_timestamp(revocation.revoked_at)}" if revocation.revoked_at else ""
            why = f" ({revocation.reason})" if revocation.reason else ""
            problems.append(("KEY_REVOKED", f"{what} is by {signer.label()}, revoked{when}{why}"))
        elif (window := signer.window_problem(at, skew)) is not None:
            problems.append(
                (
                    "UNTRUSTED_KEY",
                    f"{what} is by {signer.label()}, which {window} (checked at {format_timestamp(at)})",
                )
            )
        elif signer.keyid in counted:
            notes.append(f"{what} is a second signature by {signer.label()}; a key counts once")
        else:
            counted[signer.keyid] = signer
    if len(counted) >= trust.threshold:
        notes.extend(f"ignored: {code}: {msg}" for code, msg in problems)
        return list(counted.values()), [], notes
    if not problems or counted:
        problems.append(
            (
                "UNTRUSTED_KEY",
                f"{len(counted)} distinct trusted key(s) signed; the trust store requires {trust.threshold}",
            )
        )
    return [], problems, notes
