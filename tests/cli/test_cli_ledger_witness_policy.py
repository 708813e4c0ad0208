"""The trust store's witness quorum on the client (issue 37, item 2): ``attest ledger verify
URL``, ``attest ledger mirror`` and ``attest verify --ledger URL`` refuse a log checkpoint that
fewer of the trust store's witnesses cosigned than its witness_quorum
(WITNESS_QUORUM_NOT_MET), accept one the quorum cosigned, and behave as before without one.
The log is the in-memory one of tests/unit/_fake_log.py served over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cli_run import run
from _fake_log import FakeLog, make_key, serve
from _ledger_service_kit import entry
from test_cli_ledger import world  # noqa: F401  (the signed certificate and its trust store)

from attest.certificate.signing import load_private_key
from attest.ledger.checkpoint import split_note
from attest.ledger.log import open_ledger
from attest.ledger.service.submission import new_nonce, sign_submission
from attest.ledger.storage import LAST_CHECKPOINT_META
from attest.ledger.witness.cosignature import cosign, witness_key

WITNESSES = ("w.example/w1", "w.example/w2")


@pytest.fixture
def witnessed(
    world: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dict[str, Any]]:
    keys = world["keys"]
    assert run(capsys, "keygen", "--out", keys / "infer")[0] == 0
    client = load_private_key(keys / "infer.key")
    log = FakeLog(make_key(keys, "log"))
    log.admit("infer-01", client)
    for _ in range(3):
        body = sign_submission(
            entry(), origin=log.origin, client="infer-01", nonce=new_nonce(), key=client
        )
        log.append_honestly(body, log.writer_key_ids["infer-01"])
    witness_keys = [make_key(keys, f"witness{n}") for n in (1, 2)]
    cosigning: list[int] = [0, 1]

    def cosign_lines(note: str) -> str:
        text = split_note(note)[0]
        return "".join(cosign(text, witness_keys[n], WITNESSES[n]) for n in cosigning)

    log.cosign = cosign_lines
    trust = world["trust"]
    lines = ["witnesses:"]
    for n, name in enumerate(WITNESSES):
        lines += [f"  - name: w{n + 1}", f"    key: {witness_key(name, witness_keys[n]).text}"]
    trust.write_text(trust.read_text() + "\n".join(lines) + "\nwitness_quorum: 2\n")
    monkeypatch.setenv("ATTEST_LEDGER_SPOOL", str(tmp_path / "spool.sqlite"))
    with serve(log) as url:
        yield {
            "log": log,
            "url": url,
            "log_pub": keys / "log.pub",
            "keys": keys,
            "cosigning": cosigning,
        }


def test_ledger_verify_url_needs_the_quorum(
    world: dict[str, Path],  # noqa: F811
    witnessed: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    args = ["ledger", "verify", witnessed["url"], "--key", witnessed["log_pub"]]
    args += ["--state", tmp_path / "audit-state.json"]
    code, out, err = run(capsys, *args, "--trust", world["trust"])
    assert code == 0 and out.startswith("OK"), out + err
    witnessed["cosigning"][:] = [1]
    code, out, _ = run(capsys, *args, "--trust", world["trust"])
    assert code == 1 and "WITNESS_QUORUM_NOT_MET" in out and "1 of the 2" in out, out
    # no trust store given: today's behaviour, the log's own signature suffices
    code, out, _ = run(capsys, *args)
    assert code == 0, out


def test_mirror_refuses_a_checkpoint_below_the_quorum(
    world: dict[str, Path],  # noqa: F811
    witnessed: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    copy = tmp_path / "copy.sqlite"
    args = ["ledger", "mirror", witnessed["url"], copy, "--key", witnessed["log_pub"]]
    witnessed["cosigning"][:] = []
    code, _, err = run(capsys, *args, "--trust", world["trust"])
    assert code == 1 and "WITNESS_QUORUM_NOT_MET" in err, err
    if copy.exists():
        with open_ledger(copy) as book:
            assert book.tree_head().size == 0
    witnessed["cosigning"][:] = [0, 1]
    code, out, err = run(capsys, *args, "--trust", world["trust"], "--json")
    assert code == 0 and '"added": 3' in out, out + err
    # the copy keeps the cosigned checkpoint: a one-shot witness and offline proofs read it
    with open_ledger(copy) as book:
        note = book.storage.get_meta(LAST_CHECKPOINT_META) or ""
    assert note.count("\u2014 w.example/w") == 2


def test_verify_ledger_url_rejects_below_the_quorum(
    world: dict[str, Path],  # noqa: F811
    witnessed: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [
        "verify", world["cert"], "--trust", world["trust"], "--artifact", world["model"],
        "--ledger", witnessed["url"], "--ledger-client", "infer-01",
        "--ledger-client-key", witnessed["keys"] / "infer.key",
        "--ledger-log-key", witnessed["log_pub"], "--json",
    ]  # fmt: skip
    code, out, err = run(capsys, *args)
    assert code == 0, out + err
    witnessed["cosigning"][:] = [0]
    code, out, err = run(capsys, *args)
    assert code == 1 and '"WITNESS_QUORUM_NOT_MET"' in out, out + err
