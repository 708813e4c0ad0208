"""``attest verify --ledger URL`` (and certify's): events go through the offline spool to a
real ledger service, in order and exactly once; refusals and usage errors exit 2."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _cli_run import run
from _ledger_service_kit import ORIGIN, ServiceProcess, free_port, write_clients
from test_cli_ledger import world  # noqa: F401  (the signed certificate and its trust store)

from attest.certificate.signing import load_private_key, load_public_key
from attest.ledger.checkpoint import open_checkpoint
from attest.ledger.entries import entry_from_leaf_data
from attest.ledger.service.client import LedgerClient
from attest.ledger.service.spool import Spool
from attest.ledger.service.submission import sign_submission
from attest.ledger.service.tiles import TilePath


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
            ("release", keys / "release2.pub", ["issued"]),
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
    # the service is down: the verdict stands (exit 0) and the event waits in the spool
    code, _, err = run(capsys, *args)
    assert code == 0 and "1 event(s) queued" in err, err
    world["model"].write_bytes(b"tampered")
    code, _, err = run(capsys, *args)
    assert code == 1 and "2 event(s) queued" in err, err
    fleet["service"] = fleet["start"]()  # type: ignore[operator]
    world["model"].write_bytes(b"\x12\x04onnx" * 64)
    code, _, err = run(capsys, *args)
    assert code == 0, err
    assert [line for line in err.splitlines() if "recorded" in line] == [
        f"ledger: event {n} recorded at {url} as entry {n - 1}" for n in (1, 2, 3)
    ]
    with LedgerClient(url) as client:
        checkpoint, _ = client.checkpoint(load_public_key(world["keys"] / "service.pub"))
        events = [entry_from_leaf_data(d).event for d in client.bundle(TilePath(None, 0, 3))]
    assert checkpoint.size == 3 and events == ["verified", "rejected", "verified"]
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
    from _ledger_service_kit import entry

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
        result = spool.flush(url, key)
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
    from _ledger_service_kit import entry

    url = str(fleet["url"])
    keys = world["keys"]
    flush = ["ledger", "flush", url, "--ledger-client", "infer-01"]
    flush += ["--ledger-client-key", keys / "infer.key", "--ledger-log-key", keys / "service.pub"]
    for _ in range(2):  # the service is down: both events wait
        assert run(capsys, *_verify_args(world, url, "infer-01", "infer.key"))[0] == 0
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
    assert entry_from_leaf_data(bundle[0]).actor == "lost-answer"
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
