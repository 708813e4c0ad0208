"""``attest verify --ledger URL --ledger-log-key``, ``attest ledger flush`` and ``attest ledger
verify URL`` against a hostile ledger service (issue 33, items 1 and 2), a real local HTTP server
whose reads are honest and whose answers to writes are not. Each row is an answer that used to
drop the event from the spool ("recorded ... as entry 41", exit 0) or end in exit 3; now the
event stays pending, the output says "submitted, not proven", and the exit code is the
verdict's."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cli_run import run
from _fake_log import FakeLog, b64, honest, make_key, published_client, serve
from _ledger_service_kit import ORIGIN, entry
from test_cli_ledger import world  # noqa: F401  (the signed certificate and its trust store)

from attest.certificate.signing import load_private_key
from attest.ledger.service.submission import new_nonce, sign_submission


@pytest.fixture
def hostile(
    world: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dict[str, Any]]:
    keys = world["keys"]
    assert run(capsys, "keygen", "--out", keys / "infer")[0] == 0
    client = load_private_key(keys / "infer.key")
    log_key = make_key(keys, "service-plain")
    log = FakeLog(log_key)
    log.admit("infer-01", client)
    monkeypatch.setenv("ATTEST_LEDGER_SPOOL", str(tmp_path / "spool.sqlite"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state-home"))
    with serve(log) as url:
        yield {"log": log, "url": url, "log_pub": keys / "service-plain.pub", "keys": keys}


def _verify(world: dict[str, Path], h: dict[str, Any], *log_key: object) -> list[object]:  # noqa: F811
    return [
        "verify", world["cert"], "--trust", world["trust"], "--artifact", world["model"],
        "--ledger", h["url"], "--ledger-client", "infer-01",
        "--ledger-client-key", h["keys"] / "infer.key", *log_key,
    ]  # fmt: skip


def _states(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "spool.sqlite") as db:
        return [r[0] for r in db.execute("SELECT state FROM events ORDER BY seq")]


def _without_checkpoint(log: FakeLog, body: dict[str, Any]) -> tuple[int, Any]:
    answer = log.append_honestly(body, log.writer_key_ids["infer-01"])
    return 200, {"index": answer["index"], "leaf": answer["leaf"]}


# (row, what the service answers to the write)
ANSWERS: list[tuple[str, Any]] = [
    ("200 without a checkpoint", _without_checkpoint),
    ("409 with a made-up index", lambda log, body: (409, {"error": "REPLAY", "index": 41})),
    ("an empty object", lambda log, body: (200, {})),
    ("a string index", lambda log, body: (200, {"index": "abc"})),
    ("a leaf that is not base64", lambda log, body: (200, {"index": 0, "leaf": b64(b"\xff")})),
]


@pytest.mark.parametrize(("row", "answer"), ANSWERS, ids=[a[0] for a in ANSWERS])
def test_verify_keeps_an_unproven_event_and_exits_with_the_verdict(
    world: dict[str, Path],  # noqa: F811
    hostile: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    row: str,
    answer: Any,
) -> None:
    hostile["log"].add = answer
    code, out, err = run(capsys, *_verify(world, hostile, "--ledger-log-key", hostile["log_pub"]))
    assert code == 0 and "VERIFIED" in out.upper(), out + err
    assert "submitted, not proven" in err and "recorded" not in err, err
    assert _states(tmp_path) == ["pending"]
    # the service answers honestly again: attest ledger flush --key proves the same event
    hostile["log"].add = honest
    flush = ["ledger", "flush", hostile["url"], "--ledger-client", "infer-01"]
    flush += ["--ledger-client-key", hostile["keys"] / "infer.key"]
    code, out, _ = run(capsys, *flush, "--key", hostile["log_pub"])
    assert code == 0 and "each proven" in out and "0 event(s) still waiting" in out, out
    assert _states(tmp_path) == ["done"]


def test_verify_with_a_log_signed_by_another_key(
    world: dict[str, Path],  # noqa: F811
    hostile: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    hostile["log"].key = make_key(tmp_path, "impostor")
    code, out, err = run(capsys, *_verify(world, hostile, "--ledger-log-key", hostile["log_pub"]))
    # the log's revocations cannot be read from a log that does not verify: rejected (exit 1)
    assert code == 1 and "REVOCATION_STATUS_UNKNOWN" in out, out + err
    assert "submitted, not proven" in err and "does not verify under the log key" in err, err
    assert _states(tmp_path) == ["pending"]


def test_without_the_log_key_a_write_is_submitted_not_proven(
    world: dict[str, Path],  # noqa: F811
    hostile: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    code, out, err = run(capsys, *_verify(world, hostile))
    assert code == 0, out + err
    assert "submitted, not proven: no log key was given" in err, err
    assert _states(tmp_path) == ["pending"]
    flush = ["ledger", "flush", hostile["url"], "--ledger-client", "infer-01"]
    flush += ["--ledger-client-key", hostile["keys"] / "infer.key"]
    code, out, _ = run(capsys, *flush)  # still no key: still not proven (exit 1)
    assert code == 1 and "submitted, not proven" in out and "1 event(s) still waiting" in out
    code, out, _ = run(capsys, *flush, "--key", hostile["log_pub"], "--json")
    assert code == 0 and '"pending": 0' in out, out
    assert _states(tmp_path) == ["done"] and len(hostile["log"].leaves) == 1
    code, _, err = run(
        capsys, *flush, "--key", hostile["log_pub"], "--ledger-log-key", world["trust"]
    )
    assert code == 2 and "give the log's key once" in err


def test_ledger_verify_refuses_a_log_resigned_under_a_new_origin(
    hostile: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    log: FakeLog = hostile["log"]
    client = load_private_key(hostile["keys"] / "infer.key")
    for _ in range(3):
        body = sign_submission(
            entry(), origin=ORIGIN, client="infer-01", nonce=new_nonce(), key=client
        )
        honest(log, body)
    verify = ["ledger", "verify", hostile["url"], "--key", hostile["log_pub"]]
    code, out, _ = run(capsys, *verify)
    assert code == 0 and "3 client signatures checked" in out, out
    # the operator truncates the log and re-signs it under a new origin
    log.leaves = log.leaves[:1]
    log.origin = "fresh.example/ledger"
    log.clients = []
    log.publish_clients([published_client("infer-01", client)])
    code, out, _ = run(capsys, *verify)
    assert code == 1 and "TAMPERED" in out and "a log keeps its origin" in out, out
    code, out, _ = run(capsys, *verify, "--origin", ORIGIN)
    assert code == 1 and "(--origin)" in out, out


def test_flush_key_on_the_command_line_wins_over_the_environment(
    world: dict[str, Path],  # noqa: F811
    hostile: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    assert run(capsys, *_verify(world, hostile))[0] == 0  # submitted, not proven
    make_key(tmp_path, "other")  # another log's key, named by the environment
    monkeypatch.setenv("ATTEST_LEDGER_LOG_KEY", str(tmp_path / "other.pub"))
    flush = ["ledger", "flush", hostile["url"], "--ledger-client", "infer-01"]
    flush += ["--ledger-client-key", hostile["keys"] / "infer.key"]
    code, out, _ = run(capsys, *flush)  # the environment's key is not the log's: not proven
    assert code == 1 and "does not verify under the log key" in out, out
    code, out, _ = run(capsys, *flush, "--key", hostile["log_pub"])
    assert code == 0 and "each proven" in out, out
