"""The service collects cosignatures: one asyncio task sends the newest signed checkpoint to
every configured witness at once (:class:`~attest.ledger.witness.client.WitnessClient`), and
once a quorum of them cosigned it, publishes the checkpoint with the cosignatures gathered
(``GET /checkpoint`` then serves it). A write's answer waits, at most the configured time, for
a published checkpoint that covers its entry.

Pipelined: sequencing never waits for a round. A round starts as soon as the previous one
ended and the log has grown (but no sooner than :data:`MIN_ROUND_S` after the previous one
started), and covers everything sequenced when it starts; the writes sequenced while it is in
flight go in the next one. Every answer waiting for a size the published checkpoint covers is
released together when it is published. So under load a round cosigns many batches (two HTTP
requests and one consistency proof per round, not per batch) and a write waits about one and a
half rounds. A round below the quorum is retried after a short pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import aiohttp
import anyio.to_thread

from attest.ledger.checkpoint import Checkpoint, split_note
from attest.ledger.service.sequencer import ServedCheckpoint
from attest.ledger.witness.client import WitnessClient, WitnessingConfig, witness_session
from attest.ledger.witness.cosignature import merge_signatures

__all__ = ["MIN_ROUND_S", "Witnessing"]

LOG = logging.getLogger("attest.ledger.service.witnessing")
_RETRY_S = 0.5
# The floor between round starts. Rounds back to back (no floor) cost the service and the
# witnesses a round's CPU (HTTP, proof, fsync, signatures) more often than it buys latency on
# a busy machine; 20 ms added a fixed wait to every write. 10 ms gave the highest witnessed
# rate of the three on the shared 2-vCPU VM; with the cheaper rounds (aiohttp, the witness's
# in-place state) 3 and 5 ms did no better than 10 within that machine's noise
# (docs/benchmarks.md, ledger service, issue 37).
MIN_ROUND_S = 0.01


class Witnessing:
    """Cosignature collection for one log (module docstring). ``prove(old, new)`` returns the
    log's consistency proof between two sizes (blocking: run in a thread); ``prove_kept(old,
    new)``, when given, the same proof from what the service keeps in memory, or None when it
    does not keep every node (tried first, on the event loop: no thread, no query)."""

    def __init__(
        self,
        config: WitnessingConfig,
        prove: Callable[[int, int], list[bytes]],
        prove_kept: Callable[[int, int], list[bytes] | None] | None = None,
    ) -> None:
        self.config = config
        self._prove_sync = prove
        self._prove_kept = prove_kept
        self.published: ServedCheckpoint | None = None
        self._latest: ServedCheckpoint | None = None
        self._changed: asyncio.Event | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._http: aiohttp.ClientSession | None = None
        self.clients: list[WitnessClient] = []
        # told of every checkpoint published (the static tiles, when configured)
        self.on_publish: Callable[[ServedCheckpoint], None] | None = None

    async def start(self, first: ServedCheckpoint) -> None:
        self._changed = asyncio.Event()
        self._http = witness_session()
        self.clients = [WitnessClient(w, self._http) for w in self.config.witnesses]
        self.offer(first)
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._http is not None:
            await self._http.close()

    def offer(self, served: ServedCheckpoint) -> None:
        """A newer signed checkpoint to have cosigned (the sequencer calls this)."""
        if self._latest is None or served.head.size > self._latest.head.size:
            self._latest = served
            if self._changed is not None:
                self._changed.set()

    def current(self) -> ServedCheckpoint | None:
        """The latest published (cosigned) checkpoint, None before the first."""
        return self.published

    async def wait_for(self, size: int) -> ServedCheckpoint | None:
        """The published checkpoint once it covers ``size`` entries; None after the wait.
        One future and one timer per write (not :func:`asyncio.wait_for`'s task machinery):
        every write under load comes through here."""
        if self.published is not None and self.published.head.size >= size:
            return self.published
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        entry = (size, waiter)
        self._waiters.append(entry)
        timer = loop.call_later(self.config.wait_s, _expire, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
        published = self.published
        if published is None or published.head.size < size:
            with contextlib.suppress(ValueError):  # the wait ran out: no longer waiting
                self._waiters.remove(entry)
            return None
        return published

    def _publish(self, cosigned: ServedCheckpoint) -> None:
        self.published = cosigned
        if self.on_publish is not None:
            self.on_publish(cosigned)
        still: list[tuple[int, asyncio.Future[None]]] = []
        for size, waiter in self._waiters:
            if waiter.done():
                continue  # timed out: dropped here
            if size <= cosigned.head.size:
                waiter.set_result(None)
            else:
                still.append((size, waiter))
        self._waiters = still

    async def _prove(self, old: int, new: int) -> list[bytes]:
        if self._prove_kept is not None:
            kept = self._prove_kept(old, new)
            if kept is not None:
                return kept
        return await anyio.to_thread.run_sync(self._prove_sync, old, new)

    async def _loop(self) -> None:
        assert self._changed is not None
        loop = asyncio.get_running_loop()
        while True:
            await self._changed.wait()
            self._changed.clear()
            began = loop.time()
            target = self._latest
            published = self.published
            if target is None or (
                published is not None and target.head.size <= published.head.size
            ):
                continue
            try:
                lines = await self._round(target)
            except Exception:  # a bug or the database: logged, retried; writes still answer
                LOG.exception("cosigning the checkpoint of size %d failed", target.head.size)
                lines = None
            if lines is None:
                await asyncio.sleep(_RETRY_S)
                self._changed.set()
                continue
            self._publish(ServedCheckpoint(merge_signatures(target.note, lines), target.head))
            await asyncio.sleep(max(0.0, began + MIN_ROUND_S - loop.time()))

    async def _round(self, target: ServedCheckpoint) -> str | None:
        """The cosignature lines of one round, or None below the quorum."""
        checkpoint = Checkpoint.parse_body(split_note(target.note)[0])
        proofs: dict[tuple[int, int], asyncio.Task[list[bytes]]] = {}

        async def prove(old: int, new: int) -> list[bytes]:  # one query per pair per round
            if (old, new) not in proofs:
                proofs[(old, new)] = asyncio.ensure_future(self._prove(old, new))
            return await proofs[(old, new)]

        answers = await asyncio.gather(
            *(client.cosign(target.note, checkpoint, prove) for client in self.clients)
        )
        got = [lines for lines in answers if lines]
        if len(got) < self.config.quorum:
            LOG.warning(
                "checkpoint of size %d: %d of the %d cosignatures needed; not published",
                target.head.size, len(got), self.config.quorum,
            )  # fmt: skip
            return None
        return "".join(got)


def _expire(waiter: asyncio.Future[None]) -> None:
    """A write's wait ran out: it is answered with the log's own signature."""
    if not waiter.done():
        waiter.set_result(None)
