"""Command line: keygen, trust add/list/revoke, sign, verify (exit codes 0/1/2), inspect."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from _cli_run import run

STATEMENT = {
    "_type": "https://in-toto.io/Statement/v1",
    "subject": [],
    "predicateType": "https://gradient-attest.dev/certificate/v1",
    "predicate": {
        "certificate_id": "cli-0001",
        "model": {"name": "cli-model", "version": "2.0.0"},
        "issued_at": "2026-01-01T00:00:00Z",
        "expires_at": "2036-01-01T00:00:00Z",
        "verdict": "pass",
        "policy": {"id": "p", "version": "1", "digest": {"sha256": "b" * 64}},
    },
}


@pytest.fixture
def signed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Path]:
    monkeypatch.setenv("ATTEST_KEY_PASSPHRASE", "s3cret passphrase")
    monkeypatch.delenv("ATTEST_TRUST", raising=False)
    monkeypatch.delenv("ATTEST_STATE_FILE", raising=False)
    code, out, _ = run(capsys, "keygen", "--out", tmp_path / "keys" / "release")
    assert code == 0 and "key id:" in out
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x12\x04onnx" * 256)  # well-formed protobuf: an ONNX model is scanned
    from attest.core.io import sha256_file

    statement = json.loads(json.dumps(STATEMENT))
    statement["subject"] = [{"name": "model.onnx", "digest": {"sha256": sha256_file(model)}}]
    statement_path = tmp_path / "statement.json"
    statement_path.write_text(json.dumps(statement))
    cert = tmp_path / "cert.json"
    code, out, err = run(
        capsys, "sign", statement_path, "--key", tmp_path / "keys" / "release.key", "-o", cert
    )
    assert code == 0, err
    trust = tmp_path / "trust.yaml"
    code, out, err = run(
        capsys,
        "trust",
        "add",
        tmp_path / "keys" / "release.pub",
        "--trust",
        trust,
        "--name",
        "release",
    )
    assert code == 0, err
    return {"cert": cert, "trust": trust, "model": model, "keys": tmp_path / "keys"}


def test_keygen_files_and_refusals(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    signed: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = signed["keys"] / "release.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert b"ENCRYPTED" in key.read_bytes()
    code, _, err = run(capsys, "keygen", "--out", signed["keys"] / "release")
    assert code == 2 and "refusing to overwrite" in err
    monkeypatch.delenv("ATTEST_KEY_PASSPHRASE")
    code, _, err = run(capsys, "keygen", "--out", tmp_path / "nopass")
    assert code == 2 and "passphrase" in err
    code, out, _ = run(
        capsys, "keygen", "--out", tmp_path / "demo", "--unencrypted", "--algorithm", "ecdsa-p256"
    )
    assert code == 0 and "UNENCRYPTED" in out
    assert b"ENCRYPTED" not in (tmp_path / "demo.key").read_bytes()


def test_verify_exit_codes_and_json(
    signed: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["verify", signed["cert"], "--trust", signed["trust"]]
    code, out, _ = run(capsys, *base, "--artifact", signed["model"])
    assert code == 0 and out.startswith("VERIFIED: cli-model 2.0.0")
    code, out, _ = run(capsys, *base, "--artifact", signed["model"], "--json")
    data = json.loads(out)
    assert code == 0 and data["verified"] is True and data["subjects_checked"] == ["model.onnx"]
    assert {"verified", "reasons", "subjects_checked", "subjects_not_checked"} <= set(data)
    signed["model"].write_bytes(b"tampered")
    code, out, _ = run(capsys, *base, "--artifact", signed["model"], "--json")
    assert code == 1 and json.loads(out)["reasons"][0]["code"] == "SUBJECT_MISMATCH"
    code, out, _ = run(capsys, *base, "--artifact", signed["model"])
    assert code == 1 and "REJECTED" in out and "SUBJECT_MISMATCH" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["verify", "{cert}", "--trust", "{trust}"], "--artifact"),
        (
            ["verify", "{dir}/absent.json", "--trust", "{trust}", "--artifact", "{model}"],
            "does not exist",
        ),
        (
            ["verify", "{cert}", "--trust", "{dir}/absent.yaml", "--artifact", "{model}"],
            "does not exist",
        ),
        (
            [
                "verify",
                "{cert}",
                "--trust",
                "{trust}",
                "--artifact",
                "{model}",
                "--at",
                "yesterday",
            ],
            "--at",
        ),
        (
            [
                "verify",
                "{cert}",
                "--trust",
                "{trust}",
                "--artifact",
                "{model}",
                "--clock-skew",
                "lots",
            ],
            "--clock-skew",
        ),
        (["verify", "{cert}", "--trust", "{cert}", "--artifact", "{model}"], "trust store"),
        (["verify", "{cert}", "--trust", "{trust}", "--artifact", "{model}", "--bogus"], "bogus"),
    ],
)
def test_usage_and_unreadable_input_exit_2(
    signed: dict[str, Path], capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    values = {k: str(v) for k, v in signed.items()} | {"dir": str(signed["cert"].parent)}
    code, out, err = run(capsys, *[a.format(**values) for a in args])
    assert code == 2, out + err
    assert message in err


def test_audit_time_and_rollback_state(
    signed: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["verify", signed["cert"], "--trust", signed["trust"], "--artifact", signed["model"]]
    code, out, _ = run(capsys, *base, "--at", "2040-01-01T00:00:00Z", "--json")
    assert code == 1 and json.loads(out)["reasons"][0]["code"] == "EXPIRED"
    state = signed["cert"].parent / "state.json"
    state.write_text(json.dumps({"version": 1, "models": {"cli-model": {"version": "2.10.0"}}}))
    code, out, _ = run(capsys, *base, "--state-file", state, "--json")
    assert code == 1 and json.loads(out)["reasons"][0]["code"] == "ROLLBACK"


def test_trust_list_and_revoke(signed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "trust", "list", "--trust", signed["trust"], "--json")
    listing = json.loads(out)
    assert code == 0 and listing["keys"][0]["status"] == "trusted"
    keyid = listing["keys"][0]["keyid"]
    code, out, _ = run(
        capsys, "trust", "revoke", keyid[:12], "--trust", signed["trust"], "--reason", "test"
    )
    assert code == 0 and keyid in out
    code, out, _ = run(capsys, "trust", "list", "--trust", signed["trust"])
    assert "revoked" in out
    code, out, _ = run(
        capsys,
        "verify",
        signed["cert"],
        "--trust",
        signed["trust"],
        "--artifact",
        signed["model"],
        "--json",
    )
    assert code == 1 and json.loads(out)["reasons"][0]["code"] == "KEY_REVOKED"
    code, _, err = run(
        capsys, "trust", "add", signed["keys"] / "release.pub", "--trust", signed["trust"]
    )
    assert code == 2 and "already" in err


def test_sign_refuses_an_invalid_statement(
    tmp_path: Path, signed: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(STATEMENT | {"extra": 1}))
    code, _, err = run(
        capsys, "sign", bad, "--key", signed["keys"] / "release.key", "-o", tmp_path / "x.json"
    )
    assert code == 2 and "not a valid gradient-attest statement" in err
    assert not (tmp_path / "x.json").exists()


def test_inspect_says_not_verified(
    signed: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "inspect", signed["cert"])
    assert code == 0 and out.startswith("NOT VERIFIED") and "cli-model 2.0.0" in out
    code, out, _ = run(capsys, "inspect", signed["cert"], "--json")
    assert code == 0 and json.loads(out)["verified"] is False
    broken = signed["cert"].parent / "broken.json"
    broken.write_text("{")
    code, _, err = run(capsys, "inspect", broken)
    assert code == 2 and "cannot be read" in err


def test_ledger_is_called_or_refused(
    signed: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import attest.ledger

    recorded: list[tuple[Path, dict[str, Any]]] = []
    monkeypatch.setattr(
        attest.ledger, "record_verification", lambda p, d: recorded.append((p, d)), raising=False
    )
    ledger = signed["cert"].parent / "ledger.db"
    args = ["verify", signed["cert"], "--trust", signed["trust"], "--artifact", signed["model"]]
    code, _, _ = run(capsys, *args, "--ledger", ledger)
    assert (
        code == 0 and recorded and recorded[0][0] == ledger and recorded[0][1]["verified"] is True
    )
    monkeypatch.delattr(attest.ledger, "record_verification")
    code, _, err = run(capsys, *args, "--ledger", ledger)
    assert code == 2 and "no audit ledger" in err


def test_real_ledger_records_the_outcome(
    signed: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = signed["cert"].parent / "audit.db"
    args = ["verify", signed["cert"], "--trust", signed["trust"], "--artifact", signed["model"]]
    code, _, err = run(capsys, *args, "--ledger", ledger)
    assert code == 0, err
    assert ledger.exists()


def test_rollback_is_checked_by_default_in_the_user_state_directory(
    signed: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = ["verify", signed["cert"], "--trust", signed["trust"], "--artifact", signed["model"]]
    code, _, err = run(capsys, *base)  # records cli-model's version in $XDG_STATE_HOME
    assert code == 0, err
    state = Path(os.environ["XDG_STATE_HOME"]) / "gradient-attest" / "verify-state.json"
    recorded = json.loads(state.read_text())
    assert "cli-model" in json.dumps(recorded)
    # a higher version seen since: the same certificate is now a rollback, unless told not to
    state.write_text(json.dumps({"version": 1, "models": {"cli-model": {"version": "99.0.0"}}}))
    code, out, _ = run(capsys, *base, "--json")
    assert code == 1 and json.loads(out)["reasons"][0]["code"] == "ROLLBACK"
    code, out, _ = run(capsys, *base, "--no-state", "--json")
    assert code == 0 and "rollback not checked" in " ".join(json.loads(out).get("notes", []))
