"""Audit ledger speed: appends per second (one and four processes, per SQLite synchronous
setting), inclusion/consistency proof time and size at 1e3, 1e5 and 1e6 entries, and full
``ledger verify`` throughput.

Each figure is printed next to the alternative a user would otherwise pick, measured in the
same run: a plain SQLite audit table (one INSERT per transaction, no Merkle tree) for appends,
and recomputing the proof from every stored leaf hash for proofs.

    .venv/bin/python benchmarks/bench_ledger.py            # full run (builds a 1e6-entry log)
    .venv/bin/python benchmarks/bench_ledger.py --quick    # 1e3 and 1e4 only
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from attest.certificate.signing import generate_keypair, load_private_key
from attest.ledger import audit_ledger, merkle, open_ledger
from attest.ledger.entries import LedgerEntry
from attest.ledger.sqlite import SQLiteStorage, Synchronous

SHA = "5" * 64


def make_entry(i: int) -> LedgerEntry:
    """A realistic entry: certificate, model, policy digests and two subjects."""
    return LedgerEntry.model_validate(
        {
            "event": "verified",
            "time": "2026-01-01T00:00:00.000000Z",
            "certificate": {"id": f"cert-{i:012d}", "sha256": SHA},
            "model": {"name": "digits-cnn", "version": "1.2.0", "digest": SHA},
            "policy_digest": SHA,
            "subjects": [
                {"name": "model.onnx", "sha256": SHA},
                {"name": "probe.npz", "sha256": SHA},
            ],
            "result": "pass",
            "reason_codes": [],
            "certificate_checked": True,
            "actor": "deploy-server-07",
            "host": "inference-07.hospital.example",
        }
    )


def entry_bytes(count: int, start: int = 0) -> list[bytes]:
    """Leaf data for many entries fast: one canonical entry, its fixed-width id replaced."""
    template = make_entry(0).leaf_data
    marker = b"cert-000000000000"
    assert template.count(marker) == 1
    head, tail = template.split(marker)
    return [head + b"cert-%012d" % i + tail for i in range(start, start + count)]


# --- appends ---------------------------------------------------------------------------------


def _append_worker(
    path: str, synchronous: str, start: int, count: int, ready: Any, go: Any, done: Any
) -> None:
    with open_ledger(path, create=True, synchronous=synchronous) as ledger:  # type: ignore[arg-type]
        make_entry(start)  # imports and pydantic warmed up before the clock starts
        ready.put(os.getpid())
        go.wait()
        for i in range(start, start + count):
            ledger.append(make_entry(i))
    done.put(time.perf_counter())


def appends_per_second(
    folder: Path, synchronous: Synchronous, count: int, processes: int, round_number: int = 0
) -> float:
    path = folder / f"appends-{synchronous}-{processes}-{round_number}.sqlite"
    with open_ledger(path, create=True, synchronous=synchronous):
        pass
    if processes == 1:
        with open_ledger(path, synchronous=synchronous) as ledger:
            started = time.perf_counter()
            for i in range(count):
                ledger.append(make_entry(i))
            elapsed = time.perf_counter() - started
    else:
        # the clock runs from the moment every worker is started and warm to the last append
        per = count // processes
        ctx = multiprocessing.get_context("spawn")
        ready, done, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        workers = [
            ctx.Process(
                target=_append_worker, args=(str(path), synchronous, w * per, per, ready, go, done)
            )
            for w in range(processes)
        ]
        for w in workers:
            w.start()
        for _ in workers:
            ready.get(timeout=300)
        started = time.perf_counter()
        go.set()
        finished = max(done.get(timeout=600) for _ in workers)
        for w in workers:
            w.join()
            assert w.exitcode == 0
        elapsed = finished - started
        count = per * processes
    with open_ledger(path) as ledger:
        assert ledger.tree_head().size == count
    return count / elapsed


def plain_sqlite_appends_per_second(
    folder: Path, synchronous: Synchronous, count: int, round_number: int = 0
) -> float:
    """The alternative: an audit table without a Merkle tree, same journal and sync settings."""
    db = sqlite3.connect(
        folder / f"plain-{synchronous}-{round_number}.sqlite", isolation_level=None
    )
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous.upper()}")
    db.execute("CREATE TABLE audit (idx INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    started = time.perf_counter()
    for i in range(count):
        data = make_entry(i).leaf_data
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO audit (data) VALUES (?)", (data,))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - started
    db.close()
    return count / elapsed


# --- proofs ----------------------------------------------------------------------------------


def build_log(path: Path, size: int) -> float:
    """Bulk-load ``size`` entries (append_many: same rows as one append each); returns seconds."""
    started = time.perf_counter()
    with SQLiteStorage(path, create=True) as storage:
        chunk = 50_000
        for start in range(0, size, chunk):
            storage.append_many(entry_bytes(min(chunk, size - start), start))
    return time.perf_counter() - started


def naive_inclusion_proof(path: Path, index: int, size: int) -> tuple[list[bytes], float]:
    """The alternative: read every leaf hash and rebuild the path (what a log without stored
    interior hashes has to do)."""
    started = time.perf_counter()
    db = sqlite3.connect(path)
    hashes = [
        bytes(r[0])
        for r in db.execute("SELECT leaf_hash FROM leaves WHERE idx < ? ORDER BY idx", (size,))
    ]
    db.close()
    levels = [hashes]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append(
            [merkle.node_hash(below[j], below[j + 1]) for j in range(0, len(below) - 1, 2)]
        )
    proof = merkle.inclusion_proof(lambda keys: [levels[lv][ix] for lv, ix in keys], index, size)
    return proof, time.perf_counter() - started


def time_proofs(path: Path, size: int, samples: int) -> dict[str, float]:
    rng = random.Random(size)
    with open_ledger(path) as ledger:
        storage = ledger.storage
        root = storage.tree_head().root
        inclusion_ms: list[float] = []
        lengths: list[int] = []
        cpu_started = time.process_time()
        for _ in range(samples):
            index = rng.randrange(size)
            started = time.perf_counter()
            proof = merkle.inclusion_proof(storage.read_nodes, index, size)
            inclusion_ms.append((time.perf_counter() - started) * 1e3)
            lengths.append(len(proof))
            assert merkle.verify_inclusion(index, size, storage.leaf(index).leaf_hash, proof, root)
        # CPU time too: on a shared machine wall-clock tails are the scheduler's, not ours
        cpu_ms = (time.process_time() - cpu_started) * 1e3 / samples
        consistency_ms: list[float] = []
        for _ in range(samples):
            old = rng.randint(1, size)
            started = time.perf_counter()
            cproof = merkle.consistency_proof(storage.read_nodes, old, size)
            old_root = merkle.subtree_hash(storage.read_nodes, 0, old)
            consistency_ms.append((time.perf_counter() - started) * 1e3)
            assert merkle.verify_consistency(old, size, old_root, root, cproof)
        verify_us: list[float] = []
        index = size // 3
        proof = merkle.inclusion_proof(storage.read_nodes, index, size)
        leaf = storage.leaf(index).leaf_hash
        for _ in range(samples):
            started = time.perf_counter()
            merkle.verify_inclusion(index, size, leaf, proof, root)
            verify_us.append((time.perf_counter() - started) * 1e6)
    return {
        "inclusion_ms_median": statistics.median(inclusion_ms),
        "inclusion_ms_p99": sorted(inclusion_ms)[int(0.99 * (len(inclusion_ms) - 1))],
        "inclusion_cpu_ms": cpu_ms,
        "proof_hashes_max": max(lengths),
        "proof_bytes_max": 32 * max(lengths),
        "consistency_ms_median": statistics.median(consistency_ms),
        "verify_us_median": statistics.median(verify_us),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--appends", type=int, default=3000, help="appends per append measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of append measurements")
    args = parser.parse_args(argv)
    sizes = [1_000, 10_000] if args.quick else [1_000, 100_000, 1_000_000]
    appends = 1000 if args.quick else args.appends
    print(f"# ledger benchmark, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(
        f"# {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, entry {len(make_entry(0).leaf_data)} bytes, "
        f"load average {os.getloadavg()[0]:.1f} at start"
    )
    with tempfile.TemporaryDirectory(prefix="bench-ledger-") as tmp:
        folder = Path(tmp)
        print(
            "\n## appends per second (each append one transaction; entry built and canonicalized)"
        )
        print(
            f"(medians of {args.rounds} rounds; in each round the plain table and the ledger run "
            "back to back, so both see the same disk and CPU contention)"
        )
        print(
            "synchronous | processes | ledger appends/s | plain SQLite table appends/s | ledger/plain"
        )
        for synchronous in ("normal", "full"):
            rates: dict[int, list[float]] = {1: [], 4: []}
            ratios: dict[int, list[float]] = {1: [], 4: []}
            plains: list[float] = []
            for round_number in range(args.rounds):
                plain = plain_sqlite_appends_per_second(folder, synchronous, appends, round_number)
                plains.append(plain)
                for processes in (1, 4):
                    rate = appends_per_second(folder, synchronous, appends, processes, round_number)
                    rates[processes].append(rate)
                    ratios[processes].append(rate / plain)
            for processes in (1, 4):
                print(
                    f"{synchronous:>11} | {processes:>9} | {statistics.median(rates[processes]):16.0f} | "
                    f"{statistics.median(plains):28.0f} | {statistics.median(ratios[processes]):.2f}"
                )
        print("\n## proofs (O(log n) reads of stored subtree hashes)")
        print(
            "entries | build s | inclusion ms median / p99 (wall), CPU ms incl. leaf read + check | proof hashes (bytes) | "
            "consistency ms | verify us | naive ms (ratio)"
        )
        for size in sizes:
            path = folder / f"log-{size}.sqlite"
            built = build_log(path, size)
            figures = time_proofs(path, size, samples=200)
            naive_proof, naive_s = naive_inclusion_proof(path, size // 3, size)
            with open_ledger(path) as ledger:
                assert naive_proof == merkle.inclusion_proof(
                    ledger.storage.read_nodes, size // 3, size
                )
            print(
                f"{size:>7} | {built:7.1f} | {figures['inclusion_ms_median']:.3f} / {figures['inclusion_ms_p99']:.3f}, "
                f"{figures['inclusion_cpu_ms']:.3f} | "
                f"{figures['proof_hashes_max']} ({figures['proof_bytes_max']}) | {figures['consistency_ms_median']:.3f} | "
                f"{figures['verify_us_median']:.1f} | {naive_s * 1e3:.0f} ({naive_s * 1e3 / figures['inclusion_ms_median']:.0f}x)"
            )
            if size == sizes[-1]:
                print(
                    "\n## full verify (recompute the tree from every entry; check every stored hash)"
                )
                print(
                    "entries | with entry schema check: s, entries/s | hashes only: s, entries/s | sha256 of leaf data alone: entries/s"
                )
                with open_ledger(path) as ledger:
                    full = audit_ledger(ledger.storage)
                    hashes = audit_ledger(ledger.storage, check_entries=False)
                    assert full.ok and hashes.ok and full.entries_checked == size
                    started = time.perf_counter()
                    for leaf in ledger.storage.iter_leaves():
                        merkle.leaf_hash(leaf.data)
                    floor = time.perf_counter() - started
                print(
                    f"{size:>7} | {full.seconds:.1f}, {size / full.seconds:.0f} | {hashes.seconds:.1f}, "
                    f"{size / hashes.seconds:.0f} | {size / floor:.0f}"
                )
                generate_keypair(folder / "k", passphrase=None)
                key = load_private_key(folder / "k.key")
                with open_ledger(path) as ledger:
                    started = time.perf_counter()
                    ledger.sign_checkpoint(key)
                    first = time.perf_counter() - started
                    ledger.storage.append_many(entry_bytes(1000, size))
                    started = time.perf_counter()
                    ledger.sign_checkpoint(key)
                    second = time.perf_counter() - started
                print(
                    f"\ncheckpoint signing: first at {size} entries {first:.2f} s (re-hashes every entry); "
                    f"next after 1000 more {second * 1e3:.1f} ms"
                )
            path.unlink()
    print(f"# load average {os.getloadavg()[0]:.1f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
