"""The ledger on PostgreSQL (psycopg 3), meeting the contract of :mod:`attest.ledger.storage`.

- Tables ``ledger_leaves(idx, data, leaf_hash)``, ``ledger_nodes(key, hash)`` (the same node
  key as the SQLite backend: ``((index + 1) << level) << 6 | level``), ``ledger_checkpoints``,
  ``ledger_submissions(client, nonce, idx, leaf_hash)`` (replay protection; ``leaf_hash``
  identifies the entry: the leaf hash of the bare entry), ``ledger_clients`` and ``ledger_meta``. The schema is created and migrated by the tool (``ledger_meta``
  ``schema_version``; each migration one transaction).
- **Append-only in the database.** Triggers refuse UPDATE, DELETE and TRUNCATE on the leaves,
  nodes, checkpoints and submissions, whoever connects; run the service as a role that does
  not own the tables (docs/ledger.md) so it cannot drop the triggers either.
- **One writer at a time.** Every write transaction first takes the transaction-level advisory
  lock :data:`WRITER_LOCK`, so appends from any number of processes get consecutive indexes;
  the tree size is read after the lock is held. A commit returns once PostgreSQL has flushed
  its WAL (``synchronous_commit`` on, the default): an acknowledged append survives the
  service and the database being killed.
- An append refuses when fewer entries are stored than a signed checkpoint covers (contract
  point 6), read from the checkpoint rows and the meta copy of the last signed note.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from attest.errors import LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError
from attest.ledger.merkle import NodeKey, frontier_root, leaf_hash, perfect_subtrees
from attest.ledger.service.batch import Submission, SubmitOutcome
from attest.ledger.service.pg_sql import (
    MIGRATIONS,
    SCHEMA_VERSION,
    SUBMIT_STATE,
    SUBMIT_WRITE,
    WRITER_LOCK,
)
from attest.ledger.service.recent_nodes import recording

# the same node key as the SQLite backend (one encoding, not two)
from attest.ledger.sqlite import _node_key as node_key
from attest.ledger.storage import (
    LAST_CHECKPOINT_META,
    AppendResult,
    StoredCheckpoint,
    StoredLeaf,
    TreeHead,
    append_rows,
)

__all__ = ["WRITER_LOCK", "DatabaseUnavailable", "PostgresStorage", "Submission", "SubmitOutcome"]

_LEVEL_MASK = (1 << 6) - 1


class DatabaseUnavailable(LedgerError):
    """PostgreSQL could not be reached or dropped the connection: retry later."""


def _unavailable(exc: BaseException) -> DatabaseUnavailable:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DatabaseUnavailable(
        f"the ledger database is unavailable ({first[:300]})",
        hint="nothing unacknowledged was appended; retry when PostgreSQL is back",
    )


class PostgresStorage:
    """A :class:`~attest.ledger.storage.LedgerStorage` on PostgreSQL (module docstring).

    One connection; use one instance per thread. A dropped connection is reopened on the
    next call (the failed call raises :class:`DatabaseUnavailable`).
    """

    def __init__(self, dsn: str, *, create: bool = False, connect_timeout_s: int = 5) -> None:
        self.dsn = dsn
        self._timeout = connect_timeout_s
        self._db: psycopg.Connection[Any] | None = None
        self._in_tx = False
        self._cached_frontier: tuple[int, list[bytes]] | None = None
        self.last_nodes: list[tuple[NodeKey, bytes]] = []  # the last submit's, once it returned
        self._connect()
        try:
            self._migrate(create)
        except BaseException:
            self.close()
            raise

    # -- connection and schema -----------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        if self._db is not None and not self._db.closed and not self._db.broken:
            return self._db
        try:
            self._db = psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=self._timeout, application_name="attest"
            )
        except psycopg.Error as exc:
            raise _unavailable(exc) from None
        self._cached_frontier = None
        return self._db

    def _migrate(self, create: bool) -> None:
        with self._tx(lock=True) as db:
            exists = db.execute("SELECT to_regclass('ledger_meta') IS NOT NULL").fetchone()
            version = 0
            if exists and exists[0]:
                row = db.execute(
                    "SELECT value FROM ledger_meta WHERE key = 'schema_version'"
                ).fetchone()
                version = int(row[0]) if row else 0
            elif not create:
                raise LedgerError(
                    "the PostgreSQL database holds no gradient-attest ledger",
                    hint="start attest ledger serve once to create it",
                )
            if version > SCHEMA_VERSION:
                raise LedgerError(
                    f"the ledger database has schema version {version}; this gradient-attest "
                    f"knows up to {SCHEMA_VERSION}",
                    hint="upgrade gradient-attest",
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target]:
                    db.execute(statement)
            if version == 0:
                db.execute(
                    "INSERT INTO ledger_meta VALUES ('log_id', md5(random()::text || clock_timestamp()::text))"
                )
            if version < SCHEMA_VERSION:
                db.execute(
                    "INSERT INTO ledger_meta VALUES ('schema_version', %s) ON CONFLICT (key)"
                    " DO UPDATE SET value = excluded.value",
                    (str(SCHEMA_VERSION),),
                )

    @contextmanager
    def _tx(
        self, *, lock: bool = False, snapshot: bool = False
    ) -> Iterator[psycopg.Connection[Any]]:
        """A transaction (a no-op inside another one); ``lock`` takes the writer lock first.
        With neither ``lock`` nor ``snapshot`` outside a transaction, each statement commits
        on its own (autocommit): a read of append-only rows needs no BEGIN/COMMIT round trips."""
        if self._in_tx:
            yield self._connect()
            return
        db = self._connect()
        try:
            if not (lock or snapshot):
                yield db
                return
            with db.transaction():
                self._in_tx = True
                try:
                    if snapshot:
                        db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    if lock:
                        db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
                    yield db
                finally:
                    self._in_tx = False
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            self._cached_frontier = None
            raise _unavailable(exc) from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise LedgerError(f"the ledger database refused a write: {exc}") from None
        except psycopg.IntegrityError as exc:
            self._cached_frontier = None
            raise LedgerError(
                f"a stored row is in the way of an append ({str(exc).splitlines()[0]})",
                hint="the database was altered; run attest ledger verify URL",
            ) from None

    @contextmanager
    def exclusive(self, *, durable: bool = False) -> Iterator[None]:
        """See :class:`LedgerStorage`: a transaction holding the writer lock (every commit is
        durable here: ``synchronous_commit`` stays on)."""
        if self._in_tx:
            raise LedgerError("nested exclusive section on one ledger connection")
        with self._tx(lock=True):
            yield

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """See :class:`LedgerStorage`: a REPEATABLE READ transaction (reentrant)."""
        with self._tx(snapshot=not self._in_tx):
            yield

    # -- writes --------------------------------------------------------------------------------

    def _size(self, db: psycopg.Connection[Any]) -> int:
        row = db.execute("SELECT max(idx) FROM ledger_leaves").fetchone()
        return 0 if row is None or row[0] is None else int(row[0]) + 1

    def _frontier(self, db: psycopg.Connection[Any]) -> tuple[int, list[bytes]]:
        size = self._size(db)
        return size, self._frontier_of(size)

    def _frontier_of(self, size: int) -> list[bytes]:
        """The perfect subtree hashes of the tree of ``size`` entries (cached per size)."""
        if self._cached_frontier is None or self._cached_frontier[0] != size:
            hashes = self.read_nodes(perfect_subtrees(0, size)) if size else []
            self._cached_frontier = (size, hashes)
        return list(self._cached_frontier[1])

    @staticmethod
    def _floor_of(checkpoint_rows_max: int, note: str | None) -> int:
        floor = checkpoint_rows_max
        if note:
            try:
                floor = max(floor, Checkpoint.parse_body(note.rpartition("\n\n")[0] + "\n").size)
            except CheckpointError as exc:
                raise LedgerError(
                    f"the meta copy of the last signed checkpoint is malformed ({exc.message}):"
                    " the database was altered",
                    hint="restore the database from a backup",
                ) from None
        return floor

    def signed_floor(self) -> int:
        """The largest size a stored checkpoint row or the meta copy of the last note covers."""
        with self._tx() as db:
            row = db.execute("SELECT coalesce(max(size), 0) FROM ledger_checkpoints").fetchone()
            note = self.get_meta(LAST_CHECKPOINT_META)
        return self._floor_of(int(row[0]) if row else 0, note)

    @staticmethod
    def _check_floor(size: int, floor: int) -> None:
        if size < floor:
            raise LedgerError(
                f"refusing to append: a signed checkpoint covers {floor} entries but only {size}"
                f" are stored, so entries were deleted; appending would reuse index {size}",
                hint="restore the database from a backup; run attest ledger verify URL",
            )

    def _append_locked(self, db: psycopg.Connection[Any], datas: Sequence[bytes]) -> AppendResult:
        size, frontier = self._frontier(db)
        self._check_floor(size, self.signed_floor())
        leaf_rows, node_rows = append_rows(frontier, size, datas, node_key)
        size += len(datas)
        with db.cursor() as cur:
            with cur.copy("COPY ledger_leaves (idx, data, leaf_hash) FROM STDIN") as copy:
                for leaf_row in leaf_rows:
                    copy.write_row(leaf_row)
            if node_rows:
                with cur.copy("COPY ledger_nodes (key, hash) FROM STDIN") as copy:
                    for node_row in node_rows:
                        copy.write_row(node_row)
        self._cached_frontier = (size, list(frontier))
        return AppendResult(size - 1, leaf_rows[-1][2], size, frontier_root(frontier))

    def append(self, data: bytes) -> AppendResult:
        """See :class:`LedgerStorage`."""
        return self.append_many([data])

    def append_many(self, datas: Sequence[bytes]) -> AppendResult:
        """See :class:`LedgerStorage`: one transaction under the writer lock."""
        if not datas:
            raise LedgerError("nothing to append")
        try:
            with self._tx(lock=True) as db:
                return self._append_locked(db, datas)
        except BaseException:
            self._cached_frontier = None
            raise

    def submit(
        self, batch: Sequence[Submission], sign: Callable[[int, bytes], str]
    ) -> tuple[list[SubmitOutcome], TreeHead, str]:
        """Append a batch of client submissions in one transaction: a ``(client, nonce)`` seen
        before (stored, or earlier in the batch) is a replay and appends nothing; the rest get
        consecutive indexes. ``sign(size, root)`` signs the new tree head; its note is stored
        in meta in the same transaction. Returns the outcomes, the new head and the note;
        ``last_nodes`` then holds the leaf hashes and tree nodes it stored (none for a batch of
        replays), for the service's :class:`~attest.ledger.service.recent_nodes.RecentNodes`.

        Five round trips whatever the batch size: BEGIN, the writer lock, one statement reading
        the stored nonces among the batch's, the tree size and the signed floor, one statement
        inserting the leaves, the nodes they complete, the nonces and the note, and COMMIT."""
        self.last_nodes = []
        try:
            with self._tx(lock=True) as db:
                state = db.execute(SUBMIT_STATE, self._state_params(batch)).fetchone()
                assert state is not None  # a SELECT of scalar subqueries returns one row
                size = 0 if state[0] is None else int(state[0]) + 1
                floor = self._floor_of(int(state[1]), state[2])
                seen: dict[tuple[str, str], tuple[int, bytes]] = {
                    (str(c), str(n)): (int(i), bytes.fromhex(h)) for c, n, i, h in state[3] or []
                }
                fresh: list[Submission] = []
                hashes: list[bytes] = []
                ids: list[bytes] = []
                outcomes: list[SubmitOutcome] = []
                for item in batch:
                    lh = leaf_hash(item.data)
                    same = item.entry_hash or lh
                    prior = seen.get((item.client, item.nonce))
                    if prior is not None:
                        outcomes.append(
                            SubmitOutcome(prior[0] if prior[1] == same else None, lh, True)
                        )
                        continue
                    seen[(item.client, item.nonce)] = (size + len(fresh), same)
                    outcomes.append(SubmitOutcome(size + len(fresh), lh, False))
                    fresh.append(item)
                    hashes.append(lh)
                    ids.append(same)
                if not fresh:
                    head = TreeHead(size, frontier_root(self._frontier_of(size)))
                    return outcomes, head, self.get_meta(LAST_CHECKPOINT_META) or ""
                self._check_floor(size, floor)
                frontier = self._frontier_of(size)
                made: list[NodeKey] = []
                leaf_rows, node_rows = append_rows(
                    frontier, size, [s.data for s in fresh], recording(made, node_key)
                )
                head = TreeHead(size + len(fresh), frontier_root(frontier))
                note = sign(head.size, head.root)
                indexes = [row[0] for row in leaf_rows]
                db.execute(
                    SUBMIT_WRITE,
                    (
                        indexes,
                        [row[1] for row in leaf_rows],
                        hashes,
                        [row[0] for row in node_rows],
                        [row[1] for row in node_rows],
                        [s.client for s in fresh],
                        [s.nonce for s in fresh],
                        indexes,
                        ids,
                        LAST_CHECKPOINT_META,
                        note,
                    ),
                )
                self._cached_frontier = (head.size, list(frontier))
                self.last_nodes = [((0, i), h) for i, _, h in leaf_rows]
                self.last_nodes += zip(made, (h for _, h in node_rows), strict=True)
                return outcomes, head, note
        except BaseException:
            self._cached_frontier = None
            raise

    @staticmethod
    def _state_params(batch: Sequence[Submission]) -> dict[str, Any]:
        return {
            "clients": [s.client for s in batch],
            "nonces": [s.nonce for s in batch],
            "meta": LAST_CHECKPOINT_META,
        }

    def add_checkpoint(self, size: int, root: bytes, origin: str, note: str, signed_at: str) -> int:
        """See :class:`LedgerStorage`."""
        with self._tx(lock=True) as db:
            row = db.execute(
                "INSERT INTO ledger_checkpoints (size, root, origin, note, signed_at)"
                " VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (size, root, origin, note, signed_at),
            ).fetchone()
        if row is None:  # pragma: no cover - INSERT ... RETURNING always returns the row
            raise LedgerError("PostgreSQL did not return the new checkpoint's id")
        return int(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """See :class:`LedgerStorage`."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO ledger_meta (key, value) VALUES (%s, %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- reads ---------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """See :class:`LedgerStorage`."""
        with self._tx() as db:
            row = db.execute("SELECT value FROM ledger_meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def tree_head(self) -> TreeHead:
        """See :class:`LedgerStorage`."""
        with self._tx(snapshot=not self._in_tx) as db:
            size, frontier = self._frontier(db)
        return TreeHead(size, frontier_root(frontier))

    def leaf(self, index: int) -> StoredLeaf:
        """See :class:`LedgerStorage`."""
        with self._tx() as db:
            row = db.execute(
                "SELECT idx, data, leaf_hash FROM ledger_leaves WHERE idx = %s", (index,)
            ).fetchone()
        if row is None:
            raise LedgerError(f"the ledger has no entry {index}")
        return StoredLeaf(int(row[0]), bytes(row[1]), bytes(row[2]))

    def read_nodes(self, keys: Sequence[NodeKey]) -> list[bytes]:
        """See :class:`LedgerStorage`: one query for the leaves asked, one for the nodes."""
        leaf_indexes = [index for level, index in keys if level == 0]
        node_keys = [node_key(level, index) for level, index in keys if level > 0]
        found: dict[NodeKey, bytes] = {}
        with self._tx() as db:
            if leaf_indexes:
                for idx, h in db.execute(
                    "SELECT idx, leaf_hash FROM ledger_leaves WHERE idx = ANY(%s)", (leaf_indexes,)
                ):
                    found[(0, int(idx))] = bytes(h)
            if node_keys:
                for key, h in db.execute(
                    "SELECT key, hash FROM ledger_nodes WHERE key = ANY(%s)", (node_keys,)
                ):
                    level = int(key) & _LEVEL_MASK
                    found[(level, (int(key) >> 6 >> level) - 1)] = bytes(h)
        missing = [key for key in keys if key not in found]
        if missing:
            level, index = missing[0]
            raise LedgerError(
                f"the stored hash of entries [{index << level}, {(index + 1) << level}) is missing",
                hint="the database was altered; run attest ledger verify URL",
            )
        return [found[key] for key in keys]

    def iter_leaves(self, start: int = 0, stop: int | None = None) -> Iterator[StoredLeaf]:
        """See :class:`LedgerStorage`; read in pages of 4096 rows."""
        at = start
        while stop is None or at < stop:
            end = at + 4096 if stop is None else min(stop, at + 4096)
            with self._tx() as db:
                rows = db.execute(
                    "SELECT idx, data, leaf_hash FROM ledger_leaves WHERE idx >= %s AND idx < %s"
                    " ORDER BY idx",
                    (at, end),
                ).fetchall()
            if not rows and (stop is None or self._size(self._connect()) <= at):
                return
            for idx, data, lh in rows:
                yield StoredLeaf(int(idx), bytes(data), bytes(lh))
            at = end

    def iter_nodes(self) -> Iterator[tuple[int, int, bytes]]:
        """See :class:`LedgerStorage`; read in pages of 4096 rows."""
        last = -1
        while True:
            with self._tx() as db:
                rows = db.execute(
                    "SELECT key, hash FROM ledger_nodes WHERE key > %s ORDER BY key LIMIT 4096",
                    (last,),
                ).fetchall()
            if not rows:
                return
            for key, h in rows:
                level = int(key) & _LEVEL_MASK
                yield level, (int(key) >> 6 >> level) - 1, bytes(h)
            last = int(rows[-1][0])

    def checkpoints(self) -> list[StoredCheckpoint]:
        """See :class:`LedgerStorage`."""
        with self._tx() as db:
            rows = db.execute(
                "SELECT id, size, root, origin, note, signed_at FROM ledger_checkpoints ORDER BY id"
            ).fetchall()
        return [
            StoredCheckpoint(int(r[0]), int(r[1]), bytes(r[2]), str(r[3]), str(r[4]), str(r[5]))
            for r in rows
        ]

    def ping(self) -> None:
        """Raise :class:`DatabaseUnavailable` unless the database answers."""
        with self._tx() as db:
            db.execute("SELECT 1")

    def close(self) -> None:
        """See :class:`LedgerStorage`."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> PostgresStorage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
