"""`attest collect --budget` on the command line: a budget the floors cannot meet exits 2 at
the start, naming the smallest that can, with nothing written."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from _cli_run import run
from _collect_models import MLP, make_spec

import attest.collection as collection
from attest.collection.budget_calibration import Calibration


def test_collect_refuses_a_budget_under_the_floors_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # as if a pass took 2 s: the floors (5 repeats, gradcheck's base...) need far over 10 s
    def slow(ctx: object, *, capture_s: float, float64_s: float) -> Calibration:
        return Calibration(2.0, 2.0, capture_s, 4.0, 0.0)

    monkeypatch.setattr(collection, "calibrate", slow)
    spec = make_spec(tmp_path / "m", MLP, spec_extra="repeats: 20\n")
    out = tmp_path / "out" / "evidence.json"
    code, _, stderr = run(capsys, "collect", spec, "-o", out, "--budget", "10s", "-q")
    assert code == 2 and not out.exists()
    named = re.search(r"smallest budget that meets them is (\d+) s", stderr)
    assert named is not None and float(named.group(1)) > 10
    assert f"--budget {named.group(1)}s" in stderr and "repeats 5" in stderr
