"""``attest ledger witness serve``: the witness's HTTP interface (C2SP tlog-witness), a
Starlette application served by uvicorn. The submission and monitoring prefixes are both the
server's root: ``POST /add-checkpoint`` and ``GET /<origin hash>/checkpoint``."""

from __future__ import annotations

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from attest.errors import AttestError
from attest.ledger.witness.core import LOG, MAX_REQUEST_BYTES, Witness, WitnessAnswer

__all__ = ["create_witness_app"]


def _answer(answer: WitnessAnswer) -> Response:
    return Response(answer.body, status_code=answer.status, media_type=answer.content_type)


def create_witness_app(witness: Witness) -> Starlette:
    """The application of one witness."""

    async def add_checkpoint(request: Request) -> Response:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
            return PlainTextResponse("request body too large\n", status_code=413)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_REQUEST_BYTES:
                return PlainTextResponse("request body too large\n", status_code=413)
        try:
            answer = await anyio.to_thread.run_sync(witness.add_checkpoint, body)
        except AttestError as exc:  # its state cannot be read or written: never cosign then
            LOG.error("%s", exc.message)
            return PlainTextResponse(
                "the witness cannot read or write its state\n", status_code=500
            )
        return _answer(answer)

    async def latest(request: Request) -> Response:
        hashed = str(request.path_params["origin_hash"])
        try:
            answer = await anyio.to_thread.run_sync(witness.latest, hashed)
        except AttestError as exc:
            LOG.error("%s", exc.message)
            return PlainTextResponse(
                "the witness cannot read or write its state\n", status_code=500
            )
        return _answer(answer)

    return Starlette(
        routes=[
            Route("/add-checkpoint", add_checkpoint, methods=["POST"]),
            Route("/{origin_hash:str}/checkpoint", latest),
        ]
    )
