"""The account a ``--budget`` collect keeps of each phase: its estimate when it started against
the wall time it took, and the lines that say them (:mod:`attest.collection.budget`).

A plan that misses is diagnosed phase by phase: the progress shows the planned seconds of
every phase still to run before each phase starts, and the planned against the actual seconds
of every phase once the last one finished; the evidence's ``budget.phases`` keeps both. When
the floors alone no longer fit the budget, the collect says so on stderr at once (not only at
the end), once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

__all__ = ["PhaseAccount", "say_on_stderr"]


def say_on_stderr(text: str) -> None:
    """The default voice of a planner's warning: one line on stderr, at once."""
    print(f"attest: {text}", file=sys.stderr, flush=True)


@dataclass
class PhaseAccount:
    """Planned and actual seconds of each phase run, in order."""

    planned: dict[str, float] = field(default_factory=dict)
    actual: dict[str, float] = field(default_factory=dict)

    def begin(self, phase: str, planned_s: float) -> None:
        """``phase`` starts, estimated at ``planned_s`` (the plan made just before it)."""
        self.planned[phase] = planned_s

    def end(self, phase: str, actual_s: float) -> None:
        self.actual[phase] = actual_s

    def record(self) -> dict[str, dict[str, float]]:
        """``{phase: {"planned_s", "actual_s"}}`` of every phase that ran (the evidence's)."""
        return {
            phase: {"planned_s": round(planned, 3), "actual_s": round(self.actual[phase], 3)}
            for phase, planned in self.planned.items()
            if phase in self.actual
        }

    def summary(self) -> str:
        """``budget: planned against actual: profile 130 s / 141 s (1.08x), ...``."""
        parts = [
            f"{phase} {row['planned_s']:.0f} s / {row['actual_s']:.0f} s"
            + (f" ({row['actual_s'] / row['planned_s']:.2f}x)" if row["planned_s"] > 0 else "")
            for phase, row in self.record().items()
        ]
        return "budget: planned against actual seconds per phase: " + ", ".join(parts)


def plan_line(estimates: dict[str, float], elapsed_s: float, limit_s: float) -> str:
    """``budget plan: profile 130 s, gradients 25 s; 20 s spent of 300 s``."""
    phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in estimates.items())
    return f"budget plan: {phases}; {elapsed_s:.0f} s spent of {limit_s:.0f} s"
