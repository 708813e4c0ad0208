"""Full verification of a ledger: recompute the whole tree from the stored entries.

One pass over the entries in index order (O(n) time, O(log n) memory) re-hashes every entry's
data, rebuilds every perfect subtree and compares it with the stored node, and checks every
stored checkpoint (its note against its row, its root against the recomputed tree of its size,
and, with a key, its signature). What is found is reported with
the entry index it concerns:

- an **edited** entry: its data no longer hashes to its stored leaf hash (exact index);
- a **deleted** entry: a gap in the indexes (exact index);
- **reordered or inserted** rows, or an edit whose leaf hash was recomputed too: the stored
  hash of the smallest subtree over them no longer matches (entries ``[a, b)``, usually two);
- a rewrite of the whole database with every hash recomputed: only a signed checkpoint catches
  it (its root no longer matches), which is why checkpoints should be kept outside the database;
- **truncation**: fewer entries stored than a signed checkpoint covers, found from the
  checkpoint rows and from the copy of the last signed note kept in meta, which stays when the
  checkpoint rows are deleted too; deleted checkpoint rows themselves (a gap in their ids, a
  meta note missing from the table, an origin fixed in meta with no checkpoint left).

The report says which signed checkpoint the tree was verified against (``signed_size``):
entries after it are covered by no signature, and deleting them leaves a trace only when they
completed a stored subtree hash (see docs/ledger.md, *What the ledger can and cannot detect*).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from attest.certificate.signing import PublicKey
from attest.errors import LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from attest.ledger.merkle import EMPTY_ROOT, frontier_push, frontier_root, leaf_hash
from attest.ledger.storage import LAST_CHECKPOINT_META, LedgerStorage, StoredCheckpoint
from attest.ledger.writers import entry_of_leaf

__all__ = ["AuditReport", "Problem", "audit_ledger"]


@dataclass(frozen=True)
class Problem:
    """One thing found wrong: the entry index it concerns (None for ledger-wide), a kind and a sentence."""

    index: int | None
    kind: str
    message: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"index": self.index, "kind": self.kind, "message": self.message}


@dataclass
class AuditReport:
    """The outcome of :func:`audit_ledger`."""

    entries_checked: int = 0
    tree_size: int = 0
    root: bytes = EMPTY_ROOT
    nodes_checked: int = 0
    checkpoints_checked: int = 0
    signatures_checked: int = 0
    signed_size: int | None = None
    signed_by: str | None = None
    problems: list[Problem] = field(default_factory=list)
    problems_total: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing was found wrong."""
        return self.problems_total == 0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the ``--json`` output of ``attest ledger verify``)."""
        return {
            "ok": self.ok,
            "tree_size": self.tree_size,
            "root": self.root.hex(),
            "entries_checked": self.entries_checked,
            "nodes_checked": self.nodes_checked,
            "checkpoints_checked": self.checkpoints_checked,
            "signatures_checked": self.signatures_checked,
            "signed_size": self.signed_size,
            "signed_by": self.signed_by,
            "problems_total": self.problems_total,
            "problems": [p.to_json() for p in self.problems],
            "seconds": round(self.seconds, 3),
        }


class _Collector:
    def __init__(self, report: AuditReport, limit: int) -> None:
        self.report = report
        self.limit = limit

    def add(self, index: int | None, kind: str, message: str) -> None:
        self.report.problems_total += 1
        if len(self.report.problems) < self.limit:
            self.report.problems.append(Problem(index, kind, message))


RECORDED_LABEL = "the last signed checkpoint (its copy in the meta table)"


def _label(cp: StoredCheckpoint) -> str:
    """How a checkpoint is named in messages; id 0 is the meta copy of the last note."""
    return f"checkpoint {cp.id}" if cp.id else RECORDED_LABEL


def _range_text(level: int, index: int) -> str:
    lo, hi = index << level, (index + 1) << level
    return f"entry {lo}" if hi - lo == 1 else f"entries {lo}..{hi - 1}"


def _check_note(
    cp: StoredCheckpoint,
    public_keys: Sequence[tuple[PublicKey, str | None]],
    out: _Collector,
) -> Checkpoint | None:
    """One checkpoint's note against its row, and its signature when keys are given. Returns
    the note's checkpoint, or None when the note is malformed."""
    label = _label(cp)
    out.report.checkpoints_checked += 1
    text, _, _ = cp.note.rpartition("\n\n")
    try:
        body = Checkpoint.parse_body(text + "\n")
    except CheckpointError as exc:
        out.add(None, "checkpoint", f"{label}: its note is malformed: {exc.message}")
        return None
    if (body.size, body.root, body.origin) != (cp.size, cp.root, cp.origin):
        out.add(None, "checkpoint", f"{label}: the stored row disagrees with its signed note")
    if public_keys:
        verdicts = []
        for key, name in public_keys:
            try:
                open_checkpoint(cp.note, key, key_name=name)
                verdicts.append("ok")
            except CheckpointError as exc:
                verdicts.append(exc.code)
        if "ok" in verdicts:
            out.report.signatures_checked += 1
        elif "SIGNATURE_INVALID" in verdicts or "MALFORMED" in verdicts:
            out.add(None, "checkpoint", f"{label}: its signature does not verify (note altered)")
        else:
            out.add(None, "checkpoint", f"{label}: not signed by any of the given keys")
    return body


