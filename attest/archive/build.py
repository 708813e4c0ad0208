"""``attest archive``: pack a verified release into one deterministic, signed zip.

The members, under fixed names::

    manifest.dsse.json           the signed manifest (attest.archive.manifest): the archivist's
                                 DSSE signature over every other member's sha256, the archive
                                 time and the certificate's digest (with ``--key``)
    manifest.json                the format, the certificate's id, the archive time and every
                                 other member with its sha256 and size (for people; unsigned)
    certificate.json             the certificate (signatures, signer attestations, tokens)
    trust.yaml                   the trust store snapshot it was verified against
    verification.json            the verifier's report at the time of archiving
    evidence.json, findings.json the evidence and findings (evidence bound by the certificate's
                                 evidence_digest)
    report.html                  the HTML report, if given
    timestamps/sig-N.tsr         each signature's RFC 3161 token (also inside the certificate)
    revocations/N.json           the revocation statements known when archiving
    ledger/inclusion-proof.json  the certificate's ledger entry, its audit path and the signed
    ledger/ledger-key.pub        checkpoint; the checkpoint key (for people: verify-archive takes
                                 the key from the auditor's trust store, never from here)
    ledger/certificate.tlog-proof  the certificate's offline proof from a ledger service (C2SP
                                 tlog-proof: index, inclusion proof, cosigned checkpoint), with
                                 ``--ledger-proof`` or found beside the certificate
                                 (``NAME.tlog-proof`` for ``NAME.json``; attest.archive.tlog)

The bytes are deterministic for the same inputs and an Ed25519 archivist key (sorted names,
fixed zip timestamps and permissions, one compression level; the archive time is ``--at`` when
given; Ed25519 signatures are deterministic, ECDSA ones are not).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from attest.archive.manifest import (
    ARCHIVE_FORMAT,
    MANIFEST,
    SIGNED_MANIFEST,
    manifest_statement,
    sign_manifest,
)
from attest.archive.tlog import tlog_proof_member
from attest.archive.unpack import MAX_MEMBER_BYTES
from attest.certificate.signing import PrivateKey
from attest.core.files import read_bytes_checked
from attest.core.io import MAX_JSON_BYTES, atomic_write_bytes
from attest.core.times import format_timestamp
from attest.errors import CertificateRejected, InputError
from attest.verification.envelope import parse_envelope
from attest.verification.verifier import verify

__all__ = ["build_archive"]

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
    key: PrivateKey | None = None,
    evidence: str | Path | None = None,
    findings: str | Path | None = None,
    report: str | Path | None = None,
    revocations: list[tuple[str, bytes]] | None = None,
    ledger: str | Path | None = None,
    ledger_key: str | Path | None = None,
    ledger_proof: str | Path | None = None,
    at: datetime | None = None,
) -> Path:
    """Write the audit archive of ``certificate`` to ``out``, its manifest signed by ``key``
    (the archivist's; without it the archive is unsigned and ``verify-archive`` refuses it);
    refuses a certificate that does not verify against ``trust`` at ``at`` (default now)."""
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
            files[name] = read_bytes_checked(path, what=name, max_bytes=MAX_MEMBER_BYTES)
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
    given = Path(ledger_proof) if ledger_proof is not None else None
    files.update(tlog_proof_member(given, cert_path, cert_bytes))
    archived_at = format_timestamp(moment)
    files[MANIFEST] = _json(
        {
            "format": ARCHIVE_FORMAT,
            "certificate_id": checked.certificate_id,
            "model": checked.model,
            "archived_at": archived_at,
            "signed": key is not None,
            "files": [
                {"name": n, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
                for n, d in sorted(files.items())
            ],
        }
    )
    if key is not None:
        statement = manifest_statement(
            files,
            archived_at=archived_at,
            certificate_id=str(checked.certificate_id),
            model=dict(checked.model or {}),
        )
        files[SIGNED_MANIFEST] = _json(sign_manifest(statement, key))
    return atomic_write_bytes(out, _zip(files))
