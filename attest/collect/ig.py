"""Integrated gradients (Sundararajan et al. 2017) with exact float64 quadrature and diagnostics.

``IG_i(x) = (x_i - b_i) * integral_0^1 dF/dx_i (b + t (x - b)) dt`` for a scalar target
``F`` per example. The integral is a quadrature rule whose nodes and weights are float64
whatever the model's precision; gradients are cast to float64 before they are weighted and
summed, so the only rounding left is the model's own. Rules:

- ``adaptive`` (the default when ``tolerance`` is given, and of the ``ig_*`` checks):
  composite 2-point Gauss-Legendre panels bisected where their exact local completeness
  errors are largest (:mod:`attest.collect._ig_adaptive`); it stops when the sum of the
  local errors, a bound on the global error, is under the tolerance or ``max_steps`` path
  samples are spent. Its global error met 1e-3 with the fewest evaluations on the example
  models, but its stopping bound is stricter, so it often spends the whole budget
  (figures in docs/benchmarks.md, trade-off in docs/ig.md);
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
budget and one measured probe step. The model runs in eval mode (its modes are restored).

Captum's ``integrated_gradients.py`` was the model for the public shape of this module;
its float32 step weights and its trapezoid rule are deliberately not copied.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from attest._attributions import decode_attributions, encode_attributions
from attest.collect._ig_adaptive import (
    DEFAULT_PANEL_NODES,
    AdaptiveOutcome,
    PanelLayout,
    adaptive_paths,
    completeness_scale,
)
from attest.collect._ig_baselines import BASELINES, make_baseline
from attest.collect._ig_quadrature import (
    METHODS,
    canonical_method,
    next_steps,
    quadrature,
    refinement,
)
from attest.errors import InputError

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
    "quadrature",
]

ADAPTIVE = "adaptive"
TargetArg = int | str | torch.Tensor | Callable[[torch.Tensor], torch.Tensor]

_MEMORY_SAFETY_FACTOR = 1.5
# On CPU, chunks whose estimated working set is about this size ran fastest (benchmarks/bench_ig.py);
# one batch of every step, Captum's default, was up to 2x slower.
CPU_WORKING_SET_BYTES = 64 * 1024 * 1024
# Bytes per path sample measured by the probe step, per model and input shape: activation
# memory does not depend on the weights' values, so a repeat run need not probe again.
_SAMPLE_BYTES: weakref.WeakKeyDictionary[nn.Module, dict[tuple[Any, ...], int]] = (
    weakref.WeakKeyDictionary()
)


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
    panel_nodes: int = 0  # adaptive rule: Gauss-Legendre nodes per panel
    error_scale: np.ndarray | None = None  # (N,) what completeness_rel_error is relative to

    @property
    def delta(self) -> np.ndarray:
        """Signed completeness gap ``sum(attr) - (F(x) - F(b))`` per input (Captum's delta)."""
        gap: np.ndarray = self.attribution_sum - (self.f_input - self.f_baseline)
        return gap


# ----------------------------------------------------------------------------- model plumbing


def _select_target(output: torch.Tensor, classes: torch.Tensor | None) -> torch.Tensor:
    """F per example: ``output[:, k]`` summed over further dims (as ``context.target_scalar``)."""
    n = output.shape[0]
    if output.dim() < 2 or classes is None:
        return output.reshape(n, -1).sum(dim=1)
    flat = output.reshape(n, output.shape[1], -1)
    index = (
        classes.to(device=output.device, dtype=torch.long).view(n, 1, 1).expand(n, 1, flat.shape[2])
    )
    return flat.gather(1, index).reshape(n, -1).sum(dim=1)


def _argmax_classes(output: torch.Tensor) -> torch.Tensor:
    n = output.shape[0]
    if output.dim() < 2:
        return torch.zeros(n, dtype=torch.long)
    return output.detach().reshape(n, output.shape[1], -1).sum(dim=2).argmax(dim=1).cpu()


@contextmanager
def _eval_mode(model: nn.Module) -> Iterator[dict[str, Any]]:
    """Eval mode for the duration; every module's own training flag is restored after."""
    modules = list(model.named_modules())
    flags = [(module, module.training) for _, module in modules]
    model.eval()
    info: dict[str, Any] = {
        "was_training": any(training for _, training in flags),
        "has_batchnorm": any(isinstance(m, nn.modules.batchnorm._BatchNorm) for _, m in modules),
        "has_dropout": any(isinstance(m, nn.modules.dropout._DropoutNd) for _, m in modules),
        # modules whose train()/eval() override leaves them training (their outputs may vary)
        "still_training_after_eval": [name for name, m in modules if m.training],
    }
    try:
        yield info
    finally:
        for module, training in flags:
            module.training = training


class _PathEvaluator:
    """Pushes path points through the model; returns gradients and F in float64."""

    def __init__(
        self,
        model: nn.Module,
        dtype: torch.dtype,
        classes: torch.Tensor | None,
        target_fn: Callable[[torch.Tensor], torch.Tensor] | None,
    ) -> None:
        self.model = model
        self.dtype = dtype
        self.classes = classes
        self.target_fn = target_fn
        self.param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.param_ptrs |= {b.untyped_storage().data_ptr() for b in model.buffers()}

    def target(self, output: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        if self.target_fn is not None:
            return self.target_fn(output)
        return _select_target(output, None if self.classes is None else self.classes[idx])

    def endpoints(
        self, x64: torch.Tensor, b64: torch.Tensor, chunk: int, *, find_classes: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """F(x) and F(b) (float64), inputs and baselines in one forward per chunk; with
        ``find_classes``, each input's class is its argmax at x."""
        n = x64.shape[0]
        f_x, f_b = np.empty(n), np.empty(n)
        with torch.no_grad():
            for s in range(0, n, chunk):
                e = min(n, s + chunk)
                out = self.model(torch.cat([x64[s:e], b64[s:e]]).to(self.dtype))
                if find_classes:
                    assert self.classes is not None
                    self.classes[s:e] = _argmax_classes(out[: e - s])
                idx = torch.arange(s, e)
                f_x[s:e] = self.target(out[: e - s], idx).to(torch.float64).cpu().numpy()
                f_b[s:e] = self.target(out[e - s :], idx).to(torch.float64).cpu().numpy()
        return f_x, f_b

    def grad(self, points: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradient of F (float64, shape of ``points``) and F (k,) float64 at ``points``.

        ``idx`` are the input indices of the samples (for their target classes). F is summed
        over the batch before backward: each sample's F depends on that sample only (eval
        mode), and d(sum)/dF_i = 1 exactly, so these are the per-sample gradients, bit for bit.
        """
        leaf = points.detach().requires_grad_(True)
        with torch.enable_grad():
            # A copy, not the leaf, enters the model: a model that writes into its input
            # (an in-place ReLU first) still differentiates, and the gradient arrives as the
            # exact float64 image of the model-precision one.
            f = self.target(self.model(leaf.to(self.dtype, copy=True)), idx)
            g = (
                torch.autograd.grad(f.sum(), leaf, allow_unused=True)[0]
                if f.requires_grad
                else None
            )
        return (torch.zeros_like(leaf) if g is None else g), f.detach().to(torch.float64)

    def measure_sample_bytes(self, point: torch.Tensor, idx: torch.Tensor) -> int:
        """Bytes one path sample needs, from one probe step: the tensors autograd saves for
        backward (parameters and buffers excluded, storages counted once; the allocator's
        peak on CUDA if larger) plus the path point, its gradient and float64 work copies."""
        saved: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            try:
                storage = t.untyped_storage()
                ptr, size = storage.data_ptr(), storage.nbytes()
            except (RuntimeError, NotImplementedError):  # tensor subclasses without storage
                ptr, size = id(t), t.numel() * t.element_size()
            if ptr not in self.param_ptrs and ptr not in saved:
                saved[ptr] = size
            return t

        cuda = point.device.type == "cuda"
        before = 0
        if cuda:
            torch.cuda.synchronize(point.device)
            torch.cuda.reset_peak_memory_stats(point.device)
            before = torch.cuda.memory_allocated(point.device)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            self.grad(point, idx)
        measured = sum(saved.values())
        if cuda:
            measured = max(measured, torch.cuda.max_memory_allocated(point.device) - before)
        element_bytes = point[0].numel() * (2 * _itemsize(self.dtype) + 3 * 8)
        return max(1, int(_MEMORY_SAFETY_FACTOR * (measured / point.shape[0] + element_bytes)))


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _chunk_size(per_sample_bytes: int, budget: int, device: torch.device) -> int:
    """Samples per chunk: within the memory budget and, on CPU, within a cache-friendly
    working set (measured: one huge batch is slower on CPU than chunks of ~32 MiB)."""
    limit = budget if device.type != "cpu" else min(budget, CPU_WORKING_SET_BYTES)
    return max(1, min(limit // per_sample_bytes, 1 << 20))


@dataclass
class _Level:
    """Evaluations of one quadrature level for the active inputs (node-major)."""

    nodes: np.ndarray  # (k,)
    f: np.ndarray  # (k, m) F at each node for each active input
    slope: np.ndarray  # (k, m) integrand <grad, x - b>
    inputs: np.ndarray  # (m,) input indices


def _evaluate_level(
    evaluator: _PathEvaluator,
    acc: torch.Tensor,
    b64: torch.Tensor,
    diff64: torch.Tensor,
    idx_active: torch.Tensor,
    nodes: np.ndarray,
    weights: np.ndarray,
    chunk: int,
) -> _Level:
    """``acc[p] += w_j * grad(t_j, p)`` for every node j and active input p, in chunks.

    ``acc``, ``b64`` and ``diff64`` hold the active inputs only (compact). Every input
    receives its terms in node order whatever the chunk size, so the float64 sum is the
    same bits for any memory budget (for a model whose per-sample results do not depend on
    the batch size), each gradient weighted by its float64 weight as ``add_``'s ``alpha``.
    """
    m, k = len(idx_active), len(nodes)
    f_out = np.empty((k, m))
    slope_out = np.empty((k, m))
    nodes_t = torch.from_numpy(nodes).to(b64.device)
    shape = (-1,) + (1,) * (b64.dim() - 1)
    total = k * m
    for start in range(0, total, chunk):
        stop = min(total, start + chunk)
        flat = torch.arange(start, stop)
        node_of, pos = flat // m, flat % m
        pos_dev = pos.to(b64.device)
        diff = diff64[pos_dev]
        points = torch.addcmul(b64[pos_dev], nodes_t[node_of.to(b64.device)].view(shape), diff)
        grads, fs = evaluator.grad(points, idx_active[pos])
        slopes = (grads * diff).reshape(stop - start, -1).sum(dim=1)
        f_out[node_of.numpy(), pos.numpy()] = fs.cpu().numpy()
        slope_out[node_of.numpy(), pos.numpy()] = slopes.cpu().numpy()
        # Runs of one node over consecutive active inputs, added in node order.
        flat_i = start
        while flat_i < stop:
            j, p0 = divmod(flat_i, m)
            p1 = min(m, p0 + (stop - flat_i))
            c0 = flat_i - start
            acc[p0:p1].add_(grads[c0 : c0 + p1 - p0], alpha=float(weights[j]))
            flat_i += p1 - p0
    return _Level(nodes=nodes, f=f_out, slope=slope_out, inputs=idx_active.numpy().copy())


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
    panel_nodes: int = DEFAULT_PANEL_NODES,
) -> IGResult:
    """Integrated gradients of ``F(x) = model(x)[:, target]`` (summed over further dims).

    ``inputs`` (N, ...) in the precision the model runs in. ``target``: an int class, a (N,)
    tensor of classes, ``"argmax"`` (each input's predicted class), ``"label"`` (``labels``),
    or a callable mapping the model output (k, ...) to F (k,). ``baseline``: a tensor
    broadcastable to ``inputs`` or one of :data:`BASELINES` (see :func:`make_baseline`).
    With ``tolerance``, steps double until every input's relative completeness error is at
    most ``tolerance`` or ``max_steps`` is reached. ``return_diagnostics`` keeps F and the
    integrand at every evaluated node of each path (``IGResult.path``).
    """
    method = canonical_method(method or (ADAPTIVE if tolerance is not None else "trapezoid"))
    if method == ADAPTIVE:
        if isinstance(steps, bool) or int(steps) != steps or steps < 1:
            raise InputError(f"steps must be an integer >= 1, got {steps!r}")
        if isinstance(panel_nodes, bool) or int(panel_nodes) != panel_nodes or panel_nodes < 1:
            raise InputError(f"panel_nodes must be an integer >= 1, got {panel_nodes!r}")
    else:
        quadrature(method, steps)  # validates steps
    if inputs.dim() < 1 or inputs.shape[0] == 0:
        raise InputError("inputs must be a non-empty batch (N, ...)")
    if memory_budget_bytes <= 0:
        raise InputError(f"memory_budget_bytes must be positive, got {memory_budget_bytes}")
    n = inputs.shape[0]
    dtype = inputs.dtype if inputs.is_floating_point() else torch.float32
    x64 = inputs.detach().to(torch.float64)
    if isinstance(baseline, str):
        b64 = make_baseline(baseline, inputs, seed=seed)
    else:
        b64 = torch.broadcast_to(baseline.detach().to(x64.device, torch.float64), x64.shape).clone()
    diff64 = x64 - b64
    classes, pending, target_fn = _resolve_target(target, labels, n)
    everyone = torch.arange(n)

    with _eval_mode(model) as model_info:
        evaluator = _PathEvaluator(model, dtype, classes, target_fn)
        if pending == "argmax":  # the probe step needs input 0's class before the rest
            with torch.no_grad():
                evaluator.classes = torch.zeros(n, dtype=torch.long)
                evaluator.classes[:1] = _argmax_classes(model(x64[:1].to(dtype)))
        key = (tuple(x64.shape[1:]), dtype, str(x64.device))
        cache = _SAMPLE_BYTES.setdefault(model, {})
        if key not in cache:  # one probe step per model and input shape
            cache[key] = evaluator.measure_sample_bytes(x64[:1], everyone[:1])
        per_sample = cache[key]
        chunk = _chunk_size(per_sample, memory_budget_bytes, x64.device)
        f_x, f_b = evaluator.endpoints(
            x64, b64, max(1, chunk // 2), find_classes=pending == "argmax"
        )
        delta_f = f_x - f_b
        model_eps = float(torch.finfo(dtype).eps)
        error_scale = completeness_scale(f_x, f_b, model_eps)
        if method == ADAPTIVE:
            outcome = adaptive_paths(
                evaluator,
                b64,
                diff64,
                f_x,
                f_b,
                # initial panels: about ``steps`` path samples (m nodes + one panel end each)
                panels=max(1, round(steps / (panel_nodes + 1))),
                panel_nodes=int(panel_nodes),
                tolerance=tolerance,
                max_evaluations=max_steps,
                chunk=chunk,
                model_eps=model_eps,
                vector_budget_bytes=memory_budget_bytes,
            )
        else:
            fixed = _fixed_paths(
                evaluator,
                method,
                int(steps),
                tolerance,
                max_steps,
                b64,
                diff64,
                delta_f,
                error_scale,
                chunk,
                return_diagnostics,
            )
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
        return _adaptive_result(outcome, diff64, common, return_diagnostics, int(panel_nodes))
    acc, attr_sum, abs_error, rel_error, steps_used, evaluations, curve, levels = fixed
    return IGResult(
        attributions=acc * diff64,
        attribution_sum=attr_sum,
        completeness_abs_error=abs_error,
        completeness_rel_error=rel_error,
        steps_used=steps_used,
        evaluations=evaluations,
        converged=(rel_error <= tolerance) if tolerance is not None else np.ones(n, dtype=bool),
        error_curve=curve,
        path=_path_samples(levels, f_x, f_b) if return_diagnostics else None,
        **common,
    )


def _fixed_paths(
    evaluator: _PathEvaluator,
    method: str,
    steps: int,
    tolerance: float | None,
    max_steps: int,
    b64: torch.Tensor,
    diff64: torch.Tensor,
    delta_f: np.ndarray,
    error_scale: np.ndarray,
    chunk: int,
    return_diagnostics: bool,
) -> tuple[Any, ...]:
    """A fixed rule, its step count doubled while any input misses ``tolerance``."""
    n = b64.shape[0]
    everyone = torch.arange(n)
    acc = torch.zeros_like(b64)  # running weighted sum of gradients, float64
    steps_used = np.zeros(n, dtype=np.int64)
    evaluations = np.zeros(n, dtype=np.int64)
    rel_error = np.full(n, np.inf)
    abs_error = np.full(n, np.inf)
    attr_sum = np.zeros(n)
    active = np.ones(n, dtype=bool)
    levels: list[_Level] = []
    curve: list[dict[str, Any]] = []
    level_steps, previous = int(steps), 0
    while True:
        if previous == 0:
            nodes, weights = quadrature(method, level_steps)
            scale_old = 0.0
        else:
            nodes, weights, scale_old = refinement(method, previous, level_steps)
        idx = everyone[torch.from_numpy(active)]
        previous_attr = acc[idx] * diff64[idx]
        acc_active = acc[idx] * scale_old
        level = _evaluate_level(
            evaluator, acc_active, b64[idx], diff64[idx], idx, nodes, weights, chunk
        )
        acc[idx] = acc_active
        if return_diagnostics:
            levels.append(level)
        evaluations[active] += len(nodes)
        steps_used[active] = level_steps
        attr_active = (acc_active * diff64[idx]).reshape(len(idx), -1)
        sums = attr_active.sum(dim=1).cpu().numpy()
        change = (attr_active - previous_attr.reshape(len(idx), -1)).norm(dim=1) / attr_active.norm(
            dim=1
        )
        attr_sum[active] = sums
        abs_error[active] = np.abs(sums - delta_f[active])
        with np.errstate(divide="ignore", invalid="ignore"):
            rel_error[active] = np.where(
                abs_error[active] == 0, 0.0, abs_error[active] / error_scale[active]
            )
        curve.append(
            {
                "steps": level_steps,
                "inputs": np.flatnonzero(active).tolist(),
                "evaluations": evaluations[active].tolist(),
                "rel_error": [_finite_or_none(v) for v in rel_error[active]],
                # relative L2 change of the attributions since the previous step count
                "attribution_change": [
                    _finite_or_none(v) if previous else None for v in change.cpu().numpy()
                ],
            }
        )
        if tolerance is None:
            break
        active &= ~(rel_error <= tolerance)
        following = next_steps(method, level_steps)
        if not active.any() or following > max_steps:
            break
        previous, level_steps = level_steps, following

    return acc, attr_sum, abs_error, rel_error, steps_used, evaluations, curve, levels


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _path_samples(levels: list[_Level], f_x: np.ndarray, f_b: np.ndarray) -> list[PathSamples]:
    """Every node evaluated for each input, over all levels, sorted by t (first value kept)."""
    out = []
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
    panel_nodes: int,
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
        panel_nodes=panel_nodes,
        **common,
    )