def _check_checkpoints(
    storage: LedgerStorage,
    public_keys: Sequence[tuple[PublicKey, str | None]],
    out: _Collector,
) -> dict[int, list[StoredCheckpoint]]:
    """Every stored checkpoint (:func:`_check_note`), deleted checkpoint rows (a gap in their
    ids, the meta copy of the last note missing from the table, an origin fixed with no
    checkpoint left) and the meta copy itself. Returns the checkpoints by tree size, the meta
    copy included when its row is gone (as id 0), for the root and truncation checks."""
    try:
        stored = storage.checkpoints()
    except LedgerError as exc:
        out.add(None, "checkpoint", exc.message)
        stored = []
    by_size: dict[int, list[StoredCheckpoint]] = {}
    for cp in stored:
        body = _check_note(cp, public_keys, out)
        if body is not None:
            by_size.setdefault(body.size, []).append(cp)
    ids = {cp.id for cp in stored}
    gaps = [i for i in range(1, max(ids, default=0)) if i not in ids]
    if gaps:
        shown = ", ".join(map(str, gaps[:10])) + (" ..." if len(gaps) > 10 else "")
        out.add(None, "checkpoint", f"checkpoint {shown} missing: checkpoint rows were deleted")
    note = storage.get_meta(LAST_CHECKPOINT_META)
    if note is None:
        if not stored and storage.get_meta("origin") is not None:
            out.add(
                None,
                "checkpoint",
                "a checkpoint was signed (the meta table fixes its origin) but none is stored: "
                "checkpoint rows were deleted",
            )
        return by_size
    if any(cp.note == note for cp in stored):
        if stored[-1].note != note:
            out.add(
                None,
                "checkpoint",
                f"checkpoint {stored[-1].id} was stored after {RECORDED_LABEL}: a row was "
                "inserted or the meta table rolled back",
            )
        return by_size
    try:
        body = Checkpoint.parse_body(note.rpartition("\n\n")[0] + "\n")
    except CheckpointError as exc:
        out.add(None, "checkpoint", f"{RECORDED_LABEL}: its note is malformed: {exc.message}")
        return by_size
    recorded = StoredCheckpoint(0, body.size, body.root, body.origin, note, "")
    _check_note(recorded, public_keys, out)
    out.add(
        None,
        "checkpoint",
        f"{RECORDED_LABEL}, of size {body.size}, is not among the stored checkpoints: "
        "checkpoint rows were deleted",
    )
    by_size.setdefault(body.size, []).append(recorded)
    return by_size


def _signed_head(by_size: dict[int, list[StoredCheckpoint]]) -> tuple[int | None, str | None]:
    """The largest signed size and the checkpoint that says so (a row before the meta copy)."""
    if not by_size:
        return None, None
    size = max(by_size)
    return size, _label(max(by_size[size], key=lambda cp: cp.id))


