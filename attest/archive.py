"""The audit archive: one zip that reproduces a release's verdict offline, years later.

``attest archive CERT -o release.zip`` packs, under fixed names::

    manifest.json                the format, the certificate's id, the time of archiving and
                                 every other file with its sha256 and size
    certificate.json             the certificate (signatures, signer attestations, tokens)
    trust.yaml                   the trust store snapshot it was verified against
    verification.json            the verifier's report at the time of archiving
    evidence.json, findings.json the evidence and findings (evidence bound by the certificate's
                                 evidence_digest)
    report.html                  the HTML report, if given
    timestamps/sig-N.tsr         each signature's RFC 3161 token (also inside the certificate)
    revocations/N.json           the revocation statements known when archiving
    ledger/inclusion-proof.json  the certificate's ledger entry, its audit path and the signed
    ledger/ledger-key.pub        checkpoint, and the checkpoint key

The bytes are deterministic for the same inputs (sorted names, fixed zip timestamps and
permissions, one compression level; the archive time is ``--at`` when given).
``attest verify-archive`` reads nothing but the zip: the manifest must list exactly the files
present with their digests (ARCHIVE_INVALID otherwise), then the certificate is verified
against the snapshot (the verifier's own reason codes) at the archive's time or ``--at``, the
evidence against the signed digest, the revocations, and the ledger proof against its key. A
snapshot that was replaced together with its manifest digest is caught only against a trust
store the auditor holds (``--trust``): an archive cannot vouch for its own trust anchor.
"""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

from attest.core.files import read_bytes_checked
from attest.core.io import MAX_JSON_BYTES, StrictJSONError, atomic_write_bytes, loads_strict
from attest.core.times import format_timestamp, parse_timestamp
from attest.errors import CertificateRejected, InputError
from attest.verification.envelope import parse_envelope
from attest.verification.verifier import VerificationReport, verify

__all__ = ["ARCHIVE_FORMAT", "ArchiveReport", "build_archive", "verify_archive"]

ARCHIVE_FORMAT: Final = "gradient-attest/archive/v1"
MAX_ARCHIVE_BYTES = 512 * 1024 * 1024
MAX_MEMBERS = 1024
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: the same bytes every time


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # unix, whatever the host
            archive.writestr(info, files[name], compresslevel=9)
    return buffer.getvalue()


def _ledger_files(ledger: Path, ledger_key: Path, certificate_sha256: str) -> dict[str, bytes]:
    """The inclusion proof of the certificate's latest ledger entry, and the checkpoint key."""
    from attest.ledger import open_ledger
    from attest.ledger.proofs import inclusion_proof_file

    with open_ledger(ledger) as log:
        found = [
            index
            for index in range(log.tree_head().size)
            if log.entry(index)[1].certificate.sha256 == certificate_sha256
        ]
        if not found:
            raise InputError(
                f"ledger {ledger} has no entry for this certificate",
                hint="record it first: attest ledger append CERT --ledger LEDGER",
            )
        proof = inclusion_proof_file(log.prove_inclusion(found[-1]))
    key = read_bytes_checked(ledger_key, what="ledger key", max_bytes=64 * 1024)
    return {
        "ledger/inclusion-proof.json": _json(proof.model_dump(mode="json")),
        "ledger/ledger-key.pub": key,
    }


