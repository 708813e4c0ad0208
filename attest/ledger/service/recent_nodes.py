"""The Merkle nodes a cosigning round's consistency proof needs, kept in the service's memory.

Each round proves the checkpoint it sends to the witnesses consistent with the one they last
cosigned: a handful of perfect-subtree hashes, nearly all of entries sequenced since the last
round (the rest are the few large subtrees left of the old size, the same from round to
round). Reading them from PostgreSQL took a trip to a worker thread and two queries per round:
0.3-0.4 ms of CPU and 1.1 ms of wall time a round on the loaded bench machine, against 14 µs
from memory (docs/benchmarks.md, "The floor and where a write's CPU goes"). The sequencer hands over the leaf hashes and the nodes of every
batch once it is committed, a proof read from the database leaves its nodes here too, and a
round whose nodes are all here is proven on the event loop. A tree node never changes once
written (the tables are append-only), so a kept hash stays right; the witness verifies every
proof it is sent in any case. Bounded: the oldest kept hashes go first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import islice

from attest.ledger.merkle import NodeKey

__all__ = ["RecentNodes", "recording"]


class RecentNodes:
    """Up to ``limit`` node hashes by :data:`~attest.ledger.merkle.NodeKey` (level, index).
    Used from the event loop only (the sequencer adds after its commit returned)."""

    def __init__(self, limit: int = 1 << 15) -> None:
        self.limit = limit
        self._hashes: dict[NodeKey, bytes] = {}

    def __len__(self) -> int:
        return len(self._hashes)

    def add(self, nodes: Iterable[tuple[NodeKey, bytes]]) -> None:
        """Keep these hashes; past the limit, the oldest half is dropped (in one go, so a batch
        costs no walk of the whole table)."""
        hashes = self._hashes
        hashes.update(nodes)
        if len(hashes) > self.limit:
            for key in list(islice(hashes, len(hashes) - self.limit // 2)):  # oldest first
                del hashes[key]

    def read(self, keys: Sequence[NodeKey]) -> list[bytes]:
        """The hashes of ``keys``; :class:`KeyError` when one is not kept (a
        :data:`~attest.ledger.merkle.NodeReader`)."""
        hashes = self._hashes
        return [hashes[key] for key in keys]


def recording(
    made: list[NodeKey], node_key: Callable[[int, int], int]
) -> Callable[[int, int], int]:
    """``node_key`` (a database's key of a node) that also notes each node's (level, index) in
    ``made``: how :meth:`PostgresStorage.submit` learns the nodes a batch completed."""

    def key_of(level: int, index: int) -> int:
        made.append((level, index))
        return node_key(level, index)

    return key_of
