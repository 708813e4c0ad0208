"""Integrated gradients (Sundararajan et al. 2017) with exact float64 quadrature and diagnostics.

``IG_i(x) = (x_i - b_i) * integral_0^1 dF/dx_i (b + t (x - b)) dt`` for a scalar target
``F`` per example. The integral is a quadrature rule whose nodes and weights are float64
whatever the model's precision; gradients are cast to float64 before they are weighted and
summed, so the only rounding left is the model's own. Rules:

- ``adaptive`` (the default when ``tolerance`` is given, and of the ``ig_*`` checks):
  nested composite trapezoid panels, each bisected (one new path sample at its midpoint)
  where their exact local completeness errors are largest
  (:mod:`attest.collection.ig.adaptive`); it stops when the global completeness error is
  under the tolerance or ``max_steps`` path samples are spent. ``steps`` is its first
  uniform samples, both path ends included (figures in docs/benchmarks.md);
- ``trapezoid`` (the default without a tolerance): n nodes ``j/(n-1)`` (both ends included),
  weights ``1/(n-1)`` with halves at the ends, so the weights sum to 1 (Captum's
  ``riemann_trapezoid`` sums to ``(n-1)/n``). Nested under refinement; of the fixed rules it
  usually needed the fewest evaluations to reach 1e-3 on the example models;
- ``gausslegendre``: ``numpy.polynomial.legendre.leggauss`` mapped to [0, 1]; exact for
  polynomial integrands, the best fixed-step rule for smooth models, but not nested;
- ``riemann_left`` / ``riemann_right`` / ``riemann_middle``: n equal cells, weights 1/n.

``steps`` always counts integrand evaluations (model forward+backward passes) per input.
Details in docs/ig.md. With ``tolerance`` set and a fixed rule, steps double until every
input's completeness error ``|sum(IG) - (F(x) - F(b))| / |F(x) - F(b)|`` is under it or
``max_steps`` is reached;
nested rules (left, right, trapezoid) re-use every earlier evaluation when they refine.
Path points are pushed through the model in chunks whose size is fixed from a memory
budget and one measured probe step; a convolutional model on CPU gets them channels-last
(same values, faster oneDNN kernels; see ``preferred_memory_format``), and F(x), F(b) share
the path's forward pass when everything fits in one chunk. The model runs in eval mode (its
modes are restored).

Captum's ``integrated_gradients.py`` was the model for the public shape of this module;
its float32 step weights and its trapezoid rule are deliberately not copied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from attest.collection.ig.adaptive import AdaptiveOutcome, adaptive_paths
from attest.collection.ig.baselines import BASELINES, make_baseline
from attest.collection.ig.evaluator import (
    PathEvaluator,
    eval_mode,
    path_evaluator,
    path_gradients,
    samples_per_chunk,
    share_sample_bytes,
)
from attest.collection.ig.fixed import FixedOutcome, Level, fixed_paths
from attest.collection.ig.panels import PanelLayout, completeness_scale
from attest.collection.ig.quadrature import (
    METHODS,
    canonical_method,
    quadrature,
)
from attest.errors import InputError
from attest.evidence.attributions import decode_attributions, encode_attributions

__all__ = [
    "ADAPTIVE",
    "BASELINES",
    "METHODS",
    "IGResult",
    "PanelLayout",
    "PathSamples",
    "decode_attributions",
    "encode_attributions",
    "integrated_gradients",
    "make_baseline",
    "path_gradients",
    "quadrature",
    "share_sample_bytes",
]

ADAPTIVE = "adaptive"
TargetArg = int | str | torch.Tensor | Callable[[torch.Tensor], torch.Tensor]

# ----------------------------------------------------------------------------- results


@dataclass
class PathSamples:
    """What the model did along the straight path of one input, at every evaluated node.

    ``t`` are path positions (sorted, unique), ``f`` the target F at each, ``slope`` the
    integrand ``dF/dt = <grad F, x - b>`` at each; ``f_start``/``f_end`` are F(b) and F(x).
    """

    t: np.ndarray
    f: np.ndarray
    slope: np.ndarray
    f_start: float
    f_end: float
    panels: PanelLayout | None = None  # the adaptive rule's final panels


@dataclass
class IGResult:
    """Attributions and the diagnostics of how they were computed.

    Per-input arrays have length N. ``completeness_rel_error`` is
    ``|sum(attr) - (F(x) - F(b))| / |F(x) - F(b)|`` in float64, where the denominator is at
    least F's own rounding in the model's precision (8 ulp of ``|F(x)| + |F(b)|``; see
    ``completeness_scale``), so a path along which F barely moves is not judged finer than F
    itself was computed. ``error_curve`` lists, for each step count
    tried, the steps, the cumulative evaluations per input and each input's error.
    """

    attributions: torch.Tensor  # (N, ...) float64
    baseline: torch.Tensor  # (N, ...) float64
    method: str
    f_input: np.ndarray  # (N,) F(x)
    f_baseline: np.ndarray  # (N,) F(b)
    attribution_sum: np.ndarray  # (N,)
    completeness_abs_error: np.ndarray  # (N,)
    completeness_rel_error: np.ndarray  # (N,)
    steps_used: np.ndarray  # (N,) nodes of the final rule
    evaluations: np.ndarray  # (N,) forward+backward passes spent on the path
    converged: np.ndarray  # (N,) bool: error <= tolerance (True when no tolerance)
    target_classes: np.ndarray | None  # (N,) the class differentiated, when the target is a class
    tolerance: float | None
    error_curve: list[dict[str, Any]] = field(default_factory=list)
    path: list[PathSamples] | None = None
    chunk_size: int = 0
    per_sample_bytes: int = 0
    memory_budget_bytes: int = 0
    model_info: dict[str, Any] = field(default_factory=dict)
    panels: list[PanelLayout] | None = None  # adaptive rule: each input's final panels
    local_error: np.ndarray | None = None  # adaptive rule: (N,) sum of panel errors
    error_scale: np.ndarray | None = None  # (N,) what completeness_rel_error is relative to
    # adaptive rule with stall_halvings: per input, None or why and where the search stopped early
    stalls: list[dict[str, Any] | None] | None = None

    @property
    def delta(self) -> np.ndarray:
        """Signed completeness gap ``sum(attr) - (F(x) - F(b))`` per input (Captum's delta)."""
        gap: np.ndarray = self.attribution_sum - (self.f_input - self.f_baseline)
        return gap


def _resolve_target(
    target: TargetArg, labels: torch.Tensor | None, n: int
) -> tuple[torch.Tensor | None, str | None, Callable[[torch.Tensor], torch.Tensor] | None]:
    """(classes, "argmax" when they are still to be found, custom target function)."""
    if callable(target) and not isinstance(target, torch.Tensor):
        return None, None, target
    if isinstance(target, bool):
        raise InputError(
            f"target must be an int class, 'argmax', 'label' or a tensor, got {target!r}"
        )
    if isinstance(target, int):
        return torch.full((n,), target, dtype=torch.long), None, None
    if isinstance(target, torch.Tensor):
        classes = target.detach().reshape(-1).to(torch.long).cpu()
        if classes.numel() == 1:
            classes = classes.expand(n).clone()
        if classes.numel() != n:
            raise InputError(f"target has {classes.numel()} classes for {n} inputs")
        return classes, None, None
    if target == "argmax":
        return None, "argmax", None
    if target == "label":
        if labels is None:
            raise InputError("target 'label' needs per-input labels", hint="pass labels=...")
        return labels.detach().reshape(-1).to(torch.long).cpu(), None, None
    raise InputError(f"target must be an int class, 'argmax', 'label' or a tensor, got {target!r}")


# ----------------------------------------------------------------------------- the public API


def integrated_gradients(
    model: nn.Module,
    inputs: torch.Tensor,
    *,
    target: TargetArg = "argmax",
    baseline: str | torch.Tensor = "zero",
    method: str | None = None,
    steps: int = 32,
    tolerance: float | None = None,
    max_steps: int = 1024,
    memory_budget_bytes: int = 256 * 1024 * 1024,
    labels: torch.Tensor | None = None,
    seed: int = 0,
    return_diagnostics: bool = True,
    stall_halvings: int = 0,
    stop_on_steep: bool = True,
    probe_batch: int | None = None,
) -> IGResult:
    """Integrated gradients of ``F(x) = model(x)[:, target]`` (summed over further dims).

    ``inputs`` (N, ...) in the precision the model runs in. ``target``: an int class, a (N,)
    tensor of classes, ``"argmax"`` (each input's predicted class), ``"label"`` (``labels``),
    or a callable mapping the model output (k, ...) to F (k,). ``baseline``: a tensor
    broadcastable to ``inputs`` or one of :data:`BASELINES` (see :func:`make_baseline`).
    With ``tolerance``, steps double until every input's relative completeness error is at
    most ``tolerance`` or ``max_steps`` is reached. ``return_diagnostics`` keeps F and the
    integrand at every evaluated node of each path (``IGResult.path``). ``stall_halvings``
    > 0 (adaptive rule): an input stops as soon as a panel it would split next kept its error
    through that many halvings in a row (a jump, or a stretch far narrower than the panel);
    ``IGResult.stalls`` then says where along the path and why (:mod:`attest.collection.ig.stall`);
    with ``stop_on_steep`` False only a jump stops it (a steep smooth stretch is refined on).
    ``probe_batch``: how many examples the spec's probe batch has (default: ``inputs``'), a
    bound of the CPU path chunks (:func:`~attest.collection.ig.evaluator.samples_per_chunk`).
    """
    method = canonical_method(method or (ADAPTIVE if tolerance is not None else "trapezoid"))
    _check_arguments(method, steps, inputs, memory_budget_bytes)
    n = inputs.shape[0]
    dtype = inputs.dtype if inputs.is_floating_point() else torch.float32
    x64 = inputs.detach().to(torch.float64)
    if isinstance(baseline, str):
        b64 = make_baseline(baseline, inputs, seed=seed)
    else:
        b64 = torch.broadcast_to(baseline.detach().to(x64.device, torch.float64), x64.shape).clone()
    diff64 = x64 - b64
    classes, pending, target_fn = _resolve_target(target, labels, n)
    find_classes = pending == "argmax"

    with eval_mode(model) as model_info:
        evaluator, per_sample = path_evaluator(
            model, x64, dtype, classes, target_fn, find_classes, model_info
        )
        chunk = samples_per_chunk(per_sample, memory_budget_bytes, x64.device, probe_batch or n)
        model_eps = float(torch.finfo(dtype).eps)
        if method == ADAPTIVE:
            f_x, f_b = evaluator.endpoints(x64, b64, max(1, chunk // 2), find_classes=find_classes)
            error_scale = completeness_scale(f_x, f_b, model_eps)
            outcome = adaptive_paths(
                evaluator,
                b64,
                diff64,
                f_x,
                f_b,
                nodes=int(steps),  # initial path samples, both ends included (at least 2)
                tolerance=tolerance,
                max_evaluations=max_steps,
                chunk=chunk,
                model_eps=model_eps,
                vector_budget_bytes=memory_budget_bytes,
                stall_halvings=int(stall_halvings),
                stop_on_steep=bool(stop_on_steep),
            )
        else:
            fixed = _fixed_rule(
                evaluator,
                method,
                int(steps),
                tolerance,
                max_steps,
                (x64, b64, diff64),
                chunk,
                return_diagnostics,
                model_eps,
                model_info,
                find_classes=find_classes,
            )
            f_x, f_b, error_scale = fixed.f_x, fixed.f_b, fixed.error_scale
    model_info["dtype"] = str(dtype).replace("torch.", "")
    common: dict[str, Any] = {
        "baseline": b64,
        "method": method,
        "f_input": f_x,
        "f_baseline": f_b,
        "target_classes": None if evaluator.classes is None else evaluator.classes.numpy().copy(),
        "tolerance": tolerance,
        "error_scale": error_scale,
        "chunk_size": int(chunk),
        "per_sample_bytes": int(per_sample),
        "memory_budget_bytes": int(memory_budget_bytes),
        "model_info": model_info,
    }
    if method == ADAPTIVE:
        return _adaptive_result(outcome, diff64, common, return_diagnostics)
    return _fixed_result(fixed, diff64, common, return_diagnostics)


def _check_arguments(
    method: str, steps: int, inputs: torch.Tensor, memory_budget_bytes: int
) -> None:
    """Raise :class:`InputError` for a step count, batch or budget that cannot be."""
    if method == ADAPTIVE:
        if isinstance(steps, bool) or int(steps) != steps or steps < 1:
            raise InputError(f"steps must be an integer >= 1, got {steps!r}")
    else:
        quadrature(method, steps)  # validates steps
    if inputs.dim() < 1 or inputs.shape[0] == 0:
        raise InputError("inputs must be a non-empty batch (N, ...)")
    if memory_budget_bytes <= 0:
        raise InputError(f"memory_budget_bytes must be positive, got {memory_budget_bytes}")


def _fixed_rule(
    evaluator: PathEvaluator,
    method: str,
    steps: int,
    tolerance: float | None,
    max_steps: int,
    path: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    chunk: int,
    return_diagnostics: bool,
    model_eps: float,
    model_info: dict[str, Any],
    *,
    find_classes: bool,
) -> FixedOutcome:
    """A fixed rule along the paths ``(x64, b64, diff64)``. When the first level and the
    endpoints fit in one chunk (a small model), F(x) and F(b) share its forward pass; else
    they take a forward pass of their own first."""
    x64, b64, diff64 = path
    n = x64.shape[0]
    merge = not model_info["still_training_after_eval"] and (steps + 2) * n <= chunk
    f_x, f_b = np.empty(0), np.empty(0)  # (found with the first level when merged)
    if not merge:
        f_x, f_b = evaluator.endpoints(x64, b64, max(1, chunk // 2), find_classes=find_classes)
    return fixed_paths(
        evaluator,
        method,
        steps,
        tolerance,
        max_steps,
        b64,
        diff64,
        chunk,
        return_diagnostics,
        model_eps,
        f_x,
        f_b,
        (x64, b64) if merge else None,
        find_classes=find_classes,
    )


def _fixed_result(
    fixed: FixedOutcome, diff64: torch.Tensor, common: dict[str, Any], return_diagnostics: bool
) -> IGResult:
    """The :class:`IGResult` of a fixed rule."""
    rel_error = fixed.rel_error
    tolerance = common["tolerance"]
    n = diff64.shape[0]
    return IGResult(
        attributions=fixed.acc * diff64,
        attribution_sum=fixed.attr_sum,
        completeness_abs_error=fixed.abs_error,
        completeness_rel_error=rel_error,
        steps_used=fixed.steps_used,
        evaluations=fixed.evaluations,
        converged=(rel_error <= tolerance) if tolerance is not None else np.ones(n, dtype=bool),
        error_curve=fixed.curve,
        path=_path_samples(fixed.levels, fixed.f_x, fixed.f_b) if return_diagnostics else None,
        **common,
    )


def _path_samples(levels: list[Level], f_x: np.ndarray, f_b: np.ndarray) -> list[PathSamples]:
    """Every node evaluated for each input, over all levels, sorted by t (first value kept)."""
    out = []
    if len(levels) == 1 and bool(np.all(np.diff(levels[0].nodes) > 0)):
        # one level of sorted nodes (no tolerance): every input has them all, in order
        level = levels[0]
        for i, column in enumerate(np.argsort(level.inputs)):
            out.append(
                PathSamples(
                    t=level.nodes.copy(),
                    f=level.f[:, column].copy(),
                    slope=level.slope[:, column].copy(),
                    f_start=float(f_b[i]),
                    f_end=float(f_x[i]),
                )
            )
        return out
    for i in range(len(f_x)):
        ts, fs, ss = [], [], []
        for level in levels:
            where = np.flatnonzero(level.inputs == i)
            if where.size:
                ts.append(level.nodes)
                fs.append(level.f[:, where[0]])
                ss.append(level.slope[:, where[0]])
        t = np.concatenate(ts) if ts else np.empty(0)
        t_unique, first = np.unique(t, return_index=True)
        out.append(
            PathSamples(
                t=t_unique,
                f=np.concatenate(fs)[first] if ts else np.empty(0),
                slope=np.concatenate(ss)[first] if ts else np.empty(0),
                f_start=float(f_b[i]),
                f_end=float(f_x[i]),
            )
        )
    return out


def _adaptive_result(
    outcome: AdaptiveOutcome,
    diff64: torch.Tensor,
    common: dict[str, Any],
    return_diagnostics: bool,
) -> IGResult:
    """The :class:`IGResult` of the adaptive rule."""
    attributions = outcome.acc * diff64
    n = attributions.shape[0]
    f_x, f_b = common["f_input"], common["f_baseline"]
    delta = f_x - f_b
    attr_sum = attributions.reshape(n, -1).sum(dim=1).cpu().numpy()
    abs_error = np.abs(attr_sum - delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_error = np.where(abs_error == 0, 0.0, abs_error / common["error_scale"])
    tolerance = common["tolerance"]
    path = None
    if return_diagnostics:
        path = [
            PathSamples(
                t=t,
                f=f,
                slope=s,
                f_start=float(f_b[i]),
                f_end=float(f_x[i]),
                panels=outcome.layouts[i],
            )
            for i, (t, f, s) in enumerate(outcome.samples)
        ]
    common["model_info"]["adaptive_recomputed_panels"] = outcome.recomputed
    return IGResult(
        attributions=attributions,
        attribution_sum=attr_sum,
        completeness_abs_error=abs_error,
        completeness_rel_error=rel_error,
        steps_used=outcome.evaluations.copy(),
        evaluations=outcome.evaluations,
        converged=(rel_error <= tolerance) if tolerance is not None else np.ones(n, dtype=bool),
        error_curve=outcome.curve,
        path=path,
        panels=outcome.layouts,
        local_error=outcome.local_error,
        stalls=outcome.stalls,
        **common,
    )
