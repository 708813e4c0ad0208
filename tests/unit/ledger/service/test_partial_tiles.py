"""A client skips partial tiles the log has grown past (C2SP tlog-tiles): once a checkpoint it
fetched shows the full tile exists, it reads that one (its first entries or hashes) instead of
the partial one, and a partial tile the log deleted (404) is read from the full tile too."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from attest.ledger.service.client import LedgerClient, Refused
from attest.ledger.service.tiles import TilePath, encode_bundle, tile_path

ENTRIES = [b"entry %d" % n for n in range(300)]
HASHES = [hashlib.sha256(e).digest() for e in ENTRIES]


class _Log:
    """Tiles of a 300-entry log as files: the full tile 0, and the partial 0.p/100 left over
    from when the log had 100 entries (unless deleted)."""

    def __init__(self, size: int, *, partials: bool = True) -> None:
        self.size = size
        self.files = {
            tile_path(None, 0): encode_bundle(ENTRIES[:256]),
            tile_path(0, 0): b"".join(HASHES[:256]),
        }
        if partials:
            self.files[tile_path(None, 0, 100)] = encode_bundle(ENTRIES[:100])
            self.files[tile_path(0, 0, 100)] = b"".join(HASHES[:100])
        self.asked: list[str] = []

    def client(self) -> LedgerClient:
        def handler(request: httpx.Request) -> httpx.Response:
            path = request.url.path.lstrip("/")
            self.asked.append(path)
            if path == "checkpoint":
                body = f"log.test/x\n{self.size}\nAAAA\n\n".encode()
            elif path in self.files:
                body = self.files[path]
            else:
                return httpx.Response(404, stream=httpx.ByteStream(b'{"error": "NOT_FOUND"}'))
            return httpx.Response(200, stream=httpx.ByteStream(body))

        return LedgerClient("http://log.test/", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("partials", [True, False])
def test_a_partial_the_log_has_grown_past_is_read_from_the_full_tile(partials: bool) -> None:
    log = _Log(300, partials=partials)
    with log.client() as client:
        client.checkpoint_note()
        assert client.bundle(TilePath(None, 0, 100)) == ENTRIES[:100]
        assert client.hashes(TilePath(0, 0, 100)) == HASHES[:100]
    assert log.asked == ["checkpoint", tile_path(None, 0), tile_path(0, 0)]


def test_a_partial_is_read_while_the_log_has_not_grown_past_it() -> None:
    log = _Log(100)
    with log.client() as client:
        client.checkpoint_note()
        assert client.bundle(TilePath(None, 0, 100)) == ENTRIES[:100]
    assert log.asked == ["checkpoint", tile_path(None, 0, 100)]


def test_a_deleted_partial_is_read_from_the_full_tile() -> None:
    log = _Log(100, partials=False)  # a checkpoint of 100 seen, the log grew since
    with log.client() as client:
        client.checkpoint_note()
        assert client.hashes(TilePath(0, 0, 100)) == HASHES[:100]
    assert log.asked == ["checkpoint", tile_path(0, 0, 100), tile_path(0, 0)]


def test_a_checkpoint_that_overstates_the_size_falls_back_to_the_partial() -> None:
    log = _Log(300)
    del log.files[tile_path(None, 0)]  # no full tile, whatever the checkpoint said
    with log.client() as client:
        client.checkpoint_note()
        assert client.bundle(TilePath(None, 0, 100)) == ENTRIES[:100]
        del log.files[tile_path(None, 0, 100)]
        with pytest.raises(Refused):
            client.bundle(TilePath(None, 0, 100))
