"""``attest ledger witness serve`` as a real uvicorn process (tlog-witness over HTTP: 200 with
a cosignature line, 409 with text/x.tlog.size, 404, the monitoring checkpoint) and
``attest ledger witness cosign`` / ``key`` from the command line against a local ledger."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _cli_run import run
from _witness_kit import ORIGIN, Tree, WitnessProcess, make_key, write_logs

from attest.certificate.note_keys import SIGNATURE_TYPE_COSIGNATURE, parse_note_key
from attest.certificate.signing import generate_keypair, load_private_key
from attest.ledger.entries import LedgerEntry, utc_now
from attest.ledger.log import open_ledger
from attest.ledger.witness.core import add_checkpoint_body, origin_hash
from attest.ledger.witness.cosignature import check_cosignatures

NAME = "w.example/w1"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[WitnessProcess, Tree, Path]]:
    log_key, log_pub = make_key(tmp_path, "log")
    key_path, _, _ = generate_keypair(tmp_path / "witness", passphrase=None)
    logs = write_logs(tmp_path / "logs.yaml", log_pub)
    process = WitnessProcess(tmp_path, key_path, NAME, logs, tmp_path / "witness.log")
    try:
        yield process, Tree(log_key).grow(6), key_path
    finally:
        process.stop()


def test_served_witness_speaks_tlog_witness(
    served: tuple[WitnessProcess, Tree, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    process, tree, key_path = served
    with httpx.Client(base_url=process.url, timeout=10) as http:
        ok = http.post("add-checkpoint", content=add_checkpoint_body(0, [], tree.note(4)))
        assert ok.status_code == 200, ok.text
        assert ok.text.startswith(f"\u2014 {NAME} ") and ok.text.endswith("\n")
        conflict = http.post("add-checkpoint", content=add_checkpoint_body(0, [], tree.note()))
        assert conflict.status_code == 409
        assert conflict.headers["content-type"].startswith("text/x.tlog.size")
        assert conflict.text == "4\n"
        grown = http.post(
            "add-checkpoint", content=add_checkpoint_body(4, tree.proof(4), tree.note())
        )
        assert grown.status_code == 200
        fork = Tree(tree.key, salt=b"fork").grow(6)
        refused = http.post("add-checkpoint", content=add_checkpoint_body(6, [], fork.note()))
        assert refused.status_code == 422
        unknown = Tree(tree.key, origin="other.example/log").grow(1)
        assert (
            http.post(
                "add-checkpoint", content=add_checkpoint_body(0, [], unknown.note())
            ).status_code
            == 404
        )
        latest = http.get(f"{origin_hash(ORIGIN)}/checkpoint")
        assert latest.status_code == 200 and "\n6\n" in latest.text
    code, out, _ = run(capsys, "ledger", "witness", "key", "--key", key_path, "--name", NAME)
    assert code == 0
    witness = parse_note_key(out.strip(), SIGNATURE_TYPE_COSIGNATURE)
    assert check_cosignatures(latest.text, [("w1", witness)]).verified == ["w1"]
    process.stop()
    assert "split view" in process.log.read_text()


def test_cosign_one_shot_from_a_local_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_key_path, log_pub, _ = generate_keypair(tmp_path / "log", passphrase=None)
    witness_key, _, _ = generate_keypair(tmp_path / "witness", passphrase=None)
    logs = write_logs(tmp_path / "logs.yaml", log_pub)
    ledger = tmp_path / "copy.sqlite"
    log_key = load_private_key(log_key_path, prompt=False)

    def grow(count: int) -> None:
        with open_ledger(ledger, create=True) as book:
            for _ in range(count):
                book.append(
                    LedgerEntry(
                        event="verified",
                        time=utc_now(),
                        result="pass",
                        certificate_checked=True,
                        actor="a",
                        host="h",
                    )
                )
            book.sign_checkpoint(log_key, origin=ORIGIN)

    args = ["ledger", "witness", "cosign", "--key", str(witness_key), "--name", NAME]
    args += ["--logs", str(logs), "--state", str(tmp_path / "state"), "--ledger", str(ledger)]
    grow(3)
    assert run(capsys, *args, "-o", tmp_path / "cp3.txt")[0] == 0
    assert "\n3\n" in (tmp_path / "cp3.txt").read_text()
    grow(4)
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert "\n7\n" in out and f"\u2014 {NAME} " in out
    # a copy that does not extend what the witness cosigned is refused (exit 1)
    ledger.unlink()
    grow(9)
    code, _, err = run(capsys, *args)
    assert code == 1 and "refused" in err
