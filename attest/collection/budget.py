"""``attest collect --budget 30m``: plan the work to fit a time the user gives, and say what was cut.

The default is the full work (no budget). With a budget, the collector measures the model's
own forward+backward time in run 0 (``unit_s``: the operators' forward and backward time of
the reference run, without the capture's overhead) and estimates each remaining phase in
those units from a cost model (:data:`PHASE_COST`, :data:`KNOBS`: the multiples of one
forward+backward each phase and each setting costs, as benchmarks/bench_certify.py measured
them on real-size models). When the estimate is over the time left, it lowers settings one
step at a time, always the step that saves the most estimated time per step, within each
setting's floor (the least work the check still means something at: 5 repeats, one
Hessian-vector direction, a completeness tolerance of 3 %...). Before every phase it plans
again with the time actually left, so a phase that ran over is paid for by the later ones.

What was reduced is recorded in the evidence (``Evidence.budget``: the limit, the estimates,
each setting's full and planned value and the time it saves) and in each check's own
``parameters`` (which already record repeats, directions and tolerances), so a reviewer and
a policy see a budgeted certificate for what it is. Nothing is skipped: a budget too small
even for the floors keeps the floors, and the evidence says the limit was exceeded.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attest.evidence.model import BudgetRecord, BudgetReduction

__all__ = ["KNOBS", "PHASE_COST", "BudgetPlanner", "Knob", "phase_units"]


@dataclass(frozen=True)
class Knob:
    """One setting a plan may lower: its levels from the full work down to the floor, and the
    estimated cost of each level in forward+backward units (for the phase it belongs to)."""

    setting: str  # "repeats" (the spec's) or a CheckSettings field
    phase: str
    levels: tuple[Any, ...]
    cost: Callable[[Any], float]


# The cost of a phase apart from its knobs, in forward+backward units (F).
PHASE_COST: dict[str, float] = {
    "topology": 1.0,
    "profile": 4.0,  # float64 pass (about 3 F) and the thread-count run
    "gradients": 12.0,  # gradient flow, kinks, custom ops, accumulation, gradcheck's base
    "ig": 6.0,  # the baseline, F(x), monotonicity from the path's own samples
    "export": 4.0,
    "training": 20.0,
}

KNOBS: tuple[Knob, ...] = (
    Knob("repeats", "profile", (20, 10, 5), lambda r: 0.5 * (r - 1)),
    Knob("gradcheck_directions", "gradients", (4, 2, 1), lambda d: 1.0 * d),
    # products on a one-example sub-batch, one-sided differences (docs/gradient-checks.md)
    Knob("second_order_directions", "gradients", (3, 2, 1), lambda d: 3.0 * d),
    Knob("ig_tolerance", "ig", (1e-3, 3e-3, 1e-2, 3e-2), lambda t: 6.0 * (1e-3 / t) ** 0.25),
    Knob("ig_max_steps", "ig", (1024, 256, 128), lambda s: 0.0),
    # ig_determinism re-evaluates one batch of path points (at least twice): not planned
    Knob("ig_randomization_max_layers", "ig", (3, 2, 1), lambda n: 1.0 * n),
    Knob("ig_randomization_inputs", "ig", (2, 1), lambda n: 1.0 * n),
)


@dataclass
class BudgetPlanner:
    """Plans the remaining phases' settings to the time left; see the module docstring."""

    limit_s: float
    unit_s: float
    started: float = field(default_factory=time.perf_counter)
    levels: dict[str, int] = field(default_factory=dict)  # setting -> index into its ladder
    ladders: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # the user's value first
    full: dict[str, Any] = field(default_factory=dict)  # setting -> the value before planning
    estimate_full_s: float | None = None
    estimate_planned_s: float | None = None

    def _ladder(self, knob: Knob) -> tuple[Any, ...]:
        return self.ladders.get(knob.setting, knob.levels)

    def _value(self, knob: Knob) -> Any:
        return self._ladder(knob)[self.levels.get(knob.setting, 0)]

    def _phase_estimate(self, phase: str) -> float:
        cost = PHASE_COST.get(phase, 2.0)
        cost += sum(k.cost(self._value(k)) for k in KNOBS if k.phase == phase)
        return cost * self.unit_s

    def _estimate(self, phases: list[str]) -> float:
        return sum(self._phase_estimate(p) for p in phases)

    def start(self, remaining_phases: list[str], settings: Any, spec: Any) -> None:
        """Record the full values (from the spec and settings) and make the first plan."""
        for knob in KNOBS:
            current = _get(knob.setting, settings, spec)
            self.full[knob.setting] = current
            # the user's value, then the knob's levels that are strictly less work (a plan
            # never asks for more work than the spec and settings did)
            lower = [v for v in knob.levels if _at_most(v, current, knob) and v != current]
            self.ladders[knob.setting] = (current, *lower)
            self.levels[knob.setting] = 0
        self.estimate_full_s = self._estimate(remaining_phases)
        self.plan(remaining_phases, settings, spec)
        self.estimate_planned_s = self._estimate(remaining_phases)

    def plan(self, remaining_phases: list[str], settings: Any, spec: Any) -> None:
        """Lower settings of the remaining phases until their estimate fits the time left."""
        left = self.limit_s - (time.perf_counter() - self.started)
        while self._estimate(remaining_phases) > left:
            step = self._best_step(remaining_phases)
            if step is None:
                break  # every setting is at its floor: keep the floors, the record says so
            self.levels[step.setting] += 1
        for knob in KNOBS:
            if knob.phase in remaining_phases:
                _set(knob.setting, self._value(knob), settings, spec)

    def _best_step(self, remaining_phases: list[str]) -> Knob | None:
        best: tuple[float, Knob] | None = None
        for knob in KNOBS:
            index = self.levels.get(knob.setting, 0)
            ladder = self._ladder(knob)
            if knob.phase not in remaining_phases or index + 1 >= len(ladder):
                continue
            saving = knob.cost(ladder[index]) - knob.cost(ladder[index + 1])
            if knob.cost(ladder[index]) == 0.0:
                saving = 1e-9  # a cap with no estimated cost of its own goes last
            if best is None or saving > best[0]:
                best = (saving, knob)
        return best[1] if best else None

    def record(self, settings: Any, spec: Any) -> BudgetRecord:
        """The evidence's account of the plan, after the collect."""
        reductions = []
        for knob in KNOBS:
            planned = _get(knob.setting, settings, spec)
            if planned != self.full[knob.setting]:
                saves = (knob.cost(self.full[knob.setting]) - knob.cost(planned)) * self.unit_s
                reductions.append(
                    BudgetReduction(
                        setting=knob.setting,
                        full=self.full[knob.setting],
                        planned=planned,
                        saves_s=round(max(0.0, saves), 3),
                    )
                )
        elapsed = time.perf_counter() - self.started
        note = None
        if elapsed > self.limit_s:
            note = (
                f"the collect took {elapsed:.0f} s, over the budget of {self.limit_s:.0f} s "
                "(every setting was planned at or above its floor; the floors are not cut)"
                if self._all_floors()
                else f"the collect took {elapsed:.0f} s, over the budget of {self.limit_s:.0f} s "
                "(the estimate was short)"
            )
        return BudgetRecord(
            limit_s=self.limit_s,
            unit_s=round(self.unit_s, 6),
            estimate_full_s=round(self.estimate_full_s or 0.0, 3),
            estimate_planned_s=round(self.estimate_planned_s or 0.0, 3),
            elapsed_s=round(elapsed, 3),
            full_work=not reductions,
            reductions=reductions,
            note=note,
        )

    def _all_floors(self) -> bool:
        return all(self.levels.get(k.setting, 0) == len(self._ladder(k)) - 1 for k in KNOBS)


def _at_most(value: Any, current: Any, knob: Knob) -> bool:
    """Whether ``value`` is no more work than ``current`` (a looser tolerance is less work)."""
    if knob.setting == "ig_tolerance":
        return bool(value >= current)
    return bool(value <= current)


def _get(setting: str, settings: Any, spec: Any) -> Any:
    return spec.repeats if setting == "repeats" else getattr(settings, setting)


def _set(setting: str, value: Any, settings: Any, spec: Any) -> None:
    if setting == "repeats":
        spec.repeats = value
    elif dataclasses.is_dataclass(settings):
        setattr(settings, setting, value)


def phase_units(phase: str, settings: Any, spec: Any) -> float:
    """The planned cost of ``phase`` in forward+backward units at the current ``settings`` and
    ``spec`` (what :class:`BudgetPlanner` estimates once it has set them): the weights of the
    progress estimate (:func:`attest.core.progress.plan_message`)."""
    cost = PHASE_COST.get(phase, 2.0)
    return cost + sum(k.cost(_get(k.setting, settings, spec)) for k in KNOBS if k.phase == phase)