def _replay(
    storage: LedgerStorage,
    by_size: dict[int, list[StoredCheckpoint]],
    check_entries: bool,
    out: _Collector,
) -> tuple[int, list[bytes], bool]:
    """The pass over every entry: returns the size reached, the frontier and whether a gap
    made the tree impossible to rebuild."""
    report = out.report
    nodes: Iterator[tuple[int, int, bytes]] = storage.iter_nodes()
    pending = next(nodes, None)
    frontier: list[bytes] = []
    expected = 0
    broken = False  # after a gap the tree cannot be rebuilt; rows are still checked one by one
    for leaf in storage.iter_leaves():
        index = leaf.index
        if index != expected:
            missing = (
                f"entry {expected}" if index == expected + 1 else f"entries {expected}..{index - 1}"
            )
            out.add(expected, "deleted", f"{missing} missing: rows were deleted")
            broken = True
        computed = leaf_hash(leaf.data)
        if computed != leaf.leaf_hash:
            out.add(
                index,
                "edited",
                f"entry {index}: its data does not match its stored leaf hash (edited)",
            )
        if check_entries:
            try:
                entry_of_leaf(leaf.data)
            except LedgerError as exc:
                out.add(index, "malformed", f"entry {index}: {exc.message}")
        report.entries_checked += 1
        expected = index + 1
        if broken:
            continue
        for level, h in frontier_push(frontier, index, computed)[1:]:
            node_index = (expected >> level) - 1
            want = (expected, level)
            while pending is not None and ((pending[1] + 1) << pending[0], pending[0]) < want:
                out.add(
                    pending[1] << pending[0],
                    "inserted",
                    f"stored hash over {_range_text(pending[0], pending[1])} was not made by an append (inserted row)",
                )
                pending = next(nodes, None)
            if pending is None or ((pending[1] + 1) << pending[0], pending[0]) != want:
                out.add(
                    node_index << level,
                    "missing-node",
                    f"the stored hash over {_range_text(level, node_index)} is missing",
                )
                continue
            report.nodes_checked += 1
            if pending[2] != h:
                out.add(
                    node_index << level,
                    "altered",
                    f"the stored hash over {_range_text(level, node_index)} does not match them: "
                    "rows under it were edited, reordered or inserted",
                )
            pending = next(nodes, None)
        for cp in by_size.get(expected, []):
            if frontier_root(frontier) != cp.root:
                out.add(
                    None,
                    "checkpoint",
                    f"{_label(cp)} (size {cp.size}) does not match the tree recomputed from the "
                    f"entries: some entry below {cp.size} was altered",
                )
    while pending is not None:  # hashes made by appends whose entries are gone
        if not broken:
            out.add(
                pending[1] << pending[0],
                "deleted",
                f"the stored hash over {_range_text(pending[0], pending[1])} is beyond the "
                f"last stored entry ({expected - 1}): entries at the end were deleted",
            )
        pending = next(nodes, None)
    return expected, frontier, broken


def audit_ledger(
    storage: LedgerStorage,
    *,
    public_keys: Sequence[tuple[PublicKey, str | None]] = (),
    check_entries: bool = True,
    max_problems: int = 50,
) -> AuditReport:
    """Recompute the whole tree from the stored entries and check every stored hash and
    checkpoint; see the module docstring for what is reported. ``public_keys`` are
    ``(key, key name or None for the origin)`` pairs for checkpoint signatures."""
    started = time.perf_counter()
    report = AuditReport()
    out = _Collector(report, max_problems)
    with storage.snapshot():
        by_size = _check_checkpoints(storage, public_keys, out)
        for cp in by_size.get(0, []):
            if cp.root != EMPTY_ROOT:
                out.add(
                    None,
                    "checkpoint",
                    f"{_label(cp)} (size 0) does not have the empty tree's root",
                )
        expected, frontier, broken = _replay(storage, by_size, check_entries, out)
        report.tree_size = expected
        report.root = frontier_root(frontier) if not broken else EMPTY_ROOT
        report.signed_size, report.signed_by = _signed_head(by_size)
        for size, cps in sorted(by_size.items()):
            if size > expected:
                for cp in cps:
                    out.add(
                        None,
                        "truncated",
                        f"{_label(cp)} covers {size} entries but only {expected} are stored "
                        "(truncated)",
                    )
    report.seconds = time.perf_counter() - started
    return report
