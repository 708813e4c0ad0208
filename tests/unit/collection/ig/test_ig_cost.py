"""What the ig_* checks spend (issue #18), and that spending less kept what they detect:
the adaptive search stops on a stalled panel and says where, ig_determinism re-runs one batch
of path points, ig_randomization uses a coarse fixed rule on one model copy."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from attest.collection.context import CheckSettings, CollectContext, LoadedSpec
from attest.collection.ig.adaptive import MIN_PANEL_WIDTH
from attest.collection.ig.analysis import path_behaviour
from attest.collection.ig.attribution import integrated_gradients
from attest.collection.ig.checks import run
from attest.collection.ig.evaluator import SAMPLE_BYTES

torch.set_num_threads(1)


class _Step(nn.Module):
    """F jumps by 5 where the path crosses sum(x) = 1.2 (t = 0.3 from a zero baseline)."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        s = z.sum(dim=1, keepdim=True)
        return torch.where(s > 1.2, s + 5.0, s)


class _EpsTransition(nn.Module):
    """Smooth, but F changes within t ~ 1e-4 of a zero baseline (a norm layer's epsilon)."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        norm = (z * z).sum(dim=1, keepdim=True)
        return z.sum(dim=1, keepdim=True) / torch.sqrt(norm + 1e-8) + 0.1 * z.sum(
            dim=1, keepdim=True
        )


class _Counted(nn.Module):
    """Counts the rows (path samples) every forward pass sees."""

    rows = 0

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        _Counted.rows += int(z.shape[0])
        return self.body(z)


def test_a_jump_stops_the_search_early_and_is_located_to_the_narrowest_panel() -> None:
    x = torch.ones(1, 4, dtype=torch.float64)
    full = integrated_gradients(_Step(), x, target=0, steps=8, tolerance=1e-3, max_steps=1024)
    early = integrated_gradients(
        _Step(), x, target=0, steps=8, tolerance=1e-3, max_steps=1024, stall_halvings=3
    )
    assert not early.converged.any()
    # three halvings of the jump's panel, against refining it down to 2^-40 before
    assert early.evaluations[0] <= 8 + 3 * 5 < full.evaluations[0]
    assert early.stalls is not None and early.stalls[0] is not None
    stall = early.stalls[0]
    assert stall["jump"] is True and stall["halvings"] >= 3
    low, high = stall["located"]
    assert low <= 0.3 <= high and high - low <= 2 * MIN_PANEL_WIDTH
    assert stall["f_change"] == pytest.approx(5.0, rel=1e-6)
    # ig_monotonicity reads the located jump as it read the refined one
    assert early.path is not None
    reading = path_behaviour(early.path[0], flip_tolerance=0.1)
    assert reading["max_jump_ratio"] > 0.5
    assert reading["jump_interval"] == [low, high]


def test_a_steep_smooth_stretch_is_reported_with_its_interval_not_as_a_jump() -> None:
    x = torch.linspace(0.5, 1.5, 6, dtype=torch.float64).view(1, 6)
    result = integrated_gradients(
        _EpsTransition(), x, target=0, steps=8, tolerance=1e-6, max_steps=1024, stall_halvings=3
    )
    assert result.stalls is not None and result.stalls[0] is not None
    stall = result.stalls[0]
    assert stall["jump"] is False
    low, high = stall["located"]
    assert low == 0.0 and high < 1e-3  # where F rises: within 1e-4 of the baseline
    assert result.path is not None
    assert path_behaviour(result.path[0], flip_tolerance=0.1)["max_jump_ratio"] < 0.05
    # a policy that pays for full refinement (ig_stop_on_steep: false) gets it resolved
    resolved = integrated_gradients(
        _EpsTransition(),
        x,
        target=0,
        steps=8,
        tolerance=1e-6,
        max_steps=1024,
        stall_halvings=3,
        stop_on_steep=False,
    )
    assert resolved.converged.all() and resolved.stalls == [None]
    assert resolved.evaluations[0] > result.evaluations[0]


def _context(build: Any, inputs: torch.Tensor, **settings: Any) -> CollectContext:
    spec = LoadedSpec(
        path=Path("attest.yaml"),
        name="toy",
        version="1",
        factory="toy:build",
        factory_args={},
        build_model=build,
        inputs=inputs,
        labels=None,
        target=0,
        threads=1,
    )
    return CollectContext(spec=spec, settings=CheckSettings(**settings))


def test_convergence_and_completeness_name_the_interval_where_the_search_stopped() -> None:
    results = {r.check: r for r in run(_context(_Step, torch.ones(2, 4)))}
    for check in ("ig_convergence", "ig_completeness"):
        for item in results[check].items:
            assert item.status == "fail"
            assert "stopped early" in item.message and "alpha" in item.message
            assert "jumps by" in item.message
    item = results["ig_convergence"].items[0]
    assert item.metrics["stopped_early"] is True
    assert item.details["stall"]["jump"] is True
    assert results["ig_monotonicity"].items[0].status == "fail"


def _rows_spent_per_stage(
    body: nn.Module, inputs: torch.Tensor
) -> tuple[CollectContext, dict[Any, Any], dict[str, int]]:
    """Runs the IG checks on ``body`` and counts the model's rows between progress lines: the
    context, the results by check, and the rows each stage (the progress line's last part)
    spent."""
    seen: list[tuple[str, int]] = []
    ctx = _context(lambda: _Counted(body), inputs)
    ctx.progress = lambda text: seen.append((text, _Counted.rows))
    _Counted.rows = 0
    results = {r.check: r for r in run(ctx)}
    seen.append(("end", _Counted.rows))
    spent = {a.split(": ")[-1]: b_rows - a_rows for (a, a_rows), (_, b_rows) in pairwise(seen)}
    return ctx, results, spent


def test_determinism_and_randomization_cost_a_few_path_samples() -> None:
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    inputs = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    ctx, results, spent = _rows_spent_per_stage(body, inputs)
    settings = ctx.settings
    n = inputs.shape[0]
    # the same batch of points, ig_repeats times: no endpoint pass, no probe step
    assert spent["ig_determinism"] == settings.ig_repeats * settings.ig_determinism_points * n
    assert results["ig_determinism"].parameters["points_per_input"] == 2
    # original + checkpoints, 2 nodes each, plus the one forward that orders the cascade;
    # the copy takes the main model's probe-step measurement (no probe step of its own)
    k = min(settings.ig_randomization_inputs, n)
    checkpoints = len(results["ig_randomization"].items[0].details["spearman"])
    per_run = settings.ig_randomization_steps * k + 2 * k  # path samples + F(x), F(b)
    assert spent["ig_randomization"] == 1 + (1 + checkpoints) * per_run
    assert results["ig_randomization"].parameters["rule"] == "gausslegendre"


def test_the_randomized_copy_shares_the_probe_measurement() -> None:
    from attest.collection.ig.evaluator import share_sample_bytes

    source, target = nn.Linear(4, 2), nn.Linear(4, 2)
    integrated_gradients(source, torch.ones(1, 4), target=0, steps=4)
    share_sample_bytes(source, target)
    assert SAMPLE_BYTES[target] == SAMPLE_BYTES[source]
    assert np.all([v[0] > 0 for v in SAMPLE_BYTES[target].values()])


def test_ig_baseline_reads_the_paths_own_baseline_from_its_kinds_forward() -> None:
    from attest.collection.ig.attribution import BASELINES

    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    inputs = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    _, results, spent = _rows_spent_per_stage(body, inputs)
    # the inputs and each baseline kind once; the path's baseline (zero here) is one of them
    assert spent["ig_baseline"] == (1 + len(BASELINES)) * inputs.shape[0]
    item = results["ig_baseline"].items[0]
    assert item.metrics["baseline_target_probability"] is not None


def test_the_default_start_reaches_the_tolerance_with_fewer_evaluations_than_32() -> None:
    """The checks' adaptive search starts from two Simpson panels (``ig_steps`` 5): on a ReLU
    CNN whose integrand is piecewise constant it meets 1e-3 on every input, spending less
    than the former 32-sample start (which spent 31 before its first error reading)."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 6, 3, stride=2), nn.ReLU(),
        nn.Flatten(), nn.Linear(6 * 7 * 7, 4),
    )  # fmt: skip
    x = torch.randn(3, 1, 16, 16, generator=torch.Generator().manual_seed(2))
    settings = CheckSettings()
    assert settings.ig_steps == 5

    def search(steps: int) -> Any:
        return integrated_gradients(
            model, x, target="argmax", steps=steps, tolerance=1e-3, max_steps=1024
        )

    coarse, former = search(settings.ig_steps), search(32)
    assert coarse.converged.all() and former.converged.all()
    assert (coarse.completeness_rel_error <= 1e-3).all()
    assert coarse.evaluations.sum() < former.evaluations.sum()
    assert (former.evaluations >= 31).all()
