"""``attest ledger witness serve``: the witness's HTTP interface (C2SP tlog-witness), served by
uvicorn. The submission and monitoring prefixes are both the server's root: ``POST
/add-checkpoint`` and ``GET /<origin hash>/checkpoint``.

``POST /add-checkpoint`` is the hot path (every cosigning round of every log sends one) and is
answered by a plain ASGI handler in front of a Starlette application that serves the rest: no
router, Request object or body iterator per request, and the check and store run in one worker
thread of the witness's own (they are serialized under the witness's lock in any case; anyio's
thread hand-off cost more CPU than the rest of the HTTP layer here, docs/benchmarks.md, "The
floor and where a write's CPU goes"). The answers are those the Starlette route gave.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from attest.errors import AttestError
from attest.ledger.asgi_body import BodyTooLarge, read_bounded_body
from attest.ledger.witness.core import LOG, MAX_REQUEST_BYTES, Witness, WitnessAnswer

__all__ = ["create_witness_app"]

_UNSTORABLE = WitnessAnswer(500, "the witness cannot read or write its state\n")
_TOO_LARGE = WitnessAnswer(413, "request body too large\n")


def _answer(answer: WitnessAnswer) -> Response:
    return Response(answer.body, status_code=answer.status, media_type=answer.content_type)


def create_witness_app(witness: Witness) -> ASGIApp:
    """The application of one witness."""
    adds = ThreadPoolExecutor(1, thread_name_prefix="witness-add")

    def add(body: bytes) -> WitnessAnswer:
        try:
            return witness.add_checkpoint(body)
        except AttestError as exc:  # its state cannot be read or written: never cosign then
            LOG.error("%s", exc.message)
            return _UNSTORABLE

    async def add_checkpoint(scope: Scope, receive: Receive, send: Send) -> None:
        body = await _body(scope, receive)
        if body is None:  # the client went away before sending it all
            return
        if isinstance(body, bytes):
            answer = await asyncio.get_running_loop().run_in_executor(adds, add, body)
        else:
            answer = body
        await _send(send, answer)

    async def latest(request: Request) -> Response:
        hashed = str(request.path_params["origin_hash"])
        try:
            answer = await anyio.to_thread.run_sync(witness.latest, hashed)
        except AttestError as exc:
            LOG.error("%s", exc.message)
            answer = _UNSTORABLE
        return _answer(answer)

    async def _post_only(request: Request) -> Response:  # pragma: no cover - answered before
        raise AssertionError("POST /add-checkpoint is answered before routing")

    rest = Starlette(
        routes=[
            Route("/add-checkpoint", _post_only, methods=["POST"]),  # GET: 405, as before
            Route("/{origin_hash:str}/checkpoint", latest),
        ]
    )

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == "/add-checkpoint"
        ):
            await add_checkpoint(scope, receive, send)
        elif scope["type"] == "lifespan":
            await rest(scope, receive, send)
            adds.shutdown(wait=False)
        else:
            await rest(scope, receive, send)

    return app


async def _body(scope: Scope, receive: Receive) -> bytes | WitnessAnswer | None:
    """The request body, the 413 answer when it is over :data:`MAX_REQUEST_BYTES` (declared or
    sent), or None when the client left."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > MAX_REQUEST_BYTES:
            return _TOO_LARGE
    try:
        return await read_bounded_body(receive, MAX_REQUEST_BYTES)
    except BodyTooLarge:
        return _TOO_LARGE


async def _send(send: Send, answer: WitnessAnswer) -> None:
    """``answer`` as Starlette's Response wrote it (content-length, then content-type)."""
    body = answer.body.encode("utf-8")
    kind = answer.content_type.encode("latin-1")
    if kind.startswith(b"text/") and b"charset=" not in kind.lower():
        kind += b"; charset=utf-8"
    headers = [(b"content-length", b"%d" % len(body)), (b"content-type", kind)]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
