"""The embedded ledger backend: one SQLite file, meeting the contract of
:mod:`attest.ledger.storage`.

- WAL journaling; each append is one ``BEGIN IMMEDIATE`` transaction (the write lock is taken
  before the tree size is read) with a busy timeout, so several writer processes queue instead
  of failing. Writers also queue on an OS lock (see :meth:`SQLiteStorage._writer_lock`).
- Tables: ``leaves(idx, data, leaf_hash)``; ``nodes(key, hash)`` holding every perfect subtree
  of two or more leaves, ``key = (end << 6) | level`` (creation order, one integer-key lookup);
  ``checkpoints``; ``meta``. The tree size is ``max(idx) + 1``; its frontier (the perfect
  subtrees along the right edge) is read from ``nodes`` and cached per connection, checked
  against the size inside every write transaction. No tree-head row is rewritten per append:
  that row cost a second page write per commit, about a third of an append.
- Synchronous setting (``ATTEST_LEDGER_SYNCHRONOUS``): with ``normal`` (the default) a
  committed append survives the process being killed (SIGKILL) at any point and the database
  is never corrupted, but a power loss or OS crash may lose the last appends; ``full`` also
  survives power loss, at one fsync per append. Storing a checkpoint is always done with
  ``full``, so a signed checkpoint never outlives the entries it covers.
- An append refuses when fewer entries are stored than a signed checkpoint covers (contract
  point 6); the signed size is re-read only when another connection committed since.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from attest.errors import InputError, LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError
from attest.ledger.merkle import (
    NodeKey,
    frontier_root,
    perfect_subtrees,
)
from attest.ledger.storage import (
    LAST_CHECKPOINT_META,
    AppendResult,
    StoredCheckpoint,
    StoredLeaf,
    TreeHead,
    append_rows,
)

__all__ = ["SYNCHRONOUS_ENV", "SQLiteStorage", "Synchronous"]

SYNCHRONOUS_ENV = "ATTEST_LEDGER_SYNCHRONOUS"
SCHEMA_VERSION = 1
Synchronous = Literal["normal", "full", "extra"]
_LEVEL_BITS = 6  # node key = (end << 6) | level, end = first leaf index after the subtree


def _blob(value: object) -> bytes:
    """A stored BLOB as bytes. SQLite columns are dynamically typed, so an altered row may hold
    text or a number; those become bytes that no longer match any hash (and are reported)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return repr(value).encode("ascii")


