"""``attest ledger ...`` end to end: a signed certificate appended, verified with
``attest verify --ledger``, checkpointed, proved, checked offline; exit codes 0/1/2."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import pytest
from _cli_run import run

STATEMENT = {
    "_type": "https://in-toto.io/Statement/v1",
    "subject": [],
    "predicateType": "https://gradient-attest.dev/certificate/v1",
    "predicate": {
        "certificate_id": "ledger-0001",
        "model": {"name": "ledger-model", "version": "1.0.0"},
        "issued_at": "2026-01-01T00:00:00Z",
        "expires_at": "2036-01-01T00:00:00Z",
        "verdict": "pass",
        "policy": {"id": "p", "version": "1", "digest": {"sha256": "b" * 64}},
    },
}


@pytest.fixture
def world(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Path]:
    monkeypatch.setenv("ATTEST_KEY_PASSPHRASE", "ledger test passphrase")
    monkeypatch.setenv("ATTEST_LEDGER", str(tmp_path / "default.sqlite"))
    for name in ("ATTEST_TRUST", "ATTEST_STATE_FILE", "ATTEST_LEDGER_SYNCHRONOUS"):
        monkeypatch.delenv(name, raising=False)
    keys = tmp_path / "keys"
    assert run(capsys, "keygen", "--out", keys / "release")[0] == 0
    assert run(capsys, "keygen", "--out", keys / "ledger")[0] == 0
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x12\x04onnx" * 64)  # well-formed protobuf: an ONNX model is scanned
    from attest.core.io import sha256_file

    statement = json.loads(json.dumps(STATEMENT))
    statement["subject"] = [{"name": "model.onnx", "digest": {"sha256": sha256_file(model)}}]
    (tmp_path / "statement.json").write_text(json.dumps(statement))
    cert = tmp_path / "cert.json"
    code, _, err = run(
        capsys, "sign", tmp_path / "statement.json", "--key", keys / "release.key", "-o", cert
    )
    assert code == 0, err
    trust = tmp_path / "trust.yaml"
    code, _, err = run(
        capsys, "trust", "add", keys / "release.pub", "--trust", trust, "--name", "release"
    )
    assert code == 0, err
    return {
        "cert": cert,
        "trust": trust,
        "model": model,
        "keys": keys,
        "ledger": tmp_path / "audit.sqlite",
    }


def test_append_verify_checkpoint_prove_and_check_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], world: dict[str, Path]
) -> None:
    ledger, keys = world["ledger"], world["keys"]
    code, out, err = run(capsys, "ledger", "append", world["cert"], "--ledger", ledger, "--json")
    assert code == 0, err
    appended = json.loads(out)
    assert appended["index"] == 0 and appended["certificate_checked"] is False
    # the verifier appends its outcome (the real attest verify, not a stub)
    verify = [
        "verify",
        world["cert"],
        "--trust",
        world["trust"],
        "--artifact",
        world["model"],
        "--ledger",
        ledger,
    ]
    assert run(capsys, *verify)[0] == 0
    world["model"].write_bytes(b"tampered")
    assert run(capsys, *verify)[0] == 1
    code, out, _ = run(capsys, "ledger", "show", "--ledger", ledger, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["index"] == 2 and shown["tree_size"] == 3
    assert (
        shown["entry"]["event"] == "rejected"
        and "SUBJECT_MISMATCH" in shown["entry"]["reason_codes"]
    )
    assert (
        shown["entry"]["certificate"]["id"] == "ledger-0001"
        and shown["entry"]["certificate_checked"]
    )
    code, out, _ = run(capsys, "ledger", "show", "1", "--ledger", ledger)
    assert code == 0 and '"event": "verified"' in out

    # proofs need a signed checkpoint first
    code, _, err = run(
        capsys, "ledger", "prove", "1", "-o", tmp_path / "p.json", "--ledger", ledger
    )
    assert code == 2 and "checkpoint" in err
    cp = tmp_path / "cp.txt"
    code, out, err = run(
        capsys,
        "ledger",
        "checkpoint",
        "--key",
        keys / "ledger.key",
        "--origin",
        "example.org/audit",
        "-o",
        cp,
        "--ledger",
        ledger,
    )
    assert code == 0, err
    assert out.startswith("example.org/audit\n3\n") and "\n\n\u2014 example.org/audit " in out
    assert cp.read_text() == out

    proof = tmp_path / "proof.json"
    code, out, err = run(capsys, "ledger", "prove", "1", "-o", proof, "--ledger", ledger)
    assert code == 0, err
    document = json.loads(proof.read_text())
    assert document["format"] == "gradient-attest/ledger-inclusion-proof/v1"
    assert (document["index"], document["tree_size"], len(document["inclusion_proof"])) == (1, 3, 2)
    code, out, err = run(
        capsys, "ledger", "verify-proof", proof, "--checkpoint", cp, "--key", keys / "ledger.pub"
    )
    assert code == 0 and "VERIFIED: entry 1" in out, err
    code, out, _ = run(
        capsys, "ledger", "verify-proof", proof, "--key", keys / "ledger.pub", "--json"
    )
    assert code == 0 and json.loads(out)["verified"] is True

    # an auditor's checks fail closed
    code, out, _ = run(
        capsys, "ledger", "verify-proof", proof, "--key", keys / "release.pub", "--json"
    )
    assert code == 1 and json.loads(out)["reasons"][0]["code"] == "CHECKPOINT_UNKNOWN_KEY"
    forged = dict(document)
    forged["entry"] = {**document["entry"], "event": "rejected"}
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    code, out, _ = run(
        capsys, "ledger", "verify-proof", tmp_path / "forged.json", "--key", keys / "ledger.pub"
    )
    assert code == 1 and "ENTRY_MISMATCH" in out

    # the ledger grows; consistency with the old checkpoint, then a new checkpoint and full verify
    run(
        capsys,
        "ledger",
        "append",
        world["cert"],
        "--event",
        "revoked",
        "--reason",
        "KEY_COMPROMISED",
        "--ledger",
        ledger,
    )
    code, out, err = run(
        capsys,
        "ledger",
        "consistency",
        "3",
        "-o",
        tmp_path / "c.json",
        "--ledger",
        ledger,
        "--json",
    )
    assert code == 0, err
    assert (json.loads(out)["old_size"], json.loads(out)["new_size"]) == (3, 4)
    code, out, _ = run(
        capsys, "ledger", "verify-proof", tmp_path / "c.json", "--key", keys / "ledger.pub"
    )
    assert code == 0 and "extends the tree of 3" in out
    assert (
        run(
            capsys,
            "ledger",
            "checkpoint",
            "--key",
            keys / "ledger.key",
            "--ledger",
            ledger,
            "--json",
        )[0]
        == 0
    )
    code, out, _ = run(
        capsys, "ledger", "verify", "--key", keys / "ledger.pub", "--ledger", ledger, "--json"
    )
    report = json.loads(out)
    assert (
        code == 0
        and report["ok"]
        and report["tree_size"] == 4
        and report["signatures_checked"] == 2
    )

    # an old proof relative to size 3 is not a proof for the size-4 checkpoint
    cp4 = tmp_path / "cp4.txt"
    cp4.write_text(
        json.loads(
            run(
                capsys,
                "ledger",
                "checkpoint",
                "--key",
                keys / "ledger.key",
                "--ledger",
                ledger,
                "--json",
            )[1]
        )["note"]
    )
    code, out, _ = run(
        capsys, "ledger", "verify-proof", proof, "--checkpoint", cp4, "--key", keys / "ledger.pub"
    )
    assert code == 1 and "SIZE_MISMATCH" in out and "--tree-size 4" in out


def test_verify_reports_tampering_with_index_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], world: dict[str, Path]
) -> None:
    ledger = world["ledger"]
    for _ in range(6):
        assert run(capsys, "ledger", "append", world["cert"], "--ledger", ledger)[0] == 0
    code, out, _ = run(capsys, "ledger", "verify", "--ledger", ledger)
    assert code == 0 and out.startswith("OK: 6 entries")
    with sqlite3.connect(ledger) as db:
        data = db.execute("SELECT data FROM leaves WHERE idx = 4").fetchone()[0]
        db.execute(
            "UPDATE leaves SET data = ? WHERE idx = 4", (data.replace(b"issued", b"revoked"),)
        )
    code, out, _ = run(capsys, "ledger", "verify", "--ledger", ledger)
    assert code == 1 and out.startswith("TAMPERED") and "[edited] entry 4" in out
    code, _, err = run(capsys, "ledger", "show", "4", "--ledger", ledger)
    assert code == 2 and "edited" in err


def test_usage_errors_exit_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], world: dict[str, Path]
) -> None:
    missing = tmp_path / "absent.sqlite"
    for args in (
        ["ledger", "show", "0", "--ledger", missing],
        ["ledger", "verify", "--ledger", missing],
        ["ledger", "append", tmp_path / "no-cert.json", "--ledger", missing],
        ["ledger", "append", world["cert"], "--reason", "lower case", "--ledger", missing],
        ["ledger", "checkpoint", "--key", world["keys"] / "ledger.key", "--ledger", missing],
        ["ledger", "verify-proof", tmp_path / "none.json", "--key", world["keys"] / "ledger.pub"],
    ):
        code, _, err = run(capsys, *args)
        assert code == 2 and err.startswith("error:"), (args, err)
    assert not missing.exists()
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"format": "gradient-attest/ledger-inclusion-proof/v1", "index": -1}')
    code, out, _ = run(
        capsys, "ledger", "verify-proof", garbage, "--key", world["keys"] / "ledger.pub"
    )
    assert code == 1 and "MALFORMED" in out
    assert run(capsys, "ledger", "append", world["cert"], "--ledger", world["ledger"])[0] == 0
    code, _, err = run(capsys, "ledger", "consistency", "2", "--ledger", world["ledger"])
    assert code == 2 and "0 < OLD <= NEW <= 1" in err


def test_default_ledger_path_comes_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], world: dict[str, Path]
) -> None:
    code, out, _ = run(capsys, "ledger", "append", world["cert"], "--json")
    assert code == 0 and json.loads(out)["ledger"] == str(tmp_path / "default.sqlite")
    assert (tmp_path / "default.sqlite").exists()


def test_leaf_data_in_the_proof_is_the_canonical_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], world: dict[str, Path]
) -> None:
    ledger = world["ledger"]
    run(capsys, "ledger", "append", world["cert"], "--ledger", ledger)
    run(capsys, "ledger", "checkpoint", "--key", world["keys"] / "ledger.key", "--ledger", ledger)
    run(capsys, "ledger", "prove", "0", "-o", tmp_path / "p.json", "--ledger", ledger)
    document = json.loads((tmp_path / "p.json").read_text())
    from attest.certificate.signing import canonical_json

    assert base64.b64decode(document["leaf_data"]) == canonical_json(document["entry"])
