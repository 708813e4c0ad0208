"""The audit log: entries on top of a :class:`~attest.ledger.storage.LedgerStorage`, with proofs
and signed checkpoints.

Where the ledger lives when no ``--ledger`` is given: ``$ATTEST_LEDGER`` if set, else
``$XDG_DATA_HOME/gradient-attest/ledger.sqlite`` (``~/.local/share/gradient-attest/ledger.sqlite``
when ``XDG_DATA_HOME`` is unset; ``%LOCALAPPDATA%`` on Windows, ``~/Library/Application Support``
on macOS).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attest.certificate.signing import PrivateKey
from attest.errors import LedgerError
from attest.ledger.checkpoint import (
    Checkpoint,
    CheckpointError,
    check_origin,
    open_checkpoint,
    sign_checkpoint,
)
from attest.ledger.entries import LedgerEntry, utc_now
from attest.ledger.merkle import (
    EMPTY_ROOT,
    consistency_proof,
    frontier_push,
    frontier_root,
    inclusion_proof,
    leaf_hash,
    perfect_subtrees,
    subtree_hash,
    verify_consistency,
    verify_inclusion,
)
from attest.ledger.sqlite import SQLiteStorage, Synchronous
from attest.ledger.storage import (
    LAST_CHECKPOINT_META,
    AppendResult,
    LedgerStorage,
    StoredCheckpoint,
    StoredLeaf,
    TreeHead,
)
from attest.ledger.writers import entry_of_leaf

__all__ = [
    "LEDGER_ENV",
    "ConsistencyResult",
    "InclusionResult",
    "Ledger",
    "default_ledger_path",
    "open_ledger",
]

LEDGER_ENV = "ATTEST_LEDGER"
_APP_DIR = "gradient-attest"


def default_ledger_path() -> Path:
    """``$ATTEST_LEDGER``, else ``ledger.sqlite`` in the user's data directory (module docstring)."""
    explicit = os.environ.get(LEDGER_ENV)
    if explicit:
        return Path(explicit).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / _APP_DIR / "ledger.sqlite"


def open_ledger(
    path: str | Path | None = None, *, create: bool = False, synchronous: Synchronous | None = None
) -> Ledger:
    """Open the SQLite ledger at ``path`` (default: :func:`default_ledger_path`)."""
    target = Path(path) if path is not None else default_ledger_path()
    return Ledger(SQLiteStorage(target, create=create, synchronous=synchronous))


@dataclass(frozen=True)
class InclusionResult:
    """An inclusion proof of one entry relative to a signed checkpoint."""

    index: int
    leaf: StoredLeaf
    entry: LedgerEntry
    proof: list[bytes]
    checkpoint: StoredCheckpoint


@dataclass(frozen=True)
class ConsistencyResult:
    """A consistency proof between two tree sizes, with the checkpoints signed at them."""

    old: TreeHead
    new: TreeHead
    proof: list[bytes]
    old_checkpoint: StoredCheckpoint | None
    new_checkpoint: StoredCheckpoint | None


