"""Certificate revocations, checked by the verifier (CERTIFICATE_REVOKED).

Each revocation is a DSSE envelope (:mod:`attest.certificate.revocation`). It withdraws the
certificate whose signed payload has the sha256 it names, from its ``revoked_at`` on, provided
one of its signatures *counts*: judged by the very function that judges a certificate's
signatures (:func:`attest.verification.signatures.judge_signature`), it verifies under a
trusted key that was valid when it signed (inside its ``not_before``/``not_after`` window, not
revoked by then), and the trust store gives that key a role allowed to revoke
(``revocation_roles``; by default any trusted key). "When it signed" is the time of its RFC 3161
token when the signature carries one that verifies under a TSA root of the trust store, else
the verification time.

A revocation that does not count (not a revocation, no trusted signature, a key outside its
window or revoked, a token that does not verify, a key without a revoking role) does not
reject the certificate: it is listed in the notes as ``ignored revocation SOURCE: CODE: why``.
One naming another certificate does not apply.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from attest.certificate.format import PAYLOAD_TYPE, STATEMENT_TYPE
from attest.certificate.signing import pae
from attest.core.io import StrictJSONError, loads_strict
from attest.core.text import safe_text
from attest.core.times import format_timestamp, parse_timestamp
from attest.verification.envelope import Envelope, Rejected, parse_envelope
from attest.verification.signatures import judge_signature
from attest.verification.trust import TrustedKey, TrustStore

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


def _revoker(
    env: Envelope, trust: TrustStore, at: datetime, skew: timedelta
) -> tuple[TrustedKey | None, str]:
    """The first key whose signature counts and which may revoke, or why there is none."""
    message = pae(env.payload_type, env.payload)
    why: list[str] = []
    for index, item in enumerate(env.signatures):
        checked, problem = judge_signature(item, index, env, message, trust, at, skew)
        if problem is not None:
            why.append(f"{problem[0]}: {problem[1]}")
        elif checked.key is not None and not trust.may_revoke(checked.key):
            why.append(
                f"SIGNATURES_INSUFFICIENT: signature {index} is by {checked.key.label()}, which "
                "the trust store does not allow to revoke certificates (revocation_roles)"
            )
        elif checked.key is not None:
            return checked.key, ""
    return None, "; ".join(why) or "it has no signature"


def _parse(
    data: bytes,
    mine: str,
    trust: TrustStore,
    notes: list[str],
    source: str,
    moment: tuple[datetime, timedelta],
) -> Revocation | None:
    """The revocation in ``data`` if it names the certificate ``mine`` and counts; ``None``
    (with a note saying why, when it names this certificate) otherwise."""
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
    if digest != mine:
        return None  # about another certificate: nothing to judge
    signer, why = _revoker(env, trust, *moment)
    if signer is None:
        notes.append(
            f"ignored revocation {source} of certificate {safe_text(p['certificate_id'], 100)}: "
            f"{why}"
        )
        return None
    return Revocation(
        digest, p["certificate_id"], p["reason"], revoked_at, p["revoked_by"], signer.label()
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
        revocation = _parse(data, mine, trust, notes, source, (at, skew))
        if revocation is None:
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
