"""Bounded decompression in the ledger HTTP client (issue 33, item 5): each row is a gzip bomb
served where a client reads (a hash tile, the checkpoint, an entry bundle, /clients, a write's
answer); the client stops when the bytes it has produced reach the cap, with a clear error, and
its peak memory stays near the cap, not the bomb's inflated size."""

from __future__ import annotations

import functools
import gzip
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _fake_log import FakeLog, make_key

from attest.errors import LedgerError
from attest.ledger.service import client as client_module
from attest.ledger.service.client import LedgerClient
from attest.ledger.service.tiles import TilePath

URL = "https://ledger.test/"
MIB = 1024 * 1024


@functools.lru_cache(maxsize=2)
def gzip_bomb(inflated: int) -> bytes:
    """A gzip body of zeros that inflates to ``inflated`` bytes (made in pieces: the test
    itself never holds the inflated bytes)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(MIB)
    parts = [packer.compress(zeros) for _ in range(inflated // MIB)]
    return b"".join([*parts, packer.flush()])


# (row, the path the bomb is served at, how the client reads it)
READS: list[tuple[str, str, Callable[[LedgerClient, Any], object]]] = [
    ("a hash tile", "tile/0/", lambda c, key: c.hashes(TilePath(0, 0, 256))),
    ("the checkpoint", "checkpoint", lambda c, key: c.checkpoint(key)),
    ("an entry bundle", "tile/entries/", lambda c, key: c.bundle(TilePath(None, 0, 256))),
    ("the clients document", "clients", lambda c, key: c.clients()),
    ("an inclusion proof", "proof/inclusion", lambda c, key: c.inclusion_proof(0, 1)),
    ("a write's answer", "add", lambda c, key: c.submit({})),
]


@pytest.mark.parametrize(("row", "path", "read"), READS, ids=[r[0] for r in READS])
def test_a_gzip_bomb_is_stopped_at_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row: str, path: str, read: Any
) -> None:
    cap = 4 * MIB
    monkeypatch.setattr(client_module, "MAX_RESPONSE_BYTES", cap)
    log = FakeLog(make_key(tmp_path, "log"))
    log.gzip_bomb[path] = gzip_bomb(64 * MIB)  # about 64 KB on the wire, 16 times the cap
    with LedgerClient(URL, transport=log.transport()) as client:
        tracemalloc.start()
        try:
            with pytest.raises(LedgerError, match=rf"over {cap} bytes \(decompressed\)"):
                read(client, log.key.public_key)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 3 * cap, f"{row}: peak {peak / MIB:.1f} MiB for a {cap / MIB:.0f} MiB cap"


def test_the_real_cap_holds_against_a_one_megabyte_bomb(tmp_path: Path) -> None:
    """A 1 MB gzip that inflates to 1 GiB: refused at 64 MiB, memory bounded by the cap."""
    log = FakeLog(make_key(tmp_path, "log"))
    bomb = gzip_bomb(1024 * MIB)
    assert len(bomb) < 1.1 * MIB
    log.gzip_bomb["tile/entries/"] = bomb
    with LedgerClient(URL, transport=log.transport()) as client:
        tracemalloc.start()
        try:
            with pytest.raises(LedgerError, match="over 67108864 bytes"):
                client.bundle(TilePath(None, 0, 256))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 2 * client_module.MAX_RESPONSE_BYTES + 8 * MIB, peak


def test_a_gzip_answer_within_the_cap_is_read(tmp_path: Path) -> None:
    log = FakeLog(make_key(tmp_path, "log"))
    log.gzip_bomb["checkpoint"] = gzip.compress(log.note().encode())
    with LedgerClient(URL, transport=log.transport()) as client:
        assert client.checkpoint(log.key.public_key)[0].size == 0


@pytest.mark.parametrize(
    ("row", "body", "message"),
    [
        ("a corrupt gzip answer", b"\x1f\x8b\x08\x00garbage-not-deflate", "corrupt"),
        ("a truncated gzip answer", gzip.compress(b"x" * 1000)[:-12], "truncated"),
        ("data after the gzip stream", gzip.compress(b"{}") + b"more", "after the end"),
    ],
)
def test_a_broken_gzip_answer_is_a_clear_error(
    tmp_path: Path, row: str, body: bytes, message: str
) -> None:
    log = FakeLog(make_key(tmp_path, "log"))
    log.gzip_bomb["checkpoint"] = body
    with (
        LedgerClient(URL, transport=log.transport()) as client,
        pytest.raises(LedgerError, match=message),
    ):
        client.checkpoint(log.key.public_key)
