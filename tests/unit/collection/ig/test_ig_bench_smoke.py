"""Smoke test of benchmarks/bench_ig.py: its evaluation-count function runs on a tiny model."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

BENCH = Path(__file__).resolve().parents[4] / "benchmarks" / "bench_ig.py"


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ig_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses/annotations resolve the module by name
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def test_evaluation_count_on_a_linear_model() -> None:
    bench = _load_bench()
    assert set(bench.RULES) >= {"trapezoid", "gausslegendre", "adaptive"}
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(6, 3)).eval()
    x = torch.rand(2, 6)
    counts = bench.evaluations_to_tolerance(
        model, x, torch.tensor([0, 2]), "zero", "trapezoid", start=4, cap=64
    )
    # A linear model's integrand is constant: the first level (5 trapezoid nodes) is exact.
    assert counts["spent"] == [5, 5]
    assert counts["first_within"] == [5, 5]
    assert counts["converged"] == [True, True]
    assert max(counts["rel_error"]) < 1e-6


def test_evaluation_count_needs_more_on_a_curved_model() -> None:
    bench = _load_bench()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).eval().double()
    x = 3 * torch.rand(1, 4, dtype=torch.float64)
    counts = bench.evaluations_to_tolerance(
        model, x, torch.tensor([1]), "zero", "trapezoid", start=2, cap=1024, tolerance=1e-4
    )
    assert counts["converged"] == [True]
    assert counts["spent"][0] > 3  # the 3-node first level was not enough: it refined
    assert counts["first_within"] == counts["spent"]


def test_hindsight_picks_the_best_fixed_rule_per_input() -> None:
    bench = _load_bench()

    def row(method: str, first: list[int | None], spent: list[int]) -> dict[str, object]:
        return {"model": "m", "method": method, "first_within": first, "spent": spent}

    rows = [
        row("adaptive", [20, 30], [25, 30]),
        row("trapezoid", [9, 129], [9, 129]),
        row("gausslegendre", [56, None], [56, 1016]),
    ]
    (found,) = bench.hindsight(rows)
    assert [p["best"] for p in found["inputs"]] == [9, 129]
    assert [p["rule"] for p in found["inputs"]] == ["trapezoid", "trapezoid"]
    assert [p["adaptive"] for p in found["inputs"]] == [25, 30]  # what it spent
    assert found["total_ratio"] == (25 + 30) / (9 + 129)
    assert found["within_target"] == 1
