"""Auditing a remote log from its tiles (``attest ledger verify URL``) and mirroring it into
a local SQLite ledger (``attest ledger mirror URL local.sqlite``).

The audit trusts nothing the service says but the signature on its checkpoint: it fetches
every entry bundle and level-0 hash tile, checks each entry is a canonical ledger record and
hashes to the log's own leaf hash, rebuilds the tree and requires the signed root. The last
checkpoint the auditor verified is kept locally (``--state``, default one file per origin in
the user's state directory, keyed by the log's key: :mod:`attest.ledger.service.audit_state`);
the rebuilt tree must reproduce it at its size, so a log that was rewritten, forked or truncated
since is caught even when its new checkpoint is signed, and an origin change under the same key
is reported. The log's published clients (``/clients``) are checked against the stored ones
(append-only), and every client-signed leaf's signature against them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from attest.certificate.signing import PublicKey
from attest.errors import LedgerError
from attest.ledger.audit import Problem
from attest.ledger.checkpoint import Checkpoint
from attest.ledger.entries import utc_now
from attest.ledger.log import open_ledger
from attest.ledger.merkle import EMPTY_ROOT, frontier_push, frontier_root, leaf_hash
from attest.ledger.service.audit_state import (
    AuditState,
    check_clients,
    default_state_path,
    legacy_state_path,
    load_state,
    save_state,
)
from attest.ledger.service.client import LedgerClient, Refused
from attest.ledger.service.clients_doc import ClientsDocument
from attest.ledger.service.tiles import TILE_WIDTH, TilePath, tiles_for_size
from attest.ledger.storage import LAST_CHECKPOINT_META
from attest.ledger.witness.cosignature import WitnessPolicy
from attest.ledger.writers import entry_of_leaf, read_leaf

__all__ = ["RemoteAuditReport", "audit_remote", "entry_tiles", "mirror_log"]

_PARALLEL = 8


@dataclass
class RemoteAuditReport:
    """The outcome of :func:`audit_remote`."""

    url: str
    origin: str = ""
    tree_size: int = 0
    root: bytes = EMPTY_ROOT
    entries_checked: int = 0
    previous_size: int | None = None
    state_path: str = ""
    clients_version: int | None = None
    writers_checked: int = 0
    leaves_without_writer: int = 0
    problems: list[Problem] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        state = "OK" if self.ok else "TAMPERED"
        since = (
            "no earlier checkpoint stored"
            if self.previous_size is None
            else f"consistent with the stored checkpoint of {self.previous_size} entries"
            if self.ok
            else f"checked against the stored checkpoint of {self.previous_size} entries"
        )
        writers = (
            f"{self.writers_checked} client signatures checked against the published clients"
            + (f" (version {self.clients_version})" if self.clients_version else "")
        )
        if self.leaves_without_writer:
            writers += (
                f"; {self.leaves_without_writer} entries written before writers were recorded"
                " (no client signature to check)"
            )
        return (
            f"{state}: {self.url} ({self.origin}): {self.entries_checked} of {self.tree_size} "
            f"entries rebuilt from tiles in {self.seconds:.2f} s; {since}; {writers}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "url": self.url,
            "origin": self.origin,
            "tree_size": self.tree_size,
            "root": self.root.hex(),
            "entries_checked": self.entries_checked,
            "previous_size": self.previous_size,
            "state": self.state_path,
            "clients_version": self.clients_version,
            "writers_checked": self.writers_checked,
            "leaves_without_writer": self.leaves_without_writer,
            "problems": [p.to_json() for p in self.problems],
            "seconds": round(self.seconds, 3),
        }


def entry_tiles(
    client: LedgerClient, start: int, size: int
) -> Iterator[tuple[TilePath, list[bytes], list[bytes]]]:
    """Entry bundles and level-0 hash tiles from the one holding ``start`` up to ``size``,
    fetched :data:`_PARALLEL` at a time, yielded in order."""
    wanted = [t for t in tiles_for_size(size) if (t.index + 1) * TILE_WIDTH > start]
    wanted = [TilePath(None, t.index, t.width) for t in wanted]

    def fetch(tile: TilePath) -> tuple[TilePath, list[bytes], list[bytes]]:
        return tile, client.bundle(tile), client.hashes(TilePath(0, tile.index, tile.width))

    with ThreadPoolExecutor(_PARALLEL) as pool:
        for at in range(0, len(wanted), _PARALLEL * 4):
            yield from pool.map(fetch, wanted[at : at + _PARALLEL * 4])


def audit_remote(
    url: str,
    key: PublicKey,
    *,
    key_name: str | None = None,
    state_path: Path | None = None,
    check_entries: bool = True,
    origin: str | None = None,
    transport: httpx.BaseTransport | None = None,
    policy: WitnessPolicy | None = None,
) -> RemoteAuditReport:
    """Audit the whole remote log (module docstring); on success store the state.
    ``origin``: the log's origin as the auditor names it (the checkpoint must carry it);
    ``policy``: the witnesses whose quorum must have cosigned the log's checkpoint."""
    started = time.perf_counter()
    report = RemoteAuditReport(url)
    with LedgerClient(url, transport=transport) as client:
        checkpoint, note = client.checkpoint(key, key_name)
        report.origin, report.tree_size = checkpoint.origin, checkpoint.size
        path = state_path or default_state_path(key, key_name)
        report.state_path = str(path)
        legacy = legacy_state_path(checkpoint.origin)
        source = legacy if state_path is None and not path.exists() and legacy.exists() else path
        saved, problem = load_state(source, key, key_name)
        if problem:
            report.problems.append(problem)
        _check_origin(report, checkpoint, saved, origin)
        witnessed = policy.problem(note) if policy is not None else None
        if witnessed is not None:
            report.problems.append(Problem(None, "witness", f"{witnessed[0]}: {witnessed[1]}"))
        previous = saved.checkpoint if saved is not None else None
        if previous is not None:
            report.previous_size = previous.size
            if previous.size > checkpoint.size:
                report.problems.append(
                    Problem(
                        None,
                        "truncated",
                        f"the log's checkpoint covers {checkpoint.size} entries, fewer than the {previous.size} of the checkpoint you stored: the log was truncated or forked",
                    )
                )
        clients, clients_answer, found = check_clients(client, key, checkpoint.origin, saved)
        report.problems += found
        report.clients_version = clients.version if clients is not None else None
        writers = _WriterCheck(report, clients, checkpoint.origin, check=not found)
        frontier: list[bytes] = []
        size = 0
        try:
            for _tile, entries, hashes in entry_tiles(client, 0, checkpoint.size):
                for data, served_hash in zip(entries, hashes, strict=True):
                    computed = leaf_hash(data)
                    if computed != served_hash:
                        report.problems.append(
                            Problem(
                                size, "edited", "its data does not hash to the log's own leaf hash"
                            )
                        )
                    if check_entries:
                        writers.check(size, data)
                    frontier_push(frontier, size, computed)
                    size += 1
                    if (
                        previous is not None
                        and size == previous.size
                        and frontier_root(frontier) != previous.root
                    ):
                        report.problems.append(
                            Problem(
                                None,
                                "forked",
                                f"the entries no longer reproduce the checkpoint you stored (size {previous.size}): entries below {previous.size} were changed, deleted or reordered",
                            )
                        )
        except Refused as exc:
            report.problems.append(Problem(size, "unreadable", exc.message))
        report.entries_checked = size
        report.root = frontier_root(frontier)
        if size == checkpoint.size and report.root != checkpoint.root:
            report.problems.append(
                Problem(
                    None, "root", "the entries served do not reproduce the log's signed checkpoint"
                )
            )
    report.seconds = time.perf_counter() - started
    if report.ok:
        save_state(path, key, key_name, checkpoint, note, clients_answer)
    return report


