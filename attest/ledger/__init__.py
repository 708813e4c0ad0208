"""The audit ledger: a tamper-evident, append-only Merkle log of certificates and verifications.

RFC 6962 hashing, RFC 9162 inclusion and consistency proofs, C2SP signed-note checkpoints
(Ed25519), SQLite storage behind the :class:`~attest.ledger.storage.LedgerStorage` contract.
Free of torch and numpy. See docs/ledger.md.

Typical use::

    from attest.ledger import append_certificate, open_ledger, record_verification

    index = append_certificate("ledger.sqlite", "gradient_certificate.json")   # event "issued"
    index = record_verification("ledger.sqlite", verifier_report_dict)          # verified/rejected
    with open_ledger("ledger.sqlite") as ledger:
        ledger.sign_checkpoint(load_private_key("keys/ledger.key"))
        proof = ledger.prove_inclusion(index)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attest.ledger.audit import AuditReport, audit_ledger
from attest.ledger.entries import Event, LedgerEntry, entry_for_certificate, entry_for_verification
from attest.ledger.log import LEDGER_ENV, Ledger, default_ledger_path, open_ledger
from attest.ledger.sqlite import SQLiteStorage
from attest.ledger.storage import AppendResult, LedgerStorage

__all__ = [
    "LEDGER_ENV",
    "AppendResult",
    "AuditReport",
    "Ledger",
    "LedgerEntry",
    "LedgerStorage",
    "SQLiteStorage",
    "append_certificate",
    "audit_ledger",
    "default_ledger_path",
    "open_ledger",
    "record_verification",
    "revocations_in",
]


def record_verification(
    ledger_path: str | Path | None, report: Mapping[str, Any], *, actor: str | None = None
) -> int:
    """Append the outcome of ``attest verify`` (its ``--json`` report dict) to the ledger.

    Writes a ``verified`` entry (result ``pass``) when ``report["verified"]`` is true, else a
    ``rejected`` one (result ``fail``) with the reasons' codes; certificate id and sha256, model
    and policy digests are taken from ``report["certificate"]`` where present. Creates the ledger
    if needed (``None``: the default path). Returns the new entry's index.
    """
    entry = entry_for_verification(report, actor=actor)
    with open_ledger(ledger_path, create=True) as ledger:
        return ledger.append(entry).index


def append_certificate(
    ledger_path: str | Path | None,
    certificate_path: str | Path,
    *,
    event: Event = "issued",
    reason_codes: list[str] | None = None,
    actor: str | None = None,
    revocation: bytes | None = None,
) -> AppendResult:
    """Record a certificate file (``issued`` or ``revoked``) without verifying it: the entry
    says ``certificate_checked: false``. Creates the ledger if needed. ``revocation``: the
    signed revocation statement a ``revoked`` entry keeps (``attest revoke --ledger``)."""
    entry = entry_for_certificate(
        certificate_path,
        event=event,
        reason_codes=reason_codes,
        actor=actor,
        revocation=revocation,
    )
    with open_ledger(ledger_path, create=True) as ledger:
        return ledger.append(entry)


def revocations_in(ledger_path: str | Path) -> list[tuple[str, bytes]]:
    """The signed revocation statements the ledger holds, as ``(source, bytes)``; each entry
    is checked against its leaf hash as it is read. The verifier decides which to honour."""
    import base64

    found: list[tuple[str, bytes]] = []
    with open_ledger(ledger_path) as ledger:
        for index in range(ledger.tree_head().size):
            _, entry = ledger.entry(index)
            if entry.event == "revoked" and entry.revocation is not None:
                found.append((f"ledger entry {index}", base64.b64decode(entry.revocation)))
    return found
