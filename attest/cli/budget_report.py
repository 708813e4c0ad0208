"""What ``attest collect`` and ``attest certify`` say about a ``--budget`` once the collect is
over: an overrun, in plain words on stderr (budget against the time taken), not only in
``evidence.json``'s ``budget.note``, which nobody reads at the end of a long run."""

from __future__ import annotations

import click

from attest.evidence.model import Evidence

__all__ = ["say_overrun"]


def say_overrun(evidence: Evidence) -> None:
    """Print the overrun of the evidence's budget on stderr; nothing when it held."""
    budget = evidence.budget
    if budget is None or budget.elapsed_s is None or budget.elapsed_s <= budget.limit_s:
        return
    ratio = budget.elapsed_s / budget.limit_s
    click.echo(
        f"budget overrun: the collect took {budget.elapsed_s:.0f} s against a budget of "
        f"{budget.limit_s:.0f} s ({ratio:.2f}x); the settings were planned at or above their "
        "floors from a calibration on this model and the estimate was short (evidence.json "
        "budget records the plan); give a larger --budget to finish within it",
        err=True,
    )
    if budget.phases:  # which phase missed its estimate, and by how much
        rows = ", ".join(
            f"{phase} {row['planned_s']:.0f} s planned / {row['actual_s']:.0f} s taken"
            for phase, row in budget.phases.items()
        )
        click.echo(f"budget per phase: {rows}", err=True)
