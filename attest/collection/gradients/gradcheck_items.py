"""The items of ``gradcheck``: an operator's checks summed up (:func:`operator_item`), an
operator with nothing to differentiate (:func:`skipped_item`), one that cannot be re-run
alone (:func:`not_rerunnable_item`) and a call identical to an earlier one, which takes its
verdict (:func:`identical_item`, :func:`inherit_identical`)."""

from __future__ import annotations

import math
from typing import Any

from attest.collection.capture.aten_args import op_short_name
from attest.collection.capture.records import OpRecord
from attest.collection.gradients.finite_differences import BackwardCheck, describe, finite_or_none
from attest.collection.gradients.kink_detectors import POLES, SEAMS
from attest.evidence.model import CheckItem, Subject

__all__ = [
    "IDENTICAL_TO",
    "identical_item",
    "inherit_identical",
    "not_rerunnable_item",
    "operator_item",
    "skipped_item",
]

# The metric naming the earlier call whose check an identical call takes
# (:func:`attest.collection.gradients.gradcheck_groups.identical_cases`).
IDENTICAL_TO = "identical_to_operator"


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
    # a NaN error counts as the worst (max() would keep whichever came first)
    worst = max(math.inf if math.isnan(c.max_rel_error) else c.max_rel_error for _, c in checks)
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


def identical_item(record: OpRecord, first: int) -> CheckItem:
    """The placeholder of a call identical to operator ``first``: it takes that operator's
    verdict once every group is in (:func:`inherit_identical`; the two may be checked in
    different processes)."""
    return CheckItem(
        subject=Subject(kind="operator", operator_id=record.id, op=record.op, module=record.module),
        status="not_computed",
        metrics={IDENTICAL_TO: first},
        message=f"identical to operator #{first}, whose item was not found",
    )


def inherit_identical(items: list[CheckItem]) -> list[CheckItem]:
    """``items`` with every placeholder of :func:`identical_item` given the verdict, metrics
    and message of the operator it is identical to."""
    by_id = {i.subject.operator_id: i for i in items if IDENTICAL_TO not in i.metrics}
    out = []
    for item in items:
        first = item.metrics.get(IDENTICAL_TO)
        checked = by_id.get(first) if isinstance(first, int) else None
        if checked is None:
            out.append(item)
            continue
        where = checked.subject.module or "<root>"
        out.append(
            CheckItem(
                subject=item.subject,
                status=checked.status,
                metrics={**checked.metrics, IDENTICAL_TO: first},
                message=(
                    f"identical to operator #{first} ({where}: the same operator, dtypes, "
                    "shapes, strides and arguments, so the same derivative formula and "
                    f"kernel), whose check it takes: {checked.message}"
                ),
            )
        )
    return out
