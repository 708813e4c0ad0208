"""The answers waiting for a cosigned checkpoint (Witnessing.wait_for): released together once
a published checkpoint covers them, the rest kept waiting; a wait that runs out answers None and
leaves nothing behind. In process, no witnesses (the rounds: test_service_witnessed.py)."""

from __future__ import annotations

import asyncio

from attest.ledger.service.sequencer import ServedCheckpoint
from attest.ledger.service.witnessing import Witnessing
from attest.ledger.storage import TreeHead
from attest.ledger.witness.client import WitnessingConfig


def _served(size: int) -> ServedCheckpoint:
    return ServedCheckpoint(f"note {size}\n", TreeHead(size, bytes(32)), at=float(size))


def _witnessing(wait_s: float) -> Witnessing:
    return Witnessing(WitnessingConfig((), quorum=1, wait_s=wait_s), lambda old, new: [])


def test_one_publication_releases_every_write_it_covers() -> None:
    async def run() -> None:
        witnessing = _witnessing(60.0)
        waits = [asyncio.ensure_future(witnessing.wait_for(size)) for size in (3, 5, 9)]
        await asyncio.sleep(0)
        witnessing._publish(_served(5))
        await asyncio.sleep(0)
        assert [w.done() for w in waits] == [True, True, False]
        assert waits[0].result() == waits[1].result() == _served(5)
        witnessing._publish(_served(12))
        assert await waits[2] == _served(12)
        assert witnessing._waiters == []
        assert await witnessing.wait_for(7) == _served(12)  # already covered: no wait

    asyncio.run(run())


def test_a_wait_that_runs_out_answers_none_and_is_dropped() -> None:
    async def run() -> None:
        witnessing = _witnessing(0.01)
        witnessing._publish(_served(2))
        assert await witnessing.wait_for(4) is None
        assert witnessing._waiters == []

    asyncio.run(run())
