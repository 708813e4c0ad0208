"""The log's witness client (:class:`~attest.ledger.witness.client.WitnessClient`) over real HTTP:
the witness's application served by uvicorn in process on loopback, asked through the shared
aiohttp session: a first cosignature, the 409 that tells the client the witness's size and the
proof sent from it, a refusal, and a witness that does not answer."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from _witness_kit import Tree, make_key, make_witness

from attest.ledger.checkpoint import Checkpoint, split_note
from attest.ledger.witness.app import create_witness_app
from attest.ledger.witness.client import WitnessClient, WitnessEndpoint, witness_session
from attest.ledger.witness.core import Witness, add_checkpoint_body
from attest.ledger.witness.cosignature import check_cosignatures, merge_signatures


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _ask(witness: Witness, tree: Tree, url: str | None = None, size: Any = None) -> Any:
    """Serve ``witness`` and ask it to cosign ``tree``'s checkpoint; the lines and the client."""
    port = _free_port()
    config = uvicorn.Config(
        create_witness_app(witness), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(1000):  # at most 10 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started, "the in-process witness did not start"
    note = tree.note()

    async def prove(old: int, new: int) -> list[bytes]:
        return tree.proof(old, new)

    try:
        async with witness_session() as http:
            endpoint = WitnessEndpoint("w1", url or f"http://127.0.0.1:{port}/", witness.vkey)
            client = WitnessClient(endpoint, http)
            client.size = size
            lines = await client.cosign(note, Checkpoint.parse_body(split_note(note)[0]), prove)
            return lines, client
    finally:
        server.should_exit = True
        await task


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Tree, Witness]:
    log_key, log_pub = make_key(tmp_path, "log")
    return Tree(log_key).grow(5), make_witness(tmp_path, log_pub)


def test_cosigns_then_learns_the_size_from_a_409(setup: tuple[Tree, Witness]) -> None:
    tree, witness = setup
    lines, client = asyncio.run(_ask(witness, tree))
    assert client.size == 5 and lines.startswith("\u2014 w.example/w1 ")
    assert check_cosignatures(
        merge_signatures(tree.note(), lines), [("w1", witness.vkey)]
    ).verified == ["w1"]
    tree.grow(6)  # a fresh client does not know the witness's size: old 0, a 409, the proof
    lines, client = asyncio.run(_ask(witness, tree))
    assert client.size == 11
    assert check_cosignatures(
        merge_signatures(tree.note(), lines), [("w1", witness.vkey)]
    ).verified == ["w1"]


def test_a_refusal_and_a_silent_witness_give_no_lines(
    setup: tuple[Tree, Witness], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree, witness = setup
    assert witness.add_checkpoint(add_checkpoint_body(0, [], tree.note())).status == 200
    other_key, _ = make_key(tmp_path, "other")
    forged = Tree(other_key).grow(7)  # signed by a key the witness does not know for the log
    with caplog.at_level(logging.WARNING, logger="attest.ledger.service.witnessing"):
        lines, _ = asyncio.run(_ask(witness, forged, size=5))
        assert lines is None
        assert "refused the checkpoint of size 7: HTTP 403" in caplog.text
        lines, _ = asyncio.run(_ask(witness, tree, url=f"http://127.0.0.1:{_free_port()}/"))
        assert lines is None
        assert "witness w1 did not answer: Client" in caplog.text  # aiohttp's connection error
