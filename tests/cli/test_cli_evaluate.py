"""``attest evaluate``: exit codes, findings file, JSON summary, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from attest.cli import cli

EVIDENCE: dict[str, Any] = {
    "tool_version": "0.1.0",
    "created_at": "2026-05-01T00:00:00Z",
    "model": {"name": "toy", "version": "1.0.0", "precision": "float32"},
    "checks": {
        "fidelity": {
            "check": "fidelity",
            "status": "computed",
            # consistent, as a collector writes it (attest.evidence.consistency): 99.5 is
            # below the recorded pass threshold, so the check's own reading is warn
            "parameters": {"pass_threshold_pct": 99.9},
            "summary": {"operators_measured": 1, "min_fidelity_pct": 99.5},
            "items": [
                {
                    "subject": {
                        "kind": "operator",
                        "operator_id": 3,
                        "op": "aten.addmm.default",
                        "module": "fc",
                    },
                    "status": "warn",
                    "metrics": {"fidelity_pct": 99.5},
                }
            ],
        }
    },
}
RULE = {"id": "fid", "check": "fidelity", "metric": "fidelity_pct", "threshold": 99.9}
WAIVER = {
    "rule": "fid",
    "subject": "fc",
    "approved_by": "QA lead",
    "justification": "validated against the reference implementation",
    "reference": "TICKET-9",
}


def write(tmp_path: Path, policy: dict[str, Any]) -> tuple[Path, Path]:
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps(EVIDENCE))
    pol = tmp_path / "policy.yaml"
    pol.write_text(yaml.safe_dump(policy))
    return evidence, pol


@pytest.mark.parametrize(
    ("waivers", "code", "verdict"),
    [
        ([], 1, "fail"),
        ([{**WAIVER, "expires": "2099-01-01"}], 0, "pass"),
        ([{**WAIVER, "expires": "2020-01-01"}], 1, "fail"),
    ],
    ids=["fail", "waived", "expired waiver"],
)
def test_evaluate_exit_codes_and_findings(
    tmp_path: Path, waivers: list[Any], code: int, verdict: str
) -> None:
    evidence, pol = write(
        tmp_path, {"id": "p", "version": "1", "rules": [RULE], "waivers": waivers}
    )
    out = tmp_path / "findings.json"
    result = CliRunner().invoke(
        cli, ["evaluate", str(evidence), "--policy", str(pol), "-o", str(out)]
    )
    assert result.exit_code == code, result.output
    findings = json.loads(out.read_text())
    assert findings["verdict"] == verdict
    assert findings["findings"][0]["observed"] == 99.5
    assert f"policy p 1: {verdict.upper()}" in result.output
    if waivers and verdict == "fail":
        assert "expired waivers" in result.output
    if verdict == "pass":
        assert findings["findings"][0]["verdict"] == "waived"
        assert "TICKET-9" in out.read_text()


def test_evaluate_json_summary(tmp_path: Path) -> None:
    evidence, pol = write(tmp_path, {"id": "p", "version": "1", "rules": [RULE]})
    result = CliRunner().invoke(cli, ["evaluate", str(evidence), "--policy", str(pol), "--json"])
    assert result.exit_code == 1
    summary = json.loads(result.output)
    assert summary["verdict"] == "fail"
    assert summary["failed"][0]["rule"] == "fid"
    assert summary["policy"]["digest"]["sha256"]


def test_evaluate_at_makes_expiry_reproducible(tmp_path: Path) -> None:
    waivers = [{**WAIVER, "expires": "2026-03-01"}]
    evidence, pol = write(
        tmp_path, {"id": "p", "version": "1", "rules": [RULE], "waivers": waivers}
    )
    runner = CliRunner()
    before = runner.invoke(
        cli, ["evaluate", str(evidence), "--policy", str(pol), "--at", "2026-03-01T23:59:00Z"]
    )
    after = runner.invoke(
        cli, ["evaluate", str(evidence), "--policy", str(pol), "--at", "2026-03-02"]
    )
    assert (before.exit_code, after.exit_code) == (0, 1)


@pytest.mark.parametrize(
    ("evidence_text", "policy", "message"),
    [
        (None, {"id": "p", "version": "1", "rules": [RULE]}, "does not exist"),
        ("{not json", {"id": "p", "version": "1", "rules": [RULE]}, "not valid JSON"),
        (
            json.dumps({**EVIDENCE, "surprise": 1}),
            {"id": "p", "version": "1", "rules": [RULE]},
            "surprise: unknown key",
        ),
        (
            json.dumps(EVIDENCE),
            {"id": "p", "version": "1", "rules": [{**RULE, "comparator": "~"}]},
            "rules[0].comparator",
        ),
    ],
    ids=["missing evidence", "bad json", "unknown evidence key", "bad policy"],
)
def test_evaluate_bad_input_exits_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    evidence_text: str | None,
    policy: dict[str, Any],
    message: str,
) -> None:
    evidence = tmp_path / "evidence.json"
    if evidence_text is not None:
        evidence.write_text(evidence_text)
    pol = tmp_path / "policy.yaml"
    pol.write_text(yaml.safe_dump(policy))
    from attest.cli import main

    with pytest.raises(SystemExit) as info:
        main(["evaluate", str(evidence), "--policy", str(pol)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_evaluate_bad_input_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from attest.cli import main

    pol = tmp_path / "policy.yaml"
    pol.write_text(yaml.safe_dump({"id": "p", "version": "1", "rules": [{**RULE, "treshold": 1}]}))
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps(EVIDENCE))
    with pytest.raises(SystemExit):
        main(["evaluate", str(evidence), "--policy", str(pol)])
    err = capsys.readouterr().err
    assert "rules[0].treshold: unknown key" in err
    assert "Traceback" not in err
