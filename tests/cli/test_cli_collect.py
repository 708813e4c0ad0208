"""`attest collect` on the command line: exit codes, outputs, merge."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from _collect_models import LINEAR_RELU, make_spec

from attest.cli import main


def invoke(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    return make_spec(tmp_path / "m", LINEAR_RELU, x=torch.randn(3, 4), spec_extra="repeats: 2\n")


def test_collect_writes_evidence_and_exits_0(
    spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "evidence.json"
    code, stdout, stderr = invoke(["collect", str(spec), "-o", str(out), "--json"], capsys)
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert (
        summary["evidence"] == str(out) and summary["checks"]["determinism"]["status"] == "computed"
    )
    assert summary["errored"] == [] and summary["compile"] is None
    data = json.loads(out.read_text())
    assert data["model"]["name"] == "tiny" and len(data["operators"]) == 3
    assert stderr == ""  # --json: no progress unless --progress plain asks


def test_bad_spec_exits_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "attest.yaml"
    bad.write_text("model: {name: x}\nbogus: 1\n")
    code, _, stderr = invoke(["collect", str(bad), "-o", str(tmp_path / "e.json")], capsys)
    assert code == 2
    assert "bogus: unknown key" in stderr and "Traceback" not in stderr
    assert not (tmp_path / "e.json").exists()


def test_model_that_cannot_run_its_probe_exits_2_in_the_preflight(
    spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (spec.parent / "model.py").write_text(
        "from torch import nn\n"
        "class Boom(nn.Module):\n"
        "    def forward(self, x):\n"
        "        raise RuntimeError('planted')\n"
        "def build():\n"
        "    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU())\n"
        "    m.add_module('boom', Boom())\n"
        "    return m\n"
    )
    out = tmp_path / "e.json"
    code, _, stderr = invoke(["collect", str(spec), "-o", str(out)], capsys)
    assert code == 2 and "Traceback" not in stderr
    assert (
        "the model cannot run its probe (3, 4) in float32: forward raised RuntimeError in "
        "module 'boom' (Boom) given (3, 3): planted" in stderr
    )
    assert "hint: use a probe the architecture supports" in stderr
    assert not out.exists()  # stopped before any check


# Raises in the reference run (call 1: in collect, run 0 is the preflight's float32 pass), runs
# the preflight's plain float32 pass that a failed run 0 triggers (call 2) and its float64 pass
# (call 3), then raises again: the preflight passes, the reference run failed.
RAISES_IN_THE_REFERENCE_RUN = (
    "from torch import nn\n"
    "class Flaky(nn.Module):\n"
    "    calls = 0\n"
    "    def forward(self, x):\n"
    "        Flaky.calls += 1\n"
    "        if Flaky.calls == 1 or Flaky.calls > 3:\n"
    "            raise RuntimeError('sensor went away')\n"
    "        return x\n"
    "def build():\n"
    "    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU())\n"
    "    m.add_module('flaky', Flaky())\n"
    "    return m\n"
)


def test_model_that_raises_in_the_reference_run_exits_2_with_evidence(
    spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (spec.parent / "model.py").write_text(RAISES_IN_THE_REFERENCE_RUN)
    out = tmp_path / "e.json"
    code, stdout, stderr = invoke(["collect", str(spec), "-o", str(out)], capsys)
    assert code == 2, stdout + stderr
    assert "model raised RuntimeError in forward at module 'flaky'" in stdout
    assert "checks that ran errored" in stdout
    assert "the model raised RuntimeError in forward of the reference run" in stderr
    assert "judges nothing" in stderr and "Traceback" not in stderr
    assert json.loads(out.read_text())["model_failure"]["module"] == "flaky"  # for the record


def test_every_check_errored_exits_2(tmp_path: Path) -> None:
    from attest.cli.collect import require_a_verdict
    from attest.errors import CollectError
    from attest.evidence.model import CheckResult

    evidence = _evidence_with(
        {"topology": "error", "determinism": "error", "export": "not_applicable"}
    )
    with pytest.raises(CollectError, match=r"every check that ran errored; 2 of 2 checks errored"):
        require_a_verdict(evidence, tmp_path / "e.json")
    evidence.checks["determinism"] = CheckResult(check="determinism", status="computed")
    require_a_verdict(evidence, tmp_path / "e.json")  # one check judged: a verdict


def _evidence_with(statuses: dict[str, str]) -> Any:
    from attest.evidence.model import CheckResult, Evidence

    return Evidence.model_construct(
        model={},
        targets=[],
        model_failure=None,
        checks={c: CheckResult(check=c, status=s) for c, s in statuses.items()},  # type: ignore[arg-type]
    )


def test_merge(spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert invoke(["collect", str(spec), "-o", str(a)], capsys)[0] == 0
    data = json.loads(a.read_text())
    data["targets"] = ["cuda:sm_90"]
    for row in data["operators"]:
        row["hardware_affinity_mask"] = ["cuda:sm_90"]
    b.write_text(json.dumps(data))
    code, _, stderr = invoke(
        ["collect", "--merge", str(a), str(b), "-o", str(tmp_path / "all.json")], capsys
    )
    assert code == 0, stderr
    merged = json.loads((tmp_path / "all.json").read_text())
    assert (
        len(merged["targets"]) == 2 and len(merged["operators"][0]["hardware_affinity_mask"]) == 2
    )


def test_merge_refuses_other_model(
    spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert invoke(["collect", str(spec), "-o", str(a)], capsys)[0] == 0
    data = json.loads(a.read_text())
    data["model"]["digest"] = "0" * 64
    b.write_text(json.dumps(data))
    code, _, stderr = invoke(
        ["collect", "--merge", str(a), str(b), "-o", str(tmp_path / "all.json")], capsys
    )
    assert code == 2 and "weights digest" in stderr


@pytest.mark.parametrize(
    "args",
    [
        ["collect", "-o", "x.json"],
        ["collect", "a.yaml", "b.yaml", "-o", "x.json"],
        ["collect", "--merge", "a.json", "-o", "x.json"],
    ],
)
def test_usage_errors_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(args, capsys)[0] == 2


def test_help_lists_collect() -> None:
    from attest.cli import cli

    result = CliRunner().invoke(cli, ["collect", "--help"])
    assert result.exit_code == 0 and "--merge" in result.output
