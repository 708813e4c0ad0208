"""The integrated-gradients sanity checks (DESIGN.md section 5, ``ig_*``); see docs/ig.md.

``run(ctx)`` computes IG once on the probe inputs (adaptive steps, the spec's baseline and
target, the deployed precision, the spec's thread count) and reads six checks off it and
off a few extra runs:

- ``ig_completeness``: per input, ``|sum(attr) - (F(x) - F(b))| / |F(x) - F(b)|`` in float64;
- ``ig_convergence``: the error curve as steps double, and the steps needed;
- ``ig_baseline``: how neutral the baseline is (softmax entropy, target probability);
- ``ig_monotonicity``: F and the integrand along the path: jumps, spikes, sign flips;
- ``ig_randomization``: Adebayo et al.'s cascading parameter randomization, Spearman per layer;
- ``ig_determinism``: attributions bit-exact across repeats at fixed threads.

Each item names its input (and, for non-finite values, the first tensor index). The
attributions are stored, compressed and bounded, in ``ctx.extras["ig_attributions"]`` for
the orchestrator to copy into ``Evidence.attributions``. Monotonicity and Spearman live in
:mod:`attest.collect._ig_analysis`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from attest.collect._ig_analysis import (
    baseline_neutrality,
    cascade_layers,
    path_behaviour,
    randomize_layer,
    spearman,
)
from attest.collect.context import CollectContext
from attest.collect.ig import (
    BASELINES,
    IGResult,
    encode_attributions,
    integrated_gradients,
    make_baseline,
)
from attest.evidence import CheckItem, CheckResult, ItemStatus, Metric, Subject

__all__ = ["IG_CHECKS", "run"]

IG_CHECKS: tuple[str, ...] = (
    "ig_completeness",
    "ig_convergence",
    "ig_baseline",
    "ig_monotonicity",
    "ig_randomization",
    "ig_determinism",
)


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _first_nonfinite(array: np.ndarray) -> list[int] | None:
    bad = np.argwhere(~np.isfinite(array))
    return [int(v) for v in bad[0]] if bad.size else None


@contextmanager
def _threads(count: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(count)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _error_results(reason: str, checks: tuple[str, ...] = IG_CHECKS) -> list[CheckResult]:
    return [CheckResult(check=c, status="error", reason=reason) for c in checks]  # type: ignore[arg-type]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run(ctx: CollectContext) -> list[CheckResult]:
    """Every ``ig_*`` check; a check that raises becomes an ``error`` result, never a crash."""
    spec, settings = ctx.spec, ctx.settings
    started = time.perf_counter()
    inputs = ctx.inputs()
    labels = spec.labels
    if settings.ig_max_inputs is not None:
        inputs = inputs[: settings.ig_max_inputs]
        labels = None if labels is None else labels[: settings.ig_max_inputs]
    if spec.target == "label" and labels is None:
        return [
            CheckResult(
                check=c,  # type: ignore[arg-type]
                status="not_computed",
                reason="target is 'label' but the probe has no 'target' tensor",
            )
            for c in IG_CHECKS
        ]
    base_params: dict[str, Any] = {
        "method": settings.ig_method,
        "baseline": spec.baseline,
        "target": spec.target,
        "precision": spec.precision,
        "threads": spec.threads,
        "seed": settings.seed,
        "inputs_analysed": int(inputs.shape[0]),
    }
    with _threads(spec.threads):
        try:
            model = ctx.fresh_model()
            baseline = make_baseline(spec.baseline, inputs, seed=settings.seed)
            main = integrated_gradients(
                model,
                inputs,
                target=spec.target,
                labels=labels,
                baseline=baseline,
                method=settings.ig_method,
                steps=settings.ig_steps,
                tolerance=settings.ig_tolerance,
                max_steps=settings.ig_max_steps,
                memory_budget_bytes=settings.ig_memory_budget_bytes,
            )
        except Exception as exc:  # the model raised: every IG check says where, none crashes
            return _error_results(f"integrated gradients could not be computed: {_describe(exc)}")
        base_params.update(
            {
                "chunk_size": main.chunk_size,
                "per_sample_bytes": main.per_sample_bytes,
                "memory_budget_bytes": main.memory_budget_bytes,
                "model_mode": {k: v for k, v in main.model_info.items() if k != "module_kinds"},
            }
        )
        duration = time.perf_counter() - started
        results = [
            _completeness(main, settings.ig_tolerance, base_params, duration),
            _convergence(main, settings, base_params, duration),
        ]
        steps = (
            ("ig_baseline", lambda: _baseline(ctx, model, inputs, main, base_params)),
            ("ig_monotonicity", lambda: _monotonicity(ctx, main, base_params)),
            ("ig_randomization", lambda: _randomization(ctx, inputs, baseline, main, base_params)),
            (
                "ig_determinism",
                lambda: _determinism(ctx, model, inputs, baseline, main, base_params),
            ),
        )
        for check, compute in steps:
            results.append(_guarded(check, compute))
    ctx.extras["ig_attributions"] = encode_attributions(
        main.attributions.cpu().numpy(),
        inputs.detach().cpu().to(torch.float64).numpy(),
        max_bytes=settings.ig_attribution_max_bytes,
        extra={
            "method": main.method,
            "baseline": spec.baseline,
            "target_classes": None if main.target_classes is None else main.target_classes.tolist(),
            "steps_used": main.steps_used.tolist(),
        },
    )
    return results


def _guarded(check: str, compute: Callable[[], CheckResult]) -> CheckResult:
    started = time.perf_counter()
    try:
        result = compute()
    except Exception as exc:
        return CheckResult(check=check, status="error", reason=_describe(exc))  # type: ignore[arg-type]
    result.duration_s = time.perf_counter() - started
    return result


def _input_subject(i: int, indices: list[int] | None = None) -> Subject:
    return Subject(kind="input", input_index=i, indices=indices)


def _summary_max(items: list[CheckItem], metric: str) -> Metric:
    values = [
        v
        for i in items
        if isinstance(v := i.metrics.get(metric), int | float) and not isinstance(v, bool)
    ]
    return max(values) if values else None


def _counts(items: list[CheckItem]) -> dict[str, Metric]:
    return {f"items_{s}": sum(1 for i in items if i.status == s) for s in ("pass", "warn", "fail")}


# ----------------------------------------------------------------------------- completeness


def _completeness(
    main: IGResult, tolerance: float, params: dict[str, Any], duration: float
) -> CheckResult:
    attributions = main.attributions.cpu().numpy()
    items = []
    for i in range(len(main.f_input)):
        bad = _first_nonfinite(attributions[i])
        rel = main.completeness_rel_error[i]
        metrics: dict[str, Metric] = {
            "completeness_rel_error": _finite(rel),
            "completeness_abs_error": _finite(main.completeness_abs_error[i]),
            "f_input": _finite(main.f_input[i]),
            "f_baseline": _finite(main.f_baseline[i]),
            "attribution_sum": _finite(main.attribution_sum[i]),
            "steps_used": int(main.steps_used[i]),
            "nonfinite_attributions": int((~np.isfinite(attributions[i])).sum()),
        }
        status: ItemStatus
        if bad is not None:
            status, message = "fail", f"non-finite attribution at index {tuple(bad)}"
        elif not np.isfinite(rel) or rel > tolerance:
            status = "fail"
            message = f"sum of attributions misses F(x) - F(b) by {rel:.3g} relative (tolerance {tolerance:g})"
        else:
            status, message = "pass", f"completeness error {rel:.3g} relative"
        items.append(
            CheckItem(
                subject=_input_subject(i, bad), status=status, metrics=metrics, message=message
            )
        )
    return CheckResult(
        check="ig_completeness",
        status="computed",
        parameters={
            **params,
            "tolerance": tolerance,
            "error": "|sum(attr) - (F(x) - F(b))| / |F(x) - F(b)|",
        },
        summary={
            "max_completeness_rel_error": _summary_max(items, "completeness_rel_error"),
            **_counts(items),
        },
        items=items,
        duration_s=duration,
    )


# ----------------------------------------------------------------------------- convergence


def _convergence(
    main: IGResult, settings: Any, params: dict[str, Any], duration: float
) -> CheckResult:
    items = []
    for i in range(len(main.f_input)):
        steps, errors, changes = [], [], []
        for level in main.error_curve:
            if i in level["inputs"]:
                k = level["inputs"].index(i)
                steps.append(level["steps"])
                errors.append(level["rel_error"][k])
                changes.append(level["attribution_change"][k])
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
        else:
            status = "fail"
            message = (
                f"completeness error still {errors[-1] if errors else None} at {main.steps_used[i]} steps "
                f"(max {settings.ig_max_steps}); the path may have a jump the quadrature cannot integrate"
            )
        items.append(
            CheckItem(
                subject=_input_subject(i),
                status=status,
                metrics=metrics,
                message=message,
                details={"steps": steps, "rel_error": errors, "attribution_change": changes},
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
            "refinement": "cells doubled; left, right and trapezoid re-use earlier evaluations",
        },
        summary={
            "max_steps_used": int(main.steps_used.max()),
            "total_evaluations": int(main.evaluations.sum()),
            **_counts(items),
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
    with torch.no_grad():
        out_x = model(inputs)
        readings = {
            kind: baseline_neutrality(
                model(make_baseline(kind, inputs, seed=settings.seed).to(inputs.dtype)),
                out_x,
                classes,
            )
            for kind in BASELINES
        }
        chosen = baseline_neutrality(model(main.baseline.to(inputs.dtype)), out_x, classes)
    items = []
    for i in range(inputs.shape[0]):
        metrics = {k: _finite(v[i]) if isinstance(v, np.ndarray) else v for k, v in chosen.items()}
        status: ItemStatus
        if chosen["classifier"]:
            p_b, entropy = (
                chosen["baseline_target_probability"][i],
                chosen["baseline_entropy_ratio"][i],
            )
            if p_b > settings.ig_baseline_max_target_probability:
                status = "fail"
                message = f"the model reads the baseline as the target class (p = {p_b:.3f})"
            elif entropy < settings.ig_baseline_min_entropy_ratio:
                status = "warn"
                message = (
                    f"softmax at the baseline is far from uniform (entropy ratio {entropy:.3f})"
                )
            else:
                status, message = "pass", f"baseline near uniform (entropy ratio {entropy:.3f})"
        else:
            ratio = chosen["baseline_output_ratio"][i]
            if not np.isfinite(ratio) or ratio > settings.ig_baseline_max_output_ratio:
                status, message = "fail", f"|F(baseline)| is {ratio:.3g} of |F(x)|"
            else:
                status, message = "pass", f"|F(baseline)| is {ratio:.3g} of |F(x)|"
        items.append(
            CheckItem(subject=_input_subject(i), status=status, metrics=metrics, message=message)
        )
    summary: dict[str, Metric] = {**_counts(items), "classifier": bool(chosen["classifier"])}
    for kind, reading in readings.items():
        for key in (
            "baseline_entropy_ratio",
            "baseline_target_probability",
            "baseline_output_ratio",
        ):
            values = reading.get(key)
            if isinstance(values, np.ndarray) and values.size:
                summary[f"{kind}_{key}_mean"] = _finite(float(np.mean(values)))
    return CheckResult(
        check="ig_baseline",
        status="computed",
        parameters={
            **params,
            "max_target_probability": settings.ig_baseline_max_target_probability,
            "min_entropy_ratio": settings.ig_baseline_min_entropy_ratio,
            "max_output_ratio": settings.ig_baseline_max_output_ratio,
            "baselines_compared": list(BASELINES),
        },
        summary=summary,
        items=items,
    )


# ----------------------------------------------------------------------------- monotonicity


def _monotonicity(ctx: CollectContext, main: IGResult, params: dict[str, Any]) -> CheckResult:
    settings = ctx.settings
    assert main.path is not None
    items = []
    for i, samples in enumerate(main.path):
        reading = path_behaviour(samples, flip_tolerance=settings.ig_monotonicity_flip_tolerance)
        metrics: dict[str, Metric] = {
            k: v for k, v in reading.items() if not isinstance(v, dict | list)
        }
        status: ItemStatus
        if reading["nonfinite_nodes"]:
            status = "fail"
            message = f"F or the integrand is not finite at t = {reading['first_nonfinite_t']}"
        elif reading["max_jump_ratio"] > settings.ig_monotonicity_max_jump:
            status = "fail"
            message = (
                f"F jumps by {reading['max_jump_ratio']:.3g} of the path's variation between "
                f"t = {reading['jump_interval'][0]:.6g} and {reading['jump_interval'][1]:.6g}"
            )
        elif reading["max_spike_share"] > settings.ig_monotonicity_max_spike_share:
            status = "fail"
            message = (
                f"the integrand spikes to {reading['max_spike_ratio']:.3g}x its mean magnitude at "
                f"t = {reading['spike_t']:.6g} (step {reading['spike_step']})"
            )
        elif reading["sign_flips_beyond_tolerance"]:
            status = "warn"
            message = (
                f"the integrand changes sign {reading['sign_flips_beyond_tolerance']} times beyond "
                f"tolerance, first near t = {reading['first_flip_t']:.6g}; F is not monotone along the path"
            )
        else:
            status, message = "pass", "F and the integrand behave along the path"
        items.append(
            CheckItem(
                subject=_input_subject(i),
                status=status,
                metrics=metrics,
                message=message,
                details={k: v for k, v in reading.items() if isinstance(v, dict | list)},
            )
        )
    return CheckResult(
        check="ig_monotonicity",
        status="computed",
        parameters={
            **params,
            "max_jump": settings.ig_monotonicity_max_jump,
            "max_spike_share": settings.ig_monotonicity_max_spike_share,
            "flip_tolerance": settings.ig_monotonicity_flip_tolerance,
            "scale": "path variation V = max(integral |dF/dt| dt, |F(x) - F(b)|)",
        },
        summary={
            "max_jump_ratio": _summary_max(items, "max_jump_ratio"),
            "max_spike_ratio": _summary_max(items, "max_spike_ratio"),
            "max_sign_flips": _summary_max(items, "sign_flips"),
            **_counts(items),
        },
        items=items,
    )


# ----------------------------------------------------------------------------- randomization


def _randomization(
    ctx: CollectContext,
    inputs: torch.Tensor,
    baseline: torch.Tensor,
    main: IGResult,
    params: dict[str, Any],
) -> CheckResult:
    settings = ctx.settings
    k = max(1, min(settings.ig_randomization_inputs, inputs.shape[0]))
    x, b = inputs[:k], baseline[:k]
    target: Any = (
        torch.from_numpy(main.target_classes[:k]) if main.target_classes is not None else "argmax"
    )
    model = ctx.fresh_model()
    layers = cascade_layers(model, x[:1])
    if not layers:
        return CheckResult(
            check="ig_randomization", status="not_computed", reason="the model has no parameters"
        )

    def attribute(net: torch.nn.Module) -> np.ndarray:
        result = integrated_gradients(
            net,
            x,
            target=target,
            baseline=b,
            method=settings.ig_method,
            steps=settings.ig_steps,
            memory_budget_bytes=settings.ig_memory_budget_bytes,
            return_diagnostics=False,
        )
        return result.attributions.reshape(k, -1).cpu().numpy()

    original = attribute(model)
    count = len(layers)
    checkpoints = sorted(
        {
            round(1 + j * (count - 1) / max(1, settings.ig_randomization_max_layers - 1))
            for j in range(min(count, settings.ig_randomization_max_layers))
        }
    )
    curve: list[dict[str, Any]] = []
    randomized = 0
    for stop in checkpoints:
        while randomized < stop:
            randomize_layer(layers[randomized][1], seed=settings.seed + randomized)
            randomized += 1
        attributions = attribute(model)
        curve.append(
            {
                "layers_randomized": stop,
                "last_layer": layers[stop - 1][0],
                "spearman": [spearman(original[i], attributions[i]) for i in range(k)],
                "spearman_abs": [
                    spearman(np.abs(original[i]), np.abs(attributions[i])) for i in range(k)
                ],
            }
        )
    items = []
    for i in range(k):
        per_layer = [c["spearman"][i] for c in curve]
        final = per_layer[-1]
        metrics: dict[str, Metric] = {
            "spearman_top_layer": per_layer[0],
            "spearman_final": final,
            "spearman_abs_final": curve[-1]["spearman_abs"][i],
            "layers_randomized": count,
        }
        status: ItemStatus
        if not np.any(original[i]):
            status, message = "not_computed", "the original attributions are all zero"
        elif final is None:
            status, message = (
                "pass",
                "attributions of the randomized model are constant (no rank order left)",
            )
        elif abs(final) >= settings.ig_randomization_max_spearman:
            status = "fail"
            message = (
                f"attributions barely change when all {count} parameterized layers are randomized "
                f"(Spearman {final:.3f}): they reflect the input, not what the model learned"
            )
        else:
            status, message = (
                "pass",
                f"Spearman falls to {final:.3f} after randomizing {count} layers",
            )
        items.append(
            CheckItem(
                subject=_input_subject(i),
                status=status,
                metrics=metrics,
                message=message,
                details={
                    "layers": [c["last_layer"] for c in curve],
                    "layers_randomized": [c["layers_randomized"] for c in curve],
                    "spearman": per_layer,
                    "spearman_abs": [c["spearman_abs"][i] for c in curve],
                },
            )
        )
    return CheckResult(
        check="ig_randomization",
        status="computed",
        parameters={
            **params,
            "steps": settings.ig_steps,
            "inputs_used": k,
            "max_spearman": settings.ig_randomization_max_spearman,
            "cascade": [name for name, _ in layers],
            "reinit": "reset_parameters() under torch.manual_seed(seed + layer), else normal with the tensor's std",
        },
        summary={"max_abs_spearman_final": _summary_max(items, "spearman_final"), **_counts(items)},
        items=items,
    )


# ----------------------------------------------------------------------------- determinism


def _determinism(
    ctx: CollectContext,
    model: torch.nn.Module,
    inputs: torch.Tensor,
    baseline: torch.Tensor,
    main: IGResult,
    params: dict[str, Any],
) -> CheckResult:
    settings = ctx.settings
    repeats = max(2, settings.ig_repeats)
    target: Any = (
        torch.from_numpy(main.target_classes) if main.target_classes is not None else "argmax"
    )
    runs = [
        integrated_gradients(
            model,
            inputs,
            target=target,
            baseline=baseline,
            method=settings.ig_method,
            steps=settings.ig_steps,
            memory_budget_bytes=settings.ig_memory_budget_bytes,
            return_diagnostics=False,
        )
        .attributions.cpu()
        .numpy()
        for _ in range(repeats)
    ]
    items = []
    for i in range(inputs.shape[0]):
        reference = runs[0][i]
        digests = [hashlib.sha256(np.ascontiguousarray(r[i]).tobytes()).hexdigest() for r in runs]
        equal = [d == digests[0] for d in digests]
        with np.errstate(invalid="ignore"):
            diffs = [np.abs(r[i] - reference) for r in runs[1:]]
        max_diff = max((float(np.nanmax(d)) if d.size else 0.0) for d in diffs)
        scale = float(np.nanmax(np.abs(reference))) if reference.size else 0.0
        first: list[int] | None = None
        for r in runs[1:]:
            mismatch = np.argwhere(~((r[i] == reference) | (np.isnan(r[i]) & np.isnan(reference))))
            if mismatch.size:
                first = [int(v) for v in mismatch[0]]
                break
        bit_exact = all(equal)
        metrics: dict[str, Metric] = {
            "bit_exact": bit_exact,
            "bit_exact_rate": sum(equal) / len(equal),
            "max_abs_diff": _finite(max_diff),
            "max_rel_diff": _finite(max_diff / scale) if scale > 0 else None,
            "repeats": repeats,
        }
        message = (
            "bit-exact"
            if bit_exact
            else f"attributions differ between repeats, first at index {tuple(first or [])}"
        )
        items.append(
            CheckItem(
                subject=_input_subject(i, None if bit_exact else first),
                status="pass" if bit_exact else "fail",
                metrics=metrics,
                message=message,
                details={"sha256": digests[0]},
            )
        )
    return CheckResult(
        check="ig_determinism",
        status="computed",
        parameters={**params, "repeats": repeats, "steps": settings.ig_steps},
        summary={"bit_exact": all(bool(i.metrics["bit_exact"]) for i in items), **_counts(items)},
        items=items,
    )
