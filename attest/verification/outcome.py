"""What :func:`attest.verification.verifier.verify` found: the report it returns and the reason
codes a rejection carries (docs/threat-model.md lists what each means)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from attest.core.text import safe_text
from attest.core.times import format_timestamp

__all__ = ["REASON_CODES", "VerificationReport", "provenance_line", "provenance_lines"]

REASON_CODES: tuple[str, ...] = (
    "MALFORMED",
    "SIGNATURE_INVALID",
    "UNTRUSTED_KEY",
    "KEY_REVOKED",
    "EXPIRED",
    "NOT_YET_VALID",
    "SUBJECT_MISMATCH",
    "ARTIFACT_MISSING",
    "POLICY_FAILED",
    "ROLLBACK",
    "ENVIRONMENT_MISMATCH",
    "PROBE_MISMATCH",
    "SIGNATURES_INSUFFICIENT",
    "TIMESTAMP_INVALID",
    "CERTIFICATE_REVOKED",
    # attest verify --ledger URL: the ledger service's revocations could not be read from a log
    # that verifies (attest.cli.ledger_remote.remote_revocations); fails closed
    "REVOCATION_STATUS_UNKNOWN",
    # the certificate's policy is not one this server accepts (attest verify --require-policy,
    # the trust store's accepted_policies; attest.verification.policy_accept)
    "POLICY_NOT_ACCEPTED",
    # the ledger log's checkpoint is cosigned by fewer of the trust store's witnesses than its
    # witness_quorum (attest verify --ledger URL, --ledger-proof; attest.ledger.witness)
    "WITNESS_QUORUM_NOT_MET",
    # attest verify --ledger-proof: the offline proof (C2SP tlog-proof) does not show this
    # certificate's entry in a checkpoint of a ledger key of the trust store
    "LEDGER_PROOF_INVALID",
    # a file in a certified folder that the folder's manifest neither binds nor ignores
    # (attest verify --artifact FOLDER/; attest.certificate.folder_manifest)
    "UNEXPECTED_FILE",
)


@dataclass
class VerificationReport:
    """What :func:`verify` found. ``statement`` is set only when ``verified`` is true."""

    verified: bool
    reasons: list[tuple[str, str]]
    checked_at: datetime
    certificate_path: str
    certificate_sha256: str | None = None
    subjects_checked: list[str] = field(default_factory=list)
    subjects_not_checked: list[str] = field(default_factory=list)
    # a folder bound through its manifest: subject name -> its files whose bytes matched
    folder_files: dict[str, list[str]] = field(default_factory=dict)
    signers: list[dict[str, str]] = field(default_factory=list)
    signatures: list[dict[str, Any]] = field(default_factory=list)  # each as judged (step 3)
    model: dict[str, str] | None = None  # as signed; set once the payload passed its checks
    certificate_id: str | None = None
    certificate_subjects: list[dict[str, Any]] = field(default_factory=list)  # as signed
    policy: dict[str, Any] | None = None  # id, version, digest: as signed
    verdict_counts: dict[str, int] | None = None  # the recorded findings by verdict
    # predicate.evidence_provenance as signed: each target's collector, host and time
    evidence_provenance: dict[str, Any] | None = None
    statement: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    probe: dict[str, Any] | None = None
    environment_differences: list[dict[str, Any]] = field(default_factory=list)
    environment_target: str | None = None  # the certified target this machine matched

    @property
    def codes(self) -> list[str]:
        """The reason codes, in the order the steps found them."""
        return [code for code, _ in self.reasons]

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as ``attest verify --json`` prints it."""
        return {
            "verified": self.verified,
            "reasons": [{"code": c, "message": m} for c, m in self.reasons],
            "subjects_checked": self.subjects_checked,
            "subjects_not_checked": self.subjects_not_checked,
            "folder_files": self.folder_files,
            "signers": self.signers,
            "signatures": self.signatures,
            "certificate": {
                "path": self.certificate_path,
                "sha256": self.certificate_sha256,
                "id": self.certificate_id,
                "subjects": self.certificate_subjects,
            },
            "model": self.model,
            "policy": self.policy,
            "verdict_counts": self.verdict_counts,
            "evidence_provenance": self.evidence_provenance,
            "checked_at": format_timestamp(self.checked_at),
            "notes": self.notes,
            "probe": self.probe,
            "environment_differences": self.environment_differences,
            "environment_target": self.environment_target,
        }


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def provenance_line(target: str, record: Any) -> str:
    """One target's evidence provenance in one line, safe to print (``record`` is a
    certificate's ``evidence_provenance[target]``, which inspect shows unverified):
    signed by NAME (ROLE, key ID) on HOST at TIME, or UNSIGNED and why."""
    name = safe_text(target, 200)
    when = safe_text(_get(record, "finished_at") or "an unrecorded time", 40)
    host = safe_text(_get(record, "host") or "an unrecorded host", 200)
    started = _get(record, "started_at")
    span = f"{safe_text(started, 40)} to {when}" if started else when
    if _get(record, "signed") is True and isinstance(_get(record, "collector"), dict):
        keyid = safe_text(str(_get(record, "collector", "keyid"))[:16], 16)
        return (
            f"{name}: signed by {safe_text(_get(record, 'collector', 'name'), 200)} "
            f"({safe_text(_get(record, 'collector', 'role'), 100)}, key {keyid}; trusted as "
            f"{safe_text(_get(record, 'collector', 'trusted_as'), 200)}) on {host} at {span}"
        )
    if _get(record, "collected_by") == "certify":
        return f"{name}: collected by the certify run itself on {host} at {span} (no collector statement)"
    note = _get(record, "note")
    return f"{name}: UNSIGNED evidence, recorded at {when}" + (
        f" ({safe_text(note, 300)})" if note else ""
    )


def provenance_lines(provenance: Any) -> list[str]:
    """:func:`provenance_line` of every target of a certificate's ``evidence_provenance``;
    a certificate made before it existed says so."""
    if not isinstance(provenance, dict) or not provenance:
        return ["(no evidence provenance recorded: a certificate older than signed evidence)"]
    return [provenance_line(str(target), record) for target, record in provenance.items()]
