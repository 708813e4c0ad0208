"""The items of ``gradcheck``: an operator's checks summed up (:func:`operator_item`), an
operator with nothing to differentiate (:func:`skipped_item`) and one that cannot be re-run
alone (:func:`not_rerunnable_item`)."""

from __future__ import annotations

from typing import Any

from attest.collection.capture.aten_args import op_short_name
from attest.collection.gradients.finite_differences import BackwardCheck, describe, finite_or_none
from attest.collection.gradients.kink_detectors import POLES, SEAMS
from attest.evidence.model import CheckItem, Subject

__all__ = ["not_rerunnable_item", "operator_item", "skipped_item"]


def not_rerunnable_item(subject: Subject, why: str) -> CheckItem:
    """The operator cannot be re-run alone (``why``): not computed."""
    return CheckItem(
        subject=subject,
        status="not_computed",
        message=f"could not re-run the operator alone in float64: {why}",
    )


def skipped_item(subject: Subject, reason: str) -> CheckItem:
    """Nothing to check: not a failure, and not a measured pass either."""
    return CheckItem(
        subject=subject,
        status="not_computed",
        metrics={"skipped": True},
        message=f"skipped (not differentiable): {reason}",
    )


def operator_item(
    subject: Subject,
    checks: list[tuple[str, BackwardCheck]],
    fixed: list[str],
    nudged: int,
    sliced: dict[str, Any] | None,
    differentiated: list[str],
) -> CheckItem:
    """An operator's item from its checks (the captured input first, then any slice): pass
    when all passed, with the inputs held fixed, the values nudged off kinks and the slice."""
    passed = all(c.passed for _, c in checks)
    main = checks[0][1]
    worst = max(c.max_rel_error for _, c in checks)
    metrics = main.metrics()
    metrics["max_rel_error"] = finite_or_none(worst)
    metrics["full_jacobian_on_slice"] = sliced is not None
    metrics["kink_values_nudged"] = nudged
    details: dict[str, Any] = {
        "checks": [
            {
                "case": name,
                **c.metrics(),
                "error_curve": c.error_curve,
                "torch_gradcheck": c.torch_gradcheck,
            }
            for name, c in checks
        ],
        "differentiated_inputs": differentiated,
    }
    if fixed:
        details["fixed_inputs"] = fixed
    if sliced is not None:
        details["slice"] = sliced
    message = "; ".join(f"{name}: {describe(c)}" for name, c in checks)
    short = op_short_name(subject.op or "")
    if nudged and short in POLES:
        message += f"; {nudged} captured values next to the derivative's pole were nudged off it"
    elif nudged and short in SEAMS:
        message += (
            f"; {nudged} sampling coordinates on or next to the interpolation's seams (whole "
            "or half pixels) were nudged off them first"
        )
    elif nudged:
        message += f"; {nudged} captured values on a kink were nudged off it first (see kinks)"
    if sliced is not None:
        message += (
            f"; full Jacobian on a slice {sliced['to_shapes']} of inputs {sliced['from_shapes']}"
        )
    return CheckItem(
        subject=subject,
        status="pass" if passed else "fail",
        metrics=metrics,
        message=message,
        details=details,
    )
