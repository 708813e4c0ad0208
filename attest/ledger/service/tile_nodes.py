"""Merkle nodes read from a log's tiles, so a client computes any inclusion or consistency proof
itself (C2SP tlog-tiles: "clients can fetch all the tiles they need and compute any desired
proof"), from the service or from its static files alike, with no proof endpoint.

A node ``(h, j)`` (:mod:`attest.ledger.merkle`: the hash of leaves ``j*2**h .. (j+1)*2**h-1``)
is, with ``L = h // 8`` and ``r = h % 8``, the Merkle Tree Hash of ``2**r`` consecutive hashes
of one level-``L`` tile; tiles are fetched once per reader, at the width the tree of ``size``
gives them (a partial one read from the full tile once the log has grown past it: the
client's choice, :mod:`.client`). Nothing read is trusted: a proof made from served tiles
is checked against a signed root by its user.
"""

from __future__ import annotations

from collections.abc import Sequence

from attest.errors import LedgerError
from attest.ledger.merkle import NodeKey, NodeReader, root_from_leaf_hashes
from attest.ledger.service.client import LedgerClient
from attest.ledger.service.tiles import TILE_HEIGHT, TILE_WIDTH, TilePath

__all__ = ["tile_node_reader"]


def tile_node_reader(client: LedgerClient, size: int) -> NodeReader:
    """A node reader over the tiles of the tree of ``size`` entries at ``client``."""
    tiles: dict[tuple[int, int], list[bytes]] = {}

    def tile(level: int, index: int) -> list[bytes]:
        if (level, index) not in tiles:
            hashes = size >> (TILE_HEIGHT * level)
            width = min(TILE_WIDTH, hashes - index * TILE_WIDTH)
            if width <= 0:
                raise LedgerError(f"no tile {level}/{index} in a tree of {size} entries")
            tiles[(level, index)] = client.hashes(TilePath(level, index, width))
        return tiles[(level, index)]

    def read(keys: Sequence[NodeKey]) -> list[bytes]:
        out = []
        for height, j in keys:
            level, rise = divmod(height, TILE_HEIGHT)
            first = j << rise  # the first of the 2**rise tile hashes under the node
            if (first + (1 << rise)) << (TILE_HEIGHT * level) > size:
                raise LedgerError(f"node ({height}, {j}) is not in a tree of {size} entries")
            hashes = tile(level, first // TILE_WIDTH)
            at = first % TILE_WIDTH
            out.append(root_from_leaf_hashes(hashes[at : at + (1 << rise)]))
        return out

    return read