class Ledger:
    """An append-only Merkle log of :class:`LedgerEntry` records."""

    def __init__(self, storage: LedgerStorage) -> None:
        self.storage = storage

    def close(self) -> None:
        """Release the storage."""
        self.storage.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- entries ----------------------------------------------------------------------------

    def append(self, entry: LedgerEntry) -> AppendResult:
        """Append one entry (one transaction); returns its index and the new tree head.
        Refuses (:class:`LedgerError`) when fewer entries are stored than a signed checkpoint
        covers: the index would be reused."""
        return self.storage.append(entry.leaf_data)

    def tree_head(self) -> TreeHead:
        """The current tree size and root."""
        return self.storage.tree_head()

    def entry(self, index: int) -> tuple[StoredLeaf, LedgerEntry]:
        """The stored entry at ``index``, checked against its stored leaf hash."""
        leaf = self.storage.leaf(index)
        if leaf_hash(leaf.data) != leaf.leaf_hash:
            raise LedgerError(
                f"entry {index} does not match its stored leaf hash: the row was edited",
                hint="run attest ledger verify",
            )
        return leaf, entry_of_leaf(leaf.data)

    # -- proofs -----------------------------------------------------------------------------

    def _checkpoint_for(self, index: int, tree_size: int | None) -> StoredCheckpoint:
        candidates = [cp for cp in self.storage.checkpoints() if cp.size > index]
        if tree_size is not None:
            candidates = [cp for cp in candidates if cp.size == tree_size]
        if not candidates:
            what = f"of size {tree_size}" if tree_size is not None else "covering it"
            raise LedgerError(
                f"entry {index}: no signed checkpoint {what}",
                hint="sign one first: attest ledger checkpoint --key KEY",
            )
        return max(candidates, key=lambda cp: (cp.size, cp.id))

    def prove_inclusion(self, index: int, tree_size: int | None = None) -> InclusionResult:
        """Inclusion proof of entry ``index`` relative to the latest signed checkpoint that
        covers it (or the one of ``tree_size``). The proof is checked before it is returned."""
        with self.storage.snapshot():
            head = self.storage.tree_head()
            if not 0 <= index < head.size:
                raise LedgerError(
                    f"entry {index} does not exist; the ledger holds {head.size} entries"
                )
            checkpoint = self._checkpoint_for(index, tree_size)
            if checkpoint.size > head.size:
                raise LedgerError(
                    f"checkpoint {checkpoint.id} is for {checkpoint.size} entries but the ledger holds "
                    f"{head.size}: entries were removed",
                    hint="run attest ledger verify",
                )
            leaf, entry = self.entry(index)
            proof = inclusion_proof(self.storage.read_nodes, index, checkpoint.size)
        if not verify_inclusion(index, checkpoint.size, leaf.leaf_hash, proof, checkpoint.root):
            raise LedgerError(
                f"the stored hashes do not prove entry {index} in checkpoint {checkpoint.id}",
                hint="the database was altered; run attest ledger verify",
            )
        return InclusionResult(index, leaf, entry, proof, checkpoint)

    def prove_consistency(self, old_size: int, new_size: int | None = None) -> ConsistencyResult:
        """Consistency proof from the tree of ``old_size`` entries to ``new_size`` (default:
        now), checked before it is returned."""
        with self.storage.snapshot():
            head = self.storage.tree_head()
            new = head.size if new_size is None else new_size
            if not 0 < old_size <= new <= head.size:
                raise LedgerError(
                    f"no consistency proof from size {old_size} to size {new}: need "
                    f"0 < OLD <= NEW <= {head.size} (the ledger's size)"
                )
            old_root = subtree_hash(self.storage.read_nodes, 0, old_size)
            new_root = subtree_hash(self.storage.read_nodes, 0, new)
            proof = consistency_proof(self.storage.read_nodes, old_size, new)
            checkpoints = self.storage.checkpoints()
        if not verify_consistency(old_size, new, old_root, new_root, proof):
            raise LedgerError(
                "the stored hashes do not form a valid consistency proof",
                hint="run attest ledger verify",
            )
        by_size = {cp.size: cp for cp in checkpoints}
        return ConsistencyResult(
            TreeHead(old_size, old_root),
            TreeHead(new, new_root),
            proof,
            by_size.get(old_size),
            by_size.get(new),
        )

    # -- checkpoints ------------------------------------------------------------------------

    def origin(self, requested: str | None = None) -> str:
        """The checkpoint origin: the one fixed at the first checkpoint, else ``requested``,
        else ``gradient-attest/ledger/<log id>``. A log keeps one origin for life."""
        fixed = self.storage.get_meta("origin")
        if fixed is not None:
            if requested is not None and requested != fixed:
                raise LedgerError(
                    f"this ledger's checkpoints are signed with origin {fixed!r}, not {requested!r}",
                    hint="a log keeps one origin; drop --origin or use a new ledger",
                )
            return fixed
        if requested is not None:
            return check_origin(requested)
        log_id = self.storage.get_meta("log_id") or "unknown"
        return f"gradient-attest/ledger/{log_id[:16]}"

    def sign_checkpoint(
        self, key: PrivateKey, *, origin: str | None = None, previous_note: str | None = None
    ) -> StoredCheckpoint:
        """Sign and store a checkpoint of the current tree.

        Refuses (:class:`LedgerError`) to sign a tree inconsistent with an earlier checkpoint
        of this key: the latest one stored in the ledger and, if given, ``previous_note`` (a
        copy kept outside the database, e.g. the last published one). Each must be reproduced
        by the stored hashes and joined to the new tree by a verified consistency proof, and
        every entry appended since the latest is re-hashed from its data. It all runs in one
        exclusive transaction, so nothing is appended between the check and the signature.
        """
        with self.storage.exclusive(durable=True):
            name = self.origin(origin)
            head = self.storage.tree_head()
            priors = self._checkpoints_signed_by(key, name)
            if previous_note is not None:
                external = self._open_own(previous_note, key, name, "the --previous checkpoint")
                priors.append((external.size, external.root, "the --previous checkpoint"))
            for size, _, label in priors:
                if size > head.size:
                    raise LedgerError(
                        f"refusing to sign: {label} covers {size} entries but the ledger holds "
                        f"{head.size}; entries were removed",
                        hint="run attest ledger verify; restore the ledger from a backup",
                    )
            anchor_size, anchor_root, anchor_label = max(priors, default=(0, EMPTY_ROOT, ""))
            frontier = (
                self.storage.read_nodes(perfect_subtrees(0, anchor_size)) if anchor_size else []
            )
            if anchor_size and frontier_root(frontier) != anchor_root:
                raise LedgerError(
                    f"refusing to sign: the stored tree no longer matches {anchor_label} (size "
                    f"{anchor_size}); entries below {anchor_size} were altered",
                    hint="run attest ledger verify",
                )
            size = anchor_size
            for leaf in self.storage.iter_leaves(anchor_size, head.size):
                if leaf.index != size:
                    raise LedgerError(
                        f"refusing to sign: entry {size} is missing",
                        hint="run attest ledger verify",
                    )
                frontier_push(frontier, size, leaf_hash(leaf.data))
                size += 1
            root = frontier_root(frontier)
            if size != head.size or root != head.root:
                raise LedgerError(
                    "refusing to sign: the entries do not reproduce the stored tree head "
                    f"(entries {anchor_size}..{head.size - 1} were altered)",
                    hint="run attest ledger verify",
                )
            for prior_size, prior_root, label in priors:
                if prior_size == 0:
                    continue  # every tree extends the empty tree
                proof = consistency_proof(self.storage.read_nodes, prior_size, size)
                if not verify_consistency(prior_size, size, prior_root, root, proof):
                    raise LedgerError(
                        f"refusing to sign: the tree of {size} entries is not consistent with {label}",
                        hint="run attest ledger verify",
                    )
            note = sign_checkpoint(Checkpoint(origin=name, size=size, root=root), key)
            signed_at = utc_now()
            new_id = self.storage.add_checkpoint(size, root, name, note, signed_at)
            # the same transaction: a signed record of the size that outlives the row's deletion
            self.storage.set_meta(LAST_CHECKPOINT_META, note)
            if self.storage.get_meta("origin") is None:
                self.storage.set_meta("origin", name)
        return StoredCheckpoint(new_id, size, root, name, note, signed_at)

    @staticmethod
    def _open_own(note: str, key: PrivateKey, name: str, label: str) -> Checkpoint:
        try:
            return open_checkpoint(note, key.public_key, key_name=name)
        except CheckpointError as exc:
            raise LedgerError(
                f"refusing to sign: {label} does not verify under this key: {exc.message}"
            ) from None

    def _checkpoints_signed_by(self, key: PrivateKey, name: str) -> list[tuple[int, bytes, str]]:
        """``(size, root, label)`` of the latest stored checkpoint this key signed, if any, and
        of the copy of the last signed note kept in meta when it says otherwise (it survives
        the deletion of checkpoint rows).

        A stored note with this key's name and key ID whose signature fails, or whose note
        disagrees with its row, means the database was altered: signing is refused.
        """
        latest: tuple[int, bytes, str] | None = None
        for stored in self.storage.checkpoints():
            label = f"checkpoint {stored.id}"
            checkpoint = self._open_stored(stored.note, key, name, label)
            if checkpoint is None:
                continue  # signed by another key (rotation) or under another name
            if (checkpoint.size, checkpoint.root) != (stored.size, stored.root):
                raise LedgerError(
                    f"refusing to sign: stored {label} disagrees with its own signed note",
                    hint="the database was altered; run attest ledger verify",
                )
            if latest is None or checkpoint.size >= latest[0]:
                latest = (checkpoint.size, checkpoint.root, label)
        priors = [] if latest is None else [latest]
        recorded_note = self.storage.get_meta(LAST_CHECKPOINT_META)
        if recorded_note is not None:
            label = "the last signed checkpoint (its copy in the meta table)"
            recorded = self._open_stored(recorded_note, key, name, label)
            if recorded is not None and (
                latest is None or latest[:2] != (recorded.size, recorded.root)
            ):
                priors.append((recorded.size, recorded.root, label))
        return priors

    @staticmethod
    def _open_stored(note: str, key: PrivateKey, name: str, label: str) -> Checkpoint | None:
        """The checkpoint of a stored note signed by ``key``; None when another key signed it."""
        try:
            return open_checkpoint(note, key.public_key, key_name=name)
        except CheckpointError as exc:
            if exc.code == "UNKNOWN_KEY":
                return None
            raise LedgerError(
                f"refusing to sign: stored {label} is corrupt: {exc.message}",
                hint="the database was altered; run attest ledger verify",
            ) from None


def roots_at(storage: LedgerStorage, sizes: Sequence[int]) -> dict[int, bytes]:
    """Tree roots at several sizes from stored nodes (O(log n) each)."""
    return {s: subtree_hash(storage.read_nodes, 0, s) if s else EMPTY_ROOT for s in sizes}
