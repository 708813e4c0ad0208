"""SQLite storage: the contract, O(log n) proofs from stored nodes, concurrent writers, SIGKILL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from attest.errors import LedgerError
from attest.ledger import audit_ledger, merkle, open_ledger
from attest.ledger.entries import LedgerEntry
from attest.ledger.sqlite import SQLiteStorage
from attest.ledger.storage import TreeHead

REPO_ROOT = Path(__file__).resolve().parents[3]


def _entry(actor: str) -> LedgerEntry:
    return LedgerEntry(
        event="issued", time="2026-01-01T00:00:00Z", certificate_checked=False, actor=actor
    )


def test_append_returns_dense_indexes_and_matching_roots(tmp_path: Path) -> None:
    with SQLiteStorage(tmp_path / "l.sqlite", create=True) as storage:
        datas = [f"leaf-{i}".encode() for i in range(37)]
        for i, data in enumerate(datas):
            result = storage.append(data)
            assert (result.index, result.tree_size) == (i, i + 1)
            assert result.leaf_hash == merkle.leaf_hash(data)
            assert result.root == merkle.root_from_leaf_hashes(
                merkle.leaf_hash(d) for d in datas[: i + 1]
            )
        assert storage.tree_head().size == 37
        assert storage.leaf(5).data == b"leaf-5"
        with pytest.raises(LedgerError, match="no entry 37"):
            storage.leaf(37)


def test_append_many_equals_single_appends(tmp_path: Path) -> None:
    datas = [f"x{i}".encode() for i in range(100)]
    with (
        SQLiteStorage(tmp_path / "a.sqlite", create=True) as one,
        SQLiteStorage(tmp_path / "b.sqlite", create=True) as bulk,
    ):
        for data in datas:
            one.append(data)
        last = bulk.append_many(datas[:40])
        assert (last.index, last.tree_size) == (39, 40)
        bulk.append_many(datas[40:])
        assert one.tree_head() == bulk.tree_head()
        assert list(one.iter_nodes()) == list(bulk.iter_nodes())
        with pytest.raises(LedgerError):
            bulk.append_many([])


def test_stored_nodes_are_every_perfect_subtree(tmp_path: Path) -> None:
    datas = [bytes([i]) for i in range(23)]
    hashes = [merkle.leaf_hash(d) for d in datas]
    with SQLiteStorage(tmp_path / "l.sqlite", create=True) as storage:
        storage.append_many(datas)
        nodes = list(storage.iter_nodes())
        for level, index, h in nodes:
            assert h == merkle.root_from_leaf_hashes(hashes[index << level : (index + 1) << level])
        # 23 leaves: 11 + 5 + 2 + 1 perfect interior subtrees
        assert Counter(level for level, _, _ in nodes) == {1: 11, 2: 5, 3: 2, 4: 1}
        for n in range(1, 24):
            for i in range(n):
                proof = merkle.inclusion_proof(storage.read_nodes, i, n)
                assert merkle.verify_inclusion(
                    i, n, hashes[i], proof, merkle.root_from_leaf_hashes(hashes[:n])
                )


def test_proof_reads_are_logarithmic(tmp_path: Path) -> None:
    asked: list[int] = []
    with SQLiteStorage(tmp_path / "l.sqlite", create=True) as storage:
        storage.append_many([i.to_bytes(4, "big") for i in range(5000)])

        def counting(keys: Sequence[merkle.NodeKey]) -> list[bytes]:
            asked.append(len(keys))
            return storage.read_nodes(keys)

        for index in (0, 1234, 4095, 4999):
            asked.clear()
            proof = merkle.inclusion_proof(counting, index, 5000)
            assert len(asked) == 1  # one batched lookup
            assert asked[0] <= 2 * 13 and len(proof) <= 13


def test_open_refuses_missing_and_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="no ledger"):
        SQLiteStorage(tmp_path / "absent.sqlite")
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE patients (id INTEGER)")
    with pytest.raises(LedgerError, match="not a gradient-attest ledger"):
        SQLiteStorage(foreign, create=True)
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LedgerError, match="not a usable ledger"):
        SQLiteStorage(garbage)
    with pytest.raises(LedgerError, match="directory"):
        SQLiteStorage(tmp_path)


def test_wal_mode_and_synchronous_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTEST_LEDGER_SYNCHRONOUS", "full")
    with SQLiteStorage(tmp_path / "l.sqlite", create=True) as storage:
        assert storage.synchronous == "full"
        assert storage._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert storage._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    monkeypatch.setenv("ATTEST_LEDGER_SYNCHRONOUS", "sometimes")
    with pytest.raises(Exception, match="synchronous"):
        SQLiteStorage(tmp_path / "l.sqlite")


def test_a_stored_hash_in_the_way_is_refused_on_append(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with SQLiteStorage(path, create=True) as storage:
        storage.append_many([b"a", b"b", b"c"])
    with sqlite3.connect(path) as db:  # the subtree over entries 2..3, planted before entry 3
        db.execute("INSERT INTO nodes (key, hash) VALUES (?, ?)", ((4 << 6) | 1, bytes(32)))
    with SQLiteStorage(path) as storage:
        with pytest.raises(LedgerError, match="in the way of entry 3"):
            storage.append(b"d")
        assert storage.tree_head().size == 3  # nothing half-written


def test_interleaved_connections_keep_one_tree(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    datas = [f"d{i}".encode() for i in range(41)]
    with SQLiteStorage(path, create=True) as one, SQLiteStorage(path) as two:
        for i, data in enumerate(datas):  # each connection's cached frontier goes stale in turn
            result = (one if i % 3 else two).append(data)
            assert result.index == i
        want = merkle.root_from_leaf_hashes(merkle.leaf_hash(d) for d in datas)
        assert one.tree_head() == two.tree_head() == TreeHead(41, want)
        assert audit_ledger(one, check_entries=False).ok


# --- several processes -----------------------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import sys
    from attest.ledger import open_ledger
    from attest.ledger.entries import LedgerEntry
    path, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open_ledger(path, create=True) as ledger:
        for i in range(count):
            entry = LedgerEntry(event="issued", time="2026-01-01T00:00:00Z",
                                certificate_checked=False, actor=f"{worker}-{i}")
            result = ledger.append(entry)
            print(result.index, result.leaf_hash.hex(), flush=True)
    """
)


