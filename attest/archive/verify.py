"""``attest verify-archive``: reproduce an archived release's verdict, proving what it says.

In order (the first failing step decides; docs/certificate-format.md, "Audit archive"):

1. the zip is read within bounded memory (:mod:`attest.archive.unpack`): over a cap is an
   :class:`~attest.errors.InputError` (exit 2); a broken zip, or one holding what attest never
   writes, is ``ARCHIVE_INVALID``;
2. ``manifest.json`` must list exactly the members present with their digests
   (``ARCHIVE_INVALID``): a check of the archive against itself, which proves nothing alone;
3. without a trust store the auditor holds, nothing is proven: ``TRUST_REQUIRED``, never
   VERIFIED (an archive cannot vouch for itself);
4. the signed manifest must be there (``ARCHIVE_UNSIGNED``), signed by a key of that trust
   store holding the ``archivist`` role, valid and unrevoked at the signed archive time
   (``ARCHIVE_UNTRUSTED``), and the members must be exactly its subjects: none added, removed,
   changed or renamed (``ARCHIVE_INVALID``);
5. the certificate against the archived trust snapshot (which the archivist signed), at the
   signed archive time or ``--at``, with the archived revocations: the verifier's own reason
   codes; the evidence against the certificate's signed digest (``ARCHIVE_INVALID``);
6. the ledger inclusion proof, if any, against a checkpoint key of the auditor's trust store
   holding the ``ledger`` role, never the key inside the archive (``LEDGER_PROOF_INVALID``).
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from attest.archive.manifest import (
    ARCHIVE_FORMAT,
    ARCHIVE_FORMAT_V1,
    ARCHIVIST_ROLE,
    LEDGER_ROLE,
    MANIFEST,
    SIGNED_MANIFEST,
    ArchiveStatement,
    ManifestProblem,
    check_manifest_signature,
    read_signed_manifest,
)
from attest.archive.tlog import TLOG_MEMBER, check_tlog_proof
from attest.archive.unpack import ArchiveFrameError, read_members
from attest.core.io import StrictJSONError, loads_strict
from attest.core.times import format_timestamp, parse_timestamp
from attest.verification.trust import TrustStore, load_trust_store
from attest.verification.verifier import VerificationReport, verify

__all__ = ["ArchiveReport", "verify_archive"]


@dataclass
class ArchiveReport:
    """What :func:`verify_archive` found: ``verified`` and ``(code, message)`` reasons."""

    verified: bool = False
    reasons: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    certificate: dict[str, Any] | None = None  # the verifier's report on the certificate
    trust_sha256: str | None = None
    signed_by: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verified": self.verified,
            "reasons": [{"code": c, "message": m} for c, m in self.reasons],
            "notes": self.notes,
            "signed_by": self.signed_by,
            "trust_snapshot_sha256": self.trust_sha256,
            "certificate": self.certificate,
        }


def _listing(members: dict[str, bytes]) -> dict[str, Any]:
    """``manifest.json`` checked against the members (the archive against itself)."""
    raw = members.get(MANIFEST)
    if raw is None:
        raise ArchiveFrameError(f"the archive has no {MANIFEST}")
    try:
        manifest = loads_strict(raw)
    except StrictJSONError as exc:
        raise ArchiveFrameError(f"{MANIFEST} is not strict JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in (
        ARCHIVE_FORMAT,
        ARCHIVE_FORMAT_V1,
    ):
        raise ArchiveFrameError(f"{MANIFEST} is not a {ARCHIVE_FORMAT} manifest")
    listed = manifest.get("files")
    if not isinstance(listed, list) or not all(
        isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(f.get("sha256"), str)
        for f in listed
    ):
        raise ArchiveFrameError(f"{MANIFEST} has no valid file list")
    digests = {f["name"]: f["sha256"] for f in listed}
    _same_members(members, digests, MANIFEST)
    for needed in ("certificate.json", "trust.yaml"):
        if needed not in digests:
            raise ArchiveFrameError(f"the archive has no {needed}")
    return manifest


def _same_members(members: dict[str, bytes], digests: dict[str, str], source: str) -> None:
    """The members (but the two manifests' own files) are exactly ``digests``."""
    own = {MANIFEST, SIGNED_MANIFEST} - set(digests)
    missing = sorted(set(digests) - set(members))
    extra = sorted(set(members) - set(digests) - own)
    if missing:
        raise ArchiveFrameError(f"the archive lacks {', '.join(missing)}, which {source} lists")
    if extra:
        raise ArchiveFrameError(
            f"the archive holds {', '.join(extra)}, which {source} does not list"
        )
    # the manifests last, so that a message names the member that was changed
    for name, digest in sorted(digests.items(), key=lambda item: (item[0] == MANIFEST, item[0])):
        if hashlib.sha256(members[name]).hexdigest() != digest:
            raise ArchiveFrameError(f"{name} does not match its digest in {source}")


def _signed(
    members: dict[str, bytes], listing: dict[str, Any], held: TrustStore, out: ArchiveReport
) -> ArchiveStatement:
    """Step 4: the statement the archivist signed, the members held to it."""
    raw = members.get(SIGNED_MANIFEST)
    if raw is None:
        raise ManifestProblem(
            "ARCHIVE_UNSIGNED",
            f"the archive has no {SIGNED_MANIFEST}: nobody vouches for its contents "
            f"(make it with attest archive --key ARCHIVIST.key)",
        )
    envelope, statement = read_signed_manifest(raw)
    out.signed_by = check_manifest_signature(envelope, statement, held)
    subjects = {s.name: s.digest.sha256 for s in statement.subject}
    try:
        _same_members(members, subjects, f"the signed {SIGNED_MANIFEST}")
    except ArchiveFrameError as exc:
        raise ManifestProblem("ARCHIVE_INVALID", str(exc)) from None
    cert_sha = hashlib.sha256(members["certificate.json"]).hexdigest()
    if statement.predicate.certificate_digest.sha256 != cert_sha:
        raise ManifestProblem("ARCHIVE_INVALID", "the signed manifest is for another certificate")
    if listing.get("archived_at") != statement.predicate.archived_at:
        raise ManifestProblem(
            "ARCHIVE_INVALID", f"{MANIFEST} and the signed manifest disagree on the archive time"
        )
    return statement


def _check_evidence(
    members: dict[str, bytes], report: VerificationReport, out: ArchiveReport
) -> None:
    statement = report.statement or {}
    signed = (statement.get("predicate") or {}).get("evidence_digest") or {}
    if "evidence.json" in members:
        actual = hashlib.sha256(members["evidence.json"]).hexdigest()
        if signed.get("sha256") not in (None, actual):
            out.reasons.append(
                ("ARCHIVE_INVALID", "evidence.json is not the evidence the certificate signed")
            )


def _check_ledger(
    members: dict[str, bytes], held: TrustStore, at: datetime, folder: Path, out: ArchiveReport
) -> None:
    """Step 6: the inclusion proof under the auditor's own ledger key(s)."""
    if TLOG_MEMBER in members:
        _check_tlog(members, held, at, out)
    if "ledger/inclusion-proof.json" not in members:
        return
    from attest.ledger.proofs import verify_proof_document

    keys = [
        k
        for k in held.keys
        if LEDGER_ROLE in k.roles and not held.is_revoked(k.keyid) and k.window_problem(at) is None
    ]
    if not keys:
        out.reasons.append(
            (
                "LEDGER_PROOF_INVALID",
                f"the archive holds a ledger proof, but {held.source} has no valid key with the "
                f"{LEDGER_ROLE} role to check it (the archived ledger-key.pub is never trusted): "
                f"attest trust add LEDGER.pub --role {LEDGER_ROLE}",
            )
        )
        return
    proof = folder / "proof.json"
    proof.write_bytes(members["ledger/inclusion-proof.json"])
    verdicts = [(k, verify_proof_document(proof, k.public_key)) for k in keys]
    good = next((k for k, v in verdicts if v.ok), None)
    if good is None:
        out.reasons += [
            ("LEDGER_PROOF_INVALID", f"ledger proof under {key.label()}: {message}")
            for key, verdict in verdicts
            for _, message in verdict.reasons
        ]
        return
    document = loads_strict(members["ledger/inclusion-proof.json"])
    entry = document.get("entry") if isinstance(document, dict) else None
    entry = entry if isinstance(entry, dict) else {}
    cert_sha = hashlib.sha256(members["certificate.json"]).hexdigest()
    if (entry.get("certificate") or {}).get("sha256") != cert_sha:
        out.reasons.append(
            ("LEDGER_PROOF_INVALID", "the ledger proof is for another certificate file")
        )
    else:
        out.notes.append(
            f"ledger inclusion proof verified against {good.label()} from your trust store"
        )
    from attest.ledger.witness.cosignature import WitnessPolicy

    note = document.get("checkpoint") if isinstance(document, dict) else None
    witnessed = WitnessPolicy.of(held.witnesses, held.witness_quorum).problem(str(note or ""))
    if witnessed is not None:
        out.reasons.append(witnessed)


def _check_tlog(
    members: dict[str, bytes], held: TrustStore, at: datetime, out: ArchiveReport
) -> None:
    """Step 6 too: the certificate's offline proof (a C2SP tlog-proof) under the auditor's own
    ledger key(s) and witness quorum."""
    try:
        text = members[TLOG_MEMBER].decode("utf-8")
    except UnicodeDecodeError:
        out.reasons.append(("LEDGER_PROOF_INVALID", f"{TLOG_MEMBER} is not UTF-8 text"))
        return
    problems = check_tlog_proof(text, members["certificate.json"], held, at)
    if problems:
        out.reasons += [(code, f"{TLOG_MEMBER}: {message}") for code, message in problems]
        return
    out.notes.append(
        f"offline ledger proof {TLOG_MEMBER} verified against a ledger key from your trust"
        " store" + (f" and {held.witness_quorum} of its witnesses" if held.witness_quorum else "")
    )


def _verify_certificate(
    members: dict[str, bytes], moment: datetime, folder: Path, out: ArchiveReport
) -> VerificationReport:
    """Step 5: the certificate against the archived (signed) snapshot."""
    revocations = [(n, d) for n, d in sorted(members.items()) if n.startswith("revocations/")]
    (folder / "certificate.json").write_bytes(members["certificate.json"])
    (folder / "trust.yaml").write_bytes(members["trust.yaml"])
    report = verify(
        folder / "certificate.json",
        trust=folder / "trust.yaml",
        artifacts=[],
        require_artifacts=False,
        at=moment,
        revocations=revocations,
    )
    report.certificate_path = "certificate.json"  # inside the archive
    out.certificate = report.to_dict()
    out.reasons += report.reasons
    _check_evidence(members, report, out)
    return report


def verify_archive(
    path: str | Path, *, at: datetime | None = None, trust: str | Path | None = None
) -> ArchiveReport:
    """Reproduce the verdict of an audit archive, proven against the auditor's trust store
    ``trust`` (see the module); without it the result is never verified."""
    out = ArchiveReport()
    try:
        members = read_members(Path(path))
        listing = _listing(members)
    except ArchiveFrameError as exc:
        out.reasons.append(("ARCHIVE_INVALID", str(exc)))
        return out
    out.trust_sha256 = hashlib.sha256(members["trust.yaml"]).hexdigest()
    if trust is None:
        out.reasons.append(
            (
                "TRUST_REQUIRED",
                "no trust store given: an archive cannot vouch for itself, so nothing in it is "
                f"proven; pass --trust with a trust store you hold that lists the "
                f"{ARCHIVIST_ROLE} key(s) (and the {LEDGER_ROLE} key for a ledger proof)",
            )
        )
        return out
    held = load_trust_store(trust)
    try:
        statement = _signed(members, listing, held, out)
    except ManifestProblem as exc:
        out.reasons.append((exc.code, exc.message))
        return out
    signed_at = parse_timestamp(statement.predicate.archived_at)
    moment = at or signed_at
    with tempfile.TemporaryDirectory(prefix="attest-archive-") as tmp:
        folder = Path(tmp)
        report = _verify_certificate(members, moment, folder, out)
        _check_ledger(members, held, signed_at, folder, out)
    out.notes.append(f"verified as of {format_timestamp(moment)}")
    out.verified = report.verified and not out.reasons
    return out
