"""Static tiles (``attest ledger serve --static-dir DIR``): the service writes the log's reads
as immutable files in the C2SP tlog-tiles layout, so any static web server (nginx, object
storage) serves them and no read reaches PostgreSQL:

    DIR/checkpoint                       the published checkpoint (cosigned when witnesses are
                                         configured), replaced atomically, written last
    DIR/tile/<L>/<N>[.p/<W>]             hash tiles, full and partial
    DIR/tile/entries/<N>[.p/<W>]         entry bundles, full and partial
    DIR/clients                          the latest signed clients document
    DIR/clients-version/<V>              every version of it (immutable)

One asyncio task publishes: for the newest checkpoint it was offered, it reads from the
database (its own connection, in a thread) the tiles the tree grew by since the last one it
wrote, writes each with :func:`attest.core.io.atomic_write_bytes` (temp file, fsync, rename),
and only then replaces ``checkpoint``, so every tile a published checkpoint needs exists first.
Partial tiles are kept (tlog-tiles: a log MUST serve the partial tiles of the sizes it
published a checkpoint for, MAY delete them later). Rounds start at most every
:data:`MIN_ROUND_S`, so under load one round covers many batches.

At start the directory's ``checkpoint`` says how far it was written: one that verifies under
the log's key and covers at most the database's entries is continued from; one that covers
more is refused (the database lost entries the directory published); anything else is
rewritten from the first entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread

from attest.certificate.signing import PublicKey
from attest.core.io import atomic_write_bytes
from attest.errors import AttestError, LedgerError
from attest.ledger.checkpoint import open_checkpoint
from attest.ledger.service.postgres import PostgresStorage
from attest.ledger.service.sequencer import ServedCheckpoint
from attest.ledger.service.tiles import (
    TILE_HEIGHT,
    TilePath,
    clients_version_path,
    encode_bundle,
    tile_path,
    tiles_for_size,
)
from attest.ledger.storage import StoredLeaf

__all__ = ["MIN_ROUND_S", "StaticTiles", "new_tiles"]

LOG = logging.getLogger("attest.ledger.service.static")
# The floor between round starts. A round's cost is per round, not per write: it rewrites the
# grown partial tiles and the checkpoint (each fsynced, whose kernel time the service pays) and
# leaves its partial tiles on disk. At 50 ms it took about a seventh of the service's samples
# under the bench's load (docs/benchmarks.md, "The floor and where a write's CPU goes"); a
# static read now trails the service's checkpoint by at most this and a round.
MIN_ROUND_S = 0.25
_RETRY_S = 1.0


def new_tiles(old: int, new: int) -> Iterator[TilePath]:
    """The hash tiles (every level) a tree of ``new`` entries has that one of ``old`` has not:
    at each level, those ending past the ``old`` tree's hashes of that level."""
    level = 0
    while new >> (TILE_HEIGHT * level):
        known = old >> (TILE_HEIGHT * level)
        for tile in tiles_for_size(new, level):
            if tile.index * 256 + tile.width > known:
                yield tile
        level += 1


