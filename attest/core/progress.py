"""Progress of ``attest collect`` and ``attest certify``: the stage, the time spent, the time left.

The library reports progress through one callback, ``Callable[[str], None]``: the ``progress``
argument of :func:`attest.collection.collect` and :func:`attest.pipeline.certify`, which the
collector hands to the check runners as ``ctx.progress``. Each call names the stage
that starts now. Two forms carry counts, and this module is the one place that writes and reads
them:

- :func:`step_message` (``"[5/18] checks: gradchecks:run"``): ``5`` of ``18`` steps are done.
  The collector counts check ids: the checks finished out of all of them.
- a trailing ``k/N`` (``"determinism run 3/20"``): progress within the current stage.
- :func:`plan_message` (``"plan: topology 1, profile 13.5, gradients 22; unit 0.0123 s"``):
  the phases still to run with their planned cost in forward+backward units (the budget
  planner's estimates, :func:`attest.collection.budget.phase_units`) and the seconds of one
  unit. The collector sends it once run 0 is captured; it changes no stage.

:class:`Tracker` turns the messages into the phase (the stage of the last step message), the
stage, the elapsed time and an estimate of the time left. With a plan, the estimate weighs
the phases by their planned cost, not their count (the largest ``k/N`` within a phase counts
as that share of it until the next phase starts, so a stage without counts after the repeats,
the thread-count run, does not take the repeats back and swing the estimate): seconds per
unit so far (the planned seconds of a tenth of the plan, two units at least, count as a
prior, so the first quick phase does not decide alone) times the units still to do. Without
a plan, elapsed time per finished step times the steps still to do; until a step has finished there
is no basis, and it says ``estimating…``. Either way the figure is an estimate, and it is
shown as one. What shows it: :mod:`attest.core.progress_display` (the command line's choice
between a live display and plain lines) and :mod:`attest.core.progress_log` (plain lines and
a heartbeat, for a log file). Imports only the standard library, so the verifier's import
graph does not grow.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from attest.core.text import safe_text

__all__ = [
    "ProgressFn",
    "Tracker",
    "format_duration",
    "parse",
    "plan_message",
    "print_stages",
    "stage_line",
    "step_message",
]

ProgressFn = Callable[[str], None]

_STEPS = re.compile(r"\[(\d+)/(\d+)\] (.*)", re.DOTALL)
_WITHIN = re.compile(r"(\d+)/(\d+)\)?")
_PLAN = re.compile(r"plan: (.*); unit ([0-9.eE+-]+) s", re.DOTALL)
_MAX_TEXT = 160  # characters of a stage shown (a spec path can be long)
_PRIOR_UNITS = 2.0  # planned seconds of this many units weigh in the measured rate, at least
_PRIOR_SHARE = 0.1  # and of this share of the plan's units


def step_message(done: int, total: int, text: str) -> str:
    """``"[done/total] text"``: a stage that also says how many of all steps are finished."""
    return f"[{done}/{total}] {text}"


def plan_message(units: dict[str, float], unit_s: float) -> str:
    """``"plan: topology 1, profile 13.5; unit 0.0123 s"``: the phases still to run, in order,
    with their planned cost in forward+backward units, and the seconds of one unit."""
    phases = ", ".join(f"{name} {cost:.6g}" for name, cost in units.items())
    return f"plan: {phases}; unit {unit_s:.6g} s"


@dataclass(frozen=True)
class Message:
    """One progress message, read: the stage text, overall steps and within-stage counts, or
    a plan (phase -> planned units, the seconds of one unit)."""

    text: str
    steps: tuple[int, int] | None = None
    within: tuple[int, int] | None = None
    plan: dict[str, float] | None = None
    unit_s: float | None = None


def _read_plan(message: str) -> Message | None:
    match = _PLAN.fullmatch(message)
    if match is None:
        return None
    units: dict[str, float] = {}
    try:
        for part in match.group(1).split(", "):
            name, _, cost = part.rpartition(" ")
            units[name] = max(0.0, float(cost))
        unit_s = max(0.0, float(match.group(2)))
    except ValueError:
        return None
    if not all(math.isfinite(v) for v in (*units.values(), unit_s)):
        return None
    return Message(message, plan=units, unit_s=unit_s)


def parse(message: str) -> Message:
    """Read a progress message (see the module docstring for the forms that carry counts)."""
    plan = _read_plan(message)
    if plan is not None:
        return plan
    steps: tuple[int, int] | None = None
    match = _STEPS.fullmatch(message)
    if match:
        steps = (int(match.group(1)), int(match.group(2)))
        message = match.group(3)
    within: tuple[int, int] | None = None
    last = message.rpartition(" ")[2]
    counted = _WITHIN.fullmatch(last.lstrip("("))
    if counted and int(counted.group(2)) > 0:
        within = (int(counted.group(1)), int(counted.group(2)))
    return Message(message, steps, within)


def format_duration(seconds: float) -> str:
    """``0:07``, ``12:05``, ``1:02:03`` (whole seconds, rounded down)."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Tracker:
    """The state of one run: the current stage, the steps done of all, and the clock.

    ``clock`` is any monotonic seconds counter (tests pass a fake one); the run starts when
    the tracker is made.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self.stage = "starting"
        self.phase = "starting"
        self.done = 0
        self.plan: dict[str, float] | None = None  # phase -> planned units, in order
        self.unit_s = 0.0
        self._plan_start = self._start
        self._plan_done = 0  # phases of the plan finished
        self._share = 0.0  # of the current plan phase, the most a k/N within it has shown
        self.total: int | None = None
        self.within: tuple[int, int] | None = None
        self.finished = False
        self.outcome = "done"
        self._end = self._start

    def update(self, message: str) -> Message:
        """Take one progress message from the library."""
        read = parse(message)
        if read.plan is not None:
            self.plan, self.unit_s = read.plan, read.unit_s or 0.0
            self._plan_start, self._plan_done, self._share = self._clock(), 0, 0.0
            return read
        self.stage = safe_text(read.text, _MAX_TEXT)
        self.within = read.within
        if read.steps is not None:
            done, total = read.steps
            self.total = max(total, 0)
            self.done = min(max(done, 0), self.total)
            self.phase = self.stage
            self._enter_phase(read.text, finished=self.total > 0 and self.done >= self.total)
        elif read.within is not None:  # run k of N has started: k - 1 of them are done
            k, n = read.within
            self._share = max(self._share, min(max(k - 1, 0), n) / n)
        return read

    def _enter_phase(self, text: str, *, finished: bool) -> None:
        """A step message: the plan's phases before the one it names are finished."""
        if self.plan is None:
            return
        names = list(self.plan)
        if finished:
            self._plan_done = len(names)
            return
        name = text.removeprefix("checks: ").strip()
        if name in names and names.index(name) > self._plan_done:
            self._plan_done, self._share = names.index(name), 0.0

    def units(self) -> tuple[float, float] | None:
        """Planned units done (the largest ``k/N`` shown within the current phase counts as
        that share of it, also after a stage without counts follows it: the thread-count run
        after the repeats keeps the repeats done) and in all, or None without a plan."""
        if self.plan is None:
            return None
        costs = list(self.plan.values())
        done = sum(costs[: self._plan_done])
        if self._plan_done < len(costs):
            done += costs[self._plan_done] * self._share
        return done, sum(costs)

    def finish(self, outcome: str = "done") -> None:
        """The run is over (``outcome``: ``done``, or ``stopped`` on an error): the clock stops."""
        self.finished, self.outcome = True, outcome
        self._end = self._clock()
        if outcome == "done":
            self.stage = self.phase = "finished"

    def elapsed(self) -> float:
        """Seconds since the tracker was made (until :meth:`finish`)."""
        end = self._end if self.finished else self._clock()
        return max(0.0, end - self._start)

    def remaining(self) -> float | None:
        """Estimated seconds left, or None while there is no basis (no step finished yet)."""
        units = self.units()
        if units is not None:
            return self._remaining_planned(*units)
        if self.total is None or self.total == 0 or self.done == 0:
            return None
        if self.done >= self.total:
            return 0.0
        return self.elapsed() * (self.total - self.done) / self.done

    def _remaining_planned(self, done: float, total: float) -> float | None:
        if done >= total or (self.total is not None and self.total and self.done >= self.total):
            return 0.0
        end = self._end if self.finished else self._clock()
        spent = max(0.0, end - self._plan_start)
        # the planned pace weighs as a tenth of the plan (at least two units): a phase of a
        # fraction of a second, or a phase whose stages have no counts, cannot set the rate
        # alone (a rate from a tiny interval over a large plan said hours for seconds)
        prior = max(_PRIOR_UNITS, _PRIOR_SHARE * total) if self.unit_s > 0 else 0.0
        if done + prior <= 0:
            return None
        rate = (spent + prior * self.unit_s) / (done + prior)
        return rate * (total - done)

    def remaining_text(self) -> str:
        """``estimating…``, ``about 1:05 left``, ``finishing`` or ``done``."""
        if self.finished:
            return self.outcome
        left = self.remaining()
        if left is None:
            return "estimating…"
        if self.total is not None and self.done >= self.total:
            return "finishing"
        return f"about {format_duration(max(1, math.ceil(left)))} left"  # never 0:00 while busy

    def steps_text(self) -> str:
        """``5/18 checks`` once counts are known, else an empty string."""
        return f"{self.done}/{self.total} checks" if self.total else ""

    def line(self) -> str:
        """One plain line: phase (when the stage is a step within it), stage, steps, elapsed,
        estimate."""
        parts = [self.stage] if self.phase in (self.stage, "starting") else [self.phase, self.stage]
        if self.total:
            parts.append(self.steps_text())
        parts.append(f"{format_duration(self.elapsed())} elapsed")
        parts.append(self.remaining_text())
        return " | ".join(parts)


def print_stages(stream: IO[str], clock: Callable[[], float] = time.monotonic) -> ProgressFn:
    """A callback printing one line per stage to ``stream`` (no terminal control codes).

    Of the ``k/N`` steps within a stage only the last is printed. Used by ``make demo`` and
    when ``rich`` is not installed.
    """
    tracker = Tracker(clock)

    def progress(message: str) -> None:
        line = stage_line(tracker, message)
        if line is not None:
            print(f"  {line}", file=stream, flush=True)

    return progress


def stage_line(tracker: Tracker, message: str) -> str | None:
    """Take ``message`` into ``tracker``; the line to print for it, or None when it starts no
    stage (a plan, or a ``k/N`` step within a stage other than the last)."""
    read = tracker.update(message)
    if read.plan is not None or (read.within is not None and read.within[0] < read.within[1]):
        return None
    return tracker.line()
