"""Test helper for the audit archive: a signed release with its ledger, the auditor's trust
store (an archivist key, a ledger key), and the tools an attacker uses on a zip (re-zip,
re-list the manifest, re-sign the signed manifest)."""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
import zipfile
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from _certfactory import NOW, World, make_world, new_key, sign_as
from _signer_cases import RE

from attest.archive import ARCHIVIST_ROLE, LEDGER_ROLE, build_archive
from attest.archive.manifest import SIGNED_MANIFEST, manifest_statement, sign_manifest
from attest.certificate.revocation import revocation_envelope
from attest.certificate.signing import PrivateKey, public_key_pem
from attest.core.io import sha256_file
from attest.verification.trust import (
    TimestampAuthority,
    TrustStore,
    add_key,
    empty_trust_store,
    save_trust_store,
)


@dataclass
class Release:
    world: World
    root: Path
    cert: Path
    trust: Path  # the release's trust store (archived as the snapshot)
    ledger: Path
    ledger_key: Path  # the log's checkpoint key (public)
    log: PrivateKey
    archivist: PrivateKey
    auditor: Path  # the auditor's trust store: archivist + ledger keys
    revocations: list[tuple[str, bytes]] = field(default_factory=list)

    def build(self, name: str = "release.zip", **extra: Any) -> Path:
        options: dict[str, Any] = {
            "trust": self.trust,
            "key": self.archivist,
            "revocations": self.revocations,
            "ledger": self.ledger,
            "ledger_key": self.ledger_key,
            "at": NOW,
        }
        options.update(extra)
        return build_archive(self.cert, self.root / name, **options)


def auditor_store(
    entries: list[tuple[PrivateKey, str, tuple[str, ...]]], **window: Any
) -> TrustStore:
    store = empty_trust_store("auditor trust store")
    for key, name, roles in entries:
        store, _ = add_key(store, public_key_pem(key.public_key), name=name, roles=roles, **window)
    return store


def make_release(root: Path, *, tsa: Any = None) -> Release:
    """A signed certificate (timestamped with ``tsa``), its evidence and findings, a revocation
    of another certificate, a ledger holding it under a checkpoint signed by the log key."""
    from attest.ledger import append_certificate, open_ledger

    w = make_world(root)
    evidence = root / "evidence.json"
    evidence.write_text('{"checks": {}}\n')
    statement = w.statement(evidence_digest={"sha256": sha256_file(evidence)})
    stamp = tsa.stamp_message if tsa is not None else None
    cert = w.write(sign_as(statement, [(w.key, RE, "authorship")], timestamper=stamp))
    (root / "findings.json").write_text('{"verdict": "pass"}\n')
    store = w.trust
    if tsa is not None:
        store = replace(
            store, timestamp_authorities=(TimestampAuthority("test-tsa", tsa.root_pem),)
        )
    trust = save_trust_store(store, root / "trust.yaml")
    other = w.write(w.envelope(certificate_id="cert-0009"), "other.json")
    revocation = revocation_envelope(
        json.loads(other.read_text()), w.key, reason="other", revoked_by="Dr Test"
    )
    log, archivist = new_key(), new_key()
    ledger = root / "ledger.sqlite"
    append_certificate(ledger, cert)
    with open_ledger(ledger) as opened:
        opened.sign_checkpoint(log)
    ledger_key = root / "ledger.pub"
    ledger_key.write_text(public_key_pem(log.public_key))
    auditor = save_trust_store(
        auditor_store(
            [(archivist, "archivist", (ARCHIVIST_ROLE,)), (log, "fleet-log", (LEDGER_ROLE,))]
        ),
        root / "auditor.yaml",
    )
    return Release(
        w, root, cert, trust, ledger, ledger_key, log, archivist, auditor,
        [("rev.json", json.dumps(revocation).encode())],
    )  # fmt: skip


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def rezip(path: Path, files: dict[str, bytes]) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    path.write_bytes(buffer.getvalue())
    return path


def relist(files: dict[str, bytes]) -> dict[str, bytes]:
    """manifest.json made to list the members as they now are (what an attacker can do)."""
    manifest = json.loads(files["manifest.json"])
    manifest["files"] = [
        {"name": n, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
        for n, d in sorted(files.items())
        if n not in ("manifest.json", SIGNED_MANIFEST)
    ]
    files["manifest.json"] = json.dumps(manifest).encode()
    return files


def resign(files: dict[str, bytes], key: PrivateKey) -> dict[str, bytes]:
    """The signed manifest made anew over the members, signed by ``key``."""
    listing = json.loads(files["manifest.json"])
    covered = {n: d for n, d in files.items() if n != SIGNED_MANIFEST}
    statement = manifest_statement(
        covered,
        archived_at=listing["archived_at"],
        certificate_id=listing["certificate_id"],
        model=listing["model"],
    )
    files[SIGNED_MANIFEST] = json.dumps(sign_manifest(statement, key)).encode()
    return files


def archive_alone_says(path: Path, at: datetime | None = None) -> bool:
    """What verify-archive said before the manifest was signed: the zip against its own
    manifest.json, the certificate against its own snapshot and revocations, the ledger proof
    against its own key. True when all of it passed (the attack worked)."""
    from attest.core.times import parse_timestamp
    from attest.ledger.checkpoint import load_checkpoint_key
    from attest.ledger.proofs import verify_proof_document
    from attest.verification.verifier import verify

    files = members(path)
    listing = json.loads(files["manifest.json"])
    listed = {f["name"]: f["sha256"] for f in listing["files"]}
    present = set(files) - {"manifest.json", SIGNED_MANIFEST}
    if set(listed) != present or any(
        hashlib.sha256(files[n]).hexdigest() != d for n, d in listed.items()
    ):
        return False
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "c.json").write_bytes(files["certificate.json"])
        (folder / "t.yaml").write_bytes(files["trust.yaml"])
        report = verify(
            folder / "c.json",
            trust=folder / "t.yaml",
            artifacts=[],
            require_artifacts=False,
            at=at or parse_timestamp(listing["archived_at"]),
            revocations=[(n, d) for n, d in files.items() if n.startswith("revocations/")],
        )
        if not report.verified:
            return False
        if "ledger/inclusion-proof.json" in files:
            (folder / "p.json").write_bytes(files["ledger/inclusion-proof.json"])
            (folder / "k.pub").write_bytes(files["ledger/ledger-key.pub"])
            key, name = load_checkpoint_key(folder / "k.pub")
            if not verify_proof_document(folder / "p.json", key, key_name=name).ok:
                return False
    return True
