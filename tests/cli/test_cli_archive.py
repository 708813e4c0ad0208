"""``attest archive --key`` and ``attest verify-archive --trust`` end to end, through the
commands an archivist and an auditor type: keygen, trust add --role archivist / ledger,
ledger append and checkpoint, archive, verify-archive (exit 0 verified, 1 not, 2 unusable)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _certfactory import NOW, iso, make_world
from _cli_run import run

from attest.verification.trust import save_trust_store


def test_archivist_signs_and_auditor_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ATTEST_TRUST", "ATTEST_STATE_FILE", "ATTEST_KEY_PASSPHRASE"):
        monkeypatch.delenv(name, raising=False)
    w = make_world(tmp_path)
    cert = w.write(w.envelope())
    trust = save_trust_store(w.trust, tmp_path / "trust.yaml")
    keys = tmp_path / "keys"
    for who in ("archivist", "ledger", "intruder"):
        assert run(capsys, "keygen", "--out", keys / who, "--unencrypted")[0] == 0
    ledger = tmp_path / "ledger.sqlite"
    assert run(capsys, "ledger", "append", cert, "--ledger", ledger)[0] == 0
    code, _, err = run(
        capsys, "ledger", "checkpoint", "--key", keys / "ledger.key", "--ledger", ledger
    )
    assert code == 0, err
    auditor = tmp_path / "auditor.yaml"
    for who, role in (("archivist", "archivist"), ("ledger", "ledger"), ("intruder", "release")):
        code, out, err = run(
            capsys, "trust", "add", keys / f"{who}.pub", "--trust", auditor, "--name", who,
            "--role", role,
        )  # fmt: skip
        assert code == 0, err
    code, out, _ = run(capsys, "trust", "list", "--trust", auditor)
    assert code == 0 and "archivist" in out

    common = [cert, "--trust", trust, "--ledger", ledger, "--ledger-key", keys / "ledger.pub"]
    signed = tmp_path / "signed.zip"
    code, out, err = run(
        capsys, "archive", *common, "-o", signed, "--at", iso(NOW), "--key", keys / "archivist.key"
    )
    assert code == 0 and "signed by key" in out, err
    code, out, _ = run(capsys, "verify-archive", signed, "--trust", auditor)
    assert code == 0 and out.startswith("VERIFIED"), out
    assert "archive signed by archivist" in out and "verified against ledger" in out

    code, out, _ = run(capsys, "verify-archive", signed)
    assert code == 1 and out.startswith("UNPROVEN") and "TRUST_REQUIRED" in out

    unsigned = tmp_path / "unsigned.zip"
    code, _, err = run(capsys, "archive", *common, "-o", unsigned, "--at", iso(NOW))
    assert code == 0 and "unsigned" in err
    code, out, _ = run(capsys, "verify-archive", unsigned, "--trust", auditor, "--json")
    assert code == 1 and json.loads(out)["reasons"][0]["code"] == "ARCHIVE_UNSIGNED"

    wrong = tmp_path / "wrong.zip"
    code, _, _ = run(
        capsys, "archive", *common, "-o", wrong, "--at", iso(NOW), "--key", keys / "intruder.key"
    )
    assert code == 0
    code, out, _ = run(capsys, "verify-archive", wrong, "--trust", auditor, "--json")
    reason = json.loads(out)["reasons"][0]
    assert code == 1 and reason["code"] == "ARCHIVE_UNTRUSTED"
    assert "does not give the archivist role" in reason["message"]

    code, _, err = run(capsys, "verify-archive", signed, "--trust", tmp_path / "missing.yaml")
    assert code == 2 and "does not exist" in err
