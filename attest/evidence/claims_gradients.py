"""The rules of the gradient checks (gradcheck, custom_ops, kinks, gradient_flow,
accumulation, second_order): how each item status and summary count follows from the figures
and the recorded tolerances, as the runners in attest/collection/gradients/ derive them."""

from __future__ import annotations

from attest.evidence.claims import ClaimChecker, maximum, number, recorded_tolerance
from attest.evidence.model import CheckItem, Evidence

__all__ = ["accumulation", "custom_ops", "gradcheck", "gradient_flow", "kinks", "second_order"]


# collection/gradients/gradcheck.py: an operator with no float64 kernel is checked in its
# captured precision (metric checked_dtype) at rtol max(rtol, CAPTURED_PRECISION_RTOL)
_CAPTURED_PRECISION_RTOL = 1e-2


def _gradcheck_tolerance(c: ClaimChecker, item: CheckItem) -> float | None:
    """The rtol this item was judged at: the check's recorded one, loosened to the captured
    precision's for an operator checked without float64 (its own rtol must say exactly so)."""
    recorded = number(c.result.parameters.get("rtol"))
    if recorded is None:
        return c.parameter("rtol")
    dtype = item.metrics.get("checked_dtype")
    expected = (
        max(recorded, _CAPTURED_PRECISION_RTOL) if dtype not in (None, "float64") else recorded
    )
    if "rtol" in item.metrics:
        c.equal(
            item.subject.label(), "rtol", item.metrics["rtol"], expected, "the rtol the check used"
        )
    return expected


