"""The evidence's model-level timings are measured: the backward is the wall time of the whole
backward call of each repeat, never a sum that the lean repeats (no per-operator backward
timing) left at 0, and the report prints the figure."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from _collect_models import make_spec

from attest.collection import collect
from attest.collection.profile import repeats, split
from attest.collection.profile.repeats import DETAILED_RUNS, ComparedRun
from attest.report._page import fmt_ns
from attest.report.html import write_report

RUNNERS = ["attest.collection.profile.topology:run", "attest.collection.profile.profiler:run"]
CNN = """
import torch
from torch import nn

def build():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.Tanh(),
        nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, 3),
    )
"""


def test_model_level_backward_is_the_measured_wall_time_of_every_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[ComparedRun] = []
    original = repeats.apply_repeat

    def spy(profile: Any, run: ComparedRun) -> None:
        seen.append(run)
        original(profile, run)

    monkeypatch.setattr(repeats, "apply_repeat", spy)
    monkeypatch.setattr(split, "apply_repeat", spy)
    runs = DETAILED_RUNS + 3  # run 0, the detailed repeats, and lean ones after them
    x = torch.randn(2, 3, 16, 16)
    spec = make_spec(tmp_path / "m", CNN, x=x, spec_extra=f"repeats: {runs}\n")
    ev = collect(spec, runners=RUNNERS)

    assert len(seen) == runs - 1
    lean = [r for r in seen if not r.backward_ns]
    assert lean, "the repeats after the detailed ones time no operator's backward"
    for run in seen:
        assert run.backward_wall_ns is not None and run.backward_wall_ns > 0
        # the operators' pre -> post hook intervals lie inside the one backward call
        assert run.backward_wall_ns >= sum(run.backward_ns.values())
    walls = sorted(r.backward_wall_ns or 0 for r in seen)
    backward, forward = ev.model_metrics["backward_ns"], ev.model_metrics["forward_ns"]
    assert isinstance(backward, int) and isinstance(forward, int)
    assert forward > 0 and walls[0] <= backward <= walls[-1]  # the median of the repeats' walls
    per_operator = sum(row.get("backward_ns") or 0 for row in ev.operators)
    assert per_operator > 0
    # the per-operator medians carry each hook's own overhead, the lean wall time none: the
    # same order of magnitude, not one a thousand times the other (as 0 against 2.6 ms was)
    assert per_operator / 20 <= backward <= per_operator * 20

    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps(ev.model_dump(mode="json")), encoding="utf-8")
    out = tmp_path / "report.html"
    write_report(evidence, out)
    text = re.sub(r"<[^>]+>", " ", out.read_text(encoding="utf-8"))
    shown = re.findall(r"backward_ns\s+([0-9.]+ (?:ns|µs|ms|s))\b", text)
    assert fmt_ns(backward) in shown and "0 ns" not in shown
