"""``attest ledger verify URL`` (audit_remote) against an operator who holds the log key (issue
33, items 2 and 3): each row is an attack on a log that passed an audit before, reproduced
against an in-memory log and shown reported; the clean rows show what must keep passing (old
leaves without writers, a client retired)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _fake_log import FakeLog, b64, honest, make_key, published_client
from _ledger_service_kit import ORIGIN, entry

from attest.certificate.signing import PrivateKey, key_id
from attest.ledger.service.remote_audit import RemoteAuditReport, audit_remote
from attest.ledger.service.submission import new_nonce, sign_submission

URL = "https://ledger.test/"


@dataclass
class World:
    log: FakeLog
    log_key: PrivateKey
    client: PrivateKey
    attacker: PrivateKey
    state: Path

    def write(self, n: int = 1, *, origin: str = ORIGIN) -> None:
        for _ in range(n):
            body = sign_submission(
                entry(), origin=origin, client="infer-01", nonce=new_nonce(), key=self.client
            )
            assert honest(self.log, body)[0] == 200

    def audit(self, **kw: Any) -> RemoteAuditReport:
        kw.setdefault("state_path", self.state)
        return audit_remote(URL, self.log_key.public_key, transport=self.log.transport(), **kw)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state-home"))
    log_key = make_key(tmp_path, "log")
    client = make_key(tmp_path, "client")
    log = FakeLog(log_key)
    log.admit("infer-01", client)
    w = World(log, log_key, client, make_key(tmp_path, "attacker"), tmp_path / "state.json")
    w.write(3)
    first = w.audit()
    assert first.ok, first.problems
    assert (first.writers_checked, first.clients_version) == (3, 1)
    return w


def _kinds(report: RemoteAuditReport) -> list[str]:
    return [p.kind for p in report.problems]


def _resign_truncated_under_new_origin(w: World) -> dict[str, Any]:
    w.log.leaves = w.log.leaves[:1]
    w.log.origin = "new.example/ledger"
    w.log.clients = []
    w.log.publish_clients([published_client("infer-01", w.client)])
    return {"state_path": None}


def _origin_named_otherwise(w: World) -> dict[str, Any]:
    return {"origin": "the-log-i-know.example/ledger"}


def _clients_signed_by_another_key(w: World) -> dict[str, Any]:
    w.log.publish_clients([published_client("infer-01", w.client)], key=w.attacker)
    return {}


def _clients_drop_a_key(w: World) -> dict[str, Any]:
    w.log.publish_clients([published_client("infer-02", w.attacker)])
    return {}


def _clients_history_rewritten(w: World) -> dict[str, Any]:
    w.log.clients = []
    w.log.publish_clients([published_client("infer-01", w.client, status="retired")])
    return {}


def _clients_rolled_back(w: World) -> dict[str, Any]:
    w.log.publish_clients([published_client("infer-01", w.client, status="retired")])
    assert w.audit().ok  # version 2 stored
    w.log.clients = w.log.clients[:1]
    return {}


def _forge_leaf(w: World, **change: Any) -> dict[str, Any]:
    """The operator appends a leaf of its own making and signs the new checkpoint."""
    body = sign_submission(
        entry(actor="forged"), origin=ORIGIN, client="infer-01", nonce=new_nonce(), key=w.client
    )
    leaf = json.loads(w.log.honest_leaf(body, key_id(w.client.public_key)))
    leaf["entry"]["actor"] = change.pop("actor", leaf["entry"]["actor"])
    leaf["writer"].update(change)
    w.log.leaves.append(json.dumps(leaf, sort_keys=True, separators=(",", ":")).encode())
    return {}


# (row, the attack on the log after a clean audit, the kind and words of the problem)
ATTACKS: list[tuple[str, Callable[[World], dict[str, Any]], str, str]] = [
    (
        "a truncated log re-signed under a new origin",
        _resign_truncated_under_new_origin,
        "origin",
        "a log keeps its origin",
    ),
    ("an origin other than the one named", _origin_named_otherwise, "origin", "(--origin)"),
    ("clients signed by another key", _clients_signed_by_another_key, "clients", "does not verify"),
    ("a clients version that drops a key", _clients_drop_a_key, "clients", "append-only"),
    ("the clients history rewritten", _clients_history_rewritten, "clients", "rewritten"),
    ("the clients rolled back", _clients_rolled_back, "clients", "rolled back"),
    (
        "a leaf whose client signature is forged",
        lambda w: _forge_leaf(w, signature=b64(b"\x02" * 64)),
        "writer",
        "does not verify",
    ),
    (
        "a leaf ascribed to a client the log never listed",
        lambda w: _forge_leaf(w, client="ghost"),
        "writer",
        "do not list",
    ),
    (
        "a leaf ascribed to a listed client under another key",
        lambda w: _forge_leaf(w, key_id="ab" * 32),
        "writer",
        "do not list",
    ),
    (
        "an entry edited under the client's signature",
        lambda w: _forge_leaf(w, actor="edited-afterwards"),
        "writer",
        "does not verify",
    ),
    (
        "a leaf signed for another log",
        lambda w: _forge_leaf(w, origin="other.example/log"),
        "writer",
        "not this log",
    ),
    (
        "client-signed leaves but the clients no longer published",
        lambda w: setattr(w.log, "clients", []) or {},
        "clients",
        "no longer publishes",
    ),
]


@pytest.mark.parametrize(("row", "attack", "kind", "words"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_an_operator_attack_is_reported(
    world: World, row: str, attack: Any, kind: str, words: str
) -> None:
    if "origin" in row and "new origin" in row:
        # the state is keyed by the log's key: the default file, not one per origin
        assert world.audit(state_path=None).ok
    options = attack(world)
    report = world.audit(**options)
    assert not report.ok, row
    found = [p for p in report.problems if p.kind == kind]
    assert found and any(words in p.message for p in found), report.problems
    assert "TAMPERED" in report.summary()


def test_leaves_written_before_writers_were_recorded_still_verify(tmp_path: Path) -> None:
    log = FakeLog(make_key(tmp_path, "log"))
    log.leaves = [entry(actor=f"old-{n}").leaf_data for n in range(4)]  # bare v1 entries
    report = audit_remote(
        URL, log.key.public_key, transport=log.transport(), state_path=tmp_path / "s.json"
    )
    assert report.ok, report.problems
    assert report.leaves_without_writer == 4 and report.writers_checked == 0
    assert "4 entries written before writers were recorded" in report.summary()


def test_a_retired_client_keeps_its_leaves_verifiable(world: World) -> None:
    world.log.publish_clients([published_client("infer-01", world.client, status="retired")])
    report = world.audit()
    assert report.ok and report.writers_checked == 3 and report.clients_version == 2


def test_an_audit_walks_the_whole_clients_history_the_first_time(world: World) -> None:
    world.log.publish_clients(
        [published_client("infer-01", world.client), published_client("infer-02", world.attacker)]
    )
    world.state.unlink()
    report = world.audit()
    assert report.ok and report.clients_version == 2
    world.log.clients[0] = world.log.clients[1]  # version 1 replaced: the chain breaks
    world.state.unlink()
    assert "clients" in _kinds(world.audit())


def test_the_per_origin_state_of_earlier_versions_is_read_once(world: World) -> None:
    """An auditor upgrading keeps its stored checkpoint: the old default file (one per origin,
    a bare note) is read when the key's file does not exist yet."""
    from attest.ledger.service.audit_state import default_state_path, legacy_state_path

    legacy = legacy_state_path(ORIGIN)
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text(world.log.note())  # what the old version stored: 3 entries
    world.log.leaves = world.log.leaves[:2]  # since then the log was truncated and re-signed
    report = world.audit(state_path=None)
    assert not report.ok and "truncated" in _kinds(report)
    assert not default_state_path(world.log_key.public_key).exists()
