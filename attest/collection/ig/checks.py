"""The integrated-gradients sanity checks (``ig_*``); see docs/ig.md.

``run(ctx)`` computes IG on the probe inputs (adaptive steps, the spec's baseline and
target, the deployed precision, the spec's thread count), group of inputs by group of inputs,
and reads six checks off it and off a few extra runs; the groups and the extra runs are the
pieces of :mod:`attest.collection.ig.split` (``attest collect --workers`` spreads them):

- ``ig_completeness``: per input, ``|sum(attr) - (F(x) - F(b))| / |F(x) - F(b)|`` in float64;
- ``ig_convergence``: the error curve as steps double, and the steps needed;
- ``ig_baseline``: how neutral the baseline is (softmax entropy, target probability);
- ``ig_monotonicity``: F and the integrand along the path: jumps, spikes, sign flips;
- ``ig_randomization``: Adebayo et al.'s cascading parameter randomization, Spearman per layer;
- ``ig_determinism``: attributions bit-exact across repeats at fixed threads.

Each item names its input (and, for non-finite values, the first tensor index). The
attributions are stored, compressed and bounded, in ``ctx.ig.attributions`` for
the orchestrator to copy into ``Evidence.attributions``. Monotonicity and Spearman live in
:mod:`attest.collection.ig.analysis`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CheckSettings, CollectContext, spec_threads
from attest.collection.ig.attribution import (
    BASELINES,
    IGResult,
    encode_attributions,
)
from attest.collection.ig.baselines import call_baseline
from attest.collection.ig.named import named_attributions
from attest.collection.ig.neutrality import (
    head_judgements,
    judge_neutrality,
    target_probability_limit,
)
from attest.collection.ig.path_checks import (
    finite_or_none,
    first_nonfinite,
    input_subject,
    monotonicity,
    randomization,
    status_counts,
    summary_max,
)
from attest.collection.ig.readings import read_output, target_reading
from attest.collection.ig.split import (
    effective_tolerance,
    merge_results,
    pieces,
    prepare,
    run_piece,
)
from attest.collection.ig.stall import json_safe, stall_text
from attest.collection.nonfinite import nonfinite
from attest.collection.pieces import Split, run_split
from attest.evidence.model import IG_CHECKS, CheckId, CheckItem, CheckResult, ItemStatus, Metric

__all__ = [
    "IG_CHECKS",
    "effective_tolerance",
    "join",
    "pieces",
    "run",
    "run_piece",
    "target_probability_limit",
]


def _error_results(reason: str, checks: tuple[CheckId, ...] = IG_CHECKS) -> list[CheckResult]:
    return [CheckResult(check=c, status="error", reason=reason) for c in checks]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run(ctx: CollectContext) -> list[CheckResult]:
    """Every ``ig_*`` check; a check that raises becomes an ``error`` result, never a crash.
    Computed as pieces (:mod:`attest.collection.ig.split`), here one after another."""
    return run_split(ctx, Split(pieces, run_piece, join))


def join(ctx: CollectContext, outputs: dict[str, Any]) -> list[CheckResult]:
    """The six results from the pieces' outputs (the input groups, the randomization stages,
    the repeated batch), and the attributions in ``ctx.ig.attributions``."""
    spec = ctx.spec
    groups = [v for k, v in outputs.items() if k.startswith("inputs/")]
    failed = next((g["error"] for g in groups if g is not None and "error" in g), None)
    if failed is not None:  # the model raised: every IG check says where, none crashes
        return _error_results(f"integrated gradients could not be computed: {failed}")
    prepared = prepare(ctx)
    if isinstance(prepared, str):
        return [CheckResult(check=c, status="not_computed", reason=prepared) for c in IG_CHECKS]
    settings, inputs = prepared.settings, prepared.inputs
    main = merge_results([g["result"] for g in groups])
    base_params: dict[str, Any] = {
        "method": settings.ig_method,
        "baseline": spec.baseline,
        "target": spec.target,
        "precision": spec.precision,
        "threads": spec.threads,
        "seed": settings.seed,
        "inputs_analysed": int(inputs.shape[0]),
        "input_groups": len(groups),
        "chunk_size": main.chunk_size,
        "per_sample_bytes": main.per_sample_bytes,
        "memory_budget_bytes": main.memory_budget_bytes,
        "model_mode": {k: v for k, v in main.model_info.items() if k != "module_kinds"},
    }
    say: Callable[[str], None] = ctx.progress if ctx.progress is not None else (lambda _t: None)
    duration = sum(g["duration_s"] for g in groups)
    results = [
        _completeness(main, settings, base_params, duration),
        _convergence(main, settings, base_params, duration),
    ]
    stages = [v for k, v in outputs.items() if k.startswith("randomization/")]
    with spec_threads(spec.threads):
        say("integrated gradients: ig_baseline")
        model = ctx.fresh_model()
        results.append(
            _guarded("ig_baseline", lambda: _baseline(ctx, model, inputs, main, base_params))
        )
        say("integrated gradients: ig_monotonicity")
        results.append(_guarded("ig_monotonicity", lambda: monotonicity(ctx, main, base_params)))
    results.append(
        _from_pieces("ig_randomization", stages, lambda: randomization(ctx, stages, base_params))
    )
    repeats = outputs["repeats"]
    results.append(
        _from_pieces("ig_determinism", [repeats], lambda: _with(repeats["result"], base_params))
    )
    shown = main.attributions.cpu().numpy()
    shown_inputs = inputs.detach().cpu().to(torch.float64).numpy()
    named: dict[str, Any] = {}
    if spec.call is not None and spec.call.flat:  # split back into the named inputs
        shown, shown_inputs, named = named_attributions(spec.call, main.attributions, inputs)
    ctx.ig.attributions = encode_attributions(
        shown,
        shown_inputs,
        max_bytes=settings.ig_attribution_max_bytes,
        extra={
            **named,
            "method": main.method,
            "baseline": spec.baseline,
            "target_classes": None if main.target_classes is None else main.target_classes.tolist(),
            "steps_used": main.steps_used.tolist(),
        },
    )
    return results


def _with(result: CheckResult, params: dict[str, Any]) -> CheckResult:
    """``result`` with the main computation's parameters first."""
    return result.model_copy(update={"parameters": {**params, **result.parameters}})