def _integer(value: object, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise LedgerError(
        f"the ledger's {what} is not an integer ({value!r}): the database was altered"
    )


def _node_key(level: int, index: int) -> int:
    return ((index + 1) << level) << _LEVEL_BITS | level


def _synchronous_from_env() -> Synchronous:
    value = os.environ.get(SYNCHRONOUS_ENV, "normal").strip().lower()
    if value not in ("normal", "full", "extra"):
        raise InputError(
            f"{SYNCHRONOUS_ENV}={value!r} is not a synchronous setting",
            hint="use normal (survives process crashes) or full/extra (also power loss)",
        )
    return value  # type: ignore[return-value]


_TABLES = ("meta", "leaves", "nodes", "checkpoints")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS leaves (idx INTEGER PRIMARY KEY, data BLOB NOT NULL,"
    " leaf_hash BLOB NOT NULL)",
    # key = (end << 6) | level: creation order, and one integer primary key lookup per node.
    "CREATE TABLE IF NOT EXISTS nodes (key INTEGER PRIMARY KEY, hash BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS checkpoints (id INTEGER PRIMARY KEY, size INTEGER NOT NULL,"
    " root BLOB NOT NULL, origin TEXT NOT NULL, note TEXT NOT NULL, signed_at TEXT NOT NULL)",
)


class SQLiteStorage:
    """The embedded default backend: one SQLite file in WAL mode (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = False,
        synchronous: Synchronous | None = None,
        busy_timeout_s: float = 60.0,
    ) -> None:
        self.path = Path(path)
        self.synchronous: Synchronous = synchronous or _synchronous_from_env()
        self._in_exclusive = False
        self._lock_fd: int | None = None
        self._cached_frontier: tuple[int, list[bytes]] | None = None
        # ((size, data_version) it was read at, largest signed size, the record that signed it)
        self._cached_floor: tuple[tuple[int, int], int, str] | None = None
        if not self.path.exists():
            if not create:
                raise LedgerError(
                    f"no ledger at {self.path}",
                    hint="append an entry first (attest ledger append CERT) or pass --ledger PATH",
                )
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerError(
                    f"cannot create the folder of ledger {self.path}: {exc.strerror}"
                ) from None
        elif self.path.is_dir():
            raise LedgerError(f"ledger {self.path} is a directory, expected an SQLite file")
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {self.path}: {exc}") from None
        try:
            self._db.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
            self._set_wal()
            self._lock_fd = self._open_writer_lock()
            self._initialize(create)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise LedgerError(
                f"{self.path} is not a usable ledger database: {exc}",
                hint="check --ledger points at a gradient-attest ledger (an SQLite file)",
            ) from None
        except BaseException:
            self.close()
            raise

    # -- setup ------------------------------------------------------------------------------

    def _set_wal(self) -> None:
        # journal_mode=WAL persists in the file; switching needs a moment without readers,
        # so retry briefly when another process is creating the same ledger.
        for attempt in range(200):
            try:
                mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 199:
                    raise
                time.sleep(0.01)
                continue
            if str(mode).lower() != "wal":
                raise LedgerError(f"ledger {self.path}: SQLite refused WAL mode (got {mode})")
            return

    def _initialize(self, create: bool) -> None:
        tables = {
            row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if set(_TABLES) <= tables:
            version = self.get_meta("schema_version")
            if version != str(SCHEMA_VERSION):
                raise LedgerError(
                    f"ledger {self.path} has schema version {version}, expected {SCHEMA_VERSION}"
                )
            return
        if tables - set(_TABLES) or (tables and not create):
            raise LedgerError(
                f"{self.path} is an SQLite database but not a gradient-attest ledger",
                hint="point --ledger at a new file or at an existing ledger",
            )
        if not create:
            raise LedgerError(
                f"ledger {self.path} is empty (no tables)", hint="append an entry to create it"
            )
        with self._transaction():
            for statement in _SCHEMA:
                self._db.execute(statement)
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?), ('log_id', ?)",
                (str(SCHEMA_VERSION), uuid.uuid4().hex),
            )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (the write lock is held from the start), or a no-op
        inside :meth:`exclusive`."""
        if self._in_exclusive:
            yield
            return
        with self._writer_lock():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def _writer_lock(self) -> Iterator[None]:
        """Queue writers on an OS lock (``flock`` on ``<ledger>-writer.lock``) before SQLite's.

        Correctness comes from ``BEGIN IMMEDIATE`` alone; this is for throughput: SQLite's
        busy handler polls with sleeps of 1 ms and more, so contending writer processes idle,
        whereas a blocked ``flock`` wakes as soon as the holder releases it. The kernel drops
        the lock when its process dies (SIGKILL included). Where ``fcntl`` is missing
        (Windows) or the lock file cannot be made, writers fall back to the busy timeout.
        """
        if self._lock_fd is None:
            yield
            return
        import fcntl

        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _open_writer_lock(self) -> int | None:
        try:
            import fcntl  # noqa: F401  (POSIX only)
        except ImportError:  # pragma: no cover - Windows
            return None
        try:
            return os.open(f"{self.path}-writer.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None

    @contextmanager
    def exclusive(self, *, durable: bool = False) -> Iterator[None]:
        """A write transaction spanning several calls; nothing else can write meanwhile.
        ``durable`` commits it with ``synchronous=FULL`` (used for checkpoints)."""
        if self._in_exclusive:
            raise LedgerError("nested exclusive section on one ledger connection")
        if durable:
            self._db.execute("PRAGMA synchronous=FULL")
        try:
            with self._transaction():
                self._in_exclusive = True
                try:
                    yield
                finally:
                    self._in_exclusive = False
        except sqlite3.OperationalError as exc:
            raise self._busy_error(exc) from None
        finally:
            if durable:
                self._db.execute(f"PRAGMA synchronous={self.synchronous.upper()}")

    def _busy_error(self, exc: sqlite3.Error) -> LedgerError:
        return LedgerError(
            f"ledger {self.path} could not be written: {exc}",
            hint="another process may hold it for longer than the busy timeout; retry",
        )

    # -- writes -----------------------------------------------------------------------------

    def _size(self) -> int:
        top = self._db.execute("SELECT max(idx) FROM leaves").fetchone()[0]
        return 0 if top is None else _integer(top, "last entry index") + 1

    def _frontier(self) -> tuple[int, list[bytes]]:
        """The committed size and a copy of its frontier (cached; re-read when the size moved)."""
        size = self._size()
        if self._cached_frontier is None or self._cached_frontier[0] != size:
            hashes = self.read_nodes(perfect_subtrees(0, size)) if size else []
            self._cached_frontier = (size, hashes)
        return size, list(self._cached_frontier[1])

    def _check_floor(self, size: int) -> None:
        """Refuse to append at ``size`` below the largest signed size (cached per data_version)."""
        key = (size, self._db.execute("PRAGMA data_version").fetchone()[0])
        if self._cached_floor is None or self._cached_floor[0] != key:
            row = self._db.execute(
                "SELECT id, size FROM checkpoints ORDER BY size DESC, id DESC LIMIT 1"
            ).fetchone() or (0, 0)
            floor, label = _integer(row[1], "checkpoint size"), f"checkpoint {row[0]}"
            note = self.get_meta(LAST_CHECKPOINT_META)
            try:
                recorded = (
                    Checkpoint.parse_body(note.rpartition("\n\n")[0] + "\n") if note else None
                )
            except CheckpointError as exc:
                raise LedgerError(
                    f"ledger {self.path}: the meta copy of the last signed checkpoint is "
                    f"malformed ({exc.message}): the database was altered",
                    hint="run attest ledger verify; restore the ledger from a backup",
                ) from None
            if recorded is not None and recorded.size > floor:
                floor = recorded.size
                label = "the last signed checkpoint (its copy in the meta table)"
            self._cached_floor = (key, floor, label)
        _, floor, label = self._cached_floor
        if size < floor:
            raise LedgerError(
                f"refusing to append to ledger {self.path}: {label} covers {floor} entries but "
                f"only {size} are stored, so entries were deleted; appending would give index "
                f"{size}, which that signed checkpoint covers, to another entry",
                hint="run attest ledger verify; restore the ledger and its -wal from a backup",
            )

    def append(self, data: bytes) -> AppendResult:
        """See :class:`LedgerStorage`."""
        return self.append_many([data])

    def append_many(self, datas: Sequence[bytes]) -> AppendResult:
        """See :class:`LedgerStorage`; a bulk import is one transaction."""
        if not datas:
            raise LedgerError("nothing to append")
        try:
            with self._transaction():
                size, frontier = self._frontier()
                self._check_floor(size)
                leaf_rows, node_rows = append_rows(frontier, size, datas, _node_key)
                size += len(datas)
                root = frontier_root(frontier)
                self._db.executemany(
                    "INSERT INTO leaves (idx, data, leaf_hash) VALUES (?, ?, ?)", leaf_rows
                )
                if node_rows:
                    self._db.executemany("INSERT INTO nodes (key, hash) VALUES (?, ?)", node_rows)
                self._cached_frontier = (size, frontier)
                if self._cached_floor is not None:  # our own commit leaves data_version alone
                    self._cached_floor = ((size, self._cached_floor[0][1]), *self._cached_floor[1:])
        except BaseException as exc:
            self._cached_frontier = self._cached_floor = None
            if isinstance(exc, sqlite3.IntegrityError):
                raise LedgerError(
                    f"ledger {self.path}: a stored hash is in the way of entry {size - 1} ({exc})",
                    hint="the database was altered; run attest ledger verify",
                ) from None
            if isinstance(exc, sqlite3.OperationalError):
                raise self._busy_error(exc) from None
            raise
        return AppendResult(size - 1, leaf_rows[-1][2], size, root)

    def add_checkpoint(self, size: int, root: bytes, origin: str, note: str, signed_at: str) -> int:
        """See :class:`LedgerStorage`. Outside :meth:`exclusive` it commits durably
        (``synchronous=FULL``); inside, the exclusive section's ``durable`` flag decides."""
        if self._in_exclusive:
            return self._insert_checkpoint(size, root, origin, note, signed_at)
        with self.exclusive(durable=True):
            return self._insert_checkpoint(size, root, origin, note, signed_at)

    def _insert_checkpoint(
        self, size: int, root: bytes, origin: str, note: str, signed_at: str
    ) -> int:
        cursor = self._db.execute(
            "INSERT INTO checkpoints (size, root, origin, note, signed_at) VALUES (?, ?, ?, ?, ?)",
            (size, root, origin, note, signed_at),
        )
        self._cached_floor = None
        new_id = cursor.lastrowid
        if new_id is None:  # pragma: no cover - sqlite always sets it for an INSERT
            raise LedgerError("SQLite did not return the new checkpoint's id")
        return new_id

    def set_meta(self, key: str, value: str) -> None:
        """See :class:`LedgerStorage`."""
        with self._transaction():
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- reads ------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """See :class:`LedgerStorage`."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def tree_head(self) -> TreeHead:
        """See :class:`LedgerStorage`: the size and the root folded from stored nodes."""
        with self.snapshot():
            size, frontier = self._frontier()
        return TreeHead(size, frontier_root(frontier))

    def leaf(self, index: int) -> StoredLeaf:
        """See :class:`LedgerStorage`."""
        row = self._db.execute(
            "SELECT idx, data, leaf_hash FROM leaves WHERE idx = ?", (index,)
        ).fetchone()
        if row is None:
            raise LedgerError(
                f"ledger {self.path} has no entry {index} (it holds {self.tree_head().size})",
                hint="entries are numbered from 0",
            )
        return StoredLeaf(int(row[0]), _blob(row[1]), _blob(row[2]))

    def read_nodes(self, keys: Sequence[NodeKey]) -> list[bytes]:
        """See :class:`LedgerStorage`: one query for the leaves asked, one for the nodes."""
        leaf_indexes = [index for level, index in keys if level == 0]
        node_keys = [_node_key(level, index) for level, index in keys if level > 0]
        found: dict[NodeKey, bytes] = {}
        for start in range(0, len(leaf_indexes), 500):
            chunk = leaf_indexes[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for idx, h in self._db.execute(
                f"SELECT idx, leaf_hash FROM leaves WHERE idx IN ({marks})", chunk
            ):
                found[(0, int(idx))] = _blob(h)
        for start in range(0, len(node_keys), 500):
            chunk = node_keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, h in self._db.execute(
                f"SELECT key, hash FROM nodes WHERE key IN ({marks})", chunk
            ):
                level = int(key) & ((1 << _LEVEL_BITS) - 1)
                found[(level, (int(key) >> _LEVEL_BITS >> level) - 1)] = _blob(h)
        missing = [key for key in keys if key not in found]
        if missing:
            level, index = missing[0]
            raise LedgerError(
                f"ledger {self.path}: the stored hash of entries [{index << level}, "
                f"{(index + 1) << level}) is missing",
                hint="the database was altered; run attest ledger verify",
            )
        return [found[key] for key in keys]

    def iter_leaves(self, start: int = 0, stop: int | None = None) -> Iterator[StoredLeaf]:
        """See :class:`LedgerStorage`."""
        query = "SELECT idx, data, leaf_hash FROM leaves WHERE idx >= ?"
        params: tuple[int, ...] = (start,)
        if stop is not None:
            query += " AND idx < ?"
            params = (start, stop)
        for idx, data, lh in self._db.execute(query + " ORDER BY idx", params):
            yield StoredLeaf(int(idx), _blob(data), _blob(lh))

    def iter_nodes(self) -> Iterator[tuple[int, int, bytes]]:
        """See :class:`LedgerStorage`."""
        mask = (1 << _LEVEL_BITS) - 1
        for key, h in self._db.execute("SELECT key, hash FROM nodes ORDER BY key"):
            level = int(key) & mask
            yield level, (int(key) >> _LEVEL_BITS >> level) - 1, _blob(h)

    def checkpoints(self) -> list[StoredCheckpoint]:
        """See :class:`LedgerStorage`."""
        rows = self._db.execute(
            "SELECT id, size, root, origin, note, signed_at FROM checkpoints ORDER BY id"
        ).fetchall()
        return [
            StoredCheckpoint(
                int(r[0]),
                _integer(r[1], "checkpoint size"),
                _blob(r[2]),
                str(r[3]),
                str(r[4]),
                str(r[5]),
            )
            for r in rows
        ]

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction: every read inside sees the same committed state (reentrant)."""
        if self._in_exclusive or self._db.in_transaction:
            yield
            return
        self._db.execute("BEGIN DEFERRED")
        try:
            yield
        finally:
            self._db.execute("COMMIT")

    def close(self) -> None:
        """See :class:`LedgerStorage`."""
        self._db.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> SQLiteStorage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
