"""The ``determinism``, ``fidelity`` and ``thread_sensitivity`` results, built from a Profile.

The profiler measures; this module only turns its measurements into
:class:`~attest.evidence.model.CheckResult` objects (one item per operator plus a model item) using
the formulas of ``metrics.py``. ``numerics`` lives in ``numerics.py``.
"""

from __future__ import annotations

import math
from typing import Any

from attest.collection.capture.run import ModelFailure
from attest.collection.context import CollectContext
from attest.collection.profile.measures import OpMeasure, Profile
from attest.collection.profile.numerics import run_numerics
from attest.collection.profile.op_metrics import UNIT_ROUNDOFF, fidelity_pct, stability_score
from attest.evidence.model import CheckId, CheckItem, CheckResult, ItemStatus, Metric, Subject

__all__ = [
    "build_results",
    "determinism_figures",
    "determinism_result",
    "fidelity_figures",
    "fidelity_result",
    "thread_result",
]

DEFAULT_FIDELITY_PASS_PCT = 99.9


def _failed_run(
    check: CheckId, parameters: dict[str, Any], *runs: tuple[str, ModelFailure | None]
) -> CheckResult | None:
    """An ``error`` result for the first of ``runs`` (label, failure) whose model raised; None
    when none did. The label, if any, prefixes the reason (which run it was)."""
    for label, failure in runs:
        if failure is not None:
            reason = f"{label}: {failure.describe()}" if label else failure.describe()
            return CheckResult(check=check, status="error", reason=reason, parameters=parameters)
    return None


def _finite_or_none(value: float | None) -> float | None:
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return value


def _op_subject(m: OpMeasure) -> Subject:
    return Subject(kind="operator", operator_id=m.id, op=m.op, module=m.module)


UNINITIALIZED_NOTE = (
    "uninitialized memory (an allocation such as empty_like, or a view of one): its bytes are "
    "whatever the allocator held; the operator that fills it is measured instead"
)


def determinism_figures(m: OpMeasure, precision: str) -> dict[str, Metric]:
    """bit_exact_rate, stability_score and max_relative_deviation of one operator (None
    when fewer than two runs were compared)."""
    if m.runs_compared == 0 or m.uninitialized:
        return {"bit_exact_rate": None, "stability_score": None, "max_relative_deviation": None}
    # Run 0 is the reference and equals itself; the rate is over all `repeats` runs.
    runs = m.runs_compared + 1
    exact = m.runs_exact + 1
    rate = exact / runs
    bit_exact = m.runs_exact == m.runs_compared
    return {
        "bit_exact_rate": rate,
        "stability_score": stability_score(
            m.max_deviation, bit_exact=bit_exact, precision=precision
        ),
        "max_relative_deviation": 0.0 if bit_exact else _finite_or_none(m.max_deviation),
    }


def fidelity_figures(m: OpMeasure) -> dict[str, Metric]:
    """Accumulated and local fidelity of one operator's outputs and output gradients."""
    if m.uninitialized:
        return dict.fromkeys(
            (
                "fidelity_pct",
                "output_fidelity_pct",
                "grad_fidelity_pct",
                "local_fidelity_pct",
                "local_output_fidelity_pct",
                "local_grad_fidelity_pct",
            )
        )
    out = fidelity_pct(m.out_err)
    grad = fidelity_pct(m.grad_err)
    local_out = fidelity_pct(m.local_out_err)
    local_grad = fidelity_pct(m.local_grad_err)
    acc = [v for v in (out, grad) if v is not None]
    loc = [v for v in (local_out, local_grad) if v is not None]
    return {
        "fidelity_pct": min(acc) if acc else None,
        "output_fidelity_pct": out,
        "grad_fidelity_pct": grad,
        "local_fidelity_pct": min(loc) if loc else None,
        "local_output_fidelity_pct": local_out,
        "local_grad_fidelity_pct": local_grad,
    }


def _alignment_blocked(ctx: CollectContext) -> str | None:
    if ctx.topology_ok:
        return None
    return ctx.topology_reason or "topology failed: operators cannot be aligned across probe inputs"


