"""``attest training summary|report``, ``attest metrics --training-log`` and
``attest certify --training-log`` on logs written by a real monitored training loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli_run import run
from _monitor_loops import decaying_run, stable_run
from prometheus_client.openmetrics import parser
from test_cli_certify import MINI_POLICY, key, write_policy, write_tiny

__all__ = ["key"]  # the module-scoped signing key fixture, shared


@pytest.fixture(scope="module")
def stable_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = tmp_path_factory.mktemp("stable") / "run.jsonl"
    stable_run(log, epochs=4)
    return log


@pytest.fixture(scope="module")
def decaying_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = tmp_path_factory.mktemp("decay") / "run.jsonl"
    decaying_run(log, epochs=12, lr=10.0)
    return log


def test_summary_text_and_json(
    stable_log: Path, decaying_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "training", "summary", stable_log)
    assert code == 0 and "fidelity half-life:        not reached" in out
    code, out, _ = run(capsys, "training", "summary", decaying_log, "--json")
    summary = json.loads(out)
    assert code == 0 and summary["fidelity"]["status"] == "reached"
    assert 0 < summary["fidelity"]["half_life_epochs"] < 12
    assert summary["memory"]["rsd_pct"] == 0.0 and summary["first_nonfinite_step"] is None


def test_report_writes_the_charts(
    decaying_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "training.html"
    code, text, _ = run(capsys, "training", "report", decaying_log, "-o", out)
    html = out.read_text()
    assert code == 0 and str(out) in text
    assert "<svg" in html and "fidelity shortfall" in html and "bit-exact rate" in html
    assert "fidelity half-life" in html and "gradient norm" in html


def test_a_bad_log_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "run.jsonl"
    bad.write_text('{"kind": "sample"}\n')
    code, _, err = run(capsys, "training", "summary", bad)
    assert code == 2 and "line 1" in err


def test_metrics_of_a_training_log_parse_as_openmetrics(
    stable_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "metrics", "--training-log", stable_log, "--format", "openmetrics")
    assert code == 0
    families = {f.name: f for f in parser.text_string_to_metric_families(out)}
    latest = {s.labels["name"]: s.value for s in families["attest_training_latest"].samples}
    assert latest["step"] == 22 and latest["bit_exact_rate"] == 1.0
    summary = {s.labels["name"]: s.value for s in families["attest_training_summary"].samples}
    assert summary["fidelity_half_life_reached"] == 0 and summary["memory_delta_rsd_pct"] == 0.0


@pytest.mark.slow
def test_certify_binds_the_log_and_holds_it_against_the_policy(
    tmp_path: Path,
    key: tuple[Path, Path],
    stable_log: Path,
    decaying_log: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = write_tiny(tmp_path / "model")
    rules = {"min_fidelity_half_life_epochs": 100, "max_memory_delta_rsd_pct": 1.2}
    policy = write_policy(tmp_path / "p.yaml", {**MINI_POLICY, "training_log": rules})
    cert = tmp_path / "out" / "gradient_certificate.json"
    args = ["certify", spec, "--policy", policy, "--key", key[0], "-o", cert]
    code, out, err = run(
        capsys, *args, "--training-log", stable_log, "--report", tmp_path / "r.html"
    )
    assert code == 0, out + err
    evidence = json.loads((tmp_path / "out" / "evidence.json").read_text())
    assert evidence["training_log"]["summary"]["fidelity"]["status"] == "not reached"
    findings = json.loads((tmp_path / "out" / "findings.json").read_text())["findings"]
    ours = {f["rule"]: f["verdict"] for f in findings if f["check"] == "training_log"}
    assert ours == {
        "training_log.fidelity-half-life": "pass",
        "training_log.memory-consistency": "pass",
    }
    code, out, _ = run(capsys, "inspect", cert, "--json")
    subjects = {s["name"] for s in json.loads(out)["statement"]["subject"]}
    assert "run.jsonl" in subjects
    assert 'id="training-monitor"' in (tmp_path / "r.html").read_text()
    code, out, _ = run(capsys, "metrics", tmp_path / "out" / "evidence.json")
    assert code == 0 and "attest_training_summary" in out
    # a log whose fidelity decays within 12 epochs fails a 100-epoch half-life
    code, out, _ = run(capsys, *args, "--training-log", decaying_log)
    assert code == 1 and "training_log.fidelity-half-life" in out
