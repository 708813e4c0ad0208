"""Writers in the log (issue 33, item 3), on the real service and PostgreSQL: each leaf records
the submitting client (name, key id, signature) and the service's receive time; a client writes
only for its listed hosts; the log publishes its clients, signed, versioned and append-only; the
remote audit checks every client signature against them."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from _cli_run import exit_code as cli
from _ledger_service_kit import (
    ORIGIN,
    TEST_HOST,
    Keys,
    ServiceProcess,
    entry,
    signed_body,
    write_clients,
)

from attest.certificate.signing import key_id, load_public_key
from attest.ledger.entries import LedgerEntry
from attest.ledger.service.clients_doc import extension_problem, open_clients
from attest.ledger.writers import read_leaf


class Fleet:
    def __init__(self, dsn: str, tmp: Path) -> None:
        keys = Keys(tmp)
        self.dsn, self.tmp = dsn, tmp
        self.log_key, self.log_pub = keys.make("ledger")
        self.infer_key, self.infer_pub = keys.make("infer")
        self.release_key, self.release_pub = keys.make("release")
        self.new_infer_key, self.new_infer_pub = keys.make("infer-new")
        self.public = load_public_key(self.log_pub)
        clients = write_clients(
            tmp / "clients.yaml",
            [
                ("infer-01", self.infer_pub, ["verified", "rejected"]),
                ("release", self.release_pub, ["issued"]),
            ],
        )
        self.service = ServiceProcess(dsn, self.log_key, clients, tmp / "service.log")
        self.url = self.service.url

    def restart(self, clients: list[tuple[str, Path, list[str]]]) -> None:
        self.service.stop()
        path = write_clients(self.tmp / "clients2.yaml", clients)
        self.service = ServiceProcess(self.dsn, self.log_key, path, self.tmp / "service.log")
        self.url = self.service.url

    def post(self, body: Any) -> httpx.Response:
        return httpx.post(self.url + "add", json=body, timeout=10)

    def leaf(self, answer: dict[str, Any]) -> bytes:
        return base64.b64decode(answer["leaf"])


@pytest.fixture
def fleet(pg_dsn: str, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(pg_dsn, tmp_path)
    try:
        yield f
    finally:
        f.service.stop()


# (row, the entry an allowed client sends, the refusal)
HOST_ROWS = [
    ("another host", entry(host="someone-elses-host"), "HOST_NOT_ALLOWED"),
    ("no host at all", entry().model_copy(update={"host": None}), "HOST_NOT_ALLOWED"),
]


@pytest.mark.parametrize(("row", "item", "code"), HOST_ROWS, ids=[r[0] for r in HOST_ROWS])
def test_a_client_writes_only_for_its_listed_hosts(
    fleet: Fleet, row: str, item: LedgerEntry, code: str
) -> None:
    response = fleet.post(signed_body("infer-01", fleet.infer_key, item))
    assert response.status_code == 403, response.text
    answer = response.json()
    assert answer["error"] == code and "may write entries only for the hosts" in answer["message"]
    assert TEST_HOST in answer["message"]
    assert fleet.post(signed_body("infer-01", fleet.infer_key)).json()["index"] == 0


def test_each_leaf_records_its_writer_and_the_receive_time(fleet: Fleet) -> None:
    backdated = entry().model_copy(update={"time": "2020-01-01T00:00:00Z"})
    body = signed_body("infer-01", fleet.infer_key, backdated)
    answer = fleet.post(body).json()
    record = read_leaf(fleet.leaf(answer))
    assert record.entry == backdated and record.entry.time == "2020-01-01T00:00:00Z"
    writer = record.writer
    assert writer is not None and writer.client == "infer-01" and writer.nonce == body["nonce"]
    infer_public = load_public_key(fleet.infer_pub)
    assert writer.key_id == key_id(infer_public)
    assert writer.verifies(infer_public, backdated.leaf_data)
    assert record.received is not None
    received = datetime.strptime(record.received, "%Y-%m-%dT%H:%M:%S.%fZ")
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    assert abs((now - received).total_seconds()) < 60  # the service's clock, not the claim
    # the same write replayed: 409 with the stored leaf, which the client can prove
    replay = fleet.post(signed_body("infer-01", fleet.infer_key, backdated, nonce=body["nonce"]))
    assert replay.status_code == 409 and fleet.leaf(replay.json()) == fleet.leaf(answer)
    assert replay.json()["index"] == answer["index"] and "checkpoint" in replay.json()


def test_the_published_clients_are_signed_versioned_and_append_only(fleet: Fleet) -> None:
    first = open_clients(
        httpx.get(fleet.url + "clients", timeout=5).json(), fleet.public, where="v1"
    )
    assert first.version == 1 and first.origin == ORIGIN
    assert {(c.name, c.status) for c in first.clients} == {
        ("infer-01", "active"),
        ("release", "active"),
    }
    fleet.restart([("infer-01", fleet.new_infer_pub, ["verified"])])  # new key; release removed
    second = open_clients(
        httpx.get(fleet.url + "clients", timeout=5).json(), fleet.public, where="v2"
    )
    assert second.version == 2 and extension_problem(first, second) is None
    listed = {(c.name, c.key_id[:8], c.status) for c in second.clients}
    old_infer = key_id(load_public_key(fleet.infer_pub))[:8]
    new_infer = key_id(load_public_key(fleet.new_infer_pub))[:8]
    assert listed == {
        ("infer-01", old_infer, "retired"),
        ("release", key_id(load_public_key(fleet.release_pub))[:8], "retired"),
        ("infer-01", new_infer, "active"),
    }
    again = httpx.get(fleet.url + "clients?version=1", timeout=5).json()
    assert open_clients(again, fleet.public, where="v1 again") == first
    fleet.restart([("infer-01", fleet.new_infer_pub, ["verified"])])  # unchanged: no version
    assert httpx.get(fleet.url + "clients", timeout=5).json()["document"]["version"] == 2
    assert httpx.get(fleet.url + "clients?version=3", timeout=5).status_code == 404


def test_the_audit_checks_every_client_signature(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        assert fleet.post(signed_body("infer-01", fleet.infer_key)).status_code == 200
    fleet.restart([("infer-01", fleet.new_infer_pub, ["verified"])])
    assert fleet.post(signed_body("infer-01", fleet.new_infer_key)).status_code == 200
    assert fleet.post(signed_body("infer-01", fleet.infer_key)).status_code == 401  # retired
    state = fleet.tmp / "audit.json"
    verify = ["ledger", "verify", fleet.url, "--key", fleet.log_pub, "--state", state]
    capsys.readouterr()
    assert cli(*verify, "--origin", ORIGIN, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["writers_checked"] == 3 and report["clients_version"] == 2
    assert json.loads(state.read_text())["origin"] == ORIGIN
    assert cli(*verify, "--origin", "another.example/log") == 1
    assert "not 'another.example/log' (--origin)" in capsys.readouterr().out
