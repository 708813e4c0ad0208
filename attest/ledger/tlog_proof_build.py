"""``attest ledger proof CERT --ledger URL|PATH``: the C2SP tlog-proof of a certificate's
``issued`` entry (:mod:`attest.ledger.tlog_proof`), from a local ledger or mirror (its latest
stored checkpoint, with the cosignatures a mirror kept) or from a ledger service (its published
checkpoint, the entry found in its tiles, the inclusion proof computed from its hash tiles, so a
static tiles URL serves as well). Given the entry's index (the write's answer kept in the spool,
or ``--index``), only the one entry bundle holding it is read, not every tile: the index is a
hint, never trusted, since the entry there must be this certificate's ``issued`` entry
(:class:`NotAtIndex` otherwise) and its inclusion proof must verify. Either way the proof
is checked against the checkpoint's root before it is written, so a copy or a service that
does not reproduce its own checkpoint yields an error, never a proof that fails later.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from attest.errors import LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError, split_note
from attest.ledger.log import open_ledger
from attest.ledger.merkle import inclusion_proof, leaf_hash, verify_inclusion
from attest.ledger.service.tiles import TILE_WIDTH, TilePath
from attest.ledger.storage import LAST_CHECKPOINT_META
from attest.ledger.tlog_proof import format_tlog_proof
from attest.ledger.writers import read_leaf

if TYPE_CHECKING:  # the client (httpx) is imported only when a URL is read
    from attest.ledger.service.client import LedgerClient

__all__ = ["NotAtIndex", "build_tlog_proof", "spooled_index"]


class NotAtIndex(LedgerError):
    """The entry at the index given is not the certificate's ``issued`` entry."""


def _is_issue_of(data: bytes, certificate_sha256: str) -> bool:
    entry = read_leaf(data).entry
    return entry.event == "issued" and entry.certificate.sha256 == certificate_sha256


def _find(leaves: Iterable[tuple[int, bytes]], certificate_sha256: str) -> tuple[int, bytes]:
    for index, data in leaves:
        if _is_issue_of(data, certificate_sha256):
            return index, data
    raise LedgerError(
        f"the log's checkpoint covers no 'issued' entry of this certificate (sha256"
        f" {certificate_sha256[:16]}...)",
        hint="record it (attest ledger append CERT, or certify --ledger) and wait for the next"
        " checkpoint (attest ledger checkpoint for a local ledger)",
    )


def _parse(note: str, where: str) -> Checkpoint:
    try:
        return Checkpoint.parse_body(split_note(note)[0])
    except CheckpointError as exc:
        raise LedgerError(f"{where}: its checkpoint is malformed: {exc.message}") from None


def _checked(
    index: int, data: bytes, path: list[bytes], checkpoint: Checkpoint, where: str
) -> None:
    if not verify_inclusion(index, checkpoint.size, leaf_hash(data), path, checkpoint.root):
        raise LedgerError(
            f"{where}: entry {index} is not proven in its own checkpoint of {checkpoint.size}"
            " entries: the log or the copy is inconsistent",
            hint="audit it: attest ledger verify",
        )


def _from_local(path: Path, certificate_sha256: str) -> str:
    with open_ledger(path) as book:
        storage = book.storage
        with storage.snapshot():
            stored = storage.checkpoints()
            note = storage.get_meta(LAST_CHECKPOINT_META) or (stored[-1].note if stored else None)
            if note is None:
                raise LedgerError(
                    f"{path} holds no signed checkpoint",
                    hint="sign one: attest ledger checkpoint --key LEDGER.key",
                )
            checkpoint = _parse(note, str(path))
            leaves = ((leaf.index, leaf.data) for leaf in storage.iter_leaves(0, checkpoint.size))
            index, data = _find(leaves, certificate_sha256)
            proof = inclusion_proof(storage.read_nodes, index, checkpoint.size)
    _checked(index, data, proof, checkpoint, str(path))
    return format_tlog_proof(index, proof, note, data)


def _at_index(client: LedgerClient, index: int, size: int, certificate_sha256: str) -> bytes:
    """The leaf data at ``index``, read from the one entry bundle holding it, which must be the
    certificate's ``issued`` entry."""
    if not 0 <= index < size:
        raise NotAtIndex(f"entry {index} is not in the log's checkpoint of {size} entries")
    first = index - index % TILE_WIDTH
    width = min(TILE_WIDTH, size - first)
    data = client.bundle(TilePath(None, first // TILE_WIDTH, width))[index - first]
    if not _is_issue_of(data, certificate_sha256):
        raise NotAtIndex(
            f"entry {index} of the log is not the 'issued' entry of this certificate (sha256"
            f" {certificate_sha256[:16]}...)",
            hint="give the index the write was answered with, or leave --index out to search",
        )
    return data


def _from_service(url: str, certificate_sha256: str, start: int, index: int | None) -> str:
    """Everything from the log's tiles (the service's, or its static files'): the checkpoint,
    the entry (at ``index``, else searched from ``start``), and the inclusion proof computed
    from hash tiles."""
    from attest.ledger.service.client import LedgerClient
    from attest.ledger.service.remote_audit import entry_tiles
    from attest.ledger.service.tile_nodes import tile_node_reader

    with LedgerClient(url) as client:
        note = client.checkpoint_note()
        checkpoint = _parse(note, url)
        if index is not None:
            data = _at_index(client, index, checkpoint.size, certificate_sha256)
        else:
            leaves = (
                (tile.index * TILE_WIDTH + offset, data)
                for tile, entries, _ in entry_tiles(client, start, checkpoint.size)
                for offset, data in enumerate(entries)
            )
            index, data = _find(leaves, certificate_sha256)
        proof = inclusion_proof(tile_node_reader(client, checkpoint.size), index, checkpoint.size)
    _checked(index, data, proof, checkpoint, url)
    return format_tlog_proof(index, proof, note, data)


def build_tlog_proof(
    ledger: str, certificate_sha256: str, *, start: int = 0, index: int | None = None
) -> str:
    """The tlog-proof text of the certificate's ``issued`` entry in ``ledger`` (a path, or an
    http(s) URL of a ledger service or of its static tiles); for a URL, ``index``: the entry's
    index (the one a write was answered with; :class:`NotAtIndex` when the entry there is not
    it), else ``start``: the entries before it are not searched."""
    if ledger.startswith(("http://", "https://")):
        return _from_service(ledger, certificate_sha256, start, index)
    return _from_local(Path(ledger), certificate_sha256)


def spooled_index(url: str, certificate_sha256: str, spool_path: Path | None = None) -> int | None:
    """The index the service at ``url`` answered this machine's write of the certificate's
    ``issued`` entry with (``certify --ledger URL``), as the spool kept it once proven; None
    without a spool or such a write. A hint for :func:`build_tlog_proof`, checked there."""
    from attest.ledger.service.spool import Spool, default_spool_path

    path = spool_path or default_spool_path()
    if not path.is_file():
        return None
    with Spool(path) as spool:
        for index, data in spool.recorded(url):
            try:
                if _is_issue_of(data, certificate_sha256):
                    return index
            except LedgerError:  # an event this version cannot read: not the one
                continue
    return None