def _from_pieces(check: str, outputs: list[Any], compute: Callable[[], CheckResult]) -> CheckResult:
    """A check read off pieces' outputs: ``error`` naming the first piece that raised. Its
    ``duration_s`` is the pieces' time (wherever they ran) plus the time to read them."""
    failed = next((o["error"] for o in outputs if isinstance(o, dict) and "error" in o), None)
    if failed is not None:
        return CheckResult(check=check, status="error", reason=failed)  # type: ignore[arg-type]
    result = _guarded(check, compute)
    pieces = sum(float(o.get("duration_s", 0.0)) for o in outputs if isinstance(o, dict))
    result.duration_s = (result.duration_s or 0.0) + pieces
    return result


def _guarded(check: str, compute: Callable[[], CheckResult]) -> CheckResult:
    started = time.perf_counter()
    try:
        result = compute()
    except Exception as exc:
        return CheckResult(check=check, status="error", reason=_describe(exc))  # type: ignore[arg-type]
    result.duration_s = time.perf_counter() - started
    return result


# ----------------------------------------------------------------------------- completeness


def _error_curve(
    main: IGResult, i: int
) -> tuple[list[int], list[float | None], list[float | None]]:
    """Input ``i``'s step counts, completeness errors and attribution changes per level."""
    steps, errors, changes = [], [], []
    for level in main.error_curve:
        if i in level["inputs"]:
            k = level["inputs"].index(i)
            steps.append(level["steps"])
            errors.append(level["rel_error"][k])
            changes.append(level["attribution_change"][k])
    return steps, errors, changes


def _near_miss(errors: list[float | None], tolerance: float, settings: CheckSettings) -> bool:
    """Over the tolerance at the step cap, but by at most ``ig_near_miss_factor`` and still
    falling (its largest value on the curve is at least ``ig_near_miss_min_reduction`` times
    the final one): the quadrature needs more steps, the model is not at fault. A jump along the
    path, a severed gradient or a NaN keeps the error where it started."""
    finite = [e for e in errors if e is not None]
    if len(finite) < 2 or len(finite) != len(errors):
        return False
    final = finite[-1]
    return (
        final <= settings.ig_near_miss_factor * tolerance
        and max(finite) >= settings.ig_near_miss_min_reduction * final
    )


