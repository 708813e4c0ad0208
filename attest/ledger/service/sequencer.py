"""The service's single writer: one asyncio task turns queued submissions into batches, each
appended in one PostgreSQL transaction (under the advisory writer lock) together with the
signed checkpoint of the tree it produces, and answers every request of the batch once the
commit returned. A second task re-signs at an interval and stores a checkpoint row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

import anyio.to_thread

from attest.certificate.signing import PrivateKey
from attest.errors import AttestError, LedgerError
from attest.ledger.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from attest.ledger.log import Ledger
from attest.ledger.service.metrics import ServiceMetrics
from attest.ledger.service.postgres import PostgresStorage, Submission, SubmitOutcome
from attest.ledger.storage import TreeHead

__all__ = ["Sequencer", "ServedCheckpoint"]

LOG = logging.getLogger("attest.ledger.service")


@dataclass(frozen=True)
class ServedCheckpoint:
    """The checkpoint the service serves: its signed note, tree head, and when it was made."""

    note: str
    head: TreeHead
    at: float = field(default_factory=time.time)


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
        self.served = self._start_checkpoint()
        self._queue: asyncio.Queue[_Pending] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- checkpoints ---------------------------------------------------------------------------

    def _start_checkpoint(self) -> ServedCheckpoint:
        """Sign (and store) a checkpoint of the stored tree after checking it against every
        earlier checkpoint of this key: an inconsistent database is refused, never served."""
        stored = Ledger(self.writer).sign_checkpoint(self.key, origin=self.origin)
        open_checkpoint(stored.note, self.key.public_key)  # what is served verifies
        return ServedCheckpoint(stored.note, TreeHead(stored.size, stored.root))

    def _sign(self, size: int, root: bytes) -> str:
        return sign_checkpoint(Checkpoint(origin=self.origin, size=size, root=root), self.key)

    def _refresh(self, storage: PostgresStorage) -> ServedCheckpoint:
        """Store a checkpoint row of the current tree, re-checked from the entries."""
        stored = Ledger(storage).sign_checkpoint(self.key, origin=self.origin)
        return ServedCheckpoint(stored.note, TreeHead(stored.size, stored.root))

    def _serve(self, candidate: ServedCheckpoint) -> None:
        if candidate.head.size >= self.served.head.size:
            self.served = candidate
            self.metrics.entries.set(candidate.head.size)
            self.metrics.checkpoint_time = candidate.at

    async def _refresh_loop(self) -> None:
        storage: PostgresStorage | None = None
        while True:
            await asyncio.sleep(self.interval)
            try:
                if storage is None:
                    storage = await anyio.to_thread.run_sync(PostgresStorage, self.dsn)
                self._serve(await anyio.to_thread.run_sync(self._refresh, storage))
            except AttestError as exc:
                LOG.warning("checkpoint refresh failed: %s", exc.message)

    # -- writes --------------------------------------------------------------------------------

    async def start(self) -> None:
        self._queue = asyncio.Queue()
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
        assert self._queue is not None
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self.max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                outcomes, head, note = await anyio.to_thread.run_sync(
                    self.writer.submit, [p.submission for p in batch], self._sign
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
            served = ServedCheckpoint(note, head)
            self._serve(served)
            done = time.perf_counter()
            self.metrics.batches.inc()
            for pending, outcome in zip(batch, outcomes, strict=True):
                self.metrics.append_latency.observe(done - pending.queued_at)
                if not pending.future.done():
                    pending.future.set_result((outcome, served))
