"""An overflowing number in a user's file (issue 33, item 9): ``attest certify --evidence``
used to end in exit 3 (ValueError), ``attest evaluate`` judged an infinite figure, and
``attest training summary --json`` printed ``Infinity`` (not JSON). Each is now bad input
(exit 2) naming the file and the number's line and column, with no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli_run import run
from _monitor_loops import stable_run
from _report_samples import make_evidence, write_evidence

REPO = Path(__file__).resolve().parents[2]
STRICT = REPO / "policies" / "clinical-strict.yaml"


@pytest.fixture
def infinite_evidence(tmp_path: Path) -> Path:
    evidence = make_evidence()
    (tmp_path / "from").mkdir()
    path = write_evidence(tmp_path / "from" / "evidence.json", evidence)
    data = json.loads(path.read_text())
    data["model_metrics"]["bit_exact_rate"] = 0.123456
    text = json.dumps(data, indent=1).replace("0.123456", "1e999")
    path.write_text(text)
    return path


def _position(path: Path, literal: str) -> str:
    text = path.read_text()
    offset = text.index(literal)
    line = text.count("\n", 0, offset) + 1
    return f"{literal} at line {line} column {offset - text.rfind(chr(10), 0, offset)}"


def test_certify_from_evidence_with_an_overflowing_number_is_bad_input(
    infinite_evidence: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from attest.certificate.signing import generate_keypair

    key, _, _ = generate_keypair(tmp_path / "release", passphrase=None)
    spec = REPO / "examples" / "digits" / "attest.yaml"
    code, out, err = run(capsys, "certify", spec, "--policy", STRICT, "--key", key, "--evidence",
                         infinite_evidence, "-o", tmp_path / "cert.json", "--json", "-q")  # fmt: skip
    assert code == 2, out + err
    assert _position(infinite_evidence, "1e999") in err
    assert not (tmp_path / "cert.json").exists()


def test_evaluate_does_not_judge_an_infinite_figure(
    infinite_evidence: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "evaluate", infinite_evidence, "--policy", STRICT, "--json")
    assert code == 2 and out == ""
    assert _position(infinite_evidence, "1e999") in err


@pytest.mark.parametrize("literal", ["1e999", "-1e999", "NaN", "Infinity"])
def test_training_summary_json_is_json_or_bad_input(
    tmp_path: Path, literal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "run.jsonl"
    stable_run(log, epochs=2)
    lines = log.read_text().splitlines()
    sample = json.loads(lines[1])
    sample["grad_norm"] = 0.123456
    lines[1] = json.dumps(sample).replace("0.123456", literal)
    log.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "training", "summary", log, "--json")
    assert code == 2 and out == ""
    assert "line 2" in err and f"non-finite number {literal} at line 1 column" in err
    lines[1] = json.dumps(sample)  # the finite log: valid JSON out
    log.write_text("\n".join(lines) + "\n")
    code, out, _ = run(capsys, "training", "summary", log, "--json")
    assert code == 0 and json.loads(out)["samples"] >= 2
