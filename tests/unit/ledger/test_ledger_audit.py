"""``ledger verify``: every edited, deleted, reordered or inserted row is reported with its index."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from attest.certificate.signing import generate_keypair, load_private_key
from attest.ledger import audit_ledger, merkle, open_ledger
from attest.ledger.audit import AuditReport
from attest.ledger.checkpoint import load_checkpoint_key
from attest.ledger.entries import LedgerEntry

SIZE = 16


def _entry(i: int) -> LedgerEntry:
    return LedgerEntry(
        event="issued", time="2026-01-01T00:00:00Z", certificate_checked=False, actor=f"a{i}"
    )


def _build(path: Path, size: int = SIZE) -> None:
    with open_ledger(path, create=True) as ledger:
        for i in range(size):
            ledger.append(_entry(i))


def _audit(path: Path, **kwargs: object) -> AuditReport:
    with open_ledger(path) as ledger:
        return audit_ledger(ledger.storage, **kwargs)  # type: ignore[arg-type]


def _row(db: sqlite3.Connection, index: int) -> tuple[bytes, bytes]:
    data, h = db.execute("SELECT data, leaf_hash FROM leaves WHERE idx = ?", (index,)).fetchone()
    return bytes(data), bytes(h)


def edit_data(db: sqlite3.Connection) -> None:
    db.execute("UPDATE leaves SET data = ? WHERE idx = 5", (_entry(99).leaf_data,))


def edit_data_and_hash(db: sqlite3.Connection) -> None:
    data = _entry(99).leaf_data
    db.execute(
        "UPDATE leaves SET data = ?, leaf_hash = ? WHERE idx = 5", (data, merkle.leaf_hash(data))
    )


def delete_row(db: sqlite3.Connection) -> None:
    db.execute("DELETE FROM leaves WHERE idx = 5")


def delete_last_row(db: sqlite3.Connection) -> None:
    db.execute("DELETE FROM leaves WHERE idx = ?", (SIZE - 1,))


def reorder_rows(db: sqlite3.Connection) -> None:
    a, b = _row(db, 5), _row(db, 9)
    db.execute("UPDATE leaves SET data = ?, leaf_hash = ? WHERE idx = 5", b)
    db.execute("UPDATE leaves SET data = ?, leaf_hash = ? WHERE idx = 9", a)


def insert_row(db: sqlite3.Connection) -> None:
    rows = db.execute("SELECT idx FROM leaves WHERE idx >= 5 ORDER BY idx DESC").fetchall()
    for (idx,) in rows:
        db.execute("UPDATE leaves SET idx = ? WHERE idx = ?", (idx + 1, idx))
    data = _entry(99).leaf_data
    db.execute(
        "INSERT INTO leaves (idx, data, leaf_hash) VALUES (5, ?, ?)", (data, merkle.leaf_hash(data))
    )


def append_rows_without_hashes(db: sqlite3.Connection) -> None:
    for idx in (SIZE, SIZE + 1):  # entry 17 completes the subtree over 16..17: no hash stored
        data = _entry(idx).leaf_data
        db.execute(
            "INSERT INTO leaves (idx, data, leaf_hash) VALUES (?, ?, ?)",
            (idx, data, merkle.leaf_hash(data)),
        )


def edit_node(db: sqlite3.Connection) -> None:
    key = db.execute("SELECT key FROM nodes ORDER BY key LIMIT 1 OFFSET 3").fetchone()[0]
    db.execute("UPDATE nodes SET hash = ? WHERE key = ?", (bytes(32), key))


def non_canonical_entry(db: sqlite3.Connection) -> None:
    data = _entry(5).leaf_data.replace(b'{"actor"', b'{ "actor"')
    db.execute(
        "UPDATE leaves SET data = ?, leaf_hash = ? WHERE idx = 5", (data, merkle.leaf_hash(data))
    )


# (tamper, expected kind, expected index, text that must appear in the message)
TAMPERING: list[tuple[Callable[[sqlite3.Connection], None], str, int | None, str]] = [
    (edit_data, "edited", 5, "entry 5"),
    (edit_data_and_hash, "altered", 4, "entries 4..5"),
    (delete_row, "deleted", 5, "entry 5 missing"),
    (delete_last_row, "deleted", 14, "beyond the last stored entry (14)"),
    (reorder_rows, "altered", 4, "entries 4..5"),
    (insert_row, "altered", 4, "entries 4..5"),
    (append_rows_without_hashes, "missing-node", 16, "entries 16..17 is missing"),
    (edit_node, "altered", None, "does not match"),
    (non_canonical_entry, "malformed", 5, "canonical"),
]


@pytest.mark.parametrize(
    ("tamper", "kind", "index", "text"), TAMPERING, ids=[t[0].__name__ for t in TAMPERING]
)
def test_tampering_is_reported_with_its_index(
    tmp_path: Path,
    tamper: Callable[[sqlite3.Connection], None],
    kind: str,
    index: int | None,
    text: str,
) -> None:
    path = tmp_path / "l.sqlite"
    _build(path)
    assert _audit(path).ok
    with sqlite3.connect(path) as db:
        tamper(db)
    report = _audit(path)
    assert not report.ok
    matching = [p for p in report.problems if p.kind == kind and text in p.message]
    assert matching, report.problems
    if index is not None:
        assert matching[0].index == index


def test_reordering_reports_both_places(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _build(path)
    with sqlite3.connect(path) as db:
        reorder_rows(db)
    messages = " | ".join(p.message for p in _audit(path).problems)
    assert "entries 4..5" in messages and "entries 8..9" in messages


def test_full_rewrite_is_caught_by_the_signed_checkpoint(tmp_path: Path) -> None:
    generate_keypair(tmp_path / "k", passphrase=None)
    key = load_private_key(tmp_path / "k.key")
    honest, forged = tmp_path / "honest.sqlite", tmp_path / "forged.sqlite"
    _build(honest)
    with open_ledger(honest) as ledger:
        ledger.sign_checkpoint(key)
        checkpoint_rows = ledger.storage.checkpoints()
    # the attacker rebuilds the whole log with entry 5 changed; every hash is consistent
    with open_ledger(forged, create=True) as ledger:
        for i in range(SIZE):
            ledger.append(_entry(99 if i == 5 else i))
    with sqlite3.connect(forged) as db:
        for cp in checkpoint_rows:
            db.execute(
                "INSERT INTO checkpoints (size, root, origin, note, signed_at) VALUES (?, ?, ?, ?, ?)",
                (cp.size, cp.root, cp.origin, cp.note, cp.signed_at),
            )
    report = _audit(forged, public_keys=[load_checkpoint_key(tmp_path / "k.pub")])
    assert not report.ok
    assert report.signatures_checked == 1
    assert any("checkpoint 1 (size 16) does not match" in p.message for p in report.problems)


def test_checkpoint_signatures_are_checked_with_a_key(tmp_path: Path) -> None:
    generate_keypair(tmp_path / "k", passphrase=None)
    generate_keypair(tmp_path / "other", passphrase=None)
    path = tmp_path / "l.sqlite"
    _build(path)
    with open_ledger(path) as ledger:
        ledger.sign_checkpoint(load_private_key(tmp_path / "k.key"))
    good = _audit(path, public_keys=[load_checkpoint_key(tmp_path / "k.pub")])
    assert good.ok and good.signatures_checked == 1
    wrong = _audit(path, public_keys=[load_checkpoint_key(tmp_path / "other.pub")])
    assert [p.kind for p in wrong.problems] == ["checkpoint"]
    with sqlite3.connect(path) as db:
        note = db.execute("SELECT note FROM checkpoints").fetchone()[0]
        db.execute("UPDATE checkpoints SET note = ?", (note.replace("\n16\n", "\n15\n"),))
    altered = _audit(path, public_keys=[load_checkpoint_key(tmp_path / "k.pub")])
    assert not altered.ok
    assert any("signature does not verify" in p.message for p in altered.problems)


def test_truncated_log_is_caught_by_checkpoint(tmp_path: Path) -> None:
    generate_keypair(tmp_path / "k", passphrase=None)
    path = tmp_path / "l.sqlite"
    _build(path)
    with open_ledger(path) as ledger:
        ledger.sign_checkpoint(load_private_key(tmp_path / "k.key"))
    # drop the last entry and everything that mentions it, leaving a self-consistent 15-entry log
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM leaves WHERE idx = 15")
        db.execute("DELETE FROM nodes WHERE key >> 6 = 16")
    report = _audit(path)
    assert [p.message for p in report.problems] == [
        "checkpoint 1 covers 16 entries but only 15 are stored (truncated)"
    ]


def test_problem_list_is_capped_but_counted(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _build(path, size=40)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE leaves SET data = data || X'20'")
    report = _audit(path, max_problems=10)
    assert len(report.problems) == 10
    assert report.problems_total > 40
    assert report.to_json()["problems_total"] == report.problems_total
