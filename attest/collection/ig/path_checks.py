"""The path, randomization and determinism IG checks (``ig_monotonicity``,
``ig_randomization``, ``ig_determinism``) and the item helpers shared with
:mod:`attest.collection.ig.checks`, which runs them; see docs/ig.md."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import torch

from attest.collection.context import CheckSettings, CollectContext
from attest.collection.ig.analysis import path_behaviour, spearman
from attest.collection.ig.attribution import IGResult, path_gradients
from attest.collection.ig.quadrature import gauss_legendre
from attest.collection.nonfinite import nonfinite, one_sided_nonfinite
from attest.evidence.model import CheckItem, CheckResult, ItemStatus, Metric, Subject

__all__ = [
    "checkpoints",
    "determinism",
    "finite_or_none",
    "first_nonfinite",
    "input_subject",
    "monotonicity",
    "randomization",
    "status_counts",
    "summary_max",
]

# ``ig_randomization``: the attributions of the randomized model are compared with the
# original by signed Spearman rank correlation; a correlation of at least
# ``ig_randomization_max_spearman`` means they kept their order, so they do not depend on what
# the model learned. A strongly *negative* one means the randomization reversed their order,
# which is a change, not its absence: it fails only when the magnitudes keep their order too
# (absolute-value Spearman at least this), that is, the same map with its signs flipped.
# (Small untrained networks gave signed -0.7 to -0.84 with absolute 0.5-0.7: a map that did
# change, which the former |signed| rule failed.)
SIGN_FLIP_ABS_SPEARMAN = 0.9


def finite_or_none(value: float) -> float | None:
    """The value, or None when it is NaN or infinite (evidence is strict JSON)."""
    return float(value) if np.isfinite(value) else None


def first_nonfinite(array: np.ndarray) -> list[int] | None:
    """The first index of a NaN or infinite element, or None."""
    bad = np.argwhere(~np.isfinite(array))
    return [int(v) for v in bad[0]] if bad.size else None


def input_subject(i: int, indices: list[int] | None = None) -> Subject:
    """The subject of an item about probe input ``i``."""
    return Subject(kind="input", input_index=i, indices=indices)


def summary_max(items: list[CheckItem], metric: str) -> Metric:
    """The largest numeric value of ``metric`` over the items, or None."""
    values = [
        v
        for i in items
        if isinstance(v := i.metrics.get(metric), int | float) and not isinstance(v, bool)
    ]
    return max(values) if values else None


def status_counts(items: list[CheckItem]) -> dict[str, Metric]:
    """Items per status, as summary metrics."""
    return {f"items_{s}": sum(1 for i in items if i.status == s) for s in ("pass", "warn", "fail")}


# ----------------------------------------------------------------------------- monotonicity


def monotonicity(ctx: CollectContext, main: IGResult, params: dict[str, Any]) -> CheckResult:
    """``ig_monotonicity``: jumps, spikes and sign flips along each input's path."""
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
                subject=input_subject(i),
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
            "max_jump_ratio": summary_max(items, "max_jump_ratio"),
            "max_spike_ratio": summary_max(items, "max_spike_ratio"),
            "max_sign_flips": summary_max(items, "sign_flips"),
            **status_counts(items),
        },
        items=items,
    )


# ----------------------------------------------------------------------------- randomization


def checkpoints(count: int, settings: CheckSettings) -> list[int]:
    """How many of the ``count`` cascade layers (from the top) are re-initialized at each of
    the up to ``ig_randomization_max_layers`` checkpoints where IG is recomputed."""
    return sorted(
        {
            round(1 + j * (count - 1) / max(1, settings.ig_randomization_max_layers - 1))
            for j in range(min(count, settings.ig_randomization_max_layers))
        }
    )