def build_archive(
    certificate: str | Path,
    out: str | Path,
    *,
    trust: str | Path,
    evidence: str | Path | None = None,
    findings: str | Path | None = None,
    report: str | Path | None = None,
    revocations: list[tuple[str, bytes]] | None = None,
    ledger: str | Path | None = None,
    ledger_key: str | Path | None = None,
    at: datetime | None = None,
) -> Path:
    """Write the audit archive of ``certificate`` to ``out``; refuses a certificate that does
    not verify against ``trust`` at ``at`` (default now)."""
    cert_path = Path(certificate)
    moment = (at or datetime.now(timezone.utc)).replace(microsecond=0)
    known = list(revocations or [])
    checked = verify(
        cert_path, trust=trust, artifacts=[], require_artifacts=False, at=moment, revocations=known
    )
    if not checked.verified:
        codes = ", ".join(checked.codes)
        raise CertificateRejected(
            f"refusing to archive {cert_path}: it does not verify ({codes})",
            hint="archive a certificate attest verify accepts; its rejection is in the ledger",
        )
    cert_bytes = read_bytes_checked(cert_path, what="certificate", max_bytes=MAX_JSON_BYTES)
    files: dict[str, bytes] = {
        "certificate.json": cert_bytes,
        "trust.yaml": read_bytes_checked(Path(trust), what="trust store", max_bytes=1 << 20),
        "verification.json": _json(checked.to_dict()),
    }
    for name, given, default in (
        ("evidence.json", evidence, cert_path.with_name("evidence.json")),
        ("findings.json", findings, cert_path.with_name("findings.json")),
        ("report.html", report, None),
    ):
        path = Path(given) if given is not None else default
        if path is not None and (given is not None or path.is_file()):
            files[name] = read_bytes_checked(path, what=name, max_bytes=MAX_ARCHIVE_BYTES)
    for index, sig in enumerate(parse_envelope(cert_bytes).signatures):
        if sig.signer is not None and sig.signer.timestamp is not None:
            files[f"timestamps/sig-{index}.tsr"] = sig.signer.timestamp
    for index, (_, data) in enumerate(known):
        files[f"revocations/{index}.json"] = data
    if (ledger is None) != (ledger_key is None):
        raise InputError("--ledger and --ledger-key go together (the proof needs the key)")
    if ledger is not None and ledger_key is not None:
        digest = hashlib.sha256(cert_bytes).hexdigest()
        files.update(_ledger_files(Path(ledger), Path(ledger_key), digest))
    manifest = {
        "format": ARCHIVE_FORMAT,
        "certificate_id": checked.certificate_id,
        "model": checked.model,
        "archived_at": format_timestamp(moment),
        "files": [
            {"name": n, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
            for n, d in sorted(files.items())
        ],
    }
    files["manifest.json"] = _json(manifest)
    return atomic_write_bytes(out, _zip(files))


@dataclass
class ArchiveReport:
    """What :func:`verify_archive` found: ``verified`` and ``(code, message)`` reasons."""

    verified: bool = False
    reasons: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    certificate: dict[str, Any] | None = None  # the verifier's report on the certificate
    trust_sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verified": self.verified,
            "reasons": [{"code": c, "message": m} for c, m in self.reasons],
            "notes": self.notes,
            "trust_snapshot_sha256": self.trust_sha256,
            "certificate": self.certificate,
        }


def _read_members(path: Path) -> dict[str, bytes]:
    data = read_bytes_checked(path, what="archive", max_bytes=MAX_ARCHIVE_BYTES)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_MEMBERS:
                raise InputError(f"{path} holds {len(infos)} files, over {MAX_MEMBERS}")
            total = sum(i.file_size for i in infos)
            if total > MAX_ARCHIVE_BYTES:
                raise InputError(f"{path} unpacks to {total} bytes, over the limit")
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                raise zipfile.BadZipFile("a file name appears twice")
            return {i.filename: archive.read(i) for i in infos}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError) as exc:
        raise _Invalid(f"{path} is not a readable zip archive: {exc}") from None


class _Invalid(Exception):
    """The archive's frame is broken (ARCHIVE_INVALID)."""


