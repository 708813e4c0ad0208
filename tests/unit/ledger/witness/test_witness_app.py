"""The witness's HTTP front in process: ``POST /add-checkpoint`` (a plain ASGI handler, no
router) answers byte for byte what a Starlette response of the same answer writes (200, 409
with its size type, 400, 413 declared and sent, 500 when its state cannot be stored), a client
that leaves gets nothing, and the other routes (GET /add-checkpoint: 405, the monitoring path)
still answer through Starlette."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from _witness_kit import Tree, make_key, make_witness
from starlette.responses import Response

from attest.errors import LedgerError
from attest.ledger.witness.app import create_witness_app
from attest.ledger.witness.core import (
    MAX_REQUEST_BYTES,
    SIZE_CONTENT_TYPE,
    TEXT,
    Witness,
    WitnessAnswer,
    add_checkpoint_body,
    origin_hash,
)

Message = dict[str, Any]


def _call(
    app: Any, method: str, path: str, chunks: list[bytes], headers: list[Any]
) -> list[Message]:
    sent: list[Message] = []
    incoming = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ] or [{"type": "http.disconnect"}]

    async def receive() -> Message:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": headers,
             "query_string": b"", "root_path": "", "http_version": "1.1"}  # fmt: skip
    asyncio.run(app(scope, receive, send))
    return sent


def _starlette(answer: WitnessAnswer) -> list[Message]:
    """What the Starlette route wrote for ``answer``."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    response = Response(answer.body, status_code=answer.status, media_type=answer.content_type)
    asyncio.run(response({"type": "http"}, receive, send))
    return sent


def _post(app: Any, body: bytes, *, declared: int | None = None) -> list[Message]:
    length = str(len(body) if declared is None else declared).encode()
    return _call(app, "POST", "/add-checkpoint", [body], [(b"content-length", length)])


@pytest.fixture
def witness(tmp_path: Path) -> tuple[Witness, Tree]:
    log_key, log_pub = make_key(tmp_path, "log")
    return make_witness(tmp_path, log_pub), Tree(log_key).grow(5)


def _as_starlette(got: list[Message], content_type: str = TEXT) -> list[Message]:
    """What the Starlette route wrote for an answer of this status and body."""
    body = got[1]["body"].decode()
    return _starlette(WitnessAnswer(got[0]["status"], body, content_type))


def test_add_checkpoint_answers_as_starlette_did(witness: tuple[Witness, Tree]) -> None:
    found, tree = witness
    app = create_witness_app(found)
    got = _post(app, add_checkpoint_body(0, [], tree.note(3)))
    assert got[0]["status"] == 200 and got[1]["body"].startswith("\u2014 w.example/w1 ".encode())
    assert got == _as_starlette(got)
    got = _post(app, add_checkpoint_body(0, [], tree.note()))  # the witness is at 3
    assert (got[0]["status"], got[1]["body"]) == (409, b"3\n")
    assert got == _as_starlette(got, SIZE_CONTENT_TYPE)
    assert (b"content-type", b"text/x.tlog.size; charset=utf-8") in got[0]["headers"]
    got = _post(app, add_checkpoint_body(3, tree.proof(3), tree.note()))
    assert got[0]["status"] == 200 and got == _as_starlette(got)
    got = _post(app, b"old 01\n\n" + tree.note().encode())
    assert got[0]["status"] == 400 and got == _as_starlette(got)
    too_large = _starlette(WitnessAnswer(413, "request body too large\n"))
    assert _post(app, b"x", declared=MAX_REQUEST_BYTES + 1) == too_large
    assert _call(app, "POST", "/add-checkpoint", [b"x" * MAX_REQUEST_BYTES, b"y"], []) == too_large
    assert _call(app, "POST", "/add-checkpoint", [], []) == []  # the client left: no answer


def test_a_state_that_cannot_be_stored_is_a_500(
    witness: tuple[Witness, Tree], monkeypatch: pytest.MonkeyPatch
) -> None:
    found, tree = witness

    def broken(*args: Any) -> None:
        raise LedgerError("disk gone")

    monkeypatch.setattr(found, "_persist", broken)
    got = _post(create_witness_app(found), add_checkpoint_body(0, [], tree.note()))
    assert got == _starlette(WitnessAnswer(500, "the witness cannot read or write its state\n"))


def test_the_other_routes_still_answer(witness: tuple[Witness, Tree]) -> None:
    found, tree = witness
    app = create_witness_app(found)
    assert _post(app, add_checkpoint_body(0, [], tree.note()))[0]["status"] == 200
    assert _call(app, "GET", "/add-checkpoint", [b""], [])[0]["status"] == 405
    latest = _call(app, "GET", f"/{origin_hash(tree.origin)}/checkpoint", [b""], [])
    assert (
        latest[0]["status"] == 200
        and latest[1]["body"] == found.latest(origin_hash(tree.origin)).body.encode()
    )
