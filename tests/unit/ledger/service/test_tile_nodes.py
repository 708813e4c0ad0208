"""Proofs computed by the client from a log's tiles (attest.ledger.service.tile_nodes) equal
the proofs made from the whole tree, across full and partial tiles of levels 0 to 2."""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import cache

import httpx
import pytest

from attest.errors import LedgerError
from attest.ledger.merkle import (
    NodeKey,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root_from_leaf_hashes,
)
from attest.ledger.service.client import LedgerClient
from attest.ledger.service.tile_nodes import tile_node_reader
from attest.ledger.service.tiles import parse_tile_path

LEAVES = [leaf_hash(b"entry %d" % n) for n in range(66_000)]  # level 2 starts at 65,536
SIZES = [1, 2, 255, 256, 257, 300, 511, 65_535, 65_536, 65_537, 66_000]


@cache
def _node(height: int, index: int) -> bytes:
    return root_from_leaf_hashes(LEAVES[index << height : (index + 1) << height])


def _whole(keys: Sequence[NodeKey]) -> list[bytes]:
    return [_node(h, j) for h, j in keys]


def _client(fetched: list[str]) -> LedgerClient:
    """A log whose hash tiles are computed from LEAVES (any size: tiles are immutable)."""

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path.lstrip("/")
        fetched.append(path)
        tile = parse_tile_path(path.removeprefix("tile/"))
        assert tile.level is not None
        first = tile.index * 256
        body = b"".join(_node(8 * tile.level, first + i) for i in range(tile.width))
        return httpx.Response(200, stream=httpx.ByteStream(body))

    return LedgerClient("http://log.test/", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("size", SIZES)
def test_inclusion_and_consistency_proofs_from_tiles(size: int) -> None:
    rng = random.Random(size)
    fetched: list[str] = []
    with _client(fetched) as client:
        read = tile_node_reader(client, size)
        for index in {0, size - 1, *rng.sample(range(size), min(size, 5))}:
            assert inclusion_proof(read, index, size) == inclusion_proof(_whole, index, size)
        for old in {1, size, *rng.sample(range(1, size + 1), min(size, 4))}:
            assert consistency_proof(read, old, size) == consistency_proof(_whole, old, size)
    assert len(fetched) == len(set(fetched))  # each tile fetched once per reader
    # partial tiles are fetched at the width the size gives them, never wider
    assert all(parse_tile_path(p.removeprefix("tile/")).leaves_needed() <= size for p in fetched)


def test_a_node_outside_the_tree_is_refused() -> None:
    with _client([]) as client:
        read = tile_node_reader(client, 300)
        with pytest.raises(LedgerError, match="not in a tree of 300"):
            read([(8, 1)])  # entries 256..511
