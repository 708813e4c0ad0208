"""The service's single writer: one asyncio task turns queued submissions into batches, each
appended in one PostgreSQL transaction (under the advisory writer lock) together with the
signed checkpoint of the tree it produces, and answers every request of the batch once the
commit returned. A second task, every interval, stores a checkpoint row of the grown tree
once the entries it adds are re-hashed from their data (see :meth:`Sequencer._refresh`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import anyio.to_thread

from attest.certificate.signing import PrivateKey
from attest.errors import AttestError, LedgerError
from attest.ledger.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from attest.ledger.entries import utc_now
from attest.ledger.log import Ledger
from attest.ledger.merkle import (
    NodeKey,
    frontier_push,
    frontier_root,
    leaf_hash,
    perfect_subtrees,
)
from attest.ledger.service.metrics import ServiceMetrics
from attest.ledger.service.postgres import PostgresStorage, Submission, SubmitOutcome
from attest.ledger.storage import LAST_CHECKPOINT_META, TreeHead

__all__ = ["Sequencer", "ServedCheckpoint"]

LOG = logging.getLogger("attest.ledger.service")


@dataclass(frozen=True)
class ServedCheckpoint:
    """The checkpoint the service serves: its signed note, tree head, and when it was made."""

    note: str
    head: TreeHead
    at: float = field(default_factory=time.time)

    @functools.cached_property
    def note_json(self) -> bytes:
        """The note as a JSON string (UTF-8), encoded once for every answer that carries it."""
        return json.dumps(self.note, ensure_ascii=False).encode("utf-8")


@dataclass
class _Pending:
    submission: Submission
    future: asyncio.Future[tuple[SubmitOutcome, ServedCheckpoint]]
    queued_at: float


class Sequencer:
    """Batches submissions into appends; holds the checkpoint being served."""

    def __init__(
        self,
        dsn: str,
        key: PrivateKey,
        origin: str,
        metrics: ServiceMetrics,
        *,
        max_batch: int = 512,
        checkpoint_interval_s: float = 10.0,
    ) -> None:
        self.dsn = dsn
        self.key = key
        self.origin = origin
        self.metrics = metrics
        self.max_batch = max_batch
        self.interval = checkpoint_interval_s
        self.writer = PostgresStorage(dsn, create=True)
        self._row: tuple[int, bytes] = (0, b"")  # the latest checkpoint row: size, root
        self.served = self._start_checkpoint()
        self._queue: asyncio.Queue[_Pending] | None = None
        # the writer's connection, used from one thread of its own: a batch's hand-off through
        # asyncio's executor costs about half of anyio's (docs/benchmarks.md, ledger service)
        self._thread: ThreadPoolExecutor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # told of every newer checkpoint served (the witnesses' cosigning, when configured)
        self.on_serve: Callable[[ServedCheckpoint], None] | None = None
        # given the tree nodes (leaf hashes included) of every committed batch
        self.on_nodes: Callable[[list[tuple[NodeKey, bytes]]], None] | None = None

    # -- checkpoints ---------------------------------------------------------------------------

    def _start_checkpoint(self) -> ServedCheckpoint:
        """Sign (and store) a checkpoint of the stored tree after checking it against every
        earlier checkpoint of this key: an inconsistent database is refused, never served."""
        stored = Ledger(self.writer).sign_checkpoint(self.key, origin=self.origin)
        open_checkpoint(stored.note, self.key.public_key)  # what is served verifies
        self._row = (stored.size, stored.root)
        return ServedCheckpoint(stored.note, TreeHead(stored.size, stored.root))

    def _sign(self, size: int, root: bytes) -> str:
        return sign_checkpoint(Checkpoint(origin=self.origin, size=size, root=root), self.key)

    def _refresh(self, storage: PostgresStorage) -> ServedCheckpoint | None:
        """Store a checkpoint row of the current tree once the entries added since the last
        row are re-hashed from their data and reproduce both the writer's latest signed
        checkpoint and the stored tree head; entries another writer appended without signing
        (a bulk import) are signed here. O(entries since the last row); None when the tree
        has not grown."""
        with storage.exclusive():
            head = storage.tree_head()
            row_size, row_root = self._row
            if head.size <= row_size:
                return None
            note = storage.get_meta(LAST_CHECKPOINT_META)
            signed = open_checkpoint(note, self.key.public_key) if note else None
            if signed is not None and signed.size > head.size:
                raise LedgerError(f"a checkpoint covers {signed.size} entries, {head.size} stored")
            frontier = storage.read_nodes(perfect_subtrees(0, row_size)) if row_size else []
            if frontier_root(frontier) != row_root:
                raise LedgerError(f"the stored tree no longer matches checkpoint size {row_size}")
            size = row_size
            for leaf in storage.iter_leaves(row_size, head.size):
                if leaf.index != size:
                    raise LedgerError(f"entry {size} is missing from the database")
                frontier_push(frontier, size, leaf_hash(leaf.data))
                size += 1
                if (
                    signed is not None
                    and size == signed.size
                    and frontier_root(frontier) != signed.root
                ):
                    raise LedgerError(
                        f"entries below {size} do not reproduce the signed checkpoint"
                    )
            root = frontier_root(frontier)
            if size != head.size or root != head.root:
                raise LedgerError(
                    f"entries {row_size}..{head.size - 1} do not reproduce the stored tree"
                )
            if note is None or signed is None or signed.size != size:
                note = self._sign(size, root)
                storage.set_meta(LAST_CHECKPOINT_META, note)
            storage.add_checkpoint(size, root, self.origin, note, utc_now())
        self._row = (size, root)
        return ServedCheckpoint(note, TreeHead(size, root))

    def _serve(self, candidate: ServedCheckpoint) -> None:
        if candidate.head.size >= self.served.head.size:
            self.served = candidate
            self.metrics.entries.set(candidate.head.size)
            self.metrics.checkpoint_time = candidate.at
            if self.on_serve is not None:
                self.on_serve(candidate)

    async def _refresh_loop(self) -> None:
        storage: PostgresStorage | None = None
        while True:
            await asyncio.sleep(self.interval)
            try:
                if storage is None:
                    storage = await anyio.to_thread.run_sync(PostgresStorage, self.dsn)
                refreshed = await anyio.to_thread.run_sync(self._refresh, storage)
            except AttestError as exc:
                LOG.error("checkpoint refresh failed: %s", exc.message)
                continue
            if refreshed is not None:
                self._serve(refreshed)

    # -- writes --------------------------------------------------------------------------------

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="ledger-sequencer")
        self._tasks = [
            asyncio.create_task(self._write_loop()),
            asyncio.create_task(self._refresh_loop()),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._thread is not None:  # a batch under way ends before the connection closes
            self._thread.shutdown(wait=True)
        if self._queue is not None:
            while not self._queue.empty():
                pending = self._queue.get_nowait()
                if not pending.future.done():
                    pending.future.set_exception(LedgerError("the service is shutting down"))
        self.writer.close()

    async def submit(self, submission: Submission) -> tuple[SubmitOutcome, ServedCheckpoint]:
        """Queue one submission; returns once its batch is committed (or raises)."""
        if self._queue is None:
            raise LedgerError("the sequencer is not running")
        future: asyncio.Future[tuple[SubmitOutcome, ServedCheckpoint]] = (
            asyncio.get_running_loop().create_future()
        )
        await self._queue.put(_Pending(submission, future, time.perf_counter()))
        return await future

    async def _write_loop(self) -> None:
        assert self._queue is not None and self._thread is not None
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self.max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                outcomes, head, note = await loop.run_in_executor(
                    self._thread, self.writer.submit, [p.submission for p in batch], self._sign
                )
            except AttestError as exc:
                self.metrics.failures.inc(len(batch))
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(exc)
                continue
            except Exception as exc:
                LOG.exception("append failed")
                error = LedgerError(f"append failed: {type(exc).__name__}")
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(error)
                continue
            if self.on_nodes is not None:
                self.on_nodes(self.writer.last_nodes)
            served = ServedCheckpoint(note, head)
            self._serve(served)
            done = time.perf_counter()
            self.metrics.batches.inc()
            for pending, outcome in zip(batch, outcomes, strict=True):
                self.metrics.append_latency.observe(done - pending.queued_at)
                if not pending.future.done():
                    pending.future.set_result((outcome, served))
