"""Command line: two people sign one certificate on two occasions (sign, then cosign) under a
trust store with roles and requirements; trusted timestamps from a real TSA over HTTP; a
certificate withdrawn with attest revoke (file and ledger)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _cli_run import run
from _tsa import make_tsa, needs_openssl, serve

STATEMENT = {
    "_type": "https://in-toto.io/Statement/v1",
    "subject": [],
    "predicateType": "https://gradient-attest.dev/certificate/v1",
    "predicate": {
        "certificate_id": "cosign-0001",
        "model": {"name": "seg-model", "version": "3.1.0"},
        "issued_at": "2026-01-01T00:00:00Z",
        "expires_at": "2036-01-01T00:00:00Z",
        "verdict": "pass",
        "policy": {"id": "clinical-strict", "version": "1", "digest": {"sha256": "b" * 64}},
        "findings": [{"rule": "r", "verdict": "pass"}, {"rule": "s", "verdict": "warn"}],
    },
}


@pytest.fixture
def team(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Two keys (ML lead, clinical safety officer), a trust store requiring one authorship by
    a release-engineer and one approval by clinical-safety, a certificate signed by the first."""
    for name in ("ATTEST_TRUST", "ATTEST_STATE_FILE", "ATTEST_KEY_PASSPHRASE"):
        monkeypatch.delenv(name, raising=False)
    keys = tmp_path / "keys"
    for who in ("lead", "safety", "intern"):
        assert run(capsys, "keygen", "--out", keys / who, "--unencrypted")[0] == 0
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x12\x04onnx" * 256)
    from attest.core.io import sha256_file

    statement = json.loads(json.dumps(STATEMENT))
    statement["subject"] = [{"name": "model.onnx", "digest": {"sha256": sha256_file(model)}}]
    statement_path = tmp_path / "statement.json"
    statement_path.write_text(json.dumps(statement))
    trust = tmp_path / "trust.yaml"
    for who, role in (("lead", "release-engineer"), ("safety", "clinical-safety")):
        code, _, err = run(
            capsys,
            "trust",
            "add",
            keys / f"{who}.pub",
            "--trust",
            trust,
            "--name",
            who,
            "--role",
            role,
        )
        assert code == 0, err
    assert run(capsys, "trust", "add", keys / "intern.pub", "--trust", trust)[0] == 0
    for role, meaning in (("release-engineer", "authorship"), ("clinical-safety", "approval")):
        code, _, err = run(
            capsys, "trust", "require", "--trust", trust, "--role", role, "--meaning", meaning
        )
        assert code == 0, err
    cert = tmp_path / "cert.json"
    code, _, err = run(
        capsys,
        "sign", statement_path, "--key", keys / "lead.key", "-o", cert,
        "--name", "Ada Lovelace", "--role", "release-engineer", "--meaning", "authorship",
    )  # fmt: skip
    assert code == 0, err
    return {"cert": cert, "trust": trust, "model": model, "keys": keys, "root": tmp_path}


def _verify(capsys: pytest.CaptureFixture[str], t: dict[str, Any], cert: Path, *extra: Any) -> Any:
    args = ["verify", cert, "--trust", t["trust"], "--artifact", t["model"], "--no-state", *extra]
    return run(capsys, *args)


def _cosign(capsys: pytest.CaptureFixture[str], t: dict[str, Any], key: str, *extra: Any) -> Any:
    return run(
        capsys,
        "cosign", t["cert"], "--key", t["keys"] / f"{key}.key", "--trust", t["trust"],
        "--name", "Grace Hopper", "--role", "clinical-safety", "--meaning", "approval",
        "--comment", "reviewed the IG findings", "-o", t["root"] / "cosigned.json", *extra,
    )  # fmt: skip


