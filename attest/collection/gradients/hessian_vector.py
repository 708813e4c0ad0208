"""Hessian-vector products of the probe objective: double backward vs finite differences.

Pearlmutter's trick gives ``Hv`` as the gradient of ``<g, v>`` where ``g`` is the gradient
built with ``create_graph=True``. For seeded random directions ``v`` over the trainable
parameters and the probe input (each tensor's part scaled by that tensor's RMS, so steps are
relative), it is compared in float64 with central differences of the gradient,
``(g(theta + eps v) - g(theta - eps v)) / (2 eps)``::

    rel_error = ||Hv_ad - Hv_fd|| / max(||Hv_ad||, ||Hv_fd||, atol * ||g||)

passing at ``rel_error <= rtol``; the step is swept over several orders when the default
fails. At steps up to :data:`FORWARD_MAX_EPS` the difference is one-sided,
``(g(theta + eps v) - g(theta)) / eps`` with ``g(theta)`` the gradient the double backward
differentiates: in float64 its truncation error (``O(eps)``, about 1e-7 of the product) is four
orders below ``rtol``, the rounding error is the central difference's, and it costs one
gradient instead of two (a gradient of a large float64 network is most of this check's cost).
Larger steps, which the sweep tries for gradients with float32 rounding in them, are central. Directions span only the tensors that receive a gradient: a parameter autograd does
not differentiate (dead, or severed by ``detach``: the ``gradient_flow`` check's business)
would make finite differences see a dependence autograd cannot. If no step works at the probe
point but one works at a nearby point, the probe point lies on a kink (a ReLU input at exactly
0 makes the gradient jump there), which the ``kinks`` check reports; the direction passes and
says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from attest.collection.capture.run import model_output_tensor
from attest.collection.context import LoadedSpec
from attest.collection.gradients.finite_differences import finite_or_none
from attest.collection.gradients.flow import probe_objective

__all__ = [
    "FORWARD_MAX_EPS",
    "HVP_EPS",
    "HVP_EPS_SWEEP",
    "Graph",
    "Unrepresentative",
    "hessian_vector_check",
    "missing_backward",
]


class Unrepresentative(Exception):
    """The sub-batch cannot stand for the probe batch: its forward raised (a model that
    assumes the batch size) or its gradient is zero or not finite (every label of the
    sub-batch ignored by the loss, say). The caller runs the full batch instead."""


# A small default step: in ReLU/max-pool networks a larger one moves some of the (many)
# pre-activations across their kink, and each crossing makes the gradient jump.
HVP_EPS = 1e-7
# Larger steps too: a model whose float64 instance still runs part of its path in float32
# (the reference FNO code allocates its spectrum with a hard-coded dtype=torch.cfloat) has
# gradients with float32 rounding, which the small steps' differences amplify (the error grows
# as 1/eps, from 1e-5 of the product at eps=1e-3 to 1e-1 at 1e-7). A wrong double backward
# fails at every step.
# Tried in this order, stopping at the first that passes: smaller steps first, because the
# usual reason the default fails on a large ReLU network is a kink crossing (millions of
# pre-activations: a step of 1e-7 of the RMS moves a few across 0), which a smaller step cures;
# the larger steps (rounding) after them.
HVP_EPS_SWEEP: tuple[float, ...] = (1e-8, 1e-9, 1e-6, 1e-5, 1e-4, 1e-3)
# One-sided differences up to this step (see the module docstring), central above it.
FORWARD_MAX_EPS = 1e-6
# The differentiated tensors and their gradients, still attached to the double-backward graph.
Graph = tuple[list[torch.Tensor], list[torch.Tensor | None]]

NEARBY = 1e-3  # size of the move to a nearby point, relative to each tensor's RMS


def _norm(ts: Sequence[torch.Tensor]) -> float:
    # One foreach kernel for all tensors, not three small kernels per tensor.
    return float(torch.nn.utils.get_total_norm(list(ts), foreach=True)) if ts else 0.0


def _rms_scaled_gaussians(
    tensors: list[torch.Tensor], live: list[bool], generator: torch.Generator, scale: float = 1.0
) -> list[torch.Tensor]:
    """A Gaussian direction for each live tensor, scaled by its RMS modulus (at least 1e-3)
    times ``scale``; zeros for the others. A complex tensor (an FNO's spectral weights) gets
    a complex direction (randn's complex draw has E|z|^2 = 1). The real ones share one draw
    and every RMS comes from one foreach norm (a few kernels per tensor dominated small
    models)."""
    norms = torch.stack(torch._foreach_norm(tensors)).tolist() if tensors else []
    real = [i for i, t in enumerate(tensors) if live[i] and not t.is_complex()]
    draw = torch.randn(
        sum(tensors[i].numel() for i in real), generator=generator, dtype=torch.float64
    )
    pieces = iter(torch.split(draw, [tensors[i].numel() for i in real]))
    out: list[torch.Tensor] = []
    for i, t in enumerate(tensors):
        if not live[i]:
            out.append(torch.zeros_like(t))
            continue
        if t.is_complex():
            noise = torch.randn(t.shape, generator=generator, dtype=torch.complex128)
        else:
            noise = next(pieces).view(t.shape)
        rms = norms[i] / math.sqrt(t.numel()) if t.numel() else 0.0
        out.append(noise.to(t.device) * (max(rms, 1e-3) * scale))
    return out


class _Objective:
    """The probe objective as a function of (parameters, input), evaluated at given values."""

    def __init__(
        self, model: nn.Module, spec: LoadedSpec, x: torch.Tensor, labels: torch.Tensor | None
    ) -> None:
        self.model = model
        self.spec = spec
        self.labels = labels
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.with_x = x.is_floating_point()
        self.x = x.detach().clone()

    def point(self) -> list[torch.Tensor]:
        return [p.detach().clone() for p in self.params] + ([self.x] if self.with_x else [])

    def load(self, values: list[torch.Tensor]) -> torch.Tensor:
        if self.params:
            with torch.no_grad():
                torch._foreach_copy_(list[torch.Tensor](self.params), values[: len(self.params)])
        return values[-1].detach().clone().requires_grad_(True) if self.with_x else self.x

    def gradient(
        self, values: list[torch.Tensor], create_graph: bool
    ) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
        x = self.load(values)
        wrt: list[torch.Tensor] = [*self.params, x] if self.with_x else list(self.params)
        with torch.enable_grad():
            objective = probe_objective(self.spec, model_output_tensor(self.model(x)), self.labels)
            grads = torch.autograd.grad(
                objective, wrt, create_graph=create_graph, allow_unused=True
            )
        return wrt, list(grads)


def _zeros_for_none(
    grads: list[torch.Tensor | None], like: list[torch.Tensor]
) -> list[torch.Tensor]:
    return [torch.zeros_like(w) if g is None else g for g, w in zip(grads, like, strict=True)]


def _shifted(
    values: list[torch.Tensor], direction: list[torch.Tensor], step: float
) -> list[torch.Tensor]:
    return list(torch._foreach_add(values, direction, alpha=step))


def _hessian_vector_products(
    wrt: list[torch.Tensor], raw: list[torch.Tensor | None], directions: list[list[torch.Tensor]]
) -> list[list[torch.Tensor]]:
    """``H v`` for every direction by double backward through the gradient's graph.

    One backward per direction: batching them (``is_grads_batched``) was measured slower on
    CPU convolutions (vmap over the double backward), so it is not used."""
    tracked = [i for i, g in enumerate(raw) if g is not None and g.requires_grad]
    if not tracked:
        return [[torch.zeros_like(w) for w in wrt] for _ in directions]
    outputs = [g for g in raw if g is not None and g.requires_grad]
    products = []
    for direction in directions:
        hv = torch.autograd.grad(
            outputs,
            wrt,
            grad_outputs=[direction[i] for i in tracked],
            retain_graph=True,
            allow_unused=True,
        )
        products.append(
            [torch.zeros_like(w) if h is None else h.detach() for w, h in zip(wrt, hv, strict=True)]
        )
    return products


def _compare(
    objective: _Objective,
    point: list[torch.Tensor],
    directions: list[list[torch.Tensor]],
    rtol: float,
    atol: float,
    graph: list[Graph] | None = None,
) -> list[dict[str, Any]]:
    """Double-backward Hv at ``point`` for each direction, against finite differences.

    ``graph`` holds the gradient at ``point`` already built with ``create_graph`` (reused):
    popped, so that no caller's reference keeps it alive while the differences run."""
    wrt, raw = graph.pop() if graph else objective.gradient(point, create_graph=True)
    # The gradient at the point, detached: the one-sided differences' base (the graph it
    # hangs on is freed with ``raw`` once the double backwards are done).
    here = [g.detach() for g in _zeros_for_none(raw, wrt)]
    g_norm = _norm(here)
    # Every double backward first: the finite differences below load shifted values into the
    # parameters in place, which would invalidate the tensors this graph saved.
    products = _hessian_vector_products(wrt, raw, directions)
    del raw
    outcomes: list[dict[str, Any]] = []
    for direction, hv in zip(directions, products, strict=True):
        hv_norm = _norm(hv)

        def error_at(
            eps: float,
            direction: list[torch.Tensor] = direction,
            hv: list[torch.Tensor] = hv,
            hv_norm: float = hv_norm,
        ) -> float:
            _, plus = objective.gradient(_shifted(point, direction, eps), create_graph=False)
            if eps <= FORWARD_MAX_EPS:  # one-sided (see the module docstring)
                fd = torch._foreach_sub(_zeros_for_none(plus, wrt), here)
                torch._foreach_div_(fd, eps)
            else:
                _, minus = objective.gradient(_shifted(point, direction, -eps), create_graph=False)
                # foreach kernels: one per step of the arithmetic, not one per tensor
                fd = torch._foreach_sub(_zeros_for_none(plus, wrt), _zeros_for_none(minus, wrt))
                torch._foreach_div_(fd, 2 * eps)
            norms = [_norm(list(torch._foreach_sub(hv, fd))), _norm(fd)] if fd else [0.0, 0.0]
            diff, fd_norm = norms
            if not math.isfinite(diff):
                return math.inf
            scale = max(hv_norm, fd_norm, atol * g_norm)
            return diff / scale if scale > 0 else 0.0

        error, eps = error_at(HVP_EPS), HVP_EPS
        curve: dict[str, float | None] = {}
        if error > rtol:
            curve[f"{HVP_EPS:.0e}"] = finite_or_none(error)
            for candidate in HVP_EPS_SWEEP:  # until one passes (see HVP_EPS_SWEEP)
                candidate_error = error_at(candidate)
                curve[f"{candidate:.0e}"] = finite_or_none(candidate_error)
                if candidate_error < error:
                    error, eps = candidate_error, candidate
                if error <= rtol:
                    break
        outcomes.append(
            {
                "max_rel_error": finite_or_none(error),
                "eps": eps,
                "difference": "forward" if eps <= FORWARD_MAX_EPS else "central",
                "passed": error <= rtol,
                "hv_norm": finite_or_none(hv_norm),
                "grad_norm": finite_or_none(g_norm),
                "error_curve": curve,
            }
        )
    return outcomes


def _first_graph(objective: _Objective, point: list[torch.Tensor], sub_batch: bool) -> Graph:
    """The gradient at ``point`` with its double-backward graph. On a sub-batch, a forward
    that raises or a gradient with no signal (zero, or not finite) is :class:`Unrepresentative`:
    the caller falls back to the full batch, where the same failure is the model's."""
    if not sub_batch:
        return objective.gradient(point, create_graph=True)
    try:
        wrt, raw = objective.gradient(point, create_graph=True)
    except Exception as exc:
        if missing_backward(exc):
            raise  # a property of the model, not of the batch size
        raise Unrepresentative(f"{type(exc).__name__}: {exc}") from exc
    norm = _norm([g.detach() for g in raw if g is not None])
    if not math.isfinite(norm) or norm == 0.0:
        raise Unrepresentative(f"the sub-batch's gradient has norm {norm}")
    return wrt, raw


def missing_backward(exc: Exception) -> bool:
    """A backward that raises for a reason the batch size cannot change: an in-place write to
    a saved tensor (see gradient_flow) or a missing derivative formula."""
    text = str(exc)
    return "inplace" in text or ("derivative for" in text and "not implemented" in text)


def hessian_vector_check(
    model: nn.Module,
    spec: LoadedSpec,
    x: torch.Tensor,
    labels: torch.Tensor | None,
    directions: int,
    seed: int,
    rtol: float,
    atol: float,
    graph: list[Graph] | None = None,
    sub_batch: bool = False,
) -> list[dict[str, Any]]:
    """One outcome per seeded direction (see the module docstring). Raises what the model's
    forward, backward or double backward raises; with ``sub_batch`` (``x`` is part of the
    probe batch), :class:`Unrepresentative` when the part cannot stand for the whole.

    ``graph``: a list holding the probe objective's gradient at ``model``'s current parameters
    and ``x``, already built with ``create_graph`` (the differentiated tensors, then their
    gradients, as :func:`~attest.collection.gradients.flow.parameter_gradients` returns it); it
    is used instead of building the same graph again, and popped (freed when used)."""
    objective = _Objective(model, spec, x, labels)
    point = objective.point()
    try:
        # Held in a list that _compare empties: the graph (the largest thing this check
        # allocates) is freed as soon as the double backwards are done.
        held = [graph.pop() if graph else _first_graph(objective, point, sub_batch)]
        live = [g is not None for g in held[0][1]]
        generator = torch.Generator().manual_seed(seed)
        chosen = [_rms_scaled_gaussians(point, live, generator) for _ in range(directions)]
        outcomes = _compare(objective, point, chosen, rtol, atol, held)
        failing = [k for k, outcome in enumerate(outcomes) if not outcome["passed"]]
        if failing:
            moves = _rms_scaled_gaussians(point, live, generator, NEARBY)
            nearby = [t + m if ok else t for t, m, ok in zip(point, moves, live, strict=True)]
            retried = _compare(objective, nearby, [chosen[k] for k in failing], rtol, atol)
            for k, second in zip(failing, retried, strict=True):
                outcomes[k]["nearby"] = {
                    key: second[key] for key in ("max_rel_error", "eps", "passed")
                }
                if second["passed"]:
                    outcomes[k]["passed"] = True
                    outcomes[k]["on_kink"] = True
        for k, outcome in enumerate(outcomes):
            outcome["direction"] = k
        return outcomes
    finally:
        objective.load(point)
