"""Integrated gradients with a fixed quadrature rule: the step count doubles from ``steps``
until the completeness error meets the tolerance or ``max_steps`` is reached.

One level of the rule is one batch of path points through the model
(:class:`~attest.collection.ig.evaluator.PathEvaluator`); nested rules reuse the nodes of the
previous level. :func:`fixed_paths` returns what :func:`attest.collection.ig.attribution.integrated_gradients`
assembles into its result (the adaptive rule lives in :mod:`attest.collection.ig.adaptive`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from attest.collection.ig.evaluator import (
    PathEvaluator,
    eval_mode,
    path_evaluator,
    samples_per_chunk,
)
from attest.collection.ig.panels import completeness_scale
from attest.collection.ig.quadrature import (
    next_steps,
    quadrature,
    refinement,
)

__all__ = ["FixedOutcome", "Level", "evaluate_level", "fixed_paths", "fixed_rule_maps"]


@dataclass
class Level:
    """Evaluations of one quadrature level for the active inputs (node-major)."""

    nodes: np.ndarray  # (k,)
    f: np.ndarray  # (k, m) F at each node for each active input
    slope: np.ndarray  # (k, m) integrand <grad, x - b>
    inputs: np.ndarray  # (m,) input indices
    endpoint_f: np.ndarray | None = None  # (2n,) F at the inputs then the baselines, if asked


def evaluate_level(
    evaluator: PathEvaluator,
    acc: torch.Tensor,
    b64: torch.Tensor,
    diff64: torch.Tensor,
    idx_active: torch.Tensor,
    nodes: np.ndarray,
    weights: np.ndarray,
    chunk: int,
    endpoints: tuple[torch.Tensor, torch.Tensor] | None = None,
    find_classes: bool = False,
) -> Level:
    """``acc[p] += w_j * grad(t_j, p)`` for every node j and active input p, in chunks.

    ``endpoints`` (inputs, baselines), with ``find_classes``: evaluated in the first chunk
    (see :meth:`PathEvaluator.grad`); their F is returned as ``endpoint_f``.

    ``acc``, ``b64`` and ``diff64`` hold the active inputs only (compact). Every input
    receives its terms in node order whatever the chunk size, so the float64 sum is the
    same bits for any memory budget (for a model whose per-sample results do not depend on
    the batch size): the products ``w_j g_j`` for a whole chunk at once, then added to
    ``acc`` one node after the other.
    """
    m, k = len(idx_active), len(nodes)
    f_out = np.empty((k, m))
    slope_out = np.empty((k, m))
    nodes_t = torch.from_numpy(nodes).to(b64.device)
    weights_t = torch.from_numpy(weights).to(b64.device)
    lanes = (1,) * (b64.dim() - 1)
    total = k * m
    endpoint_f = None
    for start in range(0, total, chunk):
        stop = min(total, start + chunk)
        # Node-major order: sample s of the level is node s // m of active input s % m. The
        # chunk is the slice ``block`` of the grid (nodes j0..j1-1) x (all m inputs).
        j0, p0 = divmod(start, m)
        j1 = (stop - 1) // m + 1
        rows, block = j1 - j0, slice(p0, p0 + stop - start)
        grid = torch.addcmul(b64.unsqueeze(0), nodes_t[j0:j1].view(-1, 1, *lanes), diff64)
        grads, fs = evaluator.grad(
            grid.flatten(0, 1)[block],
            idx_active.repeat(rows)[block],
            endpoints,
            find_classes=find_classes,
        )
        f_np = fs.cpu().numpy()
        if endpoints is not None:
            endpoint_f, endpoints = f_np[stop - start :], None
        f_out.reshape(-1)[start:stop] = f_np[: stop - start]
        padded = grads
        if stop - start != rows * m:  # part of a node's inputs: pad with zeros
            padded = grads.new_zeros((rows * m, *grads.shape[1:]))
            padded[block] = grads
        padded = padded.reshape(rows, m, *grads.shape[1:])
        slopes = (padded * diff64).reshape(rows * m, -1).sum(dim=1)[block]
        slope_out.reshape(-1)[start:stop] = slopes.cpu().numpy()
        for row in padded * weights_t[j0:j1].view(-1, 1, *lanes):
            acc.add_(row)  # padding terms are exact zeros: they leave the sum's bits alone
    return Level(nodes, f_out, slope_out, idx_active.numpy().copy(), endpoint_f)


@dataclass
class FixedOutcome:
    """What :func:`fixed_paths` found (per-input arrays of length N)."""

    acc: torch.Tensor  # weighted gradient sums, float64
    attr_sum: np.ndarray
    abs_error: np.ndarray
    rel_error: np.ndarray
    steps_used: np.ndarray
    evaluations: np.ndarray
    curve: list[dict[str, Any]]
    levels: list[Level]
    f_x: np.ndarray
    f_b: np.ndarray
    error_scale: np.ndarray


def fixed_paths(
    evaluator: PathEvaluator,
    method: str,
    steps: int,
    tolerance: float | None,
    max_steps: int,
    b64: torch.Tensor,
    diff64: torch.Tensor,
    chunk: int,
    return_diagnostics: bool,
    model_eps: float,
    f_x: np.ndarray,
    f_b: np.ndarray,
    merged: tuple[torch.Tensor, torch.Tensor] | None,
    *,
    find_classes: bool,
) -> FixedOutcome:
    """A fixed rule, its step count doubled while any input misses ``tolerance``.

    F(x) and F(b) are ``f_x``, ``f_b``; or, with ``merged`` (the inputs and baselines), the
    first level computes them in its first chunk (``find_classes``: and their classes).
    """
    n = b64.shape[0]
    delta_f = f_x - f_b
    error_scale = completeness_scale(f_x, f_b, model_eps)
    everyone = torch.arange(n)
    acc = torch.zeros_like(b64)  # running weighted sum of gradients, float64
    steps_used = np.zeros(n, dtype=np.int64)
    evaluations = np.zeros(n, dtype=np.int64)
    rel_error = np.full(n, np.inf)
    abs_error = np.full(n, np.inf)
    attr_sum = np.zeros(n)
    active = np.ones(n, dtype=bool)
    levels: list[Level] = []
    curve: list[dict[str, Any]] = []
    level_steps, previous = int(steps), 0
    while True:
        if previous == 0:
            nodes, weights = quadrature(method, level_steps)
            scale_old = 0.0
        else:
            nodes, weights, scale_old = refinement(method, previous, level_steps)
        everything = bool(active.all())  # (then no gathering and scattering)
        idx = everyone if everything else everyone[torch.from_numpy(active)]
        b_active = b64 if everything else b64[idx]
        diff_active = diff64 if everything else diff64[idx]
        previous_attr = acc[idx] * diff_active if previous else None
        acc_active = acc * scale_old if everything else acc[idx] * scale_old
        level = evaluate_level(
            evaluator,
            acc_active,
            b_active,
            diff_active,
            idx,
            nodes,
            weights,
            chunk,
            merged if previous == 0 else None,
            find_classes=find_classes,
        )
        if level.endpoint_f is not None:
            f_x, f_b = level.endpoint_f[:n].copy(), level.endpoint_f[n:].copy()
            delta_f = f_x - f_b
            error_scale = completeness_scale(f_x, f_b, model_eps)
        if everything:
            acc = acc_active
        else:
            acc[idx] = acc_active
        if return_diagnostics:
            levels.append(level)
        evaluations[active] += len(nodes)
        steps_used[active] = level_steps
        attr_active = (acc_active * diff_active).reshape(len(idx), -1)
        sums = attr_active.sum(dim=1).cpu().numpy()
        change: list[float | None] = [None] * len(idx)
        if previous_attr is not None:  # relative L2 change since the previous step count
            rel_change = (attr_active - previous_attr.reshape(len(idx), -1)).norm(dim=1)
            change = [_finite_or_none(v) for v in (rel_change / attr_active.norm(dim=1)).tolist()]
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
                "attribution_change": change,
            }
        )
        if tolerance is None:
            break
        active &= ~(rel_error <= tolerance)
        following = next_steps(method, level_steps)
        if not active.any() or following > max_steps:
            break
        previous, level_steps = level_steps, following

    return FixedOutcome(
        acc,
        attr_sum,
        abs_error,
        rel_error,
        steps_used,
        evaluations,
        curve,
        levels,
        f_x,
        f_b,
        error_scale,
    )


def _finite_or_none(value: float) -> float | None:
    """The value, or None when it is NaN or infinite (evidence is strict JSON)."""
    return float(value) if np.isfinite(value) else None


def fixed_rule_maps(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    classes: torch.Tensor,
    baseline: torch.Tensor,
    method: str,
    steps: int,
    memory_budget_bytes: int,
) -> torch.Tensor | None:
    """The attributions ``integrated_gradients(model, inputs, target=classes,
    baseline=baseline, method=method, steps=steps, memory_budget_bytes=memory_budget_bytes)``
    returns (no tolerance: one level of the rule), bit for bit, without the forward pass of
    its own that it spends on F(x) and F(b) when they do not ride along in the path's first
    chunk. F(x) and F(b) only feed the completeness figures, which a caller that reads the
    maps alone (``ig_randomization``'s stages: a third of a stage's passes on resnet18 at
    224^2, docs/benchmarks.md) discards.

    None where they would ride along (a small model: then they cost next to nothing, and
    leaving them out would change that chunk's batch); the caller then runs
    ``integrated_gradients``. Call it only for a model whose forward draws no random numbers
    (the pass it leaves out would have advanced the generator that the path's passes read).
    """
    n = int(inputs.shape[0])
    dtype = inputs.dtype if inputs.is_floating_point() else torch.float32
    x64 = inputs.detach().to(torch.float64)
    b64 = torch.broadcast_to(baseline.detach().to(x64.device, torch.float64), x64.shape).clone()
    diff64 = x64 - b64
    known = classes.detach().reshape(-1).to(torch.long).cpu()
    with eval_mode(model) as model_info:
        evaluator, per_sample = path_evaluator(model, x64, dtype, known, None, False, model_info)
        chunk = samples_per_chunk(per_sample, memory_budget_bytes, x64.device, n)
        if not model_info["still_training_after_eval"] and (steps + 2) * n <= chunk:
            return None  # integrated_gradients merges F(x), F(b) into the first chunk
        nodes, weights = quadrature(method, steps)
        acc = torch.zeros_like(b64) * 0.0  # as fixed_paths starts its first level
        evaluate_level(evaluator, acc, b64, diff64, torch.arange(n), nodes, weights, chunk)
    return acc * diff64