def _manifest(members: dict[str, bytes]) -> dict[str, Any]:
    raw = members.get("manifest.json")
    if raw is None:
        raise _Invalid("the archive has no manifest.json")
    try:
        manifest = loads_strict(raw)
    except StrictJSONError as exc:
        raise _Invalid(f"manifest.json is not strict JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != ARCHIVE_FORMAT:
        raise _Invalid(f"manifest.json is not a {ARCHIVE_FORMAT} manifest")
    listed = manifest.get("files")
    if not isinstance(listed, list) or not all(
        isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(f.get("sha256"), str)
        for f in listed
    ):
        raise _Invalid("manifest.json has no valid file list")
    names = {f["name"] for f in listed}
    missing = sorted(names - set(members))
    extra = sorted(set(members) - names - {"manifest.json"})
    if missing:
        raise _Invalid(f"the archive lacks {', '.join(missing)}, which its manifest lists")
    if extra:
        raise _Invalid(f"the archive holds {', '.join(extra)}, which its manifest does not list")
    for entry in listed:
        if hashlib.sha256(members[entry["name"]]).hexdigest() != entry["sha256"]:
            raise _Invalid(f"{entry['name']} does not match its digest in the manifest")
    for needed in ("certificate.json", "trust.yaml"):
        if needed not in names:
            raise _Invalid(f"the archive has no {needed}")
    return manifest


def _check_contents(
    members: dict[str, bytes], report: VerificationReport, folder: Path, out: ArchiveReport
) -> None:
    """The evidence against the signed digest, and the ledger proof against its key."""
    statement = report.statement or {}
    signed = (statement.get("predicate") or {}).get("evidence_digest") or {}
    if "evidence.json" in members:
        actual = hashlib.sha256(members["evidence.json"]).hexdigest()
        if signed.get("sha256") not in (None, actual):
            out.reasons.append(
                ("ARCHIVE_INVALID", "evidence.json is not the evidence the certificate signed")
            )
    if "ledger/inclusion-proof.json" in members:
        from attest.ledger.checkpoint import load_checkpoint_key
        from attest.ledger.proofs import verify_proof_document

        (folder / "proof.json").write_bytes(members["ledger/inclusion-proof.json"])
        (folder / "ledger.pub").write_bytes(members.get("ledger/ledger-key.pub", b""))
        key, name = load_checkpoint_key(folder / "ledger.pub")
        verdict = verify_proof_document(folder / "proof.json", key, key_name=name)
        out.reasons += [("ARCHIVE_INVALID", f"ledger proof: {m}") for _, m in verdict.reasons]
        document = loads_strict(members["ledger/inclusion-proof.json"])
        entry = document.get("entry") if isinstance(document, dict) else None
        entry = entry if isinstance(entry, dict) else {}
        cert_sha = hashlib.sha256(members["certificate.json"]).hexdigest()
        if verdict.ok and (entry.get("certificate") or {}).get("sha256") != cert_sha:
            out.reasons.append(
                ("ARCHIVE_INVALID", "the ledger proof is for another certificate file")
            )
        elif verdict.ok:
            out.notes.append("ledger inclusion proof verified against the archived checkpoint key")


def verify_archive(
    path: str | Path, *, at: datetime | None = None, trust: str | Path | None = None
) -> ArchiveReport:
    """Reproduce the verdict of an audit archive from the archive alone (see the module)."""
    out = ArchiveReport()
    try:
        members = _read_members(Path(path))
        manifest = _manifest(members)
    except _Invalid as exc:
        out.reasons.append(("ARCHIVE_INVALID", str(exc)))
        return out
    out.trust_sha256 = hashlib.sha256(members["trust.yaml"]).hexdigest()
    if trust is not None:
        held = read_bytes_checked(Path(trust), what="trust store", max_bytes=1 << 20)
        if held != members["trust.yaml"]:
            out.reasons.append(
                ("ARCHIVE_INVALID", f"the archive's trust snapshot is not the trust store {trust}")
            )
            return out
    try:
        moment = at or parse_timestamp(str(manifest.get("archived_at")))
    except ValueError:
        out.reasons.append(("ARCHIVE_INVALID", "manifest.json has no valid archived_at"))
        return out
    revocations = [(n, d) for n, d in sorted(members.items()) if n.startswith("revocations/")]
    with tempfile.TemporaryDirectory(prefix="attest-archive-") as tmp:
        folder = Path(tmp)
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
        _check_contents(members, report, folder, out)
    out.notes.append(f"verified as of {format_timestamp(moment)}")
    out.verified = report.verified and not out.reasons
    return out
