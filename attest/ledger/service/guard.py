"""What keeps ``attest ledger serve`` answering when clients are slow, idle or many: per-connection
header and body deadlines, a connection limit that evicts the longest-waiting idle connection, a
request-concurrency limit, and the process's file-descriptor limit raised at start.

uvicorn offers the keep-alive timeout (``timeout_keep_alive``, armed only after a response) and
``limit_concurrency``; it has no deadline for a request's headers or body (uvicorn issue #157,
"--timeout-request-start / --timeout-request-complete", proposed in 2018, not implemented): a
connection that sends nothing, or trickles a header byte now and then, is held for ever, and
``limit_concurrency`` counts those idle connections too, so reaching it answers *every* new
request 503. Hence the hand-written parts here: :class:`GuardedHttpToolsProtocol` (a subclass
of uvicorn's httptools protocol adding the deadlines, a header-size cap, as uvicorn's
``h11_max_incomplete_event_size`` applies to its h11 protocol only, and the connection limit)
and :class:`ConcurrencyLimit` (an ASGI wrapper counting requests in flight, not connections).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from attest.ledger.service.limits import ConnectionLimits

__all__ = ["ConcurrencyLimit", "GuardedHttpToolsProtocol", "guarded_protocol", "run_guarded"]

# A request's line and headers together (a write's headers are a few hundred bytes).
MAX_HEADER_BYTES = 64 * 1024
_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}
_REASONS[503] = b"Service Unavailable"


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline on each request's headers (from the
    connection, or from the first byte after a keep-alive) and body (from the end of the
    headers), a cap on the header bytes, and a server-wide connection limit. One timer per
    connection; ``_waiting_since`` is set while the connection waits on its client (headers,
    body, keep-alive), None while the service is answering it."""

    limits: ConnectionLimits = ConnectionLimits()
    max_connections: int = ConnectionLimits.max_connections

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._deadline_kind = ""  # header | body | idle
        self._phase = "idle"  # idle | header | body | app
        self._header_bytes = 0
        self._waiting_since: float | None = time.monotonic()

    # -- timers -------------------------------------------------------------------------------

    def _arm(self, kind: str) -> None:
        self._disarm()
        seconds = {
            "header": self.limits.header_timeout_s,
            "body": self.limits.body_timeout_s,
            "idle": self.limits.keepalive_timeout_s,
        }[kind]
        self._deadline_kind = kind
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if self._phase == "body" and self.flow.read_paused:
            # uvicorn stopped reading (a pipelined request waits its turn, or the application
            # has not taken the buffered body yet): the delay is ours, not the client's
            self._arm("body")
            return
        if self._phase == "body":  # the current request's body is late
            free = (cycle is None or not cycle.response_started) and not self.pipeline
            self._close_with(408, b"request body timeout", answer=free)
        elif self._header_bytes:  # part of a request line or headers, never finished
            free = cycle is None or cycle.response_complete
            self._close_with(408, b"request header timeout", answer=free)
        else:  # nothing sent since the connection (or the last answer): no one to tell
            self.transport.close()

    def _close_with(self, status: int, text: bytes, *, answer: bool = True) -> None:
        """Answer ``status`` with a short text (unless a response is under way) and close. The
        request being read, if any, is marked disconnected: the application's ``receive()``
        gets ``http.disconnect`` and anything it still sends is dropped."""
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        if answer:
            self.transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                % (status, _REASONS[status], len(text), text)
            )
        self.transport.close()

    # -- the connection -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm("header")
        if len(self.connections) > self.max_connections:
            self._make_room()

    def _make_room(self) -> None:
        """Over the limit: close the connection that has waited longest on its client (an idle,
        slow-header or slow-body one); when every other connection is being answered, refuse
        this one."""
        idle = [
            c
            for c in self.connections
            if c is not self
            and isinstance(c, GuardedHttpToolsProtocol)
            and c._waiting_since is not None
            and not c.transport.is_closing()
        ]
        if idle:
            oldest = min(idle, key=lambda c: c._waiting_since or 0.0)
            oldest._disarm()
            oldest.transport.close()
        else:
            self._close_with(503, b"too many connections")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        counting = self._phase in ("idle", "header")
        if counting:
            self._header_bytes += len(data)
        super().data_received(data)
        if (
            counting
            and self._phase in ("idle", "header")
            and self._header_bytes > MAX_HEADER_BYTES
            and not self.transport.is_closing()
        ):
            self._close_with(431, b"request headers too large")

    # -- parser callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None or self._deadline_kind == "idle":
            self._arm("header")  # after a keep-alive, or pipelined behind another request
        self._phase = "header"

    def on_headers_complete(self) -> None:
        self._phase = "body"
        self._header_bytes = 0
        self._arm("body")
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None:  # the answer's header goes out with its body: one socket write
            held = _OneWriteTransport(self.transport, cycle, self.loop)
            cycle.transport = cast(asyncio.Transport, held)  # what the cycle calls is there

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()
        if self.cycle is not None and self.cycle.response_complete and not self.pipeline:
            # answered before its body was all in (a 413, say): uvicorn keeps the connection
            # and its keep-alive timer was cancelled by the body's bytes; idle from now on
            self._phase = "idle"
            self._waiting_since = time.monotonic()
            self._arm("idle")
        else:
            self._phase = "app"
            self._waiting_since = None

    def on_response_complete(self) -> None:
        cycle = self.cycle
        if cycle is not None and isinstance(cycle.transport, _OneWriteTransport):
            cycle.transport.flush()  # a header-only answer (HEAD): nothing followed it
        super().on_response_complete()  # arms uvicorn's keep-alive timer when nothing is queued
        if self._phase == "app" and not self.pipeline:
            self._phase = "idle"
            self._waiting_since = time.monotonic()


