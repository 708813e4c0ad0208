"""The rules of the four training checks (attest/collection/training/): the items whose status
is a plain function of their figures, and the failure counts. Items judged on what the
evidence keeps only in ``details`` or messages (the state a recomputation wrote, the
optimizer state a resume lost, where an example starts to interact) are held by the generic
rules and by the policy's metric rules on the summaries."""

from __future__ import annotations

import math

from attest.evidence.claims import ClaimChecker, number, same
from attest.evidence.model import CheckItem, Evidence

__all__ = ["batch_invariance", "mixed_precision", "recompute", "resume"]


def _failures(c: ClaimChecker) -> None:
    c.count("failed", "fail")


def _compared(c: ClaimChecker, item: CheckItem) -> None:
    """training/tensor_compare.py: bit for bit when rtol is 0, else a finite deviation within
    rtol; the item's rtol is the check's recorded one."""
    m = item.metrics
    rtol = number(m.get("rtol"))
    if "rtol" in c.result.parameters:
        c.equal(
            item.subject.label(),
            "rtol",
            m.get("rtol"),
            c.result.parameters["rtol"],
            "the check's rtol",
        )
    deviation = number(m.get("max_relative_deviation"))
    if rtol == 0.0:
        passed = m.get("bit_exact") is True
    else:
        passed = deviation is not None and rtol is not None and deviation <= rtol
    c.item(
        item,
        ("pass",) if passed else ("fail",),
        "bit for bit at rtol 0, else max_relative_deviation <= rtol",
        bit_exact=m.get("bit_exact"),
        max_relative_deviation=deviation,
        rtol=rtol,
    )


def _tensor_items(c: ClaimChecker) -> None:
    for item in c.result.items:
        if {"bit_exact", "bit_exact_fraction", "rtol"} <= set(item.metrics):
            _compared(c, item)


def recompute(c: ClaimChecker, _evidence: Evidence) -> None:
    """training/recompute.py: the gradient comparison items; failures counted."""
    _tensor_items(c)
    _failures(c)


def resume(c: ClaimChecker, _evidence: Evidence) -> None:
    """training/resume.py: the parameter and gradient comparison items; failures counted."""
    _tensor_items(c)
    _failures(c)


def mixed_precision(c: ClaimChecker, _evidence: Evidence) -> None:
    """training/mixed_precision_grads.py: a parameter's autocast gradient fails above
    rtol_fail, warns above rtol_warn, passes within (or when float32 cancels too); the two
    levels are the recorded factors times the unit roundoff times the item's error_scale."""
    params = c.result.parameters
    unit, warn_factor, fail_factor = (
        number(params.get(k)) for k in ("unit_roundoff", "warn_factor", "fail_factor")
    )
    for item in c.result.items:
        m = item.metrics
        if "grad_rel_error" not in m or "rtol_warn" not in m:
            continue
        scale = number(m.get("error_scale"))
        warn, fail = number(m.get("rtol_warn")), number(m.get("rtol_fail"))
        if None not in (unit, warn_factor, fail_factor, scale):
            assert unit is not None and warn_factor is not None and fail_factor is not None
            assert scale is not None
            label = item.subject.label()
            c.equal(
                label,
                "rtol_warn",
                warn,
                warn_factor * unit * scale,
                "warn_factor x u x error_scale",
            )
            c.equal(
                label,
                "rtol_fail",
                fail,
                fail_factor * unit * scale,
                "fail_factor x u x error_scale",
            )
        if m.get("cancelled") is True:
            c.item(item, ("pass",), "a gradient float32 cancels too is not held", cancelled=True)
            continue
        error = number(m.get("grad_rel_error"))
        value = math.inf if error is None or m.get("nonfinite") else error
        if warn is None or fail is None:
            c.item(item, ("fail",), "no tolerance recorded", rtol_warn=warn, rtol_fail=fail)
            continue
        want = "fail" if value > fail else "warn" if value > warn else "pass"
        c.item(
            item,
            (want,),
            "fail above rtol_fail, warn above rtol_warn",
            grad_rel_error=m.get("grad_rel_error"),
            rtol_warn=warn,
            rtol_fail=fail,
        )
    _failures(c)
    c.count("warned", "warn")


def batch_invariance(c: ClaimChecker, _evidence: Evidence) -> None:
    """training/batch_invariance.py: a batch size passes only with no non-finite value and
    each example within the recorded tolerances of itself alone (a failure is also judged
    per operator, in details: a fail is accepted)."""
    params = c.result.parameters
    for item in c.result.items:
        m = item.metrics
        if item.status != "pass" or "batch_size" not in m:
            continue
        ok = not m.get("nonfinite_values")
        for side, tolerance in (
            ("output", "output_tolerance"),
            ("input_grad", "input_grad_tolerance"),
        ):
            deviation = m.get(f"{side}_max_deviation")
            if tolerance in m and tolerance in params:
                c.equal(
                    item.subject.label(),
                    tolerance,
                    m[tolerance],
                    params[tolerance],
                    "the check's recorded tolerance",
                )
            if deviation is not None:
                d, t = number(deviation), number(m.get(tolerance))
                ok = ok and d is not None and t is not None and (d <= t or same(d, t))
        c.item(
            item,
            ("pass",) if ok else ("fail",),
            "pass needs finite values within tolerance",
            nonfinite_values=m.get("nonfinite_values"),
            output_max_deviation=m.get("output_max_deviation"),
            input_grad_max_deviation=m.get("input_grad_max_deviation"),
        )
    _failures(c)