def _check_origin(
    report: RemoteAuditReport,
    checkpoint: Checkpoint,
    saved: AuditState | None,
    named: str | None,
) -> None:
    """The origin the auditor named, and the one stored for this key, must be the log's."""
    if named is not None and checkpoint.origin != named:
        report.problems.append(
            Problem(
                None,
                "origin",
                f"the log's checkpoint is of {checkpoint.origin!r}, not {named!r} (--origin)",
            )
        )
    if saved is not None and saved.checkpoint.origin != checkpoint.origin:
        report.problems.append(
            Problem(
                None,
                "origin",
                f"the log signed by this key was {saved.checkpoint.origin!r} when you stored"
                f" its state; it now presents {checkpoint.origin!r}: a log keeps its origin, so"
                " a log re-signed under a new origin is refused, not audited as a new log",
            )
        )


class _WriterCheck:
    """Per leaf: a canonical record, and for a service-written leaf, a client signature that
    verifies under a key the log published for that client."""

    def __init__(
        self,
        report: RemoteAuditReport,
        clients: ClientsDocument | None,
        origin: str,
        *,
        check: bool,
    ) -> None:
        self.report, self.origin, self.enabled = report, origin, check
        self.keys = clients.keys() if clients is not None else None
        self.unpublished = False

    def check(self, index: int, data: bytes) -> None:
        report = self.report
        try:
            record = read_leaf(data)
        except LedgerError as exc:
            report.problems.append(Problem(index, "malformed", exc.message))
            return
        writer = record.writer
        if writer is None:
            report.leaves_without_writer += 1
            return
        if not self.enabled:  # the clients document itself was refused: reported once
            return
        if self.keys is None:
            if not self.unpublished:
                self.unpublished = True
                report.problems.append(
                    Problem(
                        index,
                        "writer",
                        "the log holds client-signed leaves but publishes no clients document:"
                        " who wrote them cannot be checked",
                    )
                )
            return
        key = self.keys.get((writer.client, writer.key_id))
        if key is None:
            problem = (
                f"written as client {writer.client!r} with key {writer.key_id[:16]}, which the"
                " log's published clients do not list"
            )
        elif writer.origin != self.origin:
            problem = f"the client signed it for {writer.origin!r}, not this log"
        elif not writer.verifies(key, record.entry_data):
            problem = f"client {writer.client!r}'s signature over the entry does not verify"
        else:
            report.writers_checked += 1
            return
        report.problems.append(Problem(index, "writer", problem))


