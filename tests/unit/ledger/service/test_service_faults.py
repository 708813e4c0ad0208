"""Faults under a 32-client load: the service killed with SIGKILL and restarted, PostgreSQL
stopped and started. Nothing acknowledged is lost or duplicated, the log stays consistent."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from _ledger_service_kit import Keys, LoadResult, ServiceProcess, run_load, write_clients
from _pgcluster import PgCluster

from attest.certificate.signing import b64decode_strict, load_public_key
from attest.ledger.checkpoint import Checkpoint, open_checkpoint
from attest.ledger.merkle import verify_consistency

pytestmark = pytest.mark.slow


class Fleet:
    def __init__(self, dsn: str, tmp: Path) -> None:
        keys = Keys(tmp)
        self.dsn = dsn
        log_key, log_pub = keys.make("ledger")
        self.client_key, client_pub = keys.make("infer")
        clients = write_clients(tmp / "clients.yaml", [("infer-01", client_pub, ["verified"])])
        self.service = ServiceProcess(dsn, log_key, clients, tmp / "service.log", interval=0.5)
        self.public = load_public_key(log_pub)

    def load(self, seconds: float) -> tuple[threading.Thread, list[LoadResult]]:
        out: list[LoadResult] = []
        thread = threading.Thread(
            target=lambda: out.append(
                run_load(self.service.url, "infer-01", self.client_key, duration_s=seconds)
            )
        )
        thread.start()
        return thread, out

    def checkpoint(self) -> Checkpoint:
        return open_checkpoint(
            httpx.get(self.service.url + "checkpoint", timeout=5).text, self.public
        )

    def check_log(self, result: LoadResult) -> None:
        """Every acknowledged entry is stored exactly once, at the index it was given; the
        indexes are dense."""
        with psycopg.connect(self.dsn) as db:
            rows = db.execute("SELECT idx, leaf_hash FROM ledger_leaves ORDER BY idx").fetchall()
        assert [r[0] for r in rows] == list(range(len(rows)))
        stored = [bytes(r[1]) for r in rows]
        assert len(set(stored)) == len(stored)  # no entry twice
        for index, lh in result.acks:
            assert stored[index] == lh
        assert len({i for i, _ in result.acks}) == len(result.acks)


@pytest.fixture
def fleet(pg_dsn: str, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(pg_dsn, tmp_path)
    try:
        yield f
    finally:
        f.service.stop()


def test_sigkill_under_load_loses_nothing_acknowledged(fleet: Fleet) -> None:
    thread, results = fleet.load(8.0)
    time.sleep(2.0)
    before = fleet.checkpoint()
    fleet.service.kill()
    fleet.service.start()
    after = fleet.checkpoint()
    thread.join()
    result = results[0]
    assert result.errors, "the kill was not noticed by any client"
    # acknowledged before the kill and after the restart (indexes past the last checkpoint)
    assert min(i for i, _ in result.acks) < before.size <= max(i for i, _ in result.acks)
    fleet.check_log(result)
    assert 0 < before.size <= after.size
    proof = httpx.get(
        fleet.service.url + f"proof/consistency?old={before.size}&new={after.size}", timeout=5
    ).json()
    path = [b64decode_strict(h) for h in proof["consistency_proof"]]
    assert verify_consistency(before.size, after.size, before.root, after.root, path)


def test_postgres_stopped_under_load_gives_retryable_errors(
    fleet: Fleet, pg_cluster: PgCluster
) -> None:
    thread, results = fleet.load(6.0)
    time.sleep(1.5)
    pg_cluster.stop("fast")
    time.sleep(1.5)
    pg_cluster.start()
    thread.join()
    result = results[0]
    unavailable = [e for e in result.errors if e.startswith("503 UNAVAILABLE retryable=True")]
    assert unavailable, result.errors
    assert not [e for e in result.errors if e.startswith(("500", "400", "401", "403"))], (
        result.errors
    )
    fleet.check_log(result)
    assert fleet.checkpoint().size >= len(result.acks)
    # the pooled read connections died with the server: at most one request notices
    codes = [httpx.get(fleet.service.url + "healthz", timeout=5).status_code for _ in range(2)]
    assert codes[-1] == 200, codes