def _completeness(
    main: IGResult, settings: CheckSettings, params: dict[str, Any], duration: float
) -> CheckResult:
    tolerance = settings.ig_tolerance
    attributions = main.attributions.cpu().numpy()
    items = []
    for i in range(len(main.f_input)):
        bad = first_nonfinite(attributions[i])
        rel = main.completeness_rel_error[i]
        metrics: dict[str, Metric] = {
            "completeness_rel_error": finite_or_none(rel),
            "completeness_abs_error": finite_or_none(main.completeness_abs_error[i]),
            "f_input": finite_or_none(main.f_input[i]),
            "f_baseline": finite_or_none(main.f_baseline[i]),
            "attribution_sum": finite_or_none(main.attribution_sum[i]),
            "steps_used": int(main.steps_used[i]),
            "nonfinite_attributions": int((~np.isfinite(attributions[i])).sum()),
        }
        status: ItemStatus
        # both sides of sum(attributions) = F(x) - F(b), asked before the error is trusted
        sides = nonfinite(
            {"F(x)": main.f_input[i], "F(b)": main.f_baseline[i], "attributions": attributions[i]}
        )
        if sides is not None:
            status, message = "fail", f"completeness cannot hold: {sides.describe()}"
            if bad is not None:
                message = f"non-finite attribution at index {tuple(bad)}: {sides.describe()}"
        elif (
            np.isfinite(rel)
            and rel > tolerance
            and _near_miss(_error_curve(main, i)[1], tolerance, settings)
        ):
            status = "warn"
            message = (
                f"sum of attributions misses F(x) - F(b) by {rel:.3g} relative (tolerance "
                f"{tolerance:g}) at the step cap, still falling: raise ig_max_steps"
            )
        elif not np.isfinite(rel) or rel > tolerance:
            status = "fail"
            message = f"sum of attributions misses F(x) - F(b) by {rel:.3g} relative (tolerance {tolerance:g})"
            stopped = stall_text(main.stalls[i] if main.stalls else None, settings.ig_max_steps)
            if stopped:
                message += f"; {stopped}"
        else:
            status, message = "pass", f"completeness error {rel:.3g} relative"
        items.append(
            CheckItem(
                subject=input_subject(i, bad), status=status, metrics=metrics, message=message
            )
        )
    return CheckResult(
        check="ig_completeness",
        status="computed",
        parameters={
            **params,
            "tolerance": tolerance,
            "near_miss_factor": settings.ig_near_miss_factor,
            "near_miss_min_reduction": settings.ig_near_miss_min_reduction,
            "error": "|sum(attr) - (F(x) - F(b))| / |F(x) - F(b)|",
        },
        summary={
            "max_completeness_rel_error": summary_max(items, "completeness_rel_error"),
            **status_counts(items),
        },
        items=items,
        duration_s=duration,
    )


# ----------------------------------------------------------------------------- convergence


def _convergence(
    main: IGResult, settings: CheckSettings, params: dict[str, Any], duration: float
) -> CheckResult:
    items = []
    for i in range(len(main.f_input)):
        steps, errors, changes = _error_curve(main, i)
        finite = [e for e in errors if e is not None]
        converged = bool(main.converged[i])
        metrics: dict[str, Metric] = {
            "converged": converged,
            "steps_used": int(main.steps_used[i]),
            "evaluations": int(main.evaluations[i]),
            "initial_rel_error": errors[0] if errors else None,
            "final_rel_error": errors[-1] if errors else None,
            "error_reduction": (finite[0] / finite[-1])
            if len(finite) > 1 and finite[-1] > 0
            else None,
            "final_attribution_change": changes[-1] if changes else None,
        }
        status: ItemStatus
        if converged:
            status = "pass"
            message = (
                f"completeness error under {settings.ig_tolerance:g} at {main.steps_used[i]} steps"
            )
        elif _near_miss(errors, settings.ig_tolerance, settings):
            status = "warn"
            message = (
                f"completeness error {errors[-1]:.3g} at the cap of {settings.ig_max_steps} steps, "
                f"still falling as steps double: raise ig_max_steps"
            )
        else:
            status = "fail"
            message = stall_text(
                main.stalls[i] if main.stalls else None, settings.ig_max_steps
            ) or (
                f"completeness error still {errors[-1] if errors else None} at {main.steps_used[i]} steps "
                f"(max {settings.ig_max_steps}) and not falling as steps double: the path may have a "
                "jump the quadrature cannot integrate (see ig_monotonicity)"
            )
        stall = main.stalls[i] if main.stalls else None
        metrics["stopped_early"] = stall is not None
        items.append(
            CheckItem(
                subject=input_subject(i),
                status=status,
                metrics=metrics,
                message=message,
                details={
                    "steps": steps,
                    "rel_error": errors,
                    "attribution_change": changes,
                    **({"stall": json_safe(stall)} if stall is not None else {}),
                },
            )
        )
    return CheckResult(
        check="ig_convergence",
        status="computed",
        parameters={
            **params,
            "initial_steps": settings.ig_steps,
            "max_steps": settings.ig_max_steps,
            "tolerance": settings.ig_tolerance,
            "refinement": "adaptive: nested composite Simpson panels, the largest-local-error "
            "ones bisected per round (two new path samples each); fixed rules: "
            "cells doubled (left, right and trapezoid re-use earlier evaluations)",
        },
        summary={
            "max_steps_used": int(main.steps_used.max()),
            "total_evaluations": int(main.evaluations.sum()),
            **status_counts(items),
        },
        items=items,
        duration_s=duration,
    )


