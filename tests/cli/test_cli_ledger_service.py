"""``attest verify --ledger URL`` (and certify's): events go through the offline spool to a
real ledger service, in order and exactly once; refusals and usage errors exit 2."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from _cli_run import run
from _ledger_service_kit import ORIGIN, ServiceProcess, entry, free_port, write_clients
from test_cli_ledger import world  # noqa: F401  (the signed certificate and its trust store)

from attest.certificate.signing import load_private_key, load_public_key
from attest.ledger.checkpoint import open_checkpoint
from attest.ledger.entries import entry_from_leaf_data
from attest.ledger.service.client import LedgerClient
from attest.ledger.service.spool import Spool
from attest.ledger.service.submission import new_nonce, sign_submission
from attest.ledger.service.tiles import TilePath
from attest.ledger.writers import entry_of_leaf


@pytest.fixture
def fleet(
    world: dict[str, Path],  # noqa: F811
    pg_dsn: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dict[str, object]]:
    keys = world["keys"]
    for name in ("service", "infer", "release2"):
        assert run(capsys, "keygen", "--out", keys / name)[0] == 0
    clients = write_clients(
        tmp_path / "clients.yaml",
        [
            ("infer-01", keys / "infer.pub", ["verified", "rejected"]),
            ("release", keys / "release2.pub", ["issued", "revoked"]),
        ],
    )
    monkeypatch.setenv("ATTEST_LEDGER_SPOOL", str(tmp_path / "spool.sqlite"))
    port = free_port()
    state: dict[str, object] = {
        "url": f"http://127.0.0.1:{port}/",
        "port": port,
        "start": lambda: ServiceProcess(
            pg_dsn, keys / "service.key", clients, tmp_path / "service.log", port=port
        ),
    }
    yield state
    service = state.get("service")
    if isinstance(service, ServiceProcess):
        service.stop()


def _verify_args(world: dict[str, Path], url: str, client: str, key: str) -> list[object]:  # noqa: F811
    keys = world["keys"]
    return [
        "verify", world["cert"], "--trust", world["trust"], "--artifact", world["model"],
        "--ledger", url, "--ledger-client", client, "--ledger-client-key", keys / key,
        "--ledger-log-key", keys / "service.pub",
    ]  # fmt: skip


def test_verify_submits_through_the_spool_in_order_exactly_once(
    world: dict[str, Path],  # noqa: F811
    fleet: dict[str, object],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    url = str(fleet["url"])
    args = _verify_args(world, url, "infer-01", "infer.key")
    # the service is down and no verified copy of its log is kept here: its revocations are
    # unknown, so the certificate is rejected (fail closed); the event waits in the spool
    code, out, err = run(capsys, *args)
    assert code == 1 and "REVOCATION_STATUS_UNKNOWN" in out and "1 event(s) queued" in err, err
    world["model"].write_bytes(b"tampered")
    code, _, err = run(capsys, *args)
    assert code == 1 and "2 event(s) queued" in err, err
    fleet["service"] = fleet["start"]()  # type: ignore[operator]
    world["model"].write_bytes(b"\x12\x04onnx" * 64)
    code, _, err = run(capsys, *args)
    assert code == 0, err
    assert [line for line in err.splitlines() if "recorded" in line] == [
        f"ledger: event {n} recorded at {url} as entry {n - 1}"
        " (proven in the log's signed checkpoint)"
        for n in (1, 2, 3)
    ]
    with LedgerClient(url) as client:
        checkpoint, _ = client.checkpoint(load_public_key(world["keys"] / "service.pub"))
        events = [entry_of_leaf(d).event for d in client.bundle(TilePath(None, 0, 3))]
    assert checkpoint.size == 3 and events == ["rejected", "rejected", "verified"]
    with sqlite3.connect(tmp_path / "spool.sqlite") as db:
        assert db.execute("SELECT state, log_index FROM events ORDER BY seq").fetchall() == [
            ("done", 0),
            ("done", 1),
            ("done", 2),
        ]


def test_an_answer_lost_in_transit_is_not_recorded_twice(
    world: dict[str, Path],  # noqa: F811
    fleet: dict[str, object],
    tmp_path: Path,
) -> None:
    fleet["service"] = fleet["start"]()  # type: ignore[operator]
    url = str(fleet["url"])
    key = load_private_key(world["keys"] / "infer.key")
    item = entry()
    with Spool(tmp_path / "spool.sqlite") as spool:
        seq = spool.enqueue(url, "infer-01", item)
        (_, _, nonce, _) = spool.pending(url)[0]
        # the first attempt reached the service, but its answer never came back
        body = sign_submission(item, origin=ORIGIN, client="infer-01", nonce=nonce, key=key)
        assert httpx.post(url + "add", json=body, timeout=10).json()["index"] == 0
        # without the log's key the service's word proves nothing: the event stays pending
        result = spool.flush(url, key)
        assert result.submitted == [] and result.pending == 1
        assert result.unproven == [(seq, "no log key was given to check the service's answer")]
        log_key = load_public_key(world["keys"] / "service.pub")
        result = spool.flush(url, key, log_key=log_key)  # the 409 carries the stored entry
    assert result.submitted == [(seq, 0)] and result.pending == 0
    note = httpx.get(url + "checkpoint", timeout=5).text
    assert open_checkpoint(note, load_public_key(world["keys"] / "service.pub")).size == 1


def test_refusals_and_usage_errors_exit_2(
    world: dict[str, Path],  # noqa: F811
    fleet: dict[str, object],
    capsys: pytest.CaptureFixture[str],
) -> None:
    fleet["service"] = fleet["start"]()  # type: ignore[operator]
    url = str(fleet["url"])
    code, _, err = run(capsys, *_verify_args(world, url, "release", "release2.key"))
    assert code == 2 and "ENTRY_TYPE_NOT_ALLOWED" in err, err
    code, _, err = run(capsys, *_verify_args(world, url, "infer-01", "release2.key"))
    assert code == 2 and "SIGNATURE_INVALID" in err, err
    code, _, err = run(
        capsys,
        "verify",
        world["cert"],
        "--trust",
        world["trust"],
        "--artifact",
        world["model"],
        "--ledger",
        url,
    )
    assert code == 2 and "--ledger-client" in err
    # without the log's key the event is submitted (or queued) and the log's revocations are
    # not read: a note says so, and the verdict is the certificate's own
    code, out, err = run(capsys, *_verify_args(world, url, "infer-01", "infer.key")[:-2])
    assert code in (0, 1) and "REVOCATION_STATUS_UNKNOWN" not in out, out
    assert "revocations held by the ledger service were not read" in out + err, out + err
    code, _, err = run(
        capsys,
        "certify",
        world["cert"],
        "--policy",
        "research",
        "--key",
        world["keys"] / "release.key",
        "--ledger",
        url,
    )
    assert code == 2 and "--ledger-client" in err


def test_ledger_flush_sends_the_spool_now_in_order_exactly_once(
    world: dict[str, Path],  # noqa: F811
    fleet: dict[str, object],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    url = str(fleet["url"])
    keys = world["keys"]
    flush = ["ledger", "flush", url, "--ledger-client", "infer-01"]
    flush += ["--ledger-client-key", keys / "infer.key", "--ledger-log-key", keys / "service.pub"]
    for _ in range(2):  # the service is down: both events wait (rejected: revocations unknown)
        assert run(capsys, *_verify_args(world, url, "infer-01", "infer.key"))[0] == 1
    code, out, _ = run(capsys, *flush)
    assert code == 1 and "not sent" in out and "2 event(s) still waiting" in out, out
    fleet["service"] = fleet["start"]()  # type: ignore[operator]
    with Spool(tmp_path / "spool.sqlite") as spool:  # a third whose first answer was lost
        spool.enqueue(url, "infer-01", entry(actor="lost-answer"))
        spool.enqueue(url, "release", entry("issued"))  # another client's: left alone
        nonce = spool.pending(url, "infer-01")[-1][2]
        item = entry_from_leaf_data(spool.pending(url, "infer-01")[-1][3])
    body = sign_submission(
        item,
        origin=ORIGIN,
        client="infer-01",
        nonce=nonce,
        key=load_private_key(keys / "infer.key"),
    )
    assert httpx.post(url + "add", json=body, timeout=10).json()["index"] == 0
    code, out, _ = run(capsys, *flush, "--json")
    assert code == 0, out
    report = json.loads(out)
    assert [s["index"] for s in report["sent"]] == [1, 2, 0]  # queued order; the lost one once
    assert report["pending"] == 0 and report["refused"] == []
    with LedgerClient(url) as client:
        bundle = client.bundle(TilePath(None, 0, 3))
    assert entry_of_leaf(bundle[0]).actor == "lost-answer"
    code, out, _ = run(capsys, *flush)  # nothing left: nothing sent again
    assert code == 0 and "0 event(s) still waiting" in out and "sent" not in out, out
    wrong = [*flush[:5], "--ledger-client-key", keys / "release2.key"]
    with Spool(tmp_path / "spool.sqlite") as spool:
        spool.enqueue(url, "infer-01", entry())
    code, out, err = run(capsys, *wrong)
    assert code == 2 and "SIGNATURE_INVALID" in out + err and "refused event" in out, out + err
    with sqlite3.connect(tmp_path / "spool.sqlite") as db:
        states = db.execute("SELECT client, state FROM events ORDER BY seq").fetchall()
    assert states == [("infer-01", "done")] * 3 + [("release", "pending"), ("infer-01", "refused")]


def test_verify_honours_revocations_held_by_the_ledger_service(
    world: dict[str, Path],  # noqa: F811
    fleet: dict[str, object],
    capsys: pytest.CaptureFixture[str],
    pg_dsn: str,
) -> None:
    from attest.cli.ledger_remote import remote_copy_path
    from attest.ledger.entries import entry_for_certificate

    keys = world["keys"]
    fleet["service"] = fleet["start"]()  # type: ignore[operator]
    url = str(fleet["url"])
    args = _verify_args(world, url, "infer-01", "infer.key")
    assert run(capsys, *args)[0] == 0  # not revoked yet
    revocation = world["cert"].with_name("revocation.json")
    code, _, err = run(
        capsys, "revoke", world["cert"], "--key", keys / "release.key", "--reason", "bad data",
        "-o", revocation,
    )  # fmt: skip
    assert code == 0, err
    revoked = entry_for_certificate(
        world["cert"], event="revoked", revocation=revocation.read_bytes()
    )
    body = sign_submission(
        revoked, origin=ORIGIN, client="release", nonce=new_nonce(),
        key=load_private_key(keys / "release2.key"),
    )  # fmt: skip
    assert httpx.post(url + "add", json=body, timeout=10).status_code == 200
    code, out, _ = run(capsys, *args)
    assert code == 1 and "CERTIFICATE_REVOKED" in out and "bad data" in out, out
    # the same reason code as a revocation in a local ledger
    local = world["cert"].with_name("local.sqlite")
    code, _, _ = run(capsys, "ledger", "append", world["cert"], "--ledger", local)
    assert code == 0
    code, out, _ = run(
        capsys, "revoke", world["cert"], "--key", keys / "release.key", "--reason", "bad data",
        "-o", world["cert"].with_name("again.json"), "--ledger", local,
    )  # fmt: skip
    assert code == 0, out
    code, out_local, _ = run(capsys, *args[:6], "--ledger", local)
    assert code == 1 and "CERTIFICATE_REVOKED" in out_local
    # an entry the copy has not seen yet is rewritten in the database: the log no longer
    # reproduces its signed root, so its revocations cannot be trusted (fail closed)
    with psycopg.connect(pg_dsn, autocommit=True) as db:
        size = db.execute("SELECT max(idx) + 1 FROM ledger_leaves").fetchone()[0]
        db.execute("SET session_replication_role = replica")
        forged = entry(actor="forger").leaf_data
        db.execute("UPDATE ledger_leaves SET data = %s WHERE idx = %s", (forged, size - 1))
    code, out, _ = run(capsys, *args, "--json")
    report = json.loads(out)
    assert code == 1 and "REVOCATION_STATUS_UNKNOWN" in [r["code"] for r in report["reasons"]]
    # the service unreachable: the verified copy answers (and says so)
    service = fleet["service"]
    assert isinstance(service, ServiceProcess)
    service.stop()
    code, out, _ = run(capsys, *args, "--json")
    report = json.loads(out)
    assert code == 1 and [r["code"] for r in report["reasons"]] == ["CERTIFICATE_REVOKED"]
    assert any("could not be reached" in note for note in report["notes"]), report["notes"]
    remote_copy_path(url).unlink()  # ... and without a copy: unknown, rejected
    code, out, _ = run(capsys, *args)
    assert code == 1 and "REVOCATION_STATUS_UNKNOWN" in out
