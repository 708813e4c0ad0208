"""The service's HTTP protocol writes an answer's status line and headers together with its body
(one socket write for a small answer), without changing what the client receives: a sized
answer, a header-only answer (HEAD), a streamed (chunked) one, an interim 100 Continue, and
an answer on a connection the application closes. Real uvicorn protocol, real loopback socket,
each transport write counted."""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from attest.ledger.service.guard import guarded_protocol
from attest.ledger.service.limits import ConnectionLimits


async def _app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    path = scope["path"]
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for part in (b"one,", b"two,", b"three"):
            await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(0)
        await send({"type": "http.response.body", "body": b""})
        return
    answer = b"echo:" + body if path == "/echo" else b"hello"
    headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(answer))]
    if path == "/close":
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


class _Counting:
    """A transport proxy recording every write that reaches the socket."""

    def __init__(self, transport: Any, writes: list[bytes]) -> None:
        self._transport, self.writes = transport, writes

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _exchange(request: bytes, *, then: bytes = b"") -> tuple[bytes, list[bytes]]:
    """Send ``request`` (and ``then`` once something came back) to a guarded uvicorn protocol
    on loopback; returns what the client received until the answer is complete, and the
    socket writes the server made."""
    writes: list[bytes] = []

    async def run() -> bytes:
        config = uvicorn.Config(
            _app, http=guarded_protocol(ConnectionLimits(), 100), log_level="warning"
        )
        config.load()
        base = config.http_protocol_class

        class Counted(base):  # type: ignore[misc, valid-type]
            def connection_made(self, transport: Any) -> None:
                super().connection_made(_Counting(transport, writes))

        factory: Callable[[], Any] = functools.partial(
            Counted, config=config, server_state=ServerState(), app_state={}
        )
        loop = asyncio.get_running_loop()
        server = await loop.create_server(factory, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            return await loop.run_in_executor(None, _client, port, request, then)
        finally:
            server.close()

    received = asyncio.run(run())
    return received, writes


def _client(port: int, request: bytes, then: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        if then:
            received = sock.recv(65536)  # the interim answer, before the body is sent
            sock.sendall(then)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk
            if received.endswith((b"hello", b"echo:abc", b"0\r\n\r\n")) or (
                received.startswith(b"HTTP/1.1 200")
                and b"HEAD" in request
                and b"\r\n\r\n" in received
            ):
                return received


def _responses(writes: list[bytes]) -> list[bytes]:
    return [w for w in writes if w.startswith(b"HTTP/1.1 2")]


def test_a_sized_answer_is_one_write() -> None:
    received, writes = _exchange(b"GET /plain HTTP/1.1\r\nhost: x\r\n\r\n")
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert received.endswith(b"\r\ncontent-length: 5\r\n\r\nhello")
    assert writes == [received]  # status line, headers and body: one socket write


def test_a_header_only_answer_is_written_at_its_end() -> None:
    received, writes = _exchange(b"HEAD /plain HTTP/1.1\r\nhost: x\r\n\r\n")
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert received.endswith(b"content-length: 5\r\n\r\n")
    assert writes == [received]


def test_a_streamed_answer_arrives_whole_and_in_order() -> None:
    received, writes = _exchange(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head
    assert body == b"4\r\none,\r\n4\r\ntwo,\r\n5\r\nthree\r\n0\r\n\r\n"
    assert b"".join(writes) == received
    assert len(_responses(writes)) == 1 and _responses(writes)[0].endswith(b"4\r\none,\r\n")


def test_an_interim_continue_is_not_held() -> None:
    request = b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\nexpect: 100-continue\r\n\r\n"
    received, writes = _exchange(request, then=b"abc")
    assert received.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert received.endswith(b"echo:abc")
    assert writes[0] == b"HTTP/1.1 100 Continue\r\n\r\n" and len(writes) == 2


def test_an_answer_that_closes_the_connection_is_written_first() -> None:
    received, writes = _exchange(b"GET /close HTTP/1.1\r\nhost: x\r\n\r\n")
    assert b"connection: close" in received and received.endswith(b"hello")
    assert writes == [received]
