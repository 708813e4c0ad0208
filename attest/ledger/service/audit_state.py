"""What the auditor of a remote log remembers between audits, and the checks against it.

The state is keyed by the log's key (its key id, and the note key name when the key is a note
verifier key), not by anything the server presents: an operator holding the log key who
re-signs a truncated or rewritten log under a new origin meets the state of the old one, and
the origin change is reported, not taken for a new log. The file (default
``$XDG_STATE_HOME/gradient-attest/ledger-audit/<16 hex of the key id>.json``) holds::

    {"format": "gradient-attest/ledger-audit-state/v1", "key_id": ..., "origin": ...,
     "checkpoint": "<the last signed checkpoint note verified>",
     "clients": {<the last signed clients document verified>} | null}

A file holding only a checkpoint note (``--state`` files written before) is read as such; when
the key's file does not exist yet, the per-origin file earlier versions kept by default
(``<16 hex of sha256(origin)>.checkpoint``) is read once, and the state then moves to the key's
file.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from attest.certificate.signing import PublicKey, key_id
from attest.core.io import StrictJSONError, atomic_write_text, loads_strict
from attest.errors import LedgerError
from attest.ledger.audit import Problem
from attest.ledger.checkpoint import Checkpoint, open_checkpoint
from attest.ledger.service.client import LedgerClient, Refused, Unreachable
from attest.ledger.service.clients_doc import ClientsDocument, extension_problem, open_clients

__all__ = [
    "AuditState",
    "check_clients",
    "default_state_path",
    "legacy_state_path",
    "load_state",
    "save_state",
]

STATE_FORMAT: Final = "gradient-attest/ledger-audit-state/v1"


def _label(key: PublicKey, key_name: str | None) -> str:
    return f"{key_id(key)} {key_name or ''}".strip()


def _state_folder() -> Path:
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "gradient-attest" / "ledger-audit"


def default_state_path(key: PublicKey, key_name: str | None = None) -> Path:
    """Where the auditor keeps its state of the log signed by ``key``."""
    digest = hashlib.sha256(_label(key, key_name).encode("utf-8")).hexdigest()[:16]
    return _state_folder() / f"{digest}.json"


def legacy_state_path(origin: str) -> Path:
    """The per-origin checkpoint file earlier versions kept by default (read once)."""
    digest = hashlib.sha256(origin.encode("utf-8")).hexdigest()[:16]
    return _state_folder() / f"{digest}.checkpoint"


@dataclass(frozen=True)
class AuditState:
    """The last checkpoint verified (and its note), and the last clients answer verified."""

    checkpoint: Checkpoint
    note: str
    clients: ClientsDocument | None
    clients_answer: dict[str, Any] | None


def load_state(
    path: Path, key: PublicKey, key_name: str | None
) -> tuple[AuditState | None, Problem | None]:
    """The stored state (None when there is none), each part verified under ``key``."""
    if not path.exists():
        return None, None
    try:
        text = path.read_text(encoding="utf-8")
        if not text.lstrip().startswith("{"):  # a bare checkpoint note (older --state files)
            return AuditState(open_checkpoint(text, key, key_name=key_name), text, None, None), None
        raw = loads_strict(text.encode("utf-8"))
        if not isinstance(raw, dict) or raw.get("format") != STATE_FORMAT:
            raise LedgerError(f"not a {STATE_FORMAT} file")
        if raw.get("key_id") != _label(key, key_name):
            raise LedgerError("it is the state of a log signed by another key")
        note = str(raw.get("checkpoint"))
        checkpoint = open_checkpoint(note, key, key_name=key_name)
        if raw.get("origin") != checkpoint.origin:
            raise LedgerError("its origin is not its checkpoint's")
        answer = raw.get("clients")
        clients = None if answer is None else open_clients(answer, key, where="stored clients")
    except (OSError, UnicodeDecodeError, StrictJSONError, LedgerError) as exc:
        message = exc.message if isinstance(exc, LedgerError) else str(exc)
        return None, Problem(None, "state", f"the stored state {path} cannot be used: {message}")
    return AuditState(checkpoint, note, clients, answer), None


def save_state(
    path: Path,
    key: PublicKey,
    key_name: str | None,
    checkpoint: Checkpoint,
    note: str,
    clients_answer: dict[str, Any] | None,
) -> None:
    """Store the state after a clean audit (atomically)."""
    from attest.core.text import printable_json

    state = {
        "format": STATE_FORMAT,
        "key_id": _label(key, key_name),
        "origin": checkpoint.origin,
        "checkpoint": note,
        "clients": clients_answer,
    }
    atomic_write_text(path, printable_json(state) + "\n")


def check_clients(
    client: LedgerClient, key: PublicKey, origin: str, saved: AuditState | None
) -> tuple[ClientsDocument | None, dict[str, Any] | None, list[Problem]]:
    """The log's latest clients document, verified under ``key``, and every version since
    the saved one (from version 1 on a first audit) checked to extend its predecessor.
    Returns the document, its signed answer and the problems (a log that publishes none: None,
    a problem only when the saved state had one)."""
    before = saved.clients if saved is not None else None
    try:
        answer = client.clients()
    except Unreachable:
        raise
    except Refused as exc:
        if exc.status != 404:
            return None, None, [Problem(None, "clients", exc.message)]
        if before is None:
            return None, None, []
        return None, None, [Problem(None, "clients", "the log no longer publishes its clients")]
    except LedgerError as exc:
        return None, None, [Problem(None, "clients", exc.message)]
    where = f"{client.url}clients"
    try:
        latest = open_clients(answer, key, where=where)
        if latest.origin != origin:
            raise LedgerError(f"{where}: the clients document is of {latest.origin!r}")
        if before is not None and latest.version < before.version:
            raise LedgerError(
                f"{where}: version {latest.version} is older than version {before.version} you"
                " stored: the published clients were rolled back"
            )
        previous = before
        for version in range(1 if before is None else before.version, latest.version + 1):
            document = latest if version == latest.version else None
            if document is None:
                document = open_clients(
                    client.clients(version), key, where=f"{where}?version={version}"
                )
            if previous is None:
                if document.version != 1 or document.previous is not None:
                    raise LedgerError(f"{where}: the first version does not start the history")
            elif version == previous.version:
                if document.digest != previous.digest:
                    raise LedgerError(
                        f"{where}: version {version} differs from the one you stored: the"
                        " published clients were rewritten"
                    )
                continue
            else:
                problem = extension_problem(previous, document)
                if problem is not None:
                    raise LedgerError(f"{where}: {problem}")
            previous = document
    except Unreachable:
        raise
    except LedgerError as exc:  # Refused too
        return None, None, [Problem(None, "clients", exc.message)]
    return latest, answer, []