class StaticTiles:
    """The files of one log in ``directory`` (module docstring)."""

    def __init__(self, directory: Path, dsn: str, log_key: PublicKey, origin: str) -> None:
        self.directory = directory
        self.dsn, self.key, self.origin = dsn, log_key, origin
        self.written = 0  # the size of the checkpoint the directory serves
        self._note = ""  # that checkpoint
        self._tail: list[StoredLeaf] = []  # the entries of the partial level-0 tile last written
        self._latest: ServedCheckpoint | None = None
        self._changed: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._storage: PostgresStorage | None = None

    # -- start ---------------------------------------------------------------------------------

    def prepare(self, stored_size: int, clients: list[dict[str, Any]]) -> None:
        """Check the directory against the database (module docstring) and write the clients
        documents. Blocking: called once before serving."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(
                f"cannot create the static directory {self.directory}: {exc.strerror}",
                hint="give --static-dir a folder the service can write",
            ) from None
        self.written = self._written_size(stored_size)
        for version, answer in enumerate(clients, start=1):
            self._write(clients_version_path(version), _json_bytes(answer))
        if clients:
            self._write("clients", _json_bytes(clients[-1]))

    def _written_size(self, stored_size: int) -> int:
        path = self.directory / "checkpoint"
        try:
            note = path.read_text("utf-8")
            checkpoint = open_checkpoint(note, self.key, key_name=self.origin)
        except FileNotFoundError:
            return 0
        except (OSError, UnicodeDecodeError, AttestError):
            LOG.warning("%s does not verify under the log's key: rewriting every tile", path)
            return 0
        if checkpoint.origin != self.origin:
            raise LedgerError(
                f"the static directory {self.directory} holds a checkpoint of"
                f" {checkpoint.origin!r}, not {self.origin!r}",
                hint="give each log its own --static-dir",
            )
        if checkpoint.size > stored_size:
            raise LedgerError(
                f"the static directory {self.directory} published a checkpoint of"
                f" {checkpoint.size} entries, but the database holds {stored_size}: the"
                " database lost entries that were published",
                hint="restore the database from a backup that holds them; keep the directory",
            )
        self._note = note
        return checkpoint.size

    async def start(self) -> None:
        self._changed = asyncio.Event()
        if self._latest is not None:
            self._changed.set()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._storage is not None:
            self._storage.close()

    # -- publishing ----------------------------------------------------------------------------

    def offer(self, served: ServedCheckpoint) -> None:
        """A newer checkpoint to publish (the sequencer or the witnessing calls this)."""
        if self._latest is None or served.head.size > self._latest.head.size:
            self._latest = served
            if self._changed is not None:
                self._changed.set()

    async def _loop(self) -> None:
        assert self._changed is not None
        loop = asyncio.get_running_loop()
        while True:
            await self._changed.wait()
            self._changed.clear()
            began = loop.time()
            target = self._latest
            if target is None or target.note == self._note or target.head.size < self.written:
                continue
            try:
                await anyio.to_thread.run_sync(self.publish, target)
            except Exception as exc:  # the database or the disk: logged, retried
                message = exc.message if isinstance(exc, AttestError) else repr(exc)
                LOG.error("static tiles of size %d: %s", target.head.size, message)
                if self._storage is not None:
                    self._storage.close()
                    self._storage = None
                await asyncio.sleep(_RETRY_S)
                self._changed.set()
                continue
            await asyncio.sleep(max(0.0, began + MIN_ROUND_S - loop.time()))

    def publish(self, target: ServedCheckpoint) -> None:
        """Write the tiles and bundles the tree grew by up to ``target``, then its checkpoint."""
        if self._storage is None:
            self._storage = PostgresStorage(self.dsn)
        storage = self._storage
        old, new = self.written, target.head.size
        for tile in new_tiles(old, new):
            if tile.level == 0:
                start = tile.index * 256
                leaves = self._leaves(storage, start, start + tile.width)
                hashes = [leaf.leaf_hash for leaf in leaves]
                self._write(
                    tile_path(None, tile.index, tile.width),
                    encode_bundle([leaf.data for leaf in leaves]),
                )
            else:
                hashes = storage.read_nodes(tile.node_keys())
            self._write(tile_path(tile.level, tile.index, tile.width), b"".join(hashes))
        self._write("checkpoint", target.note.encode("utf-8"))
        self.written, self._note = new, target.note

    def _leaves(self, storage: PostgresStorage, start: int, stop: int) -> list[StoredLeaf]:
        """Entries ``start..stop-1`` of one level-0 tile; those of the partial tile written last
        are kept in memory, so under load a round reads only the entries added since."""
        tail = self._tail[: stop - start] if self._tail and self._tail[0].index == start else []
        leaves = tail + list(storage.iter_leaves(start + len(tail), stop))
        if [leaf.index for leaf in leaves] != list(range(start, stop)):
            raise LedgerError(f"the database is missing entries of {start}..{stop - 1}")
        self._tail = leaves if len(leaves) < 256 else []
        return leaves

    def _write(self, relative: str, data: bytes) -> None:
        try:
            atomic_write_bytes(self.directory / relative, data, mode=0o644)
        except (OSError, AttestError) as exc:
            reason = exc.message if isinstance(exc, AttestError) else exc.strerror
            raise LedgerError(f"cannot write {self.directory / relative}: {reason}") from None


def _json_bytes(answer: dict[str, Any]) -> bytes:
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
