"""The offline spool: events for a ledger service wait in a local SQLite file until the service
answers, and are submitted in order, exactly once.

Each event is stored with the nonce it keeps for life before anything is sent. A submission
that fails without an answer (the service or its database down) stays queued and the
queue stops there, so order is kept; the next flush re-signs it with the same nonce, and a
service that had already stored it answers 409 with its index and the stored leaf: an event
is never recorded twice. An event the service refuses for good (4xx: an unlisted key, an
entry type or host the client may not write) is set aside as ``refused`` with the service's
reason and the rest go on.

A write counts only when proven (:mod:`attest.ledger.service.proving`): with the log's key,
the answer (200, or the 409 of a replay) must carry a signed checkpoint whose inclusion proof
for this event's leaf verifies and which is consistent with the last checkpoint this spool has
seen under that key (kept in the table ``seen``). An answer that does not prove the write, or
any answer when no log key is given ("submitted, not proven"), leaves the event pending, with
the reason in ``detail``; a later flush with the key re-sends it (same nonce, so the service
answers 409 with the stored entry) and proves it.

Default file: ``$ATTEST_LEDGER_SPOOL``, else ``ledger-spool.sqlite`` beside the default ledger.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from attest.certificate.signing import PrivateKey, PublicKey, key_id
from attest.errors import LedgerError
from attest.ledger.entries import LedgerEntry, entry_from_leaf_data, utc_now
from attest.ledger.log import default_ledger_path
from attest.ledger.service.client import LedgerClient, Refused, Unreachable
from attest.ledger.service.proving import Unproven, WriteClaim, prove_answer
from attest.ledger.service.submission import new_nonce, sign_submission

__all__ = ["SPOOL_ENV", "FlushResult", "Spool", "default_spool_path"]

SPOOL_ENV = "ATTEST_LEDGER_SPOOL"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY AUTOINCREMENT, url TEXT NOT NULL,"
    " client TEXT NOT NULL, nonce TEXT NOT NULL UNIQUE, leaf BLOB NOT NULL,"
    " state TEXT NOT NULL DEFAULT 'pending', log_index INTEGER, detail TEXT,"
    " queued_at TEXT NOT NULL)"
)
_SEEN = "CREATE TABLE IF NOT EXISTS seen (log_key TEXT PRIMARY KEY, note TEXT NOT NULL)"
NO_LOG_KEY = "no log key was given to check the service's answer"


def default_spool_path() -> Path:
    """``$ATTEST_LEDGER_SPOOL``, else ``ledger-spool.sqlite`` beside the default ledger."""
    explicit = os.environ.get(SPOOL_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return default_ledger_path().with_name("ledger-spool.sqlite")


@dataclass
class FlushResult:
    """What one flush did: ``(seq, index)`` submitted and proven, ``unproven`` events
    ``(seq, reason)`` (sent, kept pending), still ``pending`` (a count), ``refused`` events
    ``(seq, reason)``, and why the queue stopped (``unreachable``) if it did."""

    submitted: list[tuple[int, int]] = field(default_factory=list)
    unproven: list[tuple[int, str]] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    pending: int = 0
    unreachable: str | None = None


class Spool:
    """The spool file (module docstring)."""

    def __init__(self, path: str | Path, *, transport: httpx.BaseTransport | None = None) -> None:
        self.path = Path(path)
        self.transport = transport  # tests: an httpx transport instead of the network
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(_SCHEMA)
            self._db.execute(_SEEN)
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

    def recorded(self, url: str) -> list[tuple[int, bytes]]:
        """``(index, leaf data)`` of the events sent to ``url`` (a trailing ``/`` or not) and
        proven, newest first: where the service recorded them."""
        base = url.rstrip("/")
        rows = self._db.execute(
            "SELECT log_index, leaf FROM events WHERE state = 'done' AND log_index IS NOT NULL"
            " AND url IN (?, ?) ORDER BY seq DESC",
            (base, base + "/"),
        ).fetchall()
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def _mark(self, seq: int, state: str, index: int | None, detail: str | None) -> None:
        self._db.execute(
            "UPDATE events SET state = ?, log_index = ?, detail = ? WHERE seq = ?",
            (state, index, detail, seq),
        )

    def seen(self, log_key: PublicKey, name: str | None) -> str | None:
        """The last checkpoint note this spool saw (and checked) under ``log_key``."""
        row = self._db.execute(
            "SELECT note FROM seen WHERE log_key = ?", (_log_key_label(log_key, name),)
        ).fetchone()
        return None if row is None else str(row[0])

    def _remember(self, log_key: PublicKey, name: str | None, note: str) -> None:
        self._db.execute(
            "INSERT INTO seen (log_key, note) VALUES (?, ?)"
            " ON CONFLICT (log_key) DO UPDATE SET note = excluded.note",
            (_log_key_label(log_key, name), note),
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
        ``client_name`` when given (``key`` signs them). An event leaves the queue only when
        its answer is proven under ``log_key``."""
        result = FlushResult()
        queue = self.pending(url, client_name)
        if not queue:
            return result
        with LedgerClient(url, transport=self.transport) as client:
            try:
                origin = self._origin(client, log_key, log_key_name)
                for seq, name, nonce, leaf in queue:
                    claim = WriteClaim(origin, name, key.public_key, nonce, leaf)
                    self._send(client, claim, seq, key, log_key, log_key_name, result)
            except Unreachable as exc:
                result.unreachable = exc.message
            except Unproven as exc:  # the log's own checkpoint does not verify: prove nothing
                result.unproven += [(seq, exc.message) for seq, *_ in queue]
        result.pending = len(self.pending(url, client_name))
        return result

    @staticmethod
    def _origin(client: LedgerClient, log_key: PublicKey | None, name: str | None) -> str:
        if log_key is None:
            return client.origin_unverified()
        try:
            return client.checkpoint(log_key, name)[0].origin
        except Unreachable:
            raise
        except LedgerError as exc:
            raise Unproven(
                f"the log's checkpoint does not verify under the log key: {exc}"
            ) from None

    def _send(
        self,
        client: LedgerClient,
        claim: WriteClaim,
        seq: int,
        key: PrivateKey,
        log_key: PublicKey | None,
        log_key_name: str | None,
        result: FlushResult,
    ) -> None:
        """Submit one event and prove the answer (the outcome goes into ``result``)."""
        entry = entry_from_leaf_data(claim.entry_data)
        body = sign_submission(
            entry, origin=claim.origin, client=claim.client, nonce=claim.nonce, key=key
        )
        answer: object
        try:
            answer = client.submit(body)
        except Refused as exc:
            if exc.status != 409 or exc.index is None:
                self._mark(seq, "refused", None, exc.message)
                result.refused.append((seq, exc.message))
                return
            answer = exc.body  # a replay of the stored entry: its answer must prove it too
        except Unreachable:
            raise
        except LedgerError as exc:  # an answer that is not JSON, or over the cap
            answer = exc.message
        try:
            if isinstance(answer, str):
                raise Unproven(answer)
            if log_key is None:
                raise Unproven(NO_LOG_KEY)
            seen = self.seen(log_key, log_key_name)
            proven = prove_answer(
                client, answer, claim, log_key=log_key, log_key_name=log_key_name, seen_note=seen
            )
        except Unproven as exc:
            self._mark(seq, "pending", None, exc.message)
            result.unproven.append((seq, exc.message))
            return
        self._remember(log_key, log_key_name, proven.latest_note)
        self._mark(seq, "done", proven.index, None)
        result.submitted.append((seq, proven.index))


def _log_key_label(log_key: PublicKey, name: str | None) -> str:
    return f"{key_id(log_key)} {name or ''}".strip()
