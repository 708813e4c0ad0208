"""The storage contract of the ledger (:class:`LedgerStorage`): what any backend, e.g. a
shared database serving a fleet, must guarantee. The embedded default is
:class:`attest.ledger.sqlite.SQLiteStorage`.

1. **Dense, append-only indexes.** Entries are numbered 0, 1, 2, ... with no gaps. A stored
   leaf, interior node or checkpoint is never changed or removed.
2. **Atomic, linearizable append.** :meth:`LedgerStorage.append` assigns the next index, stores
   the leaf data and its hash and every perfect subtree the leaf completes (the new tree head
   follows from them), all in one transaction, serialized against every other writer (in any
   process): two appends never get the same index and a crash never leaves half an append.
   When ``append`` returns, the entry is committed; the backend documents what a commit
   survives.
3. **O(log n) proofs.** :meth:`LedgerStorage.read_nodes` returns the hash of any perfect subtree
   ``(level, index)`` inside the tree, so proofs never walk the leaves.
4. **Snapshots.** Inside ``with storage.snapshot():`` reads see one committed prefix of the log,
   never an append in progress.
5. **Exclusive sections.** Inside ``with storage.exclusive():`` no other writer can append or
   store a checkpoint; checkpoint signing uses it so that checking consistency with the last
   signed checkpoint, signing and storing are one step. ``durable=True`` makes its commit
   survive power loss whatever the backend's default.
6. **No reuse of signed indexes.** An append refuses (:class:`~attest.errors.LedgerError`)
   when the stored size is below the largest size a stored checkpoint covers, counting both
   the checkpoint rows and the copy of the last signed note kept under the meta key
   :data:`LAST_CHECKPOINT_META` (written in the same transaction as its row): entries a
   signature covers were deleted, and appending would give their indexes to other entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from attest.ledger.merkle import NodeKey, frontier_push, leaf_hash

__all__ = [
    "LAST_CHECKPOINT_META",
    "AppendResult",
    "LedgerStorage",
    "StoredCheckpoint",
    "StoredLeaf",
    "TreeHead",
    "append_rows",
]

LAST_CHECKPOINT_META = "last_checkpoint"
"""Meta key holding the signed note of the latest checkpoint, stored with its row: deleting
checkpoint rows (with the entries they cover) leaves this signed record of the size behind."""


@dataclass(frozen=True)
class TreeHead:
    """A tree size and its RFC 6962 root hash."""

    size: int
    root: bytes


@dataclass(frozen=True)
class AppendResult:
    """What an append committed: the entry's index, its leaf hash and the new tree head."""

    index: int
    leaf_hash: bytes
    tree_size: int
    root: bytes


@dataclass(frozen=True)
class StoredLeaf:
    """One stored entry: its index, leaf data and leaf hash."""

    index: int
    data: bytes
    leaf_hash: bytes


@dataclass(frozen=True)
class StoredCheckpoint:
    """A signed checkpoint as stored: the signed note text and the tree head it commits to."""

    id: int
    size: int
    root: bytes
    origin: str
    note: str
    signed_at: str


class LedgerStorage(Protocol):
    """The storage contract of the module docstring (points 1-5)."""

    def append(self, data: bytes) -> AppendResult:
        """Append one entry's leaf data in one transaction; returns what was committed.
        Refuses when fewer entries are stored than a checkpoint covers (point 6)."""
        ...

    def append_many(self, datas: Sequence[bytes]) -> AppendResult:
        """Append several entries, consecutively, in one transaction; returns the last one's
        result (the first one's index is ``result.index - len(datas) + 1``)."""
        ...

    def tree_head(self) -> TreeHead:
        """The current (committed) tree size and root."""
        ...

    def leaf(self, index: int) -> StoredLeaf:
        """The stored entry at ``index``; :class:`LedgerError` when there is none."""
        ...

    def read_nodes(self, keys: Sequence[NodeKey]) -> list[bytes]:
        """Hashes of the perfect subtrees ``(level, index)``, in the order asked."""
        ...

    def iter_leaves(self, start: int = 0, stop: int | None = None) -> Iterator[StoredLeaf]:
        """Stored entries in index order, as stored (a verifier must not trust them)."""
        ...

    def iter_nodes(self) -> Iterator[tuple[int, int, bytes]]:
        """Stored interior nodes ``(level >= 1, index, hash)`` in the order appends made them."""
        ...

    def checkpoints(self) -> list[StoredCheckpoint]:
        """Every stored checkpoint, oldest first."""
        ...

    def add_checkpoint(self, size: int, root: bytes, origin: str, note: str, signed_at: str) -> int:
        """Store a signed checkpoint durably; returns its id."""
        ...

    def get_meta(self, key: str) -> str | None:
        """A ledger-wide setting (``log_id``, ``origin``, :data:`LAST_CHECKPOINT_META`)."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Set a ledger-wide setting."""
        ...

    def exclusive(self, *, durable: bool = False) -> AbstractContextManager[None]:
        """Context manager: a write transaction no other writer can interleave with;
        ``durable`` makes its commit survive power loss whatever the synchronous setting."""
        ...

    def snapshot(self) -> AbstractContextManager[None]:
        """Context manager: a read transaction; every read inside sees one committed state."""
        ...

    def close(self) -> None:
        """Release the storage."""
        ...


def append_rows(
    frontier: list[bytes], size: int, datas: Sequence[bytes], node_key: Callable[[int, int], int]
) -> tuple[list[tuple[int, bytes, bytes]], list[tuple[int, bytes]]]:
    """The rows an append of ``datas`` to a tree of ``size`` entries stores: ``(index, data,
    leaf hash)`` per entry and ``(node_key(level, index), hash)`` per perfect subtree of two or
    more leaves it completes. Pushes every leaf onto ``frontier`` (in place)."""
    leaf_rows: list[tuple[int, bytes, bytes]] = []
    node_rows: list[tuple[int, bytes]] = []
    for data in datas:
        lh = leaf_hash(data)
        completed = frontier_push(frontier, size, lh)
        size += 1
        for level, h in completed[1:]:
            node_rows.append((node_key(level, (size >> level) - 1), h))
        leaf_rows.append((size - 1, data, lh))
    return leaf_rows, node_rows