def mirror_log(
    url: str,
    local: Path,
    key: PublicKey,
    *,
    key_name: str | None = None,
    policy: WitnessPolicy | None = None,
) -> dict[str, Any]:
    """Bring the local SQLite copy ``local`` up to the remote log's signed checkpoint (with
    ``policy``, one its witness quorum cosigned: else :class:`QuorumNotMet`, nothing added).

    Everything runs in one exclusive local transaction: the new entries are appended, the
    copy's root must equal the signed root (else nothing is kept), and the checkpoint is
    stored with them, so the copy verifies with ``attest ledger verify --key``.
    """
    with LedgerClient(url) as client, open_ledger(local, create=True) as book:
        checkpoint, note = client.checkpoint(key, key_name)
        if policy is not None:
            policy.require(note)
        storage = book.storage
        fixed = storage.get_meta("origin")
        if fixed is not None and fixed != checkpoint.origin:
            raise LedgerError(f"{local} mirrors {fixed!r}, not {checkpoint.origin!r}")
        with storage.exclusive(durable=True):
            start = storage.tree_head().size
            if start > checkpoint.size:
                raise LedgerError(
                    f"{local} holds {start} entries but the log's checkpoint only {checkpoint.size}:"
                    " the remote log was truncated, or this is not its mirror"
                )
            at = start
            for tile, entries, _hashes in entry_tiles(client, start, checkpoint.size):
                fresh = entries[max(0, start - tile.index * TILE_WIDTH) :]
                for data in fresh:
                    entry_of_leaf(data)
                if fresh:
                    storage.append_many(fresh)
                    at += len(fresh)
            head = storage.tree_head()
            if (head.size, head.root) != (checkpoint.size, checkpoint.root):
                raise LedgerError(
                    f"the copy does not reproduce the log's signed checkpoint of {checkpoint.size}"
                    " entries: the remote log was rewritten since the copy was made, or served"
                    " wrong entries; nothing was added",
                    hint="keep the copy: it is evidence; run attest ledger verify URL",
                )
            if checkpoint.size > start or not storage.checkpoints():
                storage.add_checkpoint(
                    checkpoint.size, checkpoint.root, checkpoint.origin, note, utc_now()
                )
                storage.set_meta(LAST_CHECKPOINT_META, note)
            if fixed is None:
                storage.set_meta("origin", checkpoint.origin)
    return {"url": url, "local": str(local), "added": at - start, "tree_size": checkpoint.size}
