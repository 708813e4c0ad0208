"""``attest collect --budget 30m``: plan the work to fit a time the user gives, or refuse it.

The default is the full work (no budget). With a budget, the collector first calibrates on
the model itself (:mod:`attest.collection.budget_calibration`: one timed forward+backward,
one timed captured repeat, counted in the budget) and estimates every remaining phase from
those seconds: a determinism repeat costs the measured repeat, the other work costs multiples
of the measured pass (:data:`PHASE_COST`, :data:`KNOBS`: how many passes each phase and each
setting's level runs; ``kind`` says which measured pass a cost counts).

Then, in order:

1. **Refuse or plan.** The elapsed time (start, preflight, run 0, the calibration) plus the
   estimate of every remaining phase at its floors is the least the collect can take. When
   that is over the budget the collect stops at once with a
   :class:`~attest.errors.InputError` naming, in seconds, the smallest budget that meets the
   floors (the estimate plus :data:`MINIMUM_SLACK`). The floors are each setting's least
   meaningful work (5 repeats, one Hessian-vector direction...) raised to what the policy
   requires (``floors``: clinical-strict's 100 determinism repeats, its 1 % completeness
   tolerance; :mod:`attest.pipeline.budget_floors`), never below either, never above what
   the spec and settings asked.
2. **Lower settings to fit** :data:`TARGET_SHARE` of the budget: one step at a time, always
   the step that saves the most, then the repeats are filled back up to whatever still fits.
3. **Re-plan before every phase** with the time actually left, and with the estimates of the
   phases still to run scaled by how the finished ones compared with theirs (measured over
   estimated, over all finished phases), so a phase that ran over is paid for by the later
   ones. Within the profile phase, the repeats above the floor stop when the next one would
   not leave time for the phases after it (:meth:`BudgetPlanner.repeat_allowed`).

What was reduced is recorded in the evidence (``Evidence.budget``: the limit, the calibration,
the floors and the minimum, the estimates, each setting's full and planned value) and in each
check's own ``parameters``, so a reviewer and a policy see a budgeted certificate for what it
is. Nothing is skipped, and no floor is ever cut.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attest.collection.budget_calibration import Calibration
from attest.collection.budget_phases import PhaseAccount, plan_line, say_on_stderr
from attest.errors import InputError
from attest.evidence.model import BudgetCalibration, BudgetRecord, BudgetReduction

__all__ = [
    "KNOBS",
    "MINIMUM_SLACK",
    "PHASE_COST",
    "TARGET_SHARE",
    "BudgetPlanner",
    "Knob",
    "phase_units",
]

# The plan fills this share of the budget; the rest absorbs the estimates' error.
TARGET_SHARE = 0.92
# The smallest budget named when refusing: the floors' estimate and this much more.
MINIMUM_SLACK = 1.08


@dataclass(frozen=True)
class Knob:
    """One setting a plan may lower: its levels from the full work down to the floor, and the
    estimated cost of each level (for the phase it belongs to) in passes of ``kind``."""

    setting: str  # "repeats" (the spec's) or a CheckSettings field
    phase: str
    levels: tuple[Any, ...]
    cost: Callable[[Any], float]
    kind: str = "pass"  # "pass" | "repeat" | "float64": see Calibration.seconds


# The cost of a phase apart from its knobs: how many of each calibrated pass it runs (kinds
# of Calibration.seconds: "pass" one forward+backward through every operator, "repeat" a
# captured repeat, "float64" a plain float64 forward+backward, "capture" the reference capture,
# "second" fixed seconds). topology: each example alone under the capture, forward only;
# profile: the float64 pass with each operator's local re-run, the thread-count run and the
# detailed repeats' bookkeeping; gradients: gradient flow, kinks, custom ops, accumulation,
# gradcheck's base; ig: the adaptive path (evaluations of one example at a time, so about a
# second of fixed overhead per input group on any model), the baseline, F(x); export: the ONNX
# export (seconds of tracing on any model) and the onnxruntime comparison. A phase the spec
# does not ask for (no export:, no training:) reports not_applicable at once.
PHASE_COST: dict[str, dict[str, float]] = {
    "topology": {"capture": 0.3},
    "profile": {"capture": 1.0, "float64": 3.0, "repeat": 3.0},
    "gradients": {"pass": 16.0},
    "ig": {"pass": 20.0, "second": 8.0},
    "export": {"pass": 4.0, "second": 4.0},
    "training": {"pass": 20.0},
}
_OTHER_PHASE = {"pass": 2.0}

KNOBS: tuple[Knob, ...] = (
    Knob("repeats", "profile", (20, 10, 5), lambda r: max(0, r - 1), kind="repeat"),
    Knob("gradcheck_directions", "gradients", (4, 2, 1), lambda d: 1.0 * d),
    # products on a one-example sub-batch, one-sided differences (docs/gradient-checks.md)
    Knob("second_order_directions", "gradients", (3, 2, 1), lambda d: 3.0 * d),
    Knob("ig_tolerance", "ig", (1e-3, 3e-3, 1e-2, 3e-2), lambda t: 6.0 * (1e-3 / t) ** 0.25),
    Knob("ig_max_steps", "ig", (1024, 256, 128), lambda s: 0.0),
    # ig_determinism re-evaluates one batch of path points (at least twice): not planned
    Knob("ig_randomization_max_layers", "ig", (3, 2, 1), lambda n: 1.0 * n),
    Knob("ig_randomization_inputs", "ig", (2, 1), lambda n: 1.0 * n),
)
_BY_SETTING = {knob.setting: knob for knob in KNOBS}


@dataclass
class BudgetPlanner:
    """Plans the remaining phases' settings to the time left; see the module docstring.

    ``floors``: the least work a setting may be planned at, beyond the knob's own last level
    (the policy's evidence floors; for ``ig_tolerance`` the loosest tolerance allowed)."""

    limit_s: float
    calibration: Calibration
    started: float = field(default_factory=time.perf_counter)
    floors: dict[str, Any] = field(default_factory=dict)
    levels: dict[str, int] = field(default_factory=dict)  # setting -> index into its ladder
    ladders: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # the user's value first
    full: dict[str, Any] = field(default_factory=dict)  # setting -> the value before planning
    estimate_full_s: float | None = None
    estimate_planned_s: float | None = None
    minimum_s: float | None = None
    correction: float = 1.0  # measured / estimated, over the phases finished so far
    skipped: set[str] = field(default_factory=set)  # phases the spec does not ask for
    repeat_times: list[float] = field(default_factory=list)  # measured, between repeats
    _last_repeat: float | None = None
    _declined: bool = False
    _estimated_done: float = 0.0
    _measured_done: float = 0.0
    _remaining: list[str] = field(default_factory=list)
    account: PhaseAccount = field(default_factory=PhaseAccount)
    say: Callable[[str], None] = say_on_stderr  # a warning at the moment it arises (stderr)
    progress: Callable[[str], None] | None = None  # the plan per phase, as a progress line
    _warned: bool = False

    @property
    def unit_s(self) -> float:
        return self.calibration.unit_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    # -- estimates --------------------------------------------------------------------------

    def _ladder(self, knob: Knob) -> tuple[Any, ...]:
        return self.ladders.get(knob.setting, knob.levels)

    def _value(self, knob: Knob) -> Any:
        return self._ladder(knob)[self.levels.get(knob.setting, 0)]

    def _knob_s(self, knob: Knob, value: Any) -> float:
        seconds = knob.cost(value) * self.calibration.seconds(knob.kind)
        # a repeat is measured as such; the other costs are counts of passes, corrected by
        # how the finished phases compared with their estimates
        return seconds if knob.kind == "repeat" else seconds * self.correction

    def phase_estimate(self, phase: str, values: dict[str, Any] | None = None) -> float:
        """Seconds ``phase`` is estimated to take at the planned values (or ``values``)."""
        if phase in self.skipped:
            return 0.0
        seconds = fixed_passes(phase, self.calibration) * self.correction
        for knob in KNOBS:
            if knob.phase == phase:
                value = (values or {}).get(knob.setting, self._value(knob))
                seconds += self._knob_s(knob, value)
        return seconds

    def estimate(self, phases: list[str], values: dict[str, Any] | None = None) -> float:
        return sum(self.phase_estimate(p, values) for p in phases)

    def floor_values(self) -> dict[str, Any]:
        return {k.setting: self._ladder(k)[-1] for k in KNOBS}

    # -- planning ---------------------------------------------------------------------------

    def start(self, remaining_phases: list[str], settings: Any, spec: Any) -> None:
        """Record the full values, refuse a budget the floors cannot meet (InputError, at
        once), else make the first plan."""
        self.skipped = {p for p in remaining_phases if not applies(p, spec)}
        for knob in KNOBS:
            current = _get(knob.setting, settings, spec)
            self.full[knob.setting] = current
            self.ladders[knob.setting] = self._make_ladder(knob, current)
            self.levels[knob.setting] = 0
        self._remaining = list(remaining_phases)
        self.estimate_full_s = self.estimate(remaining_phases)
        floors = self.estimate(remaining_phases, self.floor_values())
        need = self.elapsed() + floors
        self.minimum_s = float(math.ceil(need * MINIMUM_SLACK))
        if need > self.limit_s:
            raise InputError(
                f"a budget of {self.limit_s:.0f} s cannot meet the evidence floors: the collect "
                f"needs about {need:.0f} s at the least work allowed ({self._floors_text()}; "
                f"{self.elapsed():.1f} s already spent on start, run 0 and the calibration), so "
                f"the smallest budget that meets them is {self.minimum_s:.0f} s",
                hint=f"give --budget {self.minimum_s:.0f}s or more (the spec's budget: too), or "
                "lower the floors in the spec or the policy (repeats, min_repeats)",
            )
        self.plan(remaining_phases, settings, spec)
        self.estimate_planned_s = self.estimate(remaining_phases)

    def _make_ladder(self, knob: Knob, current: Any) -> tuple[Any, ...]:
        """The user's value, then the knob's levels that are strictly less work (a plan never
        asks for more work than the spec and settings did) and not below the floor."""
        floor = self.floors.get(knob.setting)
        lower = [v for v in knob.levels if _less_work(v, current, knob) and v != current]
        if floor is not None:
            lower = [v for v in lower if not _less_work(v, floor, knob) or v == floor]
            if _less_work(floor, current, knob) and floor != current and floor not in lower:
                lower.append(floor)
                lower.sort(key=lambda v: -knob.cost(v))
        return (current, *lower)

    def plan(self, remaining_phases: list[str], settings: Any, spec: Any) -> None:
        """Lower settings of the remaining phases until their estimate fits the share of the
        time left, then give the repeats back whatever still fits."""
        self._remaining = list(remaining_phases)
        left = self.limit_s * TARGET_SHARE - self.elapsed()
        at_floors = False
        while self.estimate(remaining_phases) > left:
            step = self._best_step(remaining_phases)
            if step is None:
                at_floors = True  # every setting is at its floor: keep the floors, say so
                break
            self.levels[step.setting] += 1
        self._fill_repeats(remaining_phases, left, spec)
        for knob in KNOBS:
            if knob.phase in remaining_phases:
                _set(knob.setting, self._value(knob), settings, spec)
        estimates = {p: self.phase_estimate(p) for p in remaining_phases if p not in self.skipped}
        if remaining_phases:
            self.account.begin(remaining_phases[0], estimates.get(remaining_phases[0], 0.0))
        if self.progress is not None and estimates:
            self.progress(plan_line(estimates, self.elapsed(), self.limit_s))
        if at_floors:
            self._floors_past(self.elapsed() + sum(estimates.values()), remaining_phases[:1])

    def _floors_past(self, finish_s: float, phases: list[str]) -> None:
        """Say on stderr, once, that the floors no longer fit (``finish_s``: the estimated
        end at the floors, over the budget): the floors are kept, the budget will be overrun."""
        if finish_s <= self.limit_s or self._warned:
            return
        self._warned = True
        where = f" (from the {phases[0]} phase on)" if phases else ""
        self.say(
            f"budget: the evidence floors no longer fit the budget of {self.limit_s:.0f} s: "
            f"the collect is now estimated to finish after about {finish_s:.0f} s{where}, "
            f"{finish_s / self.limit_s:.2f}x the budget ({self._floors_text()} are kept; the "
            "phases ran slower than calibrated, the machine may be loaded)"
        )

    def _fill_repeats(self, remaining_phases: list[str], left: float, spec: Any) -> None:
        """After a step down, the largest repeat count between the level reached and the
        one above it that still fits (the levels are coarse; a repeat is one measured run)."""
        knob = _BY_SETTING["repeats"]
        index = self.levels.get("repeats", 0)
        if "profile" not in remaining_phases or index == 0:
            return
        ladder = list(self._ladder(knob))
        low, high = int(ladder[index]), int(ladder[index - 1])
        per_repeat = self.calibration.seconds("repeat")
        spare = left - self.estimate(remaining_phases)
        extra = int(spare // per_repeat) if spare > 0 and per_repeat > 0 else 0
        best = min(high - 1, low + extra)
        if best > low:  # a level of its own, between: the levels below (the floor) stay
            ladder.insert(index, best)
            self.ladders["repeats"] = tuple(ladder)

    def _best_step(self, remaining_phases: list[str]) -> Knob | None:
        best: tuple[float, Knob] | None = None
        for knob in KNOBS:
            index = self.levels.get(knob.setting, 0)
            ladder = self._ladder(knob)
            if knob.phase not in remaining_phases or index + 1 >= len(ladder):
                continue
            saving = self._knob_s(knob, ladder[index]) - self._knob_s(knob, ladder[index + 1])
            if knob.cost(ladder[index]) == 0.0:
                saving = 1e-9  # a cap with no estimated cost of its own goes last
            if best is None or saving > best[0]:
                best = (saving, knob)
        return best[1] if best else None

    # -- while running ----------------------------------------------------------------------

    def finished(self, phase: str, measured_s: float, spec: Any) -> None:
        """A phase finished after ``measured_s``: fold it into the correction of the later
        phases' estimates (repeats apart: the calibration measured them as such)."""
        self.account.end(phase, measured_s)
        knob = _BY_SETTING["repeats"]
        ran = {knob.setting: spec.repeats}
        estimated = self.phase_estimate(phase, ran)
        repeats_s = self._knob_s(knob, spec.repeats) if phase == knob.phase else 0.0
        # the repeats were estimated at the calibrated time, uncorrected: a phase whose
        # repeats ran slower than calibrated (a loaded machine) says the later ones will too
        fixed = max(0.0, estimated - repeats_s) / max(self.correction, 1e-9)
        self._estimated_done += fixed + repeats_s
        self._measured_done += max(0.0, measured_s)
        # shrunk towards 1 by a tenth of the planned work: a phase of a few seconds (topology)
        # hardly moves the estimates of the phases ten times its size
        prior = 0.1 * (self.estimate_planned_s or self.estimate_full_s or 0.0)
        ratio = (self._measured_done + prior) / max(self._estimated_done + prior, 1e-9)
        self.correction = min(4.0, max(0.5, ratio))

    def repeat_ceiling(self, spec: Any) -> int:
        """The most determinism runs the profile may make: the planned count, and past it,
        while measured repeats fit (:meth:`repeat_allowed`), up to twice as many (a warm
        repeat can be faster than the calibrated one; each run listed and declined still
        costs its piece's reseed) but never past what the spec asked."""
        planned = int(spec.repeats)
        return min(int(self.full.get("repeats", planned)), max(2 * planned, planned + 10))

    def repeat_allowed(self, run_index: int, spec: Any) -> bool:
        """Whether determinism run ``run_index`` (0-based; run 0 is the reference) runs:
        always below the floor; above it, when one more repeat (as the last ones measured,
        the calibrated one until a few are) and the later phases fit the budget's share.
        ``spec.repeats`` follows: the runs made, for the determinism check to report."""
        if self._declined and run_index >= spec.repeats:
            return False
        now = time.perf_counter()
        if self._last_repeat is not None:
            self.repeat_times.append(now - self._last_repeat)
        self._last_repeat = now
        floor = int(self._ladder(_BY_SETTING["repeats"])[-1])
        per_repeat = self._per_repeat()
        later = [p for p in self._remaining if p != "profile"]
        if run_index >= floor:
            if self.elapsed() + per_repeat + self.estimate(later) > self.limit_s * TARGET_SHARE:
                spec.repeats = run_index
                self._declined = True
                return False
        else:  # below the floor: the runs go on; do the floors still fit at the measured pace?
            floors = self.estimate(later, self.floor_values())
            self._floors_past(
                self.elapsed() + (floor - run_index) * per_repeat + floors, ["profile"]
            )
        spec.repeats = max(int(spec.repeats), run_index + 1)
        return True

    def _per_repeat(self) -> float:
        """A repeat's seconds: the median of the last five measured once there are three,
        never below the calibration's before (a warm repeat can be faster, a loaded machine
        slower: the measured pace replaces the calibrated one as the repeats run)."""
        recent = sorted(self.repeat_times[-5:])
        calibrated = self.calibration.seconds("repeat")
        if len(recent) >= 3:
            return recent[len(recent) // 2]
        return max([calibrated, *recent])

    # -- the record -------------------------------------------------------------------------

    def record(self, settings: Any, spec: Any) -> BudgetRecord:
        """The evidence's account of the plan, after the collect."""
        reductions = []
        for knob in KNOBS:
            planned = _get(knob.setting, settings, spec)
            if planned != self.full[knob.setting]:
                saves = self._knob_s(knob, self.full[knob.setting]) - self._knob_s(knob, planned)
                reductions.append(
                    BudgetReduction(
                        setting=knob.setting,
                        full=self.full[knob.setting],
                        planned=planned,
                        saves_s=round(max(0.0, saves), 3),
                    )
                )
        elapsed = self.elapsed()
        return BudgetRecord(
            limit_s=self.limit_s,
            unit_s=round(self.unit_s, 6),
            estimate_full_s=round(self.estimate_full_s or 0.0, 3),
            estimate_planned_s=round(self.estimate_planned_s or 0.0, 3),
            elapsed_s=round(elapsed, 3),
            full_work=not reductions,
            reductions=reductions,
            note=overrun_note(elapsed, self.limit_s) if elapsed > self.limit_s else None,
            calibration=BudgetCalibration(
                forward_backward_s=round(self.calibration.forward_backward_s, 6),
                repeat_s=round(self.calibration.repeat_s, 6),
                capture_s=round(self.calibration.capture_s, 6),
                float64_s=round(self.calibration.float64_s, 6),
                took_s=round(self.calibration.took_s, 6),
                repeats_s=[round(t, 6) for t in self.calibration.repeats_s],
            ),
            minimum_s=self.minimum_s,
            floors={k.setting: self._ladder(k)[-1] for k in KNOBS},
            correction=round(self.correction, 4),
            phases=self.account.record(),
        )

    def _floors_text(self) -> str:
        values = self.floor_values()
        return ", ".join(f"{name} {values[name]}" for name in ("repeats", "ig_tolerance"))


def overrun_note(elapsed_s: float, limit_s: float) -> str:
    """The plain words an overrun is reported in (evidence and stderr)."""
    return (
        f"the collect took {elapsed_s:.0f} s, over the budget of {limit_s:.0f} s "
        f"({elapsed_s / limit_s:.2f}x); the floors are never cut, the estimate was short"
    )


def _less_work(value: Any, current: Any, knob: Knob) -> bool:
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


def applies(phase: str, spec: Any) -> bool:
    """Whether the spec asks for ``phase`` at all (the export and training checks report
    not_applicable at once without ``export:`` / ``training:``)."""
    if phase == "export":
        return getattr(spec, "export", None) is not None
    if phase == "training":
        return getattr(spec, "training", None) is not None
    return True


def fixed_passes(phase: str, calibration: Calibration | None) -> float:
    """The cost of ``phase`` apart from its knobs: in seconds with a ``calibration``, else in
    passes (every kind counted as one pass, fixed seconds as none)."""
    cost = 0.0
    for kind, count in PHASE_COST.get(phase, _OTHER_PHASE).items():
        if calibration is not None:
            cost += count * (1.0 if kind == "second" else calibration.seconds(kind))
        elif kind != "second":
            cost += count
    return cost


def phase_units(
    phase: str, settings: Any, spec: Any, calibration: Calibration | None = None
) -> float:
    """The planned cost of ``phase`` in passes at the current ``settings`` and ``spec`` (what
    :class:`BudgetPlanner` estimates once it has set them, divided by one pass's seconds when
    ``calibration`` is given): the weights of the progress estimate
    (:func:`attest.core.progress.plan_message`) and of the workers' balance."""
    if not applies(phase, spec):
        return 0.0
    if calibration is not None:
        cost = fixed_passes(phase, calibration) / calibration.unit_s
    else:
        cost = fixed_passes(phase, None)
    for knob in KNOBS:
        if knob.phase == phase:
            scale = calibration.seconds(knob.kind) / calibration.unit_s if calibration else 1.0
            cost += knob.cost(_get(knob.setting, settings, spec)) * scale
    return cost
