"""``attest ledger proof CERT --ledger URL|PATH``: the C2SP tlog-proof of a certificate's
``issued`` entry (:mod:`attest.ledger.tlog_proof`), from a local ledger or mirror (its latest
stored checkpoint, with the cosignatures a mirror kept) or from a ledger service (its published
checkpoint, the entry found in its tiles, the inclusion proof computed from its hash tiles, so a
static tiles URL serves as well). Either way the proof
is checked against the checkpoint's root before it is written, so a copy or a service that
does not reproduce its own checkpoint yields an error, never a proof that fails later.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from attest.errors import LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError, split_note
from attest.ledger.log import open_ledger
from attest.ledger.merkle import inclusion_proof, leaf_hash, verify_inclusion
from attest.ledger.storage import LAST_CHECKPOINT_META
from attest.ledger.tlog_proof import format_tlog_proof
from attest.ledger.writers import read_leaf

__all__ = ["build_tlog_proof"]


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


def _from_service(url: str, certificate_sha256: str, start: int) -> str:
    """Everything from the log's tiles (the service's, or its static files'): the checkpoint,
    the entry (searched from ``start``), and the inclusion proof computed from hash tiles."""
    from attest.ledger.service.client import LedgerClient
    from attest.ledger.service.remote_audit import entry_tiles
    from attest.ledger.service.tile_nodes import tile_node_reader

    with LedgerClient(url) as client:
        note = client.checkpoint_note()
        checkpoint = _parse(note, url)
        leaves = (
            (tile.index * 256 + offset, data)
            for tile, entries, _ in entry_tiles(client, start, checkpoint.size)
            for offset, data in enumerate(entries)
        )
        index, data = _find(leaves, certificate_sha256)
        proof = inclusion_proof(tile_node_reader(client, checkpoint.size), index, checkpoint.size)
    _checked(index, data, proof, checkpoint, url)
    return format_tlog_proof(index, proof, note, data)


def build_tlog_proof(ledger: str, certificate_sha256: str, *, start: int = 0) -> str:
    """The tlog-proof text of the certificate's ``issued`` entry in ``ledger`` (a path, or an
    http(s) URL of a ledger service or of its static tiles); ``start``: for a URL, the entries
    before it are not searched (the index a write was answered with)."""
    if ledger.startswith(("http://", "https://")):
        return _from_service(ledger, certificate_sha256, start)
    return _from_local(Path(ledger), certificate_sha256)
