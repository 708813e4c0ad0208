"""C2SP tlog-tiles paths, tile counts and entry bundles, against the spec's own examples."""

from __future__ import annotations

import pytest

from attest.errors import LedgerError
from attest.ledger.service.tiles import (
    TilePath,
    decode_bundle,
    encode_bundle,
    parse_tile_path,
    split_hashes,
    tile_path,
    tiles_for_size,
)


def test_paths_follow_the_spec() -> None:
    assert tile_path(0, 1234067) == "tile/0/x001/x234/067"  # the spec's example
    assert tile_path(None, 5, 17) == "tile/entries/005.p/17"
    assert tile_path(2, 0) == "tile/2/000"
    for level, index, width in ((0, 1234067, 256), (None, 5, 17), (63, 10**9, 255), (1, 0, 1)):
        rest = tile_path(level, index, width).removeprefix("tile/")
        assert parse_tile_path(rest) == TilePath(level, index, width)


@pytest.mark.parametrize(
    "rest",
    ["0/1234067", "00/000", "64/000", "0/x000/067", "0/001/234", "0/000.p/256", "0/000.p/0",
     "0/000.p/010", "entries", "tiles/000", "0/x1/000", "-1/000"],
)  # fmt: skip
def test_malformed_paths_are_refused(rest: str) -> None:
    with pytest.raises(LedgerError):
        parse_tile_path(rest)


def test_tile_counts_for_a_tree_of_70000_match_the_spec() -> None:
    level0 = list(tiles_for_size(70_000, 0))
    assert len(level0) == 274 and level0[-1] == TilePath(0, 273, 112)
    assert list(tiles_for_size(70_000, 1)) == [TilePath(1, 0, 256), TilePath(1, 1, 17)]
    assert list(tiles_for_size(70_000, 2)) == [TilePath(2, 0, 1)]
    assert list(tiles_for_size(256, 1)) == [TilePath(1, 0, 1)]
    assert TilePath(1, 1, 17).leaves_needed() == (256 + 17) * 256


def test_bundles_round_trip_and_are_checked() -> None:
    entries = [b"", b"a", b"x" * 0xFFFF]
    blob = encode_bundle(entries)
    assert blob[:2] == b"\x00\x00" and blob[2:4] == b"\x00\x01"
    assert decode_bundle(blob, 3) == entries
    with pytest.raises(LedgerError, match="expected 4"):
        decode_bundle(blob, 4)
    with pytest.raises(LedgerError, match="inside an entry"):
        decode_bundle(blob[:-1], 3)
    with pytest.raises(LedgerError, match="does not fit"):
        encode_bundle([b"x" * 0x10000])
    with pytest.raises(LedgerError):
        split_hashes(b"\x00" * 33, 1)
