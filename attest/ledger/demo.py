"""The audit-ledger part of ``make demo``: record the demo certificate and its verifications,
sign a checkpoint, write and check an inclusion proof (what an auditor would receive)."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attest.certificate.signing import generate_keypair, load_private_key
from attest.core.io import atomic_write_json, atomic_write_text
from attest.ledger import append_certificate, audit_ledger, open_ledger, record_verification
from attest.ledger.proofs import inclusion_proof_file, verify_proof_document

__all__ = ["ledger_demo"]

DEMO_LEDGER_KEY = "DEMO-ONLY-ledger-unencrypted"
DEMO_ORIGIN = "demo.gradient-attest.invalid/ledger"


def ledger_demo(out: Path, certificate: Path, reports: Sequence[Mapping[str, Any]]) -> bool:
    """Append ``certificate`` (issued) and each verifier report to ``out/ledger.sqlite``, sign a
    checkpoint with a throw-away key, prove the last entry and check the proof offline.
    Prints what it does; returns True when every step behaved as expected."""
    path = out / "ledger.sqlite"
    issued = append_certificate(path, certificate)
    indexes = [record_verification(path, report) for report in reports]
    print(
        f"ledger {path}: certificate issued -> entry {issued.index}; verifications -> entries {indexes}"
    )
    key_path, pub_path, _ = generate_keypair(out / "keys" / DEMO_LEDGER_KEY, passphrase=None)
    with open_ledger(path) as ledger:
        checkpoint = ledger.sign_checkpoint(load_private_key(key_path), origin=DEMO_ORIGIN)
        result = ledger.prove_inclusion(indexes[-1])
        audit = audit_ledger(ledger.storage)
    atomic_write_text(out / "checkpoint.txt", checkpoint.note)
    proof_path = atomic_write_json(
        out / "inclusion-proof.json", inclusion_proof_file(result).model_dump(mode="json")
    )
    print(
        f"signed checkpoint ({DEMO_ORIGIN}, {checkpoint.size} entries) -> {out / 'checkpoint.txt'}:"
    )
    for line in checkpoint.note.splitlines():
        print(f"    {line}")
    print(f"inclusion proof of entry {result.index} ({result.entry.event}) -> {proof_path}:")
    for number, h in enumerate(result.proof):
        print(f"    [{number}] {base64.b64encode(h).decode('ascii')}")
    from attest.certificate.signing import load_public_key

    verdict = verify_proof_document(proof_path, load_public_key(pub_path))
    print(
        f"offline proof check: {'VERIFIED' if verdict.ok else 'REJECTED'}; full ledger verify: {'OK' if audit.ok else 'TAMPERED'}"
    )
    print(f"try: attest ledger verify-proof {proof_path} --key {pub_path}")
    return verdict.ok and audit.ok and len(indexes) == len(reports)