def determinism_result(ctx: CollectContext, profile: Profile) -> CheckResult:
    """``determinism``: per-operator bit-exact rate and stability score over the repeats."""
    repeats = ctx.spec.repeats
    parameters: dict[str, Any] = {
        "repeats": repeats,
        "seed": ctx.settings.seed,
        "seed_per_run": "the generator is reset to the seed before every run",
        "comparison": "raw bytes of every output and computed gradient against run 0",
        "precision": profile.precision,
        "unit_roundoff": UNIT_ROUNDOFF[profile.precision],
        "stability_formula": "100*(1-min(1,log10(1+d/u)/log10(1+1/u))); 100 iff bit-exact",
    }
    failed = _failed_run("determinism", parameters, ("", profile.failure))
    if failed is not None:
        return failed
    if repeats < 2:
        return CheckResult(
            check="determinism",
            status="not_computed",
            reason="repeats is 1: there is no second run to compare; set repeats >= 2 in the spec",
            parameters=parameters,
        )
    blocked = _alignment_blocked(ctx)
    compared = profile.runs - 1
    model_rate = (profile.model_exact_runs + 1) / profile.runs
    random_ops = [m for m in profile.ops if m.random]
    items: list[CheckItem] = [
        CheckItem(
            subject=Subject(kind="model"),
            status="pass" if profile.model_exact_runs == compared and not random_ops else "fail",
            metrics={
                "bit_exact_rate": model_rate,
                "runs": profile.runs,
                "sequence_changed_runs": profile.sequence_changed_runs,
                "random_operators": len(random_ops),
            },
            message=(
                f"{len(random_ops)} random operator(s) in the forward pass (first: "
                f"{random_ops[0].op} @ {random_ops[0].module or '<root>'}); a fixed seed hides them"
                if random_ops
                else ""
            ),
        )
    ]
    scores: list[float] = []
    rates: list[float] = []
    for m in profile.ops:
        if blocked:
            items.append(CheckItem(subject=_op_subject(m), status="not_computed", message=blocked))
            continue
        if m.uninitialized:
            items.append(
                CheckItem(
                    subject=_op_subject(m),
                    status="not_computed",
                    metrics={"skipped": True},
                    message=UNINITIALIZED_NOTE,
                )
            )
            continue
        figures = determinism_figures(m, profile.precision)
        figures["random_op"] = m.random
        figures["nondeterminism_origin"] = m.origin_runs > 0
        rate = figures["bit_exact_rate"]
        score = figures["stability_score"]
        if isinstance(rate, float):
            rates.append(rate)
        if isinstance(score, float):
            scores.append(score)
        status: ItemStatus = "pass" if rate == 1.0 and not m.random else "fail"
        message = ""
        if m.random:
            message = "random operator: its output depends on the generator state (hidden here by the fixed seed)"
        elif rate != 1.0:
            message = (
                f"output or gradient bytes differ in {m.runs_compared - m.runs_exact} of "
                f"{m.runs_compared} repeated runs"
                + (
                    "; the difference starts here"
                    if m.origin_runs
                    else "; inherited from another operator"
                )
                + (f"; {m.repeat_nonfinite}" if m.repeat_nonfinite else "")
            )
        items.append(
            CheckItem(subject=_op_subject(m), status=status, metrics=figures, message=message)
        )
    summary: dict[str, Metric] = {
        "bit_exact_reproducibility": model_rate,
        "runs": profile.runs,
        "operators": len(profile.ops),
        "nondeterministic_operators": sum(1 for r in rates if r < 1.0),
        "origin_operators": sum(1 for m in profile.ops if m.origin_runs),
        "first_origin_operator": next((m.id for m in profile.ops if m.origin_runs), None),
        "first_origin_module": next((m.module for m in profile.ops if m.origin_runs), None),
        "random_operators": len(random_ops),
        "min_bit_exact_rate": min(rates) if rates else None,
        "min_stability_score": min(scores) if scores else None,
        "sequence_changed_runs": profile.sequence_changed_runs,
    }
    return CheckResult(
        check="determinism",
        status="computed",
        reason=blocked,
        parameters=parameters,
        summary=summary,
        items=items,
    )