class _OneWriteTransport:
    """The transport as one request's response cycle sees it: the status line and headers
    uvicorn writes on ``http.response.start`` are held and written together with the first
    body write that follows, so a small answer costs one ``send()`` (one TCP segment, one
    wake-up of the client) instead of two. uvicorn writes each ASGI message as it comes and
    has no option to coalesce them (hand-written here for that reason). Nothing is held past
    the current turn of the event loop (a ``call_soon`` flush), nor past the response's end,
    a close or an interim ``100 Continue`` (written before the response starts: never held)."""

    __slots__ = ("_cycle", "_held", "_loop", "_transport", "_waiting")

    def __init__(self, transport: Any, cycle: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._cycle, self._loop = transport, cycle, loop
        self._held: bytes | None = None
        self._waiting = True  # for the response's first write: its status line and headers

    def write(self, data: bytes) -> None:
        if self._held is not None:
            data, self._held = self._held + data, None
        elif self._waiting and self._cycle.response_started:
            # uvicorn writes the status line and headers first, in one piece: hold them
            self._waiting = False
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def flush(self) -> None:
        if self._held is not None:
            data, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return bool(self._transport.is_closing())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def guarded_protocol(limits: ConnectionLimits, max_connections: int) -> type[HttpToolsProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` carrying these limits."""
    return type(
        "LedgerHttpProtocol",
        (GuardedHttpToolsProtocol,),
        {"limits": limits, "max_connections": max_connections},
    )


class ConcurrencyLimit:
    """At most ``limit`` HTTP requests worked on at once; the next is answered 503 UNAVAILABLE
    (retryable, ``Retry-After: 1``) at once, in the service's JSON error form. A request does
    not count while its application waits in ``receive()`` for the client's body: a slow body
    is the body timeout's business, and counting it would let a few slow uploads refuse
    everyone. When the body is in and every slot is taken, the application is told the client
    left (``http.disconnect``) and the client gets the 503. uvicorn's own ``limit_concurrency``
    is not used: it counts open connections as well, so idle connections alone would make it
    refuse everyone."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.active = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.active >= self.limit:
            await self._busy(send)
            return
        request = _Counted(self, receive, send)
        try:
            await self.app(scope, request.receive, request.send)
        finally:
            request.leave()
        if request.refused and not request.started:
            await self._busy(send)

    async def _busy(self, send: Any) -> None:
        body = (
            b'{"error":"UNAVAILABLE","message":"the service is answering %d requests; '
            b'retry","retryable":true}' % self.limit
        )
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"retry-after", b"1"),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class _Counted:
    """One request's slot in :class:`ConcurrencyLimit`: given up while waiting on the client."""

    def __init__(self, limit: ConcurrencyLimit, receive: Any, send: Any) -> None:
        self.limit, self._receive, self._send = limit, receive, send
        self.refused = self.started = False
        limit.active += 1  # the caller checked there is room
        self.held = True

    def leave(self) -> None:
        if self.held:
            self.limit.active -= 1
            self.held = False

    async def receive(self) -> Any:
        if self.refused:
            return {"type": "http.disconnect"}
        self.leave()
        message = await self._receive()
        if message["type"] != "http.request":  # the client left
            return message
        if self.limit.active >= self.limit.limit:
            self.refused = True
            return {"type": "http.disconnect"}
        self.limit.active += 1
        self.held = True
        return message

    async def send(self, message: Any) -> None:
        if self.refused:  # the application was told the client left: nothing more reaches it
            return
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


def run_guarded(
    app: Any,
    *,
    host: str,
    port: int,
    limits: ConnectionLimits,
    max_connections: int,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
) -> None:
    """Serve ``app`` with uvicorn under these limits until SIGINT/SIGTERM."""
    import uvicorn

    config = uvicorn.Config(
        ConcurrencyLimit(app, limits.max_requests),
        host=host,
        port=port,
        http=guarded_protocol(limits, max_connections),
        ws="none",  # no WebSocket routes: an Upgrade is answered as plain HTTP
        timeout_keep_alive=limits.keepalive_timeout_s,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    uvicorn.Server(config).run()