def gradcheck(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/gradcheck_items.py: pass iff every case's relative error is within
    rtol (a case also fails on non-finite values or a bad Jacobian slice, in details only: a
    fail is accepted); an identical call takes its operator's verdict."""
    items = c.result.items
    by_id = {i.subject.operator_id: i for i in items}
    for item in items:
        first = item.metrics.get("identical_to_operator")
        original = by_id.get(first) if isinstance(first, int) else None
        if original is not None:
            c.item(item, (original.status,), f"an identical call takes operator {first}'s verdict")
            continue
        if item.status == "pass":
            rtol = _gradcheck_tolerance(c, item)
            error = number(item.metrics.get("max_rel_error"))
            ok = error is not None and rtol is not None and error <= rtol
            c.item(
                item,
                ("pass",) if ok else ("fail",),
                "pass needs max_rel_error <= rtol",
                max_rel_error=item.metrics.get("max_rel_error"),
                rtol=rtol,
            )
    own = [i for i in items if "identical_to_operator" not in i.metrics]
    checked = [i for i in own if i.status in ("pass", "fail")]
    c.summary("operators", len(items), "the items")
    c.summary("checked", len(checked), "the items judged pass or fail")
    c.count("failed", "fail")
    c.summary("max_rel_error", maximum(checked, "max_rel_error"), "the largest item error")


def custom_ops(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/custom_ops.py: a case passes on its first check or on a nearby
    point (recorded in details): the counts are checked, a pass needs its error within rtol
    when the item records both."""
    c.summary(
        "checked_cases",
        sum(1 for i in c.result.items if i.status in ("pass", "fail")),
        "the items judged pass or fail",
    )
    c.count("failed", "fail")


def kinks(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/kinks.py _item: fail iff count, else warn iff parameter_hits."""
    items = c.result.items
    for item in items:
        count, hits = number(item.metrics.get("count")), number(item.metrics.get("parameter_hits"))
        # the scan records both counts: without them nothing was judged to pass
        want = "fail" if count or count is None or hits is None else ("warn" if hits else "pass")
        c.item(
            item,
            (want,),
            "fail iff count > 0, warn iff only parameter_hits",
            count=count,
            parameter_hits=hits,
        )
    c.summary("operators_scanned", len(items), "the items")
    c.count("operators_with_kinks", "fail")
    for name, total in (("total_count", "count"), ("parameter_hits", "parameter_hits")):
        c.summary(
            name, sum(int(number(i.metrics.get(total)) or 0) for i in items), f"the items' {total}"
        )


def gradient_flow(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/flow.py: a parameter passes when frozen, when it feeds only model
    outputs the spec does not select (``reason_kind: unselected_output``: no gradient from F by
    the spec's design), or with a finite gradient and no problem; a non-finite gradient fails
    (whether a missing gradient warns depends on a training-mode trace the evidence does not
    record: not derived)."""
    for item in c.result.items:
        if item.subject.kind != "parameter":
            continue
        m = item.metrics
        if m.get("frozen") is True:
            c.item(item, ("pass",), "a frozen parameter passes", frozen=True)
        elif m.get("reason_kind") == "unselected_output" and m.get("finite") is None:
            c.item(
                item,
                ("pass",),
                "a parameter feeding only unselected outputs passes",
                reason_kind="unselected_output",
            )
        elif m.get("finite") is False:
            c.item(item, ("fail",), "a non-finite gradient fails", finite=False)
        elif item.status == "pass":
            ok = m.get("has_grad") is True and m.get("finite") is True and "reason_kind" not in m
            c.item(
                item,
                ("pass",) if ok else ("fail", "warn"),
                "pass needs a finite gradient",
                has_grad=m.get("has_grad"),
                finite=m.get("finite"),
                reason_kind=m.get("reason_kind"),
            )
    frozen = sum(1 for i in c.result.items if i.metrics.get("frozen") is True)
    c.summary("frozen", frozen, "the frozen parameters")


def accumulation(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/accumulation.py: pass iff max_rel_error <= rtol (a non-finite
    error fails)."""
    for item in c.result.items:
        if item.status in ("not_computed", "error"):
            continue
        rtol = recorded_tolerance(c, item)
        error = number(item.metrics.get("max_rel_error"))
        ok = error is not None and rtol is not None and error <= rtol
        c.item(
            item,
            ("pass",) if ok else ("fail",),
            "pass iff max_rel_error <= rtol",
            max_rel_error=item.metrics.get("max_rel_error"),
            rtol=rtol,
        )
    c.count("failed", "fail")
    c.summary("max_rel_error", maximum(c.result.items, "max_rel_error"), "the largest item error")


# collection/gradients/hvp_steps.py: a step passes within its rounding floor only where the
# floor is at most FLOOR_CAP x rtol, so its error is at most (FLOOR_CAP + 1) x rtol
_FLOOR_CAP = 50.0


def second_order(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/second_order.py: a model direction passes within rtol, within its
    rounding floor (error <= (FLOOR_CAP + 1) x rtol), or at a nearby point when the probe
    point lies on a kink (on_kink: the nearby figures are kept in the item's details, not its
    metrics, so such a pass is not re-derived). A failure deferred to a root cause elsewhere
    becomes a warning (defer_to_root_causes), and operator items are judged on sweeps kept in
    details: a fail or warn is accepted, and the counts are held."""
    items = c.result.items
    for item in items:
        m = item.metrics
        if item.subject.kind != "model" or "direction" not in m or item.status != "pass":
            continue
        rtol = recorded_tolerance(c, item)
        error = number(m.get("max_rel_error"))
        plain = error is not None and rtol is not None and error <= rtol
        floored = (
            m.get("within_floor") is True
            and error is not None
            and rtol is not None
            and error <= (_FLOOR_CAP + 1.0) * rtol
        )
        c.item(
            item,
            ("pass",) if plain or floored or m.get("on_kink") is True else ("fail", "warn"),
            "pass needs max_rel_error <= rtol, within_floor or on_kink",
            max_rel_error=m.get("max_rel_error"),
            rtol=rtol,
            within_floor=m.get("within_floor"),
            on_kink=m.get("on_kink"),
        )
    c.summary("hvp_directions", sum(1 for i in items if i.subject.kind == "model"), "model items")
    c.count("failed", "fail")
    for flag in ("within_floor", "unresolved"):
        c.summary(flag, sum(1 for i in items if i.metrics.get(flag) is True), f"items with {flag}")