def fidelity_result(ctx: CollectContext, profile: Profile) -> CheckResult:
    """``fidelity``: accumulated and local fidelity per operator against a float64 run."""
    threshold = float(ctx.settings.extra.get("fidelity_pass_pct", DEFAULT_FIDELITY_PASS_PCT))
    parameters: dict[str, Any] = {
        "reference": "float64 run of the same model on the same inputs, same target classes",
        "precision": profile.precision,
        "accumulated": "100*(1-min(1,||g-g64||/||g64||)) on outputs and output gradients",
        "local": "operator (and each of its backward calls) re-run alone in the deployed precision on float64 inputs cast down",
        "pass_threshold_pct": threshold,
    }
    failed = _failed_run(
        "fidelity", parameters, ("", profile.failure), ("float64 run", profile.float64_failure)
    )
    if failed is not None:
        return failed
    blocked = _alignment_blocked(ctx)
    items: list[CheckItem] = []
    acc: list[tuple[float, OpMeasure]] = []
    loc: list[tuple[float, OpMeasure]] = []
    for m in profile.ops:
        if blocked:
            items.append(CheckItem(subject=_op_subject(m), status="not_computed", message=blocked))
            continue
        figures = fidelity_figures(m)
        f, lf = figures["fidelity_pct"], figures["local_fidelity_pct"]
        if isinstance(f, float):
            acc.append((f, m))
        if isinstance(lf, float):
            loc.append((lf, m))
        if m.nonfinite is not None:  # one side alone NaN or infinite: no fidelity at all
            items.append(
                CheckItem(
                    subject=_op_subject(m),
                    status="fail",
                    metrics=figures,
                    message=f"the deployed-precision run and the float64 run disagree on "
                    f"where values are finite, {m.nonfinite}",
                )
            )
            continue
        if f is None and lf is None:
            reason = _fidelity_gap(m)
            items.append(
                CheckItem(
                    subject=_op_subject(m), status="not_computed", metrics=figures, message=reason
                )
            )
            continue
        worst = min(v for v in (f, lf) if isinstance(v, float))
        status: ItemStatus = "pass" if worst >= threshold else "warn"
        notes = [n for n in (m.local_out_failed, m.local_grad_failed) if n]
        items.append(
            CheckItem(
                subject=_op_subject(m), status=status, metrics=figures, message="; ".join(notes)
            )
        )
    worst_acc = min(acc, key=lambda p: p[0]) if acc else None
    worst_loc = min(loc, key=lambda p: p[0]) if loc else None
    summary: dict[str, Metric] = {
        "operators": len(profile.ops),
        "operators_measured": len(acc),
        "min_fidelity_pct": worst_acc[0] if worst_acc else None,
        "min_fidelity_operator": worst_acc[1].id if worst_acc else None,
        "min_local_fidelity_pct": worst_loc[0] if worst_loc else None,
        "min_local_fidelity_operator": worst_loc[1].id if worst_loc else None,
        "min_local_fidelity_module": worst_loc[1].module if worst_loc else None,
        "unaligned_operators": profile.float64_unaligned_ops,
    }
    return CheckResult(
        check="fidelity",
        status="computed",
        reason=blocked,
        parameters=parameters,
        summary=summary,
        items=items,
    )


def _fidelity_gap(m: OpMeasure) -> str:
    if not m.float64_aligned:
        return "no counterpart in the float64 run (the operator sequence differs there)"
    if not any(dtype.startswith(("float", "bfloat", "complex")) for dtype in m.output_dtypes):
        return "no floating-point output"
    return (
        m.local_out_failed or m.local_grad_failed or "non-finite values: relative error undefined"
    )


def thread_result(ctx: CollectContext, profile: Profile) -> CheckResult:
    """``thread_sensitivity``: which operators' outputs or gradients change with thread count."""
    parameters: dict[str, Any] = {
        "threads": list(profile.thread_counts) if profile.thread_counts else None,
        "comparison": "raw bytes of every output and computed gradient against run 0",
    }
    failed = _failed_run(
        "thread_sensitivity",
        parameters,
        ("", profile.failure),
        ("run at other thread count", profile.thread_failure),
    )
    if failed is not None:
        return failed
    blocked = _alignment_blocked(ctx)
    changed = [m for m in profile.ops if m.thread_changed]
    items: list[CheckItem] = [
        CheckItem(
            subject=Subject(kind="model"),
            status="warn" if profile.thread_model_changed else "pass",
            metrics={
                "changed": bool(profile.thread_model_changed),
                "changed_operators": len(changed),
            },
            message=(
                f"outputs or gradients change between {profile.thread_counts[0]} and "
                f"{profile.thread_counts[1]} threads; deploy with the certified thread count"
                if profile.thread_model_changed and profile.thread_counts
                else ""
            ),
        )
    ]
    for m in profile.ops:
        if blocked:
            items.append(CheckItem(subject=_op_subject(m), status="not_computed", message=blocked))
            continue
        if m.thread_changed is None:
            continue
        items.append(
            CheckItem(
                subject=_op_subject(m),
                status="warn" if m.thread_changed else "pass",
                metrics={
                    "changed": bool(m.thread_changed),
                    "max_relative_deviation": _finite_or_none(m.thread_deviation),
                },
            )
        )
    summary: dict[str, Metric] = {
        "changed_operators": len(changed),
        "model_changed": profile.thread_model_changed,
        "first_changed_operator": changed[0].id if changed else None,
        "first_changed_module": changed[0].module if changed else None,
    }
    return CheckResult(
        check="thread_sensitivity",
        status="computed",
        reason=blocked,
        parameters=parameters,
        summary=summary,
        items=items,
    )


def build_results(ctx: CollectContext, profile: Profile) -> list[CheckResult]:
    """The four results of the profiler's runner, in a fixed order."""
    return [
        determinism_result(ctx, profile),
        fidelity_result(ctx, profile),
        run_numerics(ctx, profile),
        thread_result(ctx, profile),
    ]