def randomization(
    ctx: CollectContext, stages: list[dict[str, Any] | None], params: dict[str, Any]
) -> CheckResult:
    """``ig_randomization``: Adebayo et al.'s cascading parameter randomization test, on the
    first ``ig_randomization_inputs`` inputs with a fixed ``ig_randomization_steps``-node
    Gauss-Legendre rule, at ``ig_randomization_max_layers`` checkpoints of the cascade.

    ``stages``: the maps of the trained model (stage 0), then after each checkpoint's
    re-initialization of the top layers (each layer seeded by its place in the cascade,
    :mod:`attest.collection.ig.split`), as ``{"layers", "stop", "maps"}``; None past the last
    checkpoint. A coarse fixed rule serves: the maps only feed a rank correlation, and a
    model whose attributions do not depend on its weights keeps their order at any step count
    (docs/ig.md has the detection table against the former 32-step rule)."""
    settings = ctx.settings
    first = stages[0]
    assert first is not None
    layers: list[str] = first["layers"]
    if not layers:
        return CheckResult(
            check="ig_randomization", status="not_computed", reason="the model has no parameters"
        )
    original = first["maps"]
    curve = [
        {
            "layers_randomized": stage["stop"],
            "last_layer": layers[stage["stop"] - 1],
            "spearman": [spearman(original[i], stage["maps"][i]) for i in range(len(original))],
            "spearman_abs": [
                spearman(np.abs(original[i]), np.abs(stage["maps"][i]))
                for i in range(len(original))
            ],
        }
        for stage in stages[1:]
        if stage is not None
    ]
    k = len(original)
    randomized = [stage for stage in stages[1:] if stage is not None][-1]["maps"]
    items = [
        _randomization_item(i, original[i], randomized[i], curve, len(layers), settings)
        for i in range(k)
    ]
    return CheckResult(
        check="ig_randomization",
        status="computed",
        parameters={
            **params,
            "steps": max(1, int(settings.ig_randomization_steps)),
            "rule": "gausslegendre",
            "inputs_used": k,
            "max_spearman": settings.ig_randomization_max_spearman,
            "sign_flip_abs_spearman": SIGN_FLIP_ABS_SPEARMAN,
            "cascade": layers,
            "reinit": "reset_parameters() under torch.manual_seed(seed + layer), else normal with the tensor's std",
        },
        summary={
            "max_abs_spearman_final": max(
                (abs(v) for i in items if isinstance(v := i.metrics["spearman_final"], float)),
                default=None,
            ),
            **status_counts(items),
        },
        items=items,
    )