def test_two_people_sign_on_two_occasions(
    team: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _verify(capsys, team, team["cert"], "--json")
    assert code == 1
    data = json.loads(out)
    assert [r["code"] for r in data["reasons"]] == ["SIGNATURES_INSUFFICIENT"]
    assert "clinical-safety" in data["reasons"][0]["message"]
    assert "approval" in data["reasons"][0]["message"]
    code, out, err = _cosign(capsys, team, "safety")
    assert code == 2 and "--yes" in err  # not on a terminal: no silent signature
    code, out, err = _cosign(capsys, team, "safety", "--yes")
    assert code == 0, err
    assert "seg-model 3.1.0" in out and "pass 1" in out and "warn 1" in out  # the summary
    assert "Ada Lovelace (release-engineer), authorship" in out
    cosigned = team["root"] / "cosigned.json"
    code, out, err = _verify(capsys, team, cosigned)
    assert code == 0, out + err
    assert "Ada Lovelace (release-engineer), authorship" in out
    assert "Grace Hopper (clinical-safety), approval" in out
    assert '"reviewed the IG findings"' in out and out.count(": counted") == 2
    code, out, _ = _verify(capsys, team, cosigned, "--json")
    signatures = json.loads(out)["signatures"]
    assert [(s["name"], s["meaning"], s["status"]) for s in signatures] == [
        ("Ada Lovelace", "authorship", "counted"),
        ("Grace Hopper", "approval", "counted"),
    ]
    # inspect shows the claims, and says they are not verified
    code, out, _ = run(capsys, "inspect", cosigned)
    assert code == 0 and "Grace Hopper (clinical-safety), approval" in out
    assert "NOT VERIFIED" in out


def test_cosign_refusals(team: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    # the same key twice
    code, _, err = _cosign(capsys, team, "lead", "--yes")
    assert code == 2 and "already signed by key" in err
    # a key that does not hold the role it claims meets no requirement
    code, _, err = _cosign(capsys, team, "intern", "--yes")
    assert code == 0, err
    code, out, _ = _verify(capsys, team, team["root"] / "cosigned.json", "--json")
    data = json.loads(out)
    assert code == 1 and data["reasons"][0]["code"] == "SIGNATURES_INSUFFICIENT"
    assert any("does not give" in note for note in data["notes"])
    # a certificate that does not verify (its payload edited) is refused, exit 1
    envelope = json.loads(team["cert"].read_text())
    envelope["payload"] = envelope["payload"][:-8] + "AAAAAAA="
    team["cert"].write_text(json.dumps(envelope))
    code, _, err = _cosign(capsys, team, "safety", "--yes")
    assert code == 1 and "does not verify" in err and "SIGNATURE_INVALID" in err


def test_bad_meaning_and_signer_text_are_usage_errors(
    team: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys, "cosign", team["cert"], "--key", team["keys"] / "safety.key", "--trust",
        team["trust"], "--name", "x", "--meaning", "blessing", "-o", team["root"] / "o.json",
    )  # fmt: skip
    assert code == 2 and "blessing" in err
    code, _, err = run(
        capsys, "cosign", team["cert"], "--key", team["keys"] / "safety.key", "--trust",
        team["trust"], "--name", "a\x1b[2Jb", "--meaning", "review", "-o", team["root"] / "o.json",
    )  # fmt: skip
    assert code == 2


def test_revoke_withdraws_one_certificate(
    team: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cosign(capsys, team, "safety", "--yes")[0] == 0
    cosigned = team["root"] / "cosigned.json"
    ledger = team["root"] / "ledger.sqlite"
    revocation = team["root"] / "revocation.json"
    code, out, err = run(
        capsys, "revoke", cosigned, "--key", team["keys"] / "safety.key", "--name", "Grace Hopper",
        "--reason", "label map was wrong", "-o", revocation, "--ledger", ledger,
    )  # fmt: skip
    assert code == 0, err
    assert "entry 0 (revoked)" in out
    for extra in (("--revocations", revocation), ("--ledger", ledger)):
        code, out, _ = _verify(capsys, team, cosigned, "--json", *extra)
        data = json.loads(out)
        assert code == 1 and data["reasons"][0]["code"] == "CERTIFICATE_REVOKED", out
        message = data["reasons"][0]["message"]
        assert "Grace Hopper" in message and "label map was wrong" in message
    # the same revocation does not touch another certificate (the first, uncosigned one)
    code, out, _ = _verify(capsys, team, team["cert"], "--json", "--revocations", revocation)
    assert [r["code"] for r in json.loads(out)["reasons"]] == ["SIGNATURES_INSUFFICIENT"]
    # only clinical-safety may revoke: the intern's revocation is ignored and reported
    assert (
        run(capsys, "trust", "revokers", "--trust", team["trust"], "--role", "clinical-safety")[0]
        == 0
    )
    by_intern = team["root"] / "by-intern.json"
    code, _, err = run(
        capsys, "revoke", cosigned, "--key", team["keys"] / "intern.key", "--reason", "mine",
        "-o", by_intern,
    )  # fmt: skip
    assert code == 0, err
    code, out, _ = _verify(capsys, team, cosigned, "--json", "--revocations", by_intern)
    data = json.loads(out)
    assert code == 0 and data["verified"], out
    assert any("does not allow" in note for note in data["notes"])


@needs_openssl
def test_timestamps_from_a_real_tsa_over_http(
    team: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    tsa = make_tsa(team["root"] / "tsa")
    root = team["root"] / "tsa-root.pem"
    root.write_text(tsa.root_pem)
    with serve(tsa) as url:
        code, _, err = _cosign(capsys, team, "safety", "--yes", "--tsa", url)
    assert code == 0, err
    cosigned = team["root"] / "cosigned.json"
    # without the TSA's root in the trust store the token proves nothing: refused
    code, out, _ = _verify(capsys, team, cosigned, "--json")
    assert json.loads(out)["reasons"][0]["code"] == "TIMESTAMP_INVALID"
    code, _, err = run(capsys, "trust", "tsa", root, "--trust", team["trust"], "--name", "test-tsa")
    assert code == 0, err
    code, out, err = _verify(capsys, team, cosigned)
    assert code == 0, out + err
    assert "timestamped 20" in out and "by test-tsa" in out
    # an unreachable TSA is a clean error, and nothing is written
    code, _, err = run(
        capsys, "cosign", team["cert"], "--key", team["keys"] / "intern.key", "--trust",
        team["trust"], "--meaning", "review", "--yes", "--tsa", "http://127.0.0.1:9/tsa",
        "-o", team["root"] / "never.json",
    )  # fmt: skip
    assert code == 2 and "cannot reach the TSA" in err
    assert not (team["root"] / "never.json").exists()


def test_trust_roles_are_managed_and_listed(
    team: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    trust = team["trust"]
    code, out, _ = run(capsys, "trust", "list", "--trust", trust, "--json")
    listed = json.loads(out)
    intern = next(k for k in listed["keys"] if k["name"] == "intern")
    assert intern["roles"] == []
    assert listed["requirements"] == ["1 release-engineer authorship", "1 clinical-safety approval"]
    code, out, err = run(
        capsys, "trust", "role", intern["keyid"][:12], "--trust", trust, "--add", "clinical-safety"
    )
    assert code == 0 and "clinical-safety" in out, err
    # the intern now holds the role: their approval meets the requirement
    assert _cosign(capsys, team, "intern", "--yes")[0] == 0
    assert _verify(capsys, team, team["root"] / "cosigned.json")[0] == 0
    run(capsys, "trust", "role", intern["keyid"], "--trust", trust, "--remove", "clinical-safety")
    code, out, _ = run(capsys, "trust", "require", "--trust", trust, "--role", "clinical-safety",
                       "--meaning", "approval", "--count", "0")  # fmt: skip
    assert code == 0 and "clinical-safety" not in out
    code, out, _ = run(capsys, "trust", "list", "--trust", trust)
    assert "requires: 1 release-engineer authorship" in out and "roles: release-engineer" in out
