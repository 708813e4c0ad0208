"""The service as a real uvicorn process on PostgreSQL: tlog-tiles reads, signed writes and
each refusal, health and metrics, remote audit and mirror from the command line."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from _cli_run import exit_code as cli
from _ledger_service_kit import ORIGIN, Keys, ServiceProcess, entry, signed_body, write_clients
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from attest.certificate.signing import load_private_key, load_public_key
from attest.ledger.checkpoint import open_checkpoint
from attest.ledger.entries import LedgerEntry
from attest.ledger.merkle import leaf_hash, root_from_leaf_hashes
from attest.ledger.service.client import LedgerClient
from attest.ledger.service.postgres import PostgresStorage
from attest.ledger.service.proving import WriteClaim, prove_answer
from attest.ledger.service.tiles import TilePath, decode_bundle, tile_path
from attest.ledger.writers import entry_of_leaf


class World:
    def __init__(self, dsn: str, tmp: Path) -> None:
        keys = Keys(tmp)
        self.dsn = dsn
        self.tmp = tmp
        self.log_key, self.log_pub = keys.make("ledger")
        self.infer_key, infer_pub = keys.make("infer")
        self.release_key, release_pub = keys.make("release")
        self.other_key, _ = keys.make("stranger")
        clients = write_clients(
            tmp / "clients.yaml",
            [
                ("infer-01", infer_pub, ["verified", "rejected"]),
                ("release", release_pub, ["issued"]),
            ],
        )
        self.service = ServiceProcess(dsn, self.log_key, clients, tmp / "service.log")
        self.url = self.service.url
        self.public = load_public_key(self.log_pub)

    def post(self, body: Any, **kw: Any) -> httpx.Response:
        return httpx.post(self.url + "add", json=body, timeout=10, **kw)

    def size(self) -> int:
        note = httpx.get(self.url + "checkpoint", timeout=5).text
        return open_checkpoint(note, self.public).size


@pytest.fixture
def world(pg_dsn: str, tmp_path: Path) -> Iterator[World]:
    w = World(pg_dsn, tmp_path)
    try:
        yield w
    finally:
        w.service.stop()


def test_write_then_read_back_through_tiles_and_proofs(world: World) -> None:
    answers, bodies = [], []
    for _ in range(3):
        body = signed_body("infer-01", world.infer_key)
        bodies.append(body)
        response = world.post(body)
        assert response.status_code == 200, response.text
        answers.append(response.json())
    assert [a["index"] for a in answers] == [0, 1, 2]
    with LedgerClient(world.url) as client:
        checkpoint, _note = client.checkpoint(world.public)
        assert checkpoint.origin == ORIGIN and checkpoint.size == 3
        bundle = client.bundle(TilePath(None, 0, 3))
        assert [entry_of_leaf(d).actor for d in bundle] == ["tester"] * 3
        assert client.hashes(TilePath(0, 0, 3)) == [leaf_hash(d) for d in bundle]
        assert root_from_leaf_hashes(leaf_hash(d) for d in bundle) == checkpoint.root
        # the answer is a signed checkpoint plus a proof the client checks
        last, sent = answers[-1], bodies[-1]
        claim = WriteClaim(
            ORIGIN,
            "infer-01",
            load_private_key(world.infer_key, prompt=False).public_key,
            sent["nonce"],
            LedgerEntry.model_validate(sent["entry"]).leaf_data,
        )
        proven = prove_answer(
            client, last, claim, log_key=world.public, log_key_name=None, seen_note=None
        )
        assert proven.index == 2 and base64.b64decode(last["leaf"]) == bundle[2]
    raw = httpx.get(world.url + tile_path(None, 0, 3), timeout=5)
    assert raw.headers["content-type"] == "application/octet-stream"
    assert "immutable" in raw.headers["cache-control"]
    assert decode_bundle(raw.content, 3) == bundle
    assert (
        httpx.get(world.url + "tile/entries/000.p/4", timeout=5).status_code == 404
    )  # beyond the checkpoint
    assert httpx.get(world.url + "tile/entries/0", timeout=5).status_code == 404  # malformed path
    proof = httpx.get(world.url + "proof/consistency?old=1&new=3", timeout=5).json()
    assert proof["new_size"] == 3 and len(proof["consistency_proof"]) == 2


def test_full_tiles_and_the_level_one_tile(world: World) -> None:
    items = [entry(actor=f"a{i}").leaf_data for i in range(300)]
    with PostgresStorage(world.dsn) as pg:  # appended by another writer; the refresh picks them up
        pg.append_many(items)
    for _ in range(100):
        if world.size() == 300:
            break
        import time

        time.sleep(0.1)
    with LedgerClient(world.url) as client:
        assert client.bundle(TilePath(None, 0, 256)) == items[:256]
        assert client.bundle(TilePath(None, 1, 44)) == items[256:]
        level1 = client.hashes(TilePath(1, 0, 1))
        assert level1 == [root_from_leaf_hashes(leaf_hash(d) for d in items[:256])]
    full = httpx.get(world.url + tile_path(None, 0), headers={"Accept-Encoding": "gzip"}, timeout=5)
    assert full.headers["content-encoding"] == "gzip"  # bundles compressed when asked for
    assert decode_bundle(full.content, 256) == items[:256]
    with psycopg.connect(world.dsn) as db:  # the refresh re-hashed them and stored a row
        assert db.execute("SELECT max(size) FROM ledger_checkpoints").fetchone() == (300,)


def test_refusals_append_nothing(world: World) -> None:
    good = signed_body("infer-01", world.infer_key)
    cases: list[tuple[int, str | None, httpx.Response]] = [
        (401, "UNKNOWN_CLIENT", world.post(signed_body("nobody", world.other_key))),
        (401, "SIGNATURE_INVALID", world.post(signed_body("infer-01", world.other_key))),
        (
            403,
            "ENTRY_TYPE_NOT_ALLOWED",
            world.post(signed_body("infer-01", world.infer_key, entry("issued"))),
        ),
        (
            400,
            "MALFORMED",
            httpx.post(
                world.url + "add",
                content=b'{"format": ',
                headers={"content-type": "application/json"},
            ),
        ),
        (
            400,
            "MALFORMED",
            httpx.post(
                world.url + "add",
                content=b'{"a": 1, "a": 2}',
                headers={"content-type": "application/json"},
            ),
        ),
        (
            413,
            "BODY_TOO_LARGE",
            httpx.post(
                world.url + "add",
                content=b" " * 200_000,
                headers={"content-type": "application/json"},
            ),
        ),
        (
            415,
            "UNSUPPORTED_MEDIA_TYPE",
            httpx.post(
                world.url + "add", content=json.dumps(good), headers={"content-type": "text/plain"}
            ),
        ),
        (
            400,
            "REQUEST_EXPIRED",
            world.post(signed_body("infer-01", world.infer_key, time="2020-01-01T00:00:00Z")),
        ),
        (400, "MALFORMED", world.post({**good, "extra": 1})),
        (  # the pattern lets it through, the calendar does not: refused, not a server error
            400,
            "MALFORMED",
            world.post(signed_body("infer-01", world.infer_key, time="2026-02-30T00:00:00Z")),
        ),
        (405, None, httpx.get(world.url + "add", timeout=5)),  # writes are POSTs
    ]
    for status, code, response in cases:
        error = response.json()["error"] if code else None
        assert (response.status_code, error) == (status, code), response.text
    assert world.size() == 0
    assert world.post(good).status_code == 200
    replay = world.post(good)
    assert (replay.status_code, replay.json()["error"], replay.json()["index"]) == (
        409,
        "REPLAY",
        0,
    )
    assert world.size() == 1
    with psycopg.connect(world.dsn) as db:
        assert db.execute("SELECT count(*) FROM ledger_leaves").fetchone() == (1,)


def test_health_and_openmetrics(world: World) -> None:
    assert world.post(signed_body("infer-01", world.infer_key)).status_code == 200
    health = httpx.get(world.url + "healthz", timeout=5)
    assert health.status_code == 200 and health.json()["tree_size"] == 1
    metrics = httpx.get(world.url + "metrics", timeout=5)
    assert metrics.headers["content-type"].startswith("application/openmetrics-text")
    families = {f.name: f for f in text_string_to_metric_families(metrics.text)}
    assert families["attest_ledger_entries"].samples[0].value == 1
    assert families["attest_ledger_checkpoint_age_seconds"].samples[0].value >= 0
    count = [
        s
        for s in families["attest_ledger_append_latency_seconds"].samples
        if s.name.endswith("_count")
    ]
    assert count[0].value == 1


def test_remote_audit_catches_a_changed_and_a_deleted_row(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(6):
        assert world.post(signed_body("infer-01", world.infer_key)).status_code == 200
    state = tmp_path / "auditor.checkpoint"
    assert cli("ledger", "verify", world.url, "--key", world.log_pub, "--state", state) == 0
    assert "OK" in capsys.readouterr().out and state.is_file()
    mirror = tmp_path / "mirror.sqlite"
    assert cli("ledger", "mirror", world.url, mirror, "--key", world.log_pub) == 0
    assert cli("ledger", "verify", "--ledger", mirror, "--key", world.log_pub) == 0
    capsys.readouterr()
    with psycopg.connect(world.dsn, autocommit=True) as db:  # a superuser bypassing the triggers
        db.execute("SET session_replication_role = replica")
        forged = entry(actor="forger").leaf_data
        db.execute("UPDATE ledger_leaves SET data = %s WHERE idx = 3", (forged,))
    assert cli("ledger", "verify", world.url, "--key", world.log_pub, "--state", state) == 1
    out = capsys.readouterr().out
    assert "TAMPERED" in out and "[edited] entry 3" in out and "[forked]" in out
    with psycopg.connect(world.dsn, autocommit=True) as db:
        db.execute("SET session_replication_role = replica")
        db.execute(
            "UPDATE ledger_leaves SET data = %s, leaf_hash = %s WHERE idx = 3",
            (forged, leaf_hash(forged)),
        )
    assert cli("ledger", "verify", world.url, "--key", world.log_pub, "--state", state) == 1
    assert (
        "[forked]" in capsys.readouterr().out
    )  # the stored checkpoint catches a consistent rewrite
    with psycopg.connect(world.dsn, autocommit=True) as db:
        db.execute("SET session_replication_role = replica")
        db.execute("DELETE FROM ledger_leaves WHERE idx = 1")
    assert cli("ledger", "verify", world.url, "--key", world.log_pub, "--state", state) == 1
    assert "missing entry 1" in capsys.readouterr().out
    assert (
        cli("ledger", "mirror", world.url, mirror, "--key", world.log_pub) == 2
    )  # refused, copy kept


def test_the_service_refuses_to_start_on_a_truncated_database(world: World) -> None:
    for _ in range(3):
        assert world.post(signed_body("infer-01", world.infer_key)).status_code == 200
    world.service.stop()
    with psycopg.connect(world.dsn, autocommit=True) as db:
        db.execute("SET session_replication_role = replica")
        db.execute("DELETE FROM ledger_leaves WHERE idx = 2")
    with pytest.raises(RuntimeError, match="covers 3 entries"):
        world.service.start()
    assert "Traceback" not in world.service.log.read_text()