def _randomization_item(
    i: int,
    original: np.ndarray,
    randomized: np.ndarray,
    curve: list[dict[str, Any]],
    count: int,
    settings: CheckSettings,
) -> CheckItem:
    """Input ``i``'s item: fails when its attributions (``original``) keep their rank order
    after all ``count`` layers are randomized (``randomized``: the attributions then)."""
    per_layer = [c["spearman"][i] for c in curve]
    final = per_layer[-1]
    metrics: dict[str, Metric] = {
        "spearman_top_layer": per_layer[0],
        "spearman_final": final,
        "spearman_abs_final": curve[-1]["spearman_abs"][i],
        "layers_randomized": count,
    }
    status: ItemStatus
    # spearman() is None for a constant map and for a non-finite one alike: tell them apart
    sides = nonfinite({"original": original, "randomized": randomized})
    if sides is not None:
        status, message = "fail", f"attributions cannot be rank-compared: {sides.describe()}"
    elif not np.any(original):
        status, message = "not_computed", "the original attributions are all zero"
    elif final is None:
        status, message = (
            "pass",
            "attributions of the randomized model are constant (no rank order left)",
        )
    elif final >= settings.ig_randomization_max_spearman or (
        final <= -settings.ig_randomization_max_spearman
        and (curve[-1]["spearman_abs"][i] or 0.0) >= SIGN_FLIP_ABS_SPEARMAN
    ):
        status = "fail"
        flipped = " of the magnitudes, signs flipped" if final < 0 else ""
        message = (
            f"attributions barely change when all {count} parameterized layers are randomized "
            f"(Spearman {final:.3f}{flipped}): they reflect the input, not what the model "
            "learned"
        )
    else:
        status, message = (
            "pass",
            f"Spearman falls to {final:.3f} after randomizing {count} layers",
        )
    return CheckItem(
        subject=input_subject(i),
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


# ----------------------------------------------------------------------------- determinism


def determinism(
    ctx: CollectContext,
    model: torch.nn.Module,
    inputs: torch.Tensor,
    baseline: torch.Tensor,
    classes: np.ndarray | None,
    params: dict[str, Any],
) -> CheckResult:
    """``ig_determinism``: the integrand bit-exact across repeats at fixed threads.

    Attributions are float64 sums, in a fixed order, of the model's gradients at the path
    points; their bits can differ between two runs only where the model's own evaluations
    do (a random op, a racy kernel). So instead of repeating the whole adaptive search, one
    batch of ``ig_determinism_points`` path points per input (the interior Gauss-Legendre
    nodes of [0, 1]) goes through the model ``ig_repeats`` times, in the same chunks and
    order, without reseeding in between, and every gradient and F is compared bit for bit.
    What is compared per input is the attribution integrand ``grad * (x - b)`` at those
    points, so ``max_abs_diff`` is in attribution units (per unit of path length)."""
    settings = ctx.settings
    repeats = max(2, settings.ig_repeats)
    count = max(1, int(settings.ig_determinism_points))
    t = gauss_legendre(count)[0].copy()  # (cached: never handed out to be changed)
    diff = (inputs.detach().to(torch.float64) - baseline.to(torch.float64)).cpu()
    runs: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for _ in range(repeats):
        grads, f = path_gradients(
            model, inputs, baseline, t, classes, settings.ig_memory_budget_bytes
        )
        # (points, N, ...) -> (N, points, ...): each input's integrand at every point
        runs.append((grads.cpu() * diff.unsqueeze(0)).transpose(0, 1).numpy())
        values.append(f.T.copy())
        del grads
    items = [_determinism_item(i, runs, values, repeats) for i in range(inputs.shape[0])]
    return CheckResult(
        check="ig_determinism",
        status="computed",
        parameters={
            **params,
            "repeats": repeats,
            "points_per_input": count,
            "points_t": [float(v) for v in t],
            "compared": "grad F * (x - b) and F at the same path points, same chunks, bit for bit",
        },
        summary={
            "bit_exact": all(bool(i.metrics["bit_exact"]) for i in items),
            **status_counts(items),
        },
        items=items,
    )


def _determinism_item(
    i: int, runs: list[np.ndarray], values: list[np.ndarray], repeats: int
) -> CheckItem:
    """Input ``i``'s item: its integrand (and F) in every repeat against the first."""
    reference = runs[0][i]
    digests = [
        hashlib.sha256(
            np.ascontiguousarray(r[i]).tobytes() + np.ascontiguousarray(v[i]).tobytes()
        ).hexdigest()
        for r, v in zip(runs, values, strict=True)
    ]
    equal = [d == digests[0] for d in digests]
    with np.errstate(invalid="ignore"):
        diffs = [np.abs(r[i] - reference) for r in runs[1:]]
    max_diff = max((float(np.nanmax(d)) if d.size else 0.0) for d in diffs)
    scale = float(np.nanmax(np.abs(reference))) if reference.size else 0.0
    first: list[int] | None = None
    for r in runs[1:]:
        mismatch = np.argwhere(~((r[i] == reference) | (np.isnan(r[i]) & np.isnan(reference))))
        if mismatch.size:
            first = [int(v) for v in mismatch[0][1:]]  # the tensor index (without the point)
            break
    bit_exact = all(equal)
    # NaN where every repeat has it is repeatable (completeness fails on it); NaN or infinity
    # in one repeat only is the difference to name (nanmax above skips it)
    sides = None
    for j, (r, v) in enumerate(zip(runs[1:], values[1:], strict=True), start=2):
        sides = one_sided_nonfinite(
            {"repeat 1": (reference, values[0][i]), f"repeat {j}": (r[i], v[i])}
        )
        if sides is not None:
            max_diff = math.inf
            break
    metrics: dict[str, Metric] = {
        "bit_exact": bit_exact,
        "bit_exact_rate": sum(equal) / len(equal),
        "max_abs_diff": finite_or_none(max_diff),
        "max_rel_diff": finite_or_none(max_diff / scale) if scale > 0 else None,
        "repeats": repeats,
    }
    if bit_exact:
        message = "bit-exact"
    elif sides is not None:
        message = f"the repeats differ in where they are finite: {sides.describe()}"
    elif first is None:
        message = "F differs between repeats at the same path points"
    else:
        message = f"attributions differ between repeats, first at index {tuple(first)}"
    return CheckItem(
        subject=input_subject(i, None if bit_exact else (first or [])),
        status="pass" if bit_exact else "fail",
        metrics=metrics,
        message=message,
        details={"sha256": digests[0]},
    )