# ----------------------------------------------------------------------------- baseline


def _baseline(
    ctx: CollectContext,
    model: torch.nn.Module,
    inputs: torch.Tensor,
    main: IGResult,
    params: dict[str, Any],
) -> CheckResult:
    settings = ctx.settings
    classes = None if main.target_classes is None else torch.from_numpy(main.target_classes)
    read_as = target_reading(ctx.spec.labels)  # softmax, a label's sigmoid, or a value
    call = ctx.spec.call
    computed = call is not None and call.computes_f
    if computed:  # the output's column 0 is F itself (heads, a target function)
        classes = None

    def output(x: torch.Tensor) -> torch.Tensor:
        out = model_output_tensor(model(x))
        return out[:, :1] if computed else out

    chosen_input = main.baseline.to(inputs.dtype)
    out_b: torch.Tensor | None = None
    readings = {}
    with torch.no_grad():
        out_x = output(inputs)
        for kind in BASELINES:
            start = call_baseline(call, kind, inputs, seed=settings.seed).to(inputs.dtype)
            out = output(start)
            if out_b is None and torch.equal(start, chosen_input):
                out_b = out  # the path's own baseline is one of these: one forward less
            readings[kind] = read_output(out, out_x, classes, read_as)[0]
        if out_b is None:
            out_b = output(chosen_input)
        chosen, count = read_output(out_b, out_x, classes, read_as)
    if computed and call is not None and call.heads:  # each head judged as the output it is
        with torch.no_grad():
            rows = call.unpack(inputs)[1]
            assert rows is not None
            judged = head_judgements(
                call,
                settings,
                model_output_tensor(model(main.baseline.to(inputs.dtype))),
                model_output_tensor(model(inputs)),
                rows,
            )
    else:
        judged = [judge_neutrality(settings, chosen, i, count) for i in range(inputs.shape[0])]
    for i, (_, _, metrics) in enumerate(judged):
        # a NaN probability compares False with both limits: ask about the outputs first
        sides = nonfinite({"output at the baseline": out_b[i], "output at the input": out_x[i]})
        if sides is not None:
            judged[i] = (
                "fail",
                f"baseline neutrality cannot be judged: {sides.describe()}",
                metrics,
            )
    items = [
        CheckItem(subject=input_subject(i), status=status, metrics=metrics, message=message)
        for i, (status, message, metrics) in enumerate(judged)
    ]
    summary: dict[str, Metric] = {**status_counts(items), "classifier": bool(chosen["classifier"])}
    for kind, reading in readings.items():
        for key in (
            "baseline_entropy_ratio",
            "baseline_target_probability",
            "baseline_output_ratio",
        ):
            values = reading.get(key)
            if isinstance(values, np.ndarray) and values.size:
                summary[f"{kind}_{key}_mean"] = finite_or_none(float(np.mean(values)))
    return CheckResult(
        check="ig_baseline",
        status="computed",
        parameters={
            **params,
            "max_target_probability": settings.ig_baseline_max_target_probability,
            "target_probability_rule": "fail when p_target(baseline) >= 1/C + share * (1 - 1/C), "
            "share = max_target_probability",
            "min_entropy_ratio": settings.ig_baseline_min_entropy_ratio,
            "max_output_ratio": settings.ig_baseline_max_output_ratio,
            "baselines_compared": list(BASELINES),
        },
        summary=summary,
        items=items,
    )
