"""Auditing a remote log from its tiles (``attest ledger verify URL``) and mirroring it into
a local SQLite ledger (``attest ledger mirror URL local.sqlite``).

The audit trusts nothing the service says but the signature on its checkpoint: it fetches
every entry bundle and level-0 hash tile, checks each entry is a canonical ledger record and
hashes to the log's own leaf hash, rebuilds the tree and requires the signed root. The last
checkpoint the auditor verified is kept locally (``--state``, default one file per origin in
the user's state directory); the rebuilt tree must reproduce it at its size, so a log that
was rewritten, forked or truncated since is caught even when its new checkpoint is signed.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attest.certificate.signing import PublicKey
from attest.core.io import atomic_write_text
from attest.errors import LedgerError
from attest.ledger.audit import Problem
from attest.ledger.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from attest.ledger.entries import entry_from_leaf_data, utc_now
from attest.ledger.log import open_ledger
from attest.ledger.merkle import EMPTY_ROOT, frontier_push, frontier_root, leaf_hash
from attest.ledger.service.client import LedgerClient, Refused
from attest.ledger.service.tiles import TILE_WIDTH, TilePath, tiles_for_size
from attest.ledger.storage import LAST_CHECKPOINT_META

__all__ = ["RemoteAuditReport", "audit_remote", "default_state_path", "mirror_log"]

_PARALLEL = 8


def default_state_path(origin: str) -> Path:
    """Where the auditor keeps the last checkpoint it verified of ``origin``."""
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    digest = hashlib.sha256(origin.encode("utf-8")).hexdigest()[:16]
    return base / "gradient-attest" / "ledger-audit" / f"{digest}.checkpoint"


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
        return (
            f"{state}: {self.url} ({self.origin}): {self.entries_checked} of {self.tree_size} "
            f"entries rebuilt from tiles in {self.seconds:.2f} s; {since}"
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
            "problems": [p.to_json() for p in self.problems],
            "seconds": round(self.seconds, 3),
        }


def _tiles(
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


def _stored_previous(
    path: Path, key: PublicKey, key_name: str | None
) -> tuple[Checkpoint | None, Problem | None]:
    if not path.exists():
        return None, None
    try:
        return open_checkpoint(path.read_text(encoding="utf-8"), key, key_name=key_name), None
    except (OSError, UnicodeDecodeError, CheckpointError) as exc:
        return None, Problem(None, "state", f"the stored checkpoint {path} cannot be used: {exc}")


def audit_remote(
    url: str,
    key: PublicKey,
    *,
    key_name: str | None = None,
    state_path: Path | None = None,
    check_entries: bool = True,
) -> RemoteAuditReport:
    """Audit the whole remote log (module docstring); on success store its checkpoint."""
    started = time.perf_counter()
    report = RemoteAuditReport(url)
    with LedgerClient(url) as client:
        checkpoint, note = client.checkpoint(key, key_name)
        report.origin, report.tree_size = checkpoint.origin, checkpoint.size
        path = state_path or default_state_path(checkpoint.origin)
        report.state_path = str(path)
        previous, problem = _stored_previous(path, key, key_name)
        if problem:
            report.problems.append(problem)
        if previous is not None:
            report.previous_size = previous.size
            if previous.origin != checkpoint.origin:
                report.problems.append(
                    Problem(None, "origin", f"the stored checkpoint is of {previous.origin!r}")
                )
            if previous.size > checkpoint.size:
                report.problems.append(
                    Problem(
                        None,
                        "truncated",
                        f"the log's checkpoint covers {checkpoint.size} entries, fewer than the {previous.size} of the checkpoint you stored: the log was truncated or forked",
                    )
                )
        frontier: list[bytes] = []
        size = 0
        try:
            for _tile, entries, hashes in _tiles(client, 0, checkpoint.size):
                for data, served_hash in zip(entries, hashes, strict=True):
                    computed = leaf_hash(data)
                    if computed != served_hash:
                        report.problems.append(
                            Problem(
                                size, "edited", "its data does not hash to the log's own leaf hash"
                            )
                        )
                    if check_entries:
                        try:
                            entry_from_leaf_data(data)
                        except LedgerError as exc:
                            report.problems.append(Problem(size, "malformed", exc.message))
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
        atomic_write_text(path, note)
    return report


def mirror_log(
    url: str, local: Path, key: PublicKey, *, key_name: str | None = None
) -> dict[str, Any]:
    """Bring the local SQLite copy ``local`` up to the remote log's signed checkpoint.

    Everything runs in one exclusive local transaction: the new entries are appended, the
    copy's root must equal the signed root (else nothing is kept), and the checkpoint is
    stored with them, so the copy verifies with ``attest ledger verify --key``.
    """
    with LedgerClient(url) as client, open_ledger(local, create=True) as book:
        checkpoint, note = client.checkpoint(key, key_name)
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
            for tile, entries, _hashes in _tiles(client, start, checkpoint.size):
                fresh = entries[max(0, start - tile.index * TILE_WIDTH) :]
                for data in fresh:
                    entry_from_leaf_data(data)
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