def _spawn(args: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
    )


def test_four_processes_appending_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"  # created concurrently by the workers themselves
    per_worker = 40
    workers = [_spawn([str(path), f"w{w}", str(per_worker)]) for w in range(4)]
    reported: list[tuple[int, str]] = []
    for proc in workers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        reported += [(int(a), b) for a, b in (line.split() for line in out.splitlines())]
    assert sorted(i for i, _ in reported) == list(range(4 * per_worker))
    with open_ledger(path) as ledger:
        actors = [ledger.entry(i)[1].actor for i in range(4 * per_worker)]
        for index, hex_hash in reported:
            assert ledger.storage.leaf(index).leaf_hash.hex() == hex_hash
        report = audit_ledger(ledger.storage)
    assert sorted(actors) == sorted(f"w{w}-{i}" for w in range(4) for i in range(per_worker))  # type: ignore[type-var]
    assert report.ok, report.problems


@pytest.mark.parametrize("synchronous", ["normal", "full"])
def test_sigkill_mid_append_keeps_every_reported_append(tmp_path: Path, synchronous: str) -> None:
    path = tmp_path / "killed.sqlite"
    with open_ledger(path, create=True) as ledger:  # created up front, so the kill lands in appends
        ledger.append(_entry("setup"))
    proc = _spawn([str(path), "victim", "100000"], env={"ATTEST_LEDGER_SYNCHRONOUS": synchronous})
    assert proc.stdout is not None
    reported: list[tuple[int, str]] = []
    deadline = time.monotonic() + 60
    while len(reported) < 60 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line.endswith("\n"):
            break
        index, hex_hash = line.split()
        reported.append((int(index), hex_hash))
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    # The kill can land while the victim writes a line: only a line that reached its newline was
    # reported (the torn tail after the last newline was never a report).
    complete = rest.split("\n")[:-1]
    reported += [(int(a), b) for a, b in (line.split() for line in complete if line.strip())]
    assert proc.returncode == -signal.SIGKILL
    assert len(reported) >= 60
    with open_ledger(path) as ledger:
        report = audit_ledger(ledger.storage)
        assert report.ok, report.problems
        size = ledger.tree_head().size
        for index, hex_hash in reported:
            assert index < size
            assert ledger.storage.leaf(index).leaf_hash.hex() == hex_hash
        # the log keeps working after the crash
        assert ledger.append(_entry("after")).index == size
