"""--budget holds on a small model with the calibration measured on it (issue 38, "A budget
that holds"): a budget under the floors is refused naming the smallest that meets them, that
minimum is then accepted and met, a feasible budget is met within 1.1x by the planner's own
accounting, and the floors that stop fitting mid-run are said at once."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import Any

import pytest
from _collect_models import MLP, make_spec

import attest.collection as collection
from attest.collection import collect
from attest.collection.budget import BudgetPlanner
from attest.collection.budget_calibration import REPEATS, Calibration
from attest.collection.context import CheckSettings
from attest.errors import InputError

PROFILE = ["attest.collection.profile.topology:run", "attest.collection.profile.profiler:run"]
FLOORS = {"repeats": 300}


def _minimum(exc: InputError) -> float:
    named = re.search(r"smallest budget that meets them is (\d+) s", str(exc))
    assert named is not None, str(exc)
    return float(named.group(1))


def test_the_named_minimum_is_accepted_and_met_then_a_larger_budget_within_1_1x(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the calibration is measured on the model by the first collect and kept for the next
    # ones (a shared machine measures a different pace each time: what is tested is that
    # the minimum named from a calibration is met with it, not the machine's steadiness)
    measured: list[Calibration] = []
    real = collection.calibrate

    def once(ctx: Any, *, capture_s: float, float64_s: float) -> Calibration:
        if not measured:
            measured.append(real(ctx, capture_s=capture_s, float64_s=float64_s))
        return measured[0]

    monkeypatch.setattr(collection, "calibrate", once)
    spec = make_spec(tmp_path, MLP, spec_extra="repeats: 300\nthreads: 1\n")
    with pytest.raises(InputError) as info:
        collect(spec, runners=PROFILE, budget_s=0.5, budget_floors=FLOORS)
    minimum = _minimum(info.value)
    calibration = measured[0]
    assert len(calibration.repeats_s) == REPEATS
    assert calibration.repeat_s == max(calibration.repeats_s[1:])  # the slowest warm run
    for budget in (minimum, 1.5 * minimum):
        started = time.perf_counter()
        ev = collect(spec, runners=PROFILE, budget_s=budget, budget_floors=FLOORS, started=started)
        took = time.perf_counter() - started
        record = ev.budget
        assert record is not None and record.elapsed_s is not None
        assert ev.checks["determinism"].summary["runs"] >= 300  # the floor, never cut
        # the planner's own accounting: each phase planned before it ran, the plan within
        # the budget, and what was spent before the first phase plus the phases' plans too
        assert set(record.phases) == {"topology", "profile"}
        assert all(row["actual_s"] > 0 and row["planned_s"] > 0 for row in record.phases.values())
        spent_before = record.elapsed_s - sum(r["actual_s"] for r in record.phases.values())
        planned = spent_before + sum(r["planned_s"] for r in record.phases.values())
        assert planned <= 1.1 * budget, record
        # generous on the wall: a shared 2-core machine can starve the process for seconds
        assert took < 3 * budget + 30


@dataclasses.dataclass
class _Spec:
    repeats: int = 300
    export: str | None = None
    training: Any = None


def test_the_floors_that_stop_fitting_are_said_at_once_and_once() -> None:
    said: list[str] = []
    calibration = Calibration(0.1, 0.1, 1.0, 0.2, 0.0)
    spec = _Spec()
    planner = BudgetPlanner(
        limit_s=120.0, calibration=calibration, floors={"repeats": 300}, say=said.append
    )
    planner.start(["profile", "gradients"], CheckSettings(), spec)
    assert said == []  # 300 repeats of 0.1 s and the rest fit 120 s
    planner.repeat_times = [0.5] * 5  # the repeats now run five times slower than calibrated
    assert planner.repeat_allowed(10, spec)  # below the floor: it runs regardless
    assert len(said) == 1 and "no longer fit the budget of 120 s" in said[0]
    assert "repeats 300" in said[0]
    assert planner.repeat_allowed(11, spec) and len(said) == 1  # said once
    # and at a re-plan between phases: the next phase's estimate over the time left
    late = BudgetPlanner(limit_s=120.0, calibration=calibration, say=said.append)
    late.start(["gradients"], CheckSettings(), _Spec())
    late.started -= 200.0  # the budget is spent
    late.plan(["gradients"], CheckSettings(), _Spec())
    assert len(said) == 2 and "from the gradients phase on" in said[1]


def test_slow_repeats_make_the_later_phases_estimates_larger() -> None:
    calibration = Calibration(0.1, 0.1, 1.0, 0.2, 0.0)
    spec = _Spec(repeats=100)
    planner = BudgetPlanner(limit_s=1e6, calibration=calibration)
    planner.start(["profile", "gradients"], CheckSettings(), spec)
    gradients = planner.phase_estimate("gradients")
    profile = planner.phase_estimate("profile")
    planner.finished("profile", 2 * profile, spec)  # the repeats took twice the calibration
    assert planner.phase_estimate("gradients") > 1.5 * gradients
