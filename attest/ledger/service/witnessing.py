"""The service collects cosignatures: one asyncio task sends the newest signed checkpoint to
every configured witness at once (:class:`~attest.ledger.witness.client.WitnessClient`), and
once a quorum of them cosigned it, publishes the checkpoint with the cosignatures gathered
(``GET /checkpoint`` then serves it). A write's answer waits, at most the configured time, for
a published checkpoint that covers its entry. Rounds start at most every 20 ms, so under load
one round cosigns many batches; a round below the quorum is retried after a short pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import anyio.to_thread
import httpx

from attest.ledger.checkpoint import Checkpoint, split_note
from attest.ledger.service.sequencer import ServedCheckpoint
from attest.ledger.witness.client import WitnessClient, WitnessingConfig
from attest.ledger.witness.cosignature import merge_signatures

__all__ = ["Witnessing"]

LOG = logging.getLogger("attest.ledger.service.witnessing")
_RETRY_S = 0.5
# Rounds start at most this often: under load one round then covers every batch of the last
# 20 ms (two HTTP requests and two proofs per round, not per batch), at that much latency.
_MIN_ROUND_S = 0.02


class Witnessing:
    """Cosignature collection for one log (module docstring). ``prove(old, new)`` returns the
    log's consistency proof between two sizes (blocking: run in a thread)."""

    def __init__(self, config: WitnessingConfig, prove: Callable[[int, int], list[bytes]]) -> None:
        self.config = config
        self._prove_sync = prove
        self.published: ServedCheckpoint | None = None
        self._latest: ServedCheckpoint | None = None
        self._changed: asyncio.Event | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._http: httpx.AsyncClient | None = None
        self.clients: list[WitnessClient] = []
        # told of every checkpoint published (the static tiles, when configured)
        self.on_publish: Callable[[ServedCheckpoint], None] | None = None

    async def start(self, first: ServedCheckpoint) -> None:
        self._changed = asyncio.Event()
        self._http = httpx.AsyncClient(timeout=10.0)
        self.clients = [WitnessClient(w, self._http) for w in self.config.witnesses]
        self.offer(first)
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._http is not None:
            await self._http.aclose()

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
        """The published checkpoint once it covers ``size`` entries; None after the wait."""
        if self.published is not None and self.published.head.size >= size:
            return self.published
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, waiter)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(waiter, self.config.wait_s)
        except TimeoutError:
            return None
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)
        return self.published

    def _publish(self, cosigned: ServedCheckpoint) -> None:
        self.published = cosigned
        if self.on_publish is not None:
            self.on_publish(cosigned)
        still: list[tuple[int, asyncio.Future[None]]] = []
        for size, waiter in self._waiters:
            if size <= cosigned.head.size:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                still.append((size, waiter))
        self._waiters = still

    async def _prove(self, old: int, new: int) -> list[bytes]:
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
            await asyncio.sleep(max(0.0, began + _MIN_ROUND_S - loop.time()))

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
