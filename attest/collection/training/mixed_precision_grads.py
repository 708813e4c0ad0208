"""The per-parameter items of the ``mixed_precision`` check: each parameter's gradient from
the autocast pass against the float64 one, with the float32 pass's distance from float64 as
the error scale, and the warn and fail levels in unit roundoffs (docs/training.md)."""

from __future__ import annotations

import math
from typing import Any

import torch

from attest.collection.nonfinite import nonfinite as nonfinite_sides
from attest.collection.training.amp_common import count_nonfinite, relative_error, unit_roundoff
from attest.evidence.model import CheckItem, ItemStatus, Subject

__all__ = ["FAIL_FACTOR", "WARN_FACTOR", "param_item"]

WARN_FACTOR = 8.0  # warn above this many unit roundoffs (times the float32 error scale)
# fail above this many: 64, not 32, because ReLU inputs within a rounding of zero flip side in
# the reduced precision, and one flip among hundreds of units of a clean MLP's first layer put
# its weight gradient 4.6e-2 from float64 where 32 u (times the error scale) allowed 4.45e-2;
# real precision defects (an unscaled float16 loss, a float16 reduction) are far beyond
FAIL_FACTOR = 64.0


def param_item(
    name: str,
    low: torch.Tensor | None,
    g64: torch.Tensor | None,
    g32: torch.Tensor | None,
    u: float,
) -> CheckItem:
    subject = Subject(kind="parameter", name=name)
    if g64 is None:
        return CheckItem(
            subject=subject,
            status="not_computed",
            message="the float64 pass gives this parameter no gradient",
        )
    if low is None:
        return CheckItem(
            subject=subject,
            status="fail",
            metrics={"grad_rel_error": None},
            message="the autocast pass gives this parameter no gradient; float64 does",
        )
    # every side asked before an error is trusted: a NaN float64 gradient made err NaN, which
    # compares False with both tolerances and passed
    sides = nonfinite_sides(
        {f"autocast ({low.dtype})".replace("torch.", ""): low, "float32": g32, "float64": g64}
    )
    if sides is not None:
        return CheckItem(
            subject=subject,
            status="fail",
            metrics={
                "grad_rel_error": None,
                "nonfinite": count_nonfinite([low]),
                "nonfinite_side": sides.label,
            },
            message=f"the gradients cannot be compared: {sides.describe()}",
        )
    err = relative_error(low, g64)
    err32 = relative_error(g32, g64)
    u32 = unit_roundoff(torch.float32)
    scale = max(1.0, (err32 or 0.0) / u32)
    warn, fail = WARN_FACTOR * u * scale, FAIL_FACTOR * u * scale
    nonfinite = count_nonfinite([low])
    nonzero = g64 != 0
    zeroed = int(((low == 0) & nonzero).sum()) / max(1, int(nonzero.sum()))
    metrics: dict[str, Any] = {
        "grad_rel_error": _finite(err),
        "float32_rel_error": _finite(err32),
        "error_scale": _finite(scale),
        "rtol_warn": _finite(warn),
        "rtol_fail": _finite(fail),
        "zeroed_fraction": zeroed,
        "nonfinite": nonfinite,
    }
    value = math.inf if err is None or nonfinite else err
    metrics["cancelled"] = cancelled = err32 is not None and err32 > 0.5 and not nonfinite
    status: ItemStatus
    if cancelled:  # float32 has no correct digit either: the float64 value is 0 but rounding
        message = (
            "the float64 gradient is 0 but for rounding (float32 is as far from it): "
            "no precision can match it, so its error is not held against a tolerance"
        )
        return CheckItem(subject=subject, status="pass", metrics=metrics, message=message)
    if value > fail:
        status = "fail"
        message = (
            f"the autocast gradient is {value:.2e} away from float64 (relative), above {fail:.2e}"
            + (
                f"; {zeroed:.0%} of its elements are 0 where float64's are not"
                if zeroed > 0.01
                else ""
            )
        )
    elif value > warn:
        status, message = "warn", f"relative error {value:.2e} above the warning level {warn:.2e}"
    else:
        status, message = "pass", f"relative error {value:.2e} within {warn:.2e}"
    return CheckItem(subject=subject, status=status, metrics=metrics, message=message)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
