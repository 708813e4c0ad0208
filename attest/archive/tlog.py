"""The certificate's offline ledger proof in an audit archive: a C2SP tlog-proof
(:mod:`attest.ledger.tlog_proof`, as ``attest certify --ledger-proof-out`` and ``attest ledger
proof`` write it) kept as the member :data:`TLOG_MEMBER`, checked when archiving and by
``verify-archive`` against a trust store's ``ledger`` keys and witness quorum, never against
anything inside the archive."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

from attest.certificate.signing import PublicKey
from attest.core.files import read_text_checked
from attest.errors import InputError, LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError, split_note
from attest.ledger.tlog_proof import (
    LEDGER_PROOF_INVALID,
    MAX_PROOF_BYTES,
    entry_problem,
    parse_tlog_proof,
    verify_tlog_proof,
)
from attest.ledger.witness.cosignature import WitnessPolicy
from attest.verification.trust import LEDGER_ROLE, TrustStore

__all__ = [
    "TLOG_MEMBER",
    "check_tlog_proof",
    "default_proof_path",
    "tlog_proof_member",
]

TLOG_MEMBER = "ledger/certificate.tlog-proof"


def _ledger_keys(store: TrustStore, at: datetime) -> list[PublicKey]:
    """The keys of ``store`` with the ledger role, not revoked and valid at ``at``."""
    return [
        k.public_key
        for k in store.keys
        if LEDGER_ROLE in k.roles and not store.is_revoked(k.keyid) and k.window_problem(at) is None
    ]


def check_tlog_proof(
    text: str, certificate: bytes, store: TrustStore, at: datetime
) -> list[tuple[str, str]]:
    """Why the proof does not show this certificate file's issue in a checkpoint of a ledger
    key of ``store`` cosigned by its witness quorum; empty when it does."""
    return verify_tlog_proof(
        text,
        hashlib.sha256(certificate).hexdigest(),
        _ledger_keys(store, at),
        WitnessPolicy.of(store.witnesses, store.witness_quorum),
    )


def default_proof_path(certificate: Path) -> Path:
    """The proof found beside a certificate: ``gradient_certificate.json`` ->
    ``gradient_certificate.tlog-proof``."""
    return certificate.with_suffix(".tlog-proof")


def tlog_proof_member(given: Path | None, certificate: Path, cert_bytes: bytes) -> dict[str, bytes]:
    """The member for ``given`` (else the proof beside the certificate, if any), checked first
    as far as it can be without a trust decision (that is verify-archive's, under the auditor's
    keys): a tlog-proof whose entry is this certificate file's issue, proven under the root of
    the checkpoint it carries."""
    path = given if given is not None else default_proof_path(certificate)
    if given is None and not path.is_file():
        return {}
    text = read_text_checked(path, what="ledger proof", max_bytes=MAX_PROOF_BYTES)
    found = "" if given is not None else " (found beside the certificate)"
    try:
        parsed = parse_tlog_proof(text)
        checkpoint = Checkpoint.parse_body(split_note(parsed.note)[0])
    except (LedgerError, CheckpointError) as exc:
        problem: tuple[str, str] | None = (LEDGER_PROOF_INVALID, exc.message)
    else:
        problem = entry_problem(parsed, checkpoint, hashlib.sha256(cert_bytes).hexdigest())
    if problem is not None:
        raise InputError(
            f"refusing to archive the ledger proof {path}{found}: {problem[1]}",
            hint="fetch a current proof of this certificate: attest ledger proof CERT --ledger"
            " URL -o FILE",
        )
    return {TLOG_MEMBER: text.encode("utf-8")}
