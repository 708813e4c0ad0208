"""Step 3 of the verifier: which trusted keys signed, who they say they are, and when.

For each signature, in order:

1. the DSSE signature over ``PAE(payloadType, payload)`` is tried under every trusted key (the
   key id in the envelope only orders the search);
2. its signer attestation (:mod:`attest.certificate.signers`), if present, must be signed by
   that same key and name this payload's sha256 and this key; otherwise the signature does not
   count (SIGNATURE_INVALID);
3. its RFC 3161 token, if present, must verify under a TSA root of the trust store over the
   attestation's signature (TIMESTAMP_INVALID otherwise); the token's time then replaces the
   verification time for the key's validity window and revocation: a revoked key's signature
   counts only if timestamped before ``revoked_at``;
4. each key counts once toward the threshold and, through the role the trust store gives it
   and the meaning it signed with, toward the store's ``requirements``
   (SIGNATURES_INSUFFICIENT names what is missing).

A signature without a signer block (a plain DSSE signature, e.g. from another DSSE tool) counts
toward the threshold but never toward a requirement: it states no meaning.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from attest.certificate.signers import MEANINGS, SIGNER_PAYLOAD_TYPE, SIGNER_TYPE, timestamp_message
from attest.certificate.signing import pae, verify_signature
from attest.core.io import StrictJSONError, loads_strict
from attest.core.text import safe_text
from attest.core.times import format_timestamp, parse_timestamp
from attest.verification.envelope import Envelope, EnvelopeSignature, SignerBlock
from attest.verification.trust import TrustedKey, TrustStore

__all__ = [
    "CheckedSignature",
    "SignatureCheck",
    "SignerClaim",
    "check_signatures",
    "judge_signature",
    "signature_line",
]

_CLAIM_FIELDS = {
    "_type",
    "payload_type",
    "payload_sha256",
    "keyid",
    "name",
    "role",
    "meaning",
    "signed_at",
    "comment",
}


@dataclass(frozen=True)
class SignerClaim:
    """What a signer attestation states, once its signature and binding are checked."""

    name: str
    role: str
    meaning: str
    signed_at: str
    comment: str


@dataclass
class CheckedSignature:
    """One signature as the verifier judged it (shown by verify, inspect and the report)."""

    index: int
    key: TrustedKey | None = None
    claim: SignerClaim | None = None
    timestamp: datetime | None = None
    timestamp_authority: str = ""
    status: str = "not counted"

    def to_dict(self) -> dict[str, Any]:
        claim = self.claim
        return {
            "index": self.index,
            "keyid": self.key.keyid if self.key else None,
            "key_name": self.key.name if self.key else None,
            "name": claim.name if claim else None,
            "role": claim.role if claim else None,
            "meaning": claim.meaning if claim else None,
            "signed_at": claim.signed_at if claim else None,
            "comment": claim.comment if claim else None,
            "timestamp": format_timestamp(self.timestamp) if self.timestamp else None,
            "timestamp_authority": self.timestamp_authority or None,
            "status": self.status,
        }


@dataclass
class SignatureCheck:
    counted: list[TrustedKey] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    signatures: list[CheckedSignature] = field(default_factory=list)


def _claim(block: SignerBlock, key: TrustedKey, env: Envelope) -> SignerClaim | str:
    """The attestation's claim if it is signed by ``key`` and bound to this payload, else why not."""
    if not verify_signature(key.public_key, block.sig, pae(SIGNER_PAYLOAD_TYPE, block.attestation)):
        return f"its signer attestation is not signed by {key.label()} (edited or moved)"
    try:
        data = loads_strict(block.attestation)
    except StrictJSONError as exc:
        return f"its signer attestation is not strict JSON: {exc}"
    if not isinstance(data, dict) or set(data) != _CLAIM_FIELDS:
        return "its signer attestation does not have the signer/v1 fields"
    if data["_type"] != SIGNER_TYPE or data["payload_type"] != env.payload_type:
        return "its signer attestation is of another type or for another payload type"
    if data["payload_sha256"] != hashlib.sha256(env.payload).hexdigest():
        return "its signer attestation is for another certificate (payload digest differs)"
    if data["keyid"] != key.keyid:
        return "its signer attestation names another key"
    texts = [data[k] for k in ("name", "role", "meaning", "signed_at", "comment")]
    if not all(isinstance(t, str) for t in texts) or data["meaning"] not in MEANINGS:
        return "its signer attestation has a field of the wrong kind or an unknown meaning"
    try:
        parse_timestamp(data["signed_at"])
    except ValueError:
        return "its signer attestation has an invalid signed_at"
    return SignerClaim(
        data["name"], data["role"], data["meaning"], data["signed_at"], data["comment"]
    )


