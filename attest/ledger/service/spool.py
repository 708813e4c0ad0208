"""The offline spool: events for a ledger service wait in a local SQLite file until the service
answers, and are submitted in order, exactly once.

Each event is stored with the nonce it keeps for life before anything is sent. A submission
that fails without an answer (the service or its database down) stays queued and the
queue stops there, so order is kept; the next flush re-signs it with the same nonce, and a
service that had already stored it answers 409 with its index, which counts as done: an
event is never recorded twice. An event the service refuses for good (4xx: an unlisted key,
an entry type the client may not write) is set aside as ``refused`` with the service's reason
and the rest go on.

Default file: ``$ATTEST_LEDGER_SPOOL``, else ``ledger-spool.sqlite`` beside the default ledger.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from attest.certificate.signing import PrivateKey, PublicKey
from attest.errors import LedgerError
from attest.ledger.entries import LedgerEntry, entry_from_leaf_data, utc_now
from attest.ledger.log import default_ledger_path
from attest.ledger.merkle import leaf_hash
from attest.ledger.service.client import LedgerClient, Refused, Unreachable
from attest.ledger.service.submission import new_nonce, sign_submission

__all__ = ["SPOOL_ENV", "FlushResult", "Spool", "default_spool_path"]

SPOOL_ENV = "ATTEST_LEDGER_SPOOL"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY AUTOINCREMENT, url TEXT NOT NULL,"
    " client TEXT NOT NULL, nonce TEXT NOT NULL UNIQUE, leaf BLOB NOT NULL,"
    " state TEXT NOT NULL DEFAULT 'pending', log_index INTEGER, detail TEXT,"
    " queued_at TEXT NOT NULL)"
)


def default_spool_path() -> Path:
    """``$ATTEST_LEDGER_SPOOL``, else ``ledger-spool.sqlite`` beside the default ledger."""
    explicit = os.environ.get(SPOOL_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return default_ledger_path().with_name("ledger-spool.sqlite")


@dataclass
class FlushResult:
    """What one flush did: ``(seq, index)`` submitted, still ``pending``, ``refused`` events
    ``(seq, reason)``, and why the queue stopped (``unreachable``) if it did."""

    submitted: list[tuple[int, int]] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    pending: int = 0
    unreachable: str | None = None


class Spool:
    """The spool file (module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(f"cannot open the ledger spool {self.path}: {exc}") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def enqueue(self, url: str, client: str, entry: LedgerEntry) -> int:
        """Store an event (durably) before it is sent; returns its sequence number."""
        cursor = self._db.execute(
            "INSERT INTO events (url, client, nonce, leaf, queued_at) VALUES (?, ?, ?, ?, ?)",
            (url, client, new_nonce(), entry.leaf_data, utc_now()),
        )
        return int(cursor.lastrowid or 0)

    def pending(self, url: str, client: str | None = None) -> list[tuple[int, str, str, bytes]]:
        """``(seq, client, nonce, leaf data)`` of the events still to send to ``url`` (only
        ``client``'s when given), in order."""
        rows = self._db.execute(
            "SELECT seq, client, nonce, leaf FROM events WHERE url = ? AND state = 'pending'"
            " AND (? IS NULL OR client = ?) ORDER BY seq",
            (url, client, client),
        ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2]), bytes(r[3])) for r in rows]

    def waiting(self) -> dict[tuple[str, str], int]:
        """How many events wait, per ``(url, client)``."""
        rows = self._db.execute(
            "SELECT url, client, count(*) FROM events WHERE state = 'pending' GROUP BY url, client"
        ).fetchall()
        return {(str(r[0]), str(r[1])): int(r[2]) for r in rows}

    def _mark(self, seq: int, state: str, index: int | None, detail: str | None) -> None:
        self._db.execute(
            "UPDATE events SET state = ?, log_index = ?, detail = ? WHERE seq = ?",
            (state, index, detail, seq),
        )

    def flush(
        self,
        url: str,
        key: PrivateKey,
        *,
        log_key: PublicKey | None = None,
        log_key_name: str | None = None,
        client_name: str | None = None,
    ) -> FlushResult:
        """Submit the pending events for ``url`` in order (module docstring), only those of
        ``client_name`` when given (``key`` signs them). With ``log_key``, each answer's signed
        checkpoint and inclusion proof are checked too."""
        result = FlushResult()
        queue = self.pending(url, client_name)
        if not queue:
            return result
        with LedgerClient(url) as client:
            try:
                origin = (
                    client.checkpoint(log_key, log_key_name)[0].origin
                    if log_key is not None
                    else client.origin_unverified()
                )
                for seq, name, nonce, leaf in queue:
                    entry = entry_from_leaf_data(leaf)
                    body = sign_submission(entry, origin=origin, client=name, nonce=nonce, key=key)
                    try:
                        answer = client.submit(body)
                    except Refused as exc:
                        if exc.status == 409 and exc.index is not None:
                            answer = {"index": exc.index}
                        else:
                            self._mark(seq, "refused", None, exc.message)
                            result.refused.append((seq, exc.message))
                            continue
                    index = answer["index"]
                    if log_key is not None and "checkpoint" in answer:
                        index = client.confirm(answer, leaf_hash(leaf), log_key, log_key_name)
                    self._mark(seq, "done", int(index), None)
                    result.submitted.append((seq, int(index)))
            except Unreachable as exc:
                result.unreachable = exc.message
        result.pending = len(self.pending(url, client_name))
        return result
