"""The request-concurrency limit and the limits' arithmetic of ``attest ledger serve``, in
process (the connection-level guards are exercised against the real service in
test_slow_clients.py)."""

from __future__ import annotations

import asyncio
import json
import resource
from typing import Any

import pytest

pytest.importorskip("uvicorn")

from attest.errors import InputError
from attest.ledger.service.guard import ConcurrencyLimit
from attest.ledger.service.limits import (
    FD_RESERVE,
    ConnectionLimits,
    connection_budget,
    raise_fd_limit,
)

SCOPE = {"type": "http", "method": "POST", "path": "/add", "headers": []}


class Client:
    """One request against the wrapper: its body arrives when :meth:`give_body` is called."""

    def __init__(self, limit: ConcurrencyLimit) -> None:
        self.limit = limit
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sent: list[dict[str, Any]] = []

    def give_body(self, body: bytes = b"{}") -> None:
        self.inbox.put_nowait({"type": "http.request", "body": body, "more_body": False})

    async def run(self) -> None:
        async def send(message: dict[str, Any]) -> None:
            self.sent.append(message)

        await self.limit(dict(SCOPE), self.inbox.get, send)

    @property
    def status(self) -> int | None:
        starts = [m["status"] for m in self.sent if m["type"] == "http.response.start"]
        return starts[0] if starts else None

    def json(self) -> Any:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent if "body" in m))


def make_app(gate: asyncio.Event, seen: list[str]) -> Any:
    """Reads the whole body, then works until ``gate`` is set, then answers 200."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen.append(message["type"])
        if message["type"] != "http.request":
            return
        await gate.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


def test_requests_beyond_the_limit_are_refused_retryable() -> None:
    async def scenario() -> tuple[Client, Client, Client]:
        gate, seen = asyncio.Event(), []
        limit = ConcurrencyLimit(make_app(gate, seen), 1)
        first, second, third = Client(limit), Client(limit), Client(limit)
        first.give_body()
        task = asyncio.create_task(first.run())
        await asyncio.sleep(0.01)  # first is being worked on
        second.give_body()
        await second.run()  # answered at once
        gate.set()
        await task
        third.give_body()
        await third.run()
        return first, second, third

    first, second, third = asyncio.run(scenario())
    assert (first.status, second.status, third.status) == (200, 503, 200)
    assert second.json()["error"] == "UNAVAILABLE" and second.json()["retryable"] is True
    assert (b"retry-after", b"1") in second.sent[0]["headers"]


def test_waiting_for_a_slow_body_takes_no_slot() -> None:
    """Reproduced with a count taken at the start: the slow uploads would hold every slot."""

    async def scenario() -> tuple[list[Client], Client, list[str], int]:
        gate, seen = asyncio.Event(), []
        gate.set()
        limit = ConcurrencyLimit(make_app(gate, seen), 2)
        slow = [Client(limit) for _ in range(5)]
        tasks = [asyncio.create_task(c.run()) for c in slow]
        await asyncio.sleep(0.01)  # all five wait in receive()
        fresh = Client(limit)
        fresh.give_body()
        await fresh.run()
        waiting = limit.active
        for client in slow:
            client.give_body()
        await asyncio.gather(*tasks)
        return slow, fresh, seen, waiting

    slow, fresh, _, waiting = asyncio.run(scenario())
    assert fresh.status == 200
    assert waiting == 0
    assert [c.status for c in slow] == [200] * 5


def test_a_body_completed_while_full_is_refused_and_the_app_told() -> None:
    async def scenario() -> tuple[Client, Client, list[str]]:
        gate, seen = asyncio.Event(), []
        limit = ConcurrencyLimit(make_app(gate, seen), 1)
        waiting, busy = Client(limit), Client(limit)
        task = asyncio.create_task(waiting.run())  # in receive(): holds no slot
        await asyncio.sleep(0.01)
        busy.give_body()
        busy_task = asyncio.create_task(busy.run())  # takes the slot, works until the gate
        await asyncio.sleep(0.01)
        waiting.give_body()  # its body completes while the only slot is taken
        await task
        gate.set()
        await busy_task
        return waiting, busy, seen

    waiting, busy, seen = asyncio.run(scenario())
    assert waiting.status == 503 and busy.status == 200
    assert "http.disconnect" in seen  # the application never worked on the refused request


def test_connection_budget_keeps_descriptors_back() -> None:
    limits = ConnectionLimits(max_connections=1000)
    assert connection_budget(limits, 100_000) == 1000
    assert connection_budget(limits, 1024) == 1024 - FD_RESERVE
    assert connection_budget(limits, 10) == 2
    assert connection_budget(limits, resource.RLIM_INFINITY) == 1000


def test_fd_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip(f"hard descriptor limit {hard}: nothing to raise toward")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        assert raise_fd_limit() == (hard, hard)
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize(
    "limits",
    [
        ConnectionLimits(header_timeout_s=0),
        ConnectionLimits(body_timeout_s=-1),
        ConnectionLimits(keepalive_timeout_s=0),
        ConnectionLimits(max_connections=1),
        ConnectionLimits(max_requests=0),
    ],
)
def test_limits_that_disable_themselves_are_refused(limits: ConnectionLimits) -> None:
    with pytest.raises(InputError):
        limits.check()
