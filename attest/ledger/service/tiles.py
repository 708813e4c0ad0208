"""C2SP tlog-tiles (https://c2sp.org/tlog-tiles): tile paths, tile ranges and entry bundles.

A tile at level ``L`` and index ``N`` holds the Merkle Tree Hashes of the perfect subtrees of
``256**L`` leaves ``N*256 .. N*256+W-1`` (``W`` = 256 for a full tile, 1..255 for a partial
one): the stored nodes ``(8*L, j)`` of :mod:`attest.ledger.merkle`. An entry bundle holds the
leaf data of level-0 tile ``N``, each prefixed by its length as a big-endian uint16.

Hand-written (path grammar and byte layout, about 100 lines): no Python package implements
tlog-tiles; the layout follows the spec, not any implementation's code.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from attest.errors import LedgerError
from attest.ledger.merkle import HASH_SIZE, NodeKey

__all__ = [
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "TilePath",
    "clients_version_path",
    "decode_bundle",
    "encode_bundle",
    "parse_tile_path",
    "tile_path",
    "tiles_for_size",
]

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT  # 256
MAX_ENTRY_BYTES = 0xFFFF  # the uint16 length prefix of an entry bundle
_INDEX_PART = re.compile(r"x\d{3}")
_LAST_PART = re.compile(r"\d{3}")
_LEVEL = re.compile(r"0|[1-9]\d?")
_WIDTH = re.compile(r"[1-9]\d{0,2}")


@dataclass(frozen=True)
class TilePath:
    """A parsed tile path: ``level`` (None for an entry bundle), ``index`` and ``width``."""

    level: int | None
    index: int
    width: int

    @property
    def is_partial(self) -> bool:
        return self.width < TILE_WIDTH

    def node_keys(self) -> list[NodeKey]:
        """The Merkle nodes ``(8*level, j)`` this hash tile holds, in order."""
        height = TILE_HEIGHT * (self.level or 0)
        first = self.index * TILE_WIDTH
        return [(height, first + i) for i in range(self.width)]

    def leaves_needed(self) -> int:
        """The tree size this tile needs: its last hash covers leaves up to here."""
        height = TILE_HEIGHT * (self.level or 0)
        return (self.index * TILE_WIDTH + self.width) << height


def _encode_index(index: int) -> str:
    digits = str(index)
    digits = "0" * (-len(digits) % 3) + digits
    parts = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*("x" + p for p in parts[:-1]), parts[-1]])


def tile_path(level: int | None, index: int, width: int = TILE_WIDTH) -> str:
    """The path below the log prefix: ``tile/<L>/<N>[.p/<W>]`` or ``tile/entries/<N>[.p/<W>]``."""
    head = "tile/entries" if level is None else f"tile/{level}"
    suffix = "" if width == TILE_WIDTH else f".p/{width}"
    return f"{head}/{_encode_index(index)}{suffix}"


def parse_tile_path(path: str) -> TilePath:
    """Parse ``<L or entries>/<N>[.p/<W>]`` (the part after ``tile/``) strictly, as the spec
    spells it (no leading zeros in L and W, 3-digit index groups, ``x`` on all but the last)."""
    parts = path.split("/")
    if len(parts) < 2:
        raise LedgerError(f"tile path {path!r} is too short")
    head, rest = parts[0], parts[1:]
    width = TILE_WIDTH
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        if not _WIDTH.fullmatch(rest[-1]) or int(rest[-1]) >= TILE_WIDTH:
            raise LedgerError(f"tile path {path!r}: partial width must be 1..255")
        width = int(rest[-1])
        rest = [*rest[:-2], rest[-2][:-2]]
    if not rest or not _LAST_PART.fullmatch(rest[-1]):
        raise LedgerError(f"tile path {path!r}: the index must end in a 3-digit group")
    if not all(_INDEX_PART.fullmatch(p) for p in rest[:-1]):
        raise LedgerError(f"tile path {path!r}: index groups before the last start with x")
    if len(rest) > 1 and rest[0] == "x000":
        raise LedgerError(f"tile path {path!r}: the index has leading zero groups")
    index = int("".join(p.lstrip("x") for p in rest))
    if head == "entries":
        return TilePath(None, index, width)
    if not _LEVEL.fullmatch(head) or int(head) > 63:
        raise LedgerError(f"tile path {path!r}: the level must be 0..63")
    return TilePath(int(head), index, width)


def tiles_for_size(size: int, level: int | None = None) -> Iterator[TilePath]:
    """Every tile (full, then the partial one if any) of one level for a tree of ``size``."""
    height = TILE_HEIGHT * (level or 0)
    hashes = size >> height
    for index in range(hashes // TILE_WIDTH):
        yield TilePath(level, index, TILE_WIDTH)
    if hashes % TILE_WIDTH:
        yield TilePath(level, hashes // TILE_WIDTH, hashes % TILE_WIDTH)


def clients_version_path(version: int) -> str:
    """Where version ``version`` of the log's signed clients document is read, from the service
    and from its static files alike (not tlog-tiles: this log's own addition)."""
    return f"clients-version/{version}"


def encode_bundle(entries: list[bytes]) -> bytes:
    """An entry bundle: each entry prefixed by its length as a big-endian uint16."""
    out = bytearray()
    for data in entries:
        if len(data) > MAX_ENTRY_BYTES:
            raise LedgerError(f"an entry of {len(data)} bytes does not fit a tile entry bundle")
        out += struct.pack(">H", len(data)) + data
    return bytes(out)


def decode_bundle(blob: bytes, expected: int) -> list[bytes]:
    """The entries of a bundle, which must hold exactly ``expected`` of them."""
    entries: list[bytes] = []
    at = 0
    while at < len(blob):
        if at + 2 > len(blob):
            raise LedgerError("entry bundle ends inside a length prefix")
        (length,) = struct.unpack_from(">H", blob, at)
        if at + 2 + length > len(blob):
            raise LedgerError("entry bundle ends inside an entry")
        entries.append(blob[at + 2 : at + 2 + length])
        at += 2 + length
    if len(entries) != expected:
        raise LedgerError(f"entry bundle holds {len(entries)} entries, expected {expected}")
    return entries


def split_hashes(blob: bytes, expected: int) -> list[bytes]:
    """The hashes of a hash tile, which must hold exactly ``expected`` of them."""
    if len(blob) != expected * HASH_SIZE:
        raise LedgerError(f"hash tile is {len(blob)} bytes, expected {expected * HASH_SIZE}")
    return [blob[i : i + HASH_SIZE] for i in range(0, len(blob), HASH_SIZE)]