def _untrusted(item: EnvelopeSignature, trust: TrustStore, what: str) -> tuple[str, str]:
    shown = safe_text(item.hint[:16])  # unsigned: escaped before it reaches any output
    listed = trust.key(item.hint)
    if trust.is_revoked(item.hint):
        return ("KEY_REVOKED", f"{what} names revoked key {shown}")
    if listed is not None:
        return ("SIGNATURE_INVALID", f"{what} does not verify under {listed.label()}")
    if item.hint:
        return ("UNTRUSTED_KEY", f"{what} is by key {shown}, which is not in the trust store")
    return ("SIGNATURE_INVALID", f"{what} verifies under no trusted key")


def _key_status(
    checked: CheckedSignature, signer: TrustedKey, trust: TrustStore, at: datetime, skew: timedelta
) -> tuple[str, str] | None:
    """Why ``signer`` does not count for this signature (revoked, outside its window), judged
    at the token's time when there is one, else at ``at``."""
    what = f"signature {checked.index}"
    stamped = checked.timestamp
    revocation = trust.revocation(signer.keyid)
    if revocation is not None:
        when = f" on {format_timestamp(revocation.revoked_at)}" if revocation.revoked_at else ""
        why = f" ({revocation.reason})" if revocation.reason else ""
        if stamped is None or revocation.revoked_at is None or stamped >= revocation.revoked_at:
            proof = (
                f"timestamped {format_timestamp(stamped)}, not before it"
                if stamped is not None
                else "no trusted timestamp proves it was signed before"
            )
            return ("KEY_REVOKED", f"{what} is by {signer.label()}, revoked{when}{why}; {proof}")
    moment, word = (stamped, "timestamped") if stamped is not None else (at, "checked")
    window = signer.window_problem(moment, timedelta(0) if stamped is not None else skew)
    if window is not None:
        return (
            "UNTRUSTED_KEY",
            f"{what} is by {signer.label()}, which {window} ({word} at {format_timestamp(moment)})",
        )
    return None


def judge_signature(
    item: EnvelopeSignature,
    index: int,
    env: Envelope,
    message: bytes,
    trust: TrustStore,
    at: datetime,
    skew: timedelta,
) -> tuple[CheckedSignature, tuple[str, str] | None]:
    """One signature judged (steps 1-3 of the module docstring): which trusted key made it,
    its checked signer claim and trusted time, and why it does not count (``None``: it does).
    Certificates, exports and revocations are all judged by this one function."""
    checked = CheckedSignature(index)
    what = f"signature {index}"
    order = sorted(trust.keys, key=lambda k: k.keyid != item.hint)  # hinted key first
    signer = next((k for k in order if verify_signature(k.public_key, item.sig, message)), None)
    if signer is None:
        untrusted = _untrusted(item, trust, what)
        checked.status = f"not counted: {untrusted[0]}"
        return checked, untrusted
    checked.key = signer
    if item.signer is not None:
        claim = _claim(item.signer, signer, env)
        if isinstance(claim, str):
            checked.status = "not counted: SIGNATURE_INVALID"
            return checked, ("SIGNATURE_INVALID", f"{what} by {signer.label()}: {claim}")
        checked.claim = claim
        if item.signer.timestamp is not None:
            from attest.verification.timestamps import check_token  # only when there is a token

            result = check_token(
                item.signer.timestamp,
                timestamp_message(item.signer.sig),
                trust.timestamp_authorities,
            )
            if result.problem is not None:
                checked.status = "not counted: TIMESTAMP_INVALID"
                return checked, (
                    "TIMESTAMP_INVALID",
                    f"{what} by {signer.label()}: {result.problem}",
                )
            checked.timestamp, checked.timestamp_authority = result.time, result.authority
    problem = _key_status(checked, signer, trust, at, skew)
    checked.status = "counted" if problem is None else f"not counted: {problem[0]}"
    return checked, problem


