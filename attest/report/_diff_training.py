"""What ``attest diff`` compares of the training checks (``mixed_precision``, ``recompute``,
``batch_invariance``, ``resume``; docs/training.md): their summary figures.

A training check's status and its newly failing items are compared with every other check's
(:func:`attest.report.diff._compare_checks`). What the summary adds is the figures a release
moves without an item changing status: a loss scale, a gradient's deviation creeping towards
its tolerance, bytes saved by checkpointing. Every change is reported; a change is a regression
only where the check counts its own failures (``failed``, ``regions_failed``,
``unrestored_state``...) and the count grew, since yes/no figures such as ``grad_bit_exact``
may flip run to run on a backend that is not deterministic. Timings (``*_s``, ``*_ns``) are not
compared: they are too noisy to read anything into, as for operators.

Plain tuples out, so that :mod:`attest.report.diff` wraps them in its own ``Change`` without an
import circle.
"""

from __future__ import annotations

from typing import Any

from attest.evidence.model import TRAINING_CHECKS, CheckResult

__all__ = ["TrainingChange", "training_changes"]

# (subject "check.figure", old value, new value, message, regression)
TrainingChange = tuple[str, Any, Any, str, bool]

# Summary counts of things the check itself judged failed: more of them is a regression.
_FAILURE_COUNTS = (
    "failed",
    "regions_failed",
    "unrestored_state",
    "random_ops_not_restored",
    "state_writes_during_recompute",
)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if _is_number(value):
        return f"{value:.6g}"
    return "not measured" if value is None else str(value)


def _summary_changes(cid: str, old: CheckResult, new: CheckResult) -> list[TrainingChange]:
    out: list[TrainingChange] = []
    for key in dict.fromkeys([*old.summary, *new.summary]):
        if key.endswith(("_s", "_ns")):
            continue
        va, vb = old.summary.get(key), new.summary.get(key)
        if va == vb or isinstance(va, dict | list) or isinstance(vb, dict | list):
            continue
        grew = isinstance(va, int | float) and isinstance(vb, int | float) and vb > va
        regression = key in _FAILURE_COUNTS and grew
        out.append((f"{cid}.{key}", va, vb, f"{_text(va)} -> {_text(vb)}", regression))
    return out


def training_changes(
    old: dict[str, CheckResult], new: dict[str, CheckResult]
) -> list[TrainingChange]:
    """The summary figures that changed between two releases, per training check computed in
    both (a status change is the check comparison's to report)."""
    out: list[TrainingChange] = []
    for cid in TRAINING_CHECKS:
        a, b = old.get(cid), new.get(cid)
        if a is None or b is None or a.status != "computed" or b.status != "computed":
            continue
        out.extend(_summary_changes(cid, a, b))
    return out
