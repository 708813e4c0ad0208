"""Tamper-table rows for signer attestations, roles, timestamps and revocations (issue 21),
shared by tests/unit/verification/test_verify_table.py (library and command line)."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from _certfactory import NOW, World, sign_as, with_roles
from _tsa import make_tsa

from attest.certificate.revocation import revocation_envelope
from attest.verification.trust import Requirement, TimestampAuthority, revoke_key

Row = tuple[Path, dict[str, Any]]
RE, CS = "release-engineer", "clinical-safety"
NEED_BOTH = (Requirement(RE, "authorship"), Requirement(CS, "approval"))


def _attestation(entry: dict[str, Any]) -> dict[str, Any]:
    return json.loads(base64.b64decode(entry["signer"]["attestation"]))


def _two_signer_trust(w: World, **changes: Any) -> Any:
    roles = {w.key.keyid: (RE,), w.second.keyid: (CS,)}
    return with_roles(w.trust, roles, requirements=NEED_BOTH, **changes)


def meaning_edited(w: World) -> Row:
    env = sign_as(w.statement(), [(w.key, RE, "authorship")])
    entry = env["signatures"][0]
    claim = _attestation(entry)
    claim["meaning"] = "approval"
    entry["signer"]["attestation"] = base64.b64encode(
        json.dumps(claim, sort_keys=True, separators=(",", ":")).encode()
    ).decode()
    return w.write(env), {}


def cosignature_moved(w: World) -> Row:
    first = sign_as(w.statement(), [(w.key, RE, "authorship")])
    other = sign_as(
        w.statement(certificate_id="cert-0002"),
        [(w.key, RE, "authorship"), (w.second, CS, "approval")],
    )
    first["signatures"].append(other["signatures"][1])
    return w.write(first), {"trust": _two_signer_trust(w)}


def attestation_moved(w: World) -> Row:
    """The second key signed this certificate as a reviewer and another one as approver: its
    approval block, moved here, names the other payload."""
    env = sign_as(w.statement(), [(w.key, RE, "authorship"), (w.second, CS, "review")])
    other = sign_as(w.statement(certificate_id="cert-0002"), [(w.second, CS, "approval")])
    env["signatures"][1]["signer"] = other["signatures"][0]["signer"]
    return w.write(env), {"trust": _two_signer_trust(w)}


def approval_missing(w: World) -> Row:
    env = sign_as(w.statement(), [(w.key, RE, "authorship")])
    return w.write(env), {"trust": _two_signer_trust(w)}


def role_not_held(w: World) -> Row:
    env = sign_as(w.statement(), [(w.key, RE, "authorship"), (w.second, RE, "approval")])
    roles = {w.key.keyid: (RE,), w.second.keyid: (RE,)}  # nobody holds clinical-safety
    return w.write(env), {"trust": with_roles(w.trust, roles, requirements=NEED_BOTH)}


def plain_signature_meets_no_requirement(w: World) -> Row:
    return w.write(w.envelope()), {"trust": _two_signer_trust(w)}


def _stamped(w: World, name: str = "tsa", **tsa_options: Any) -> tuple[dict[str, Any], Any]:
    tsa = make_tsa(w.root / name, **tsa_options)
    env = sign_as(w.statement(), [(w.key, RE, "authorship")], timestamper=tsa.stamp_message)
    return env, tsa


def _tsa_trust(w: World, *roots: str, **changes: Any) -> Any:
    authorities = tuple(TimestampAuthority(f"tsa{i}", pem) for i, pem in enumerate(roots))
    return with_roles(w.trust, {}, timestamp_authorities=authorities, **changes)


def timestamp_wrong_imprint(w: World) -> Row:
    env, tsa = _stamped(w)
    token = tsa.stamp_message(b"some other signature")
    env["signatures"][0]["signer"]["timestamp"] = base64.b64encode(token).decode()
    return w.write(env), {"trust": _tsa_trust(w, tsa.root_pem)}


def timestamp_swapped_between_signatures(w: World) -> Row:
    tsa = make_tsa(w.root / "tsa")
    env = sign_as(
        w.statement(),
        [(w.key, RE, "authorship"), (w.second, CS, "approval")],
        timestamper=tsa.stamp_message,
    )
    a, b = (s["signer"] for s in env["signatures"])
    a["timestamp"], b["timestamp"] = b["timestamp"], a["timestamp"]
    return w.write(env), {"trust": _tsa_trust(w, tsa.root_pem)}


def timestamp_from_untrusted_tsa(w: World) -> Row:
    env, _ = _stamped(w)
    trusted = make_tsa(w.root / "trusted", name="Trusted TSA")
    return w.write(env), {"trust": _tsa_trust(w, trusted.root_pem)}


def timestamp_by_expired_tsa_certificate(w: World) -> Row:
    env, tsa = _stamped(w, valid=timedelta(days=-2))
    return w.write(env), {"trust": _tsa_trust(w, tsa.root_pem)}


def timestamp_without_tsa_in_store(w: World) -> Row:
    env, _ = _stamped(w)
    return w.write(env), {}


def timestamp_after_key_window(w: World) -> Row:
    """Untimestamped, the key is inside its window at the verification time; the token proves
    the signature was made after the key's end."""
    env, tsa = _stamped(w)
    end = datetime.now(timezone.utc) - timedelta(hours=1)
    trust = w.with_keys(w.key, not_after=end)
    return w.write(env), {"trust": _tsa_trust_of(trust, tsa.root_pem)}


def timestamped_after_compromise(w: World) -> Row:
    env, tsa = _stamped(w)
    compromised = datetime.now(timezone.utc) - timedelta(hours=1)
    trust = revoke_key(w.trust, w.key.keyid, reason="compromised", at=compromised)
    return w.write(env), {"trust": _tsa_trust_of(trust, tsa.root_pem)}


def _tsa_trust_of(store: Any, root: str) -> Any:
    return with_roles(store, {}, timestamp_authorities=(TimestampAuthority("tsa", root),))


def certificate_revoked(w: World) -> Row:
    env = w.envelope()
    revocation = revocation_envelope(
        env,
        w.second,
        reason="wrong weights",
        revoked_by="Dr Test",
        revoked_at=NOW - timedelta(hours=1),
    )
    return w.write(env), {"revocations": [("rev.json", json.dumps(revocation).encode())]}


ROWS = [
    (meaning_edited, "SIGNATURE_INVALID"),
    (cosignature_moved, "SIGNATURE_INVALID"),
    (attestation_moved, "SIGNATURE_INVALID"),
    (approval_missing, "SIGNATURES_INSUFFICIENT"),
    (role_not_held, "SIGNATURES_INSUFFICIENT"),
    (plain_signature_meets_no_requirement, "SIGNATURES_INSUFFICIENT"),
    (timestamp_wrong_imprint, "TIMESTAMP_INVALID"),
    (timestamp_swapped_between_signatures, "TIMESTAMP_INVALID"),
    (timestamp_from_untrusted_tsa, "TIMESTAMP_INVALID"),
    (timestamp_by_expired_tsa_certificate, "TIMESTAMP_INVALID"),
    (timestamp_without_tsa_in_store, "TIMESTAMP_INVALID"),
    (timestamp_after_key_window, "UNTRUSTED_KEY"),
    (timestamped_after_compromise, "KEY_REVOKED"),
    (certificate_revoked, "CERTIFICATE_REVOKED"),
]