def _requirement_problems(check: SignatureCheck, trust: TrustStore) -> list[tuple[str, str]]:
    problems = []
    counted = [s for s in check.signatures if s.status == "counted" and s.key is not None]
    for item in counted:
        assert item.key is not None
        if item.claim is not None and item.claim.role not in item.key.roles:
            check.notes.append(
                f"signature {item.index} claims role {safe_text(item.claim.role, 100)!r}, which "
                f"the trust store does not give {item.key.label()}: it meets no requirement"
            )
        elif item.claim is None and trust.requirements:
            check.notes.append(
                f"signature {item.index} states no signer or meaning: it meets no requirement"
            )
    for need in trust.requirements:
        keys = {
            s.key.keyid
            for s in counted
            if s.key is not None
            and s.claim is not None
            and (s.claim.role, s.claim.meaning) == (need.role, need.meaning)
            and need.role in s.key.roles
        }
        if len(keys) < need.count:
            problems.append(
                (
                    "SIGNATURES_INSUFFICIENT",
                    f"the trust store requires {need.count} distinct {need.role} key(s) signing "
                    f"with meaning {need.meaning}; {len(keys)} did",
                )
            )
    return problems


def check_signatures(
    env: Envelope, trust: TrustStore, at: datetime, skew: timedelta
) -> SignatureCheck:
    """Judge every signature; ``problems`` is empty when the threshold and every requirement
    are met (the problems of signatures that did not count then become notes)."""
    message = pae(env.payload_type, env.payload)
    check = SignatureCheck()
    counted: dict[str, TrustedKey] = {}
    sig_problems: list[tuple[str, str]] = []
    for index, item in enumerate(env.signatures):
        checked, problem = judge_signature(item, index, env, message, trust, at, skew)
        check.signatures.append(checked)
        if problem is not None:
            sig_problems.append(problem)
        elif checked.key is not None and checked.key.keyid in counted:
            checked.status = "not counted: a key counts once"
            check.notes.append(
                f"signature {index} is a second signature by {checked.key.label()}; a key counts once"
            )
        elif checked.key is not None:
            counted[checked.key.keyid] = checked.key
    missing = _requirement_problems(check, trust)
    if len(counted) >= trust.threshold and not missing:
        check.counted = list(counted.values())
        check.notes.extend(f"ignored: {code}: {msg}" for code, msg in sig_problems)
        return check
    check.problems = sig_problems
    if len(counted) < trust.threshold and (not sig_problems or counted):
        check.problems.append(
            (
                "UNTRUSTED_KEY",
                f"{len(counted)} distinct trusted key(s) signed; the trust store requires {trust.threshold}",
            )
        )
    check.problems += missing
    return check


def signature_line(sig: dict[str, Any]) -> str:
    """One signature as "name (role), meaning, time" with its key and status, safe to print."""
    if sig.get("name") is not None:
        who = (
            f"{safe_text(sig['name'], 200)} ({safe_text(sig.get('role'), 100)}), "
            f"{safe_text(sig.get('meaning'), 32)}, {safe_text(sig.get('signed_at'), 40)}"
        )
    else:
        who = "no signer stated"
    if sig.get("timestamp"):
        who += f", timestamped {safe_text(sig['timestamp'], 40)}"
        if sig.get("timestamp_authority"):
            who += f" by {safe_text(sig['timestamp_authority'], 100)}"
    if sig.get("comment"):
        who += f' "{safe_text(sig["comment"], 300)}"'
    keyid = safe_text((sig.get("keyid") or "")[:16])
    if not sig.get("keyid"):
        key = "unknown key"
    elif sig.get("key_name"):
        key = f"{safe_text(sig['key_name'], 100)} ({keyid})"
    else:
        key = f"id {keyid}"
    return f"signature {sig.get('index')}: {who}; key {key}: {safe_text(sig.get('status'), 200)}"
