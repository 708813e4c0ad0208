"""Certificate revocations, checked by the verifier (CERTIFICATE_REVOKED).

Each revocation is a DSSE envelope (:mod:`attest.certificate.revocation`). It withdraws the
certificate whose signed payload has the sha256 it names, from its ``revoked_at`` on, provided
one of its signatures verifies under a trusted key the trust store allows to revoke
(``revocation_roles``; by default any trusted key that is not itself revoked). A revocation that
does not verify, or is signed by a key not allowed to revoke, is ignored and reported in the
notes; one naming another certificate does not apply.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from attest.certificate.format import PAYLOAD_TYPE, STATEMENT_TYPE
from attest.certificate.signing import pae, verify_signature
from attest.core.io import StrictJSONError, loads_strict
from attest.core.text import safe_text
from attest.core.times import format_timestamp, parse_timestamp
from attest.verification.envelope import Rejected, parse_envelope
from attest.verification.trust import TrustStore

__all__ = ["REVOCATION_PREDICATE_TYPE", "Revocation", "check_revocations"]

REVOCATION_PREDICATE_TYPE = "https://gradient-attest.dev/revocation/v1"  # as certificate.revocation


@dataclass(frozen=True)
class Revocation:
    payload_sha256: str
    certificate_id: str
    reason: str
    revoked_at: datetime
    revoked_by: str
    key_label: str


def _statement(payload: bytes) -> dict[str, Any] | None:
    try:
        data = loads_strict(payload)
    except StrictJSONError:
        return None
    if not isinstance(data, dict) or data.get("_type") != STATEMENT_TYPE:
        return None
    if data.get("predicateType") != REVOCATION_PREDICATE_TYPE:
        return None
    return data


def _parse(data: bytes, trust: TrustStore, source: str, notes: list[str]) -> Revocation | None:
    try:
        env = parse_envelope(data)
    except Rejected as exc:
        notes.append(f"ignored revocation {source}: {exc.message}")
        return None
    statement = _statement(env.payload) if env.payload_type == PAYLOAD_TYPE else None
    try:
        if statement is None:
            raise ValueError("not a revocation")
        (subject,) = statement["subject"]
        digest = subject["digest"]["sha256"]
        p = statement["predicate"]
        texts = [p["certificate_id"], p["reason"], p["revoked_by"], digest]
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("a field is not text")
        revoked_at = parse_timestamp(p["revoked_at"])
    except (KeyError, TypeError, ValueError):
        notes.append(f"ignored revocation {source}: not a revocation statement")
        return None
    message = pae(env.payload_type, env.payload)
    signers = [
        k
        for k in trust.keys
        for item in env.signatures
        if verify_signature(k.public_key, item.sig, message)
    ]
    allowed = [k for k in signers if trust.may_revoke(k)]
    if not allowed:
        who = ", ".join(k.label() for k in signers) or "no trusted key"
        notes.append(
            f"ignored revocation {source} of certificate {safe_text(p['certificate_id'], 100)}: "
            f"signed by {who}, which the trust store does not allow to revoke certificates"
        )
        return None
    return Revocation(
        digest, p["certificate_id"], p["reason"], revoked_at, p["revoked_by"], allowed[0].label()
    )


def check_revocations(
    payload: bytes,
    revocations: list[tuple[str, bytes]],
    trust: TrustStore,
    at: datetime,
    skew: timedelta,
    notes: list[str],
) -> list[tuple[str, str]]:
    """CERTIFICATE_REVOKED reasons for the certificate whose signed payload is ``payload``."""
    mine = hashlib.sha256(payload).hexdigest()
    reasons = []
    for source, data in revocations:
        revocation = _parse(data, trust, source, notes)
        if revocation is None or revocation.payload_sha256 != mine:
            continue
        if revocation.revoked_at > at + skew:
            notes.append(
                f"revocation {source} takes effect only at {format_timestamp(revocation.revoked_at)}"
            )
            continue
        reasons.append(
            (
                "CERTIFICATE_REVOKED",
                f"revoked by {safe_text(revocation.revoked_by, 200)} "
                f"(key {revocation.key_label}) on {format_timestamp(revocation.revoked_at)}: "
                f"{safe_text(revocation.reason, 500)}",
            )
        )
    return reasons
