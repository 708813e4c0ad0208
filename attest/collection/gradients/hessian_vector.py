"""Hessian-vector products of the probe objective: double backward vs finite differences.

Pearlmutter's trick gives ``Hv`` as the gradient of ``<g, v>`` where ``g`` is the gradient
built with ``create_graph=True``. For seeded random directions ``v`` over the trainable
parameters and the probe input (each tensor's part scaled by that tensor's RMS, so steps are
relative), it is compared in float64 with central differences of the gradient,
``(g(theta + eps v) - g(theta - eps v)) / (2 eps)``::

    rel_error = ||Hv_ad - Hv_fd|| / max(||Hv_ad||, ||Hv_fd||, atol * ||g||)

passing at ``rel_error <= rtol``; the step is swept over several orders when the default
fails, and when no step passes, a step whose mismatch is within the difference's own error
(its rounding floor: :mod:`~attest.collection.gradients.hvp_steps`) passes. At steps up to :data:`FORWARD_MAX_EPS` the difference is one-sided,
``(g(theta + eps v) - g(theta)) / eps`` with ``g(theta)`` the gradient the double backward
differentiates: in float64 its truncation error (``O(eps)``, about 1e-8 of the product at the
default step) is five orders below ``rtol``, the rounding error is the central difference's, and it costs one
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
from attest.collection.gradients.hvp_directions import Directions
from attest.collection.gradients.hvp_steps import StepError, sweep
from attest.collection.gradients.known_rules import padding_rows
from attest.collection.gradients.shared_model import exact_copy
from attest.collection.nonfinite import NonFinite, nonfinite

__all__ = [
    "FORWARD_MAX_EPS",
    "HVP_EPS",
    "HVP_EPS_SWEEP",
    "Directions",
    "Graph",
    "Unrepresentative",
    "hessian_vector_check",
    "hvp_error",
    "missing_backward",
]


class Unrepresentative(Exception):
    """The sub-batch cannot stand for the probe batch: its forward raised (a model that
    assumes the batch size) or its gradient is zero or not finite (every label of the
    sub-batch ignored by the loss, say). The caller runs the full batch instead."""


# A small default step: in ReLU/max-pool networks a larger one moves some of the (many)
# pre-activations across their kink, and each crossing makes the gradient jump. 1e-8, not
# 1e-7 (until 2026-12-04): on SegResNet's 32^3 crop 1e-7 crossed kinks in two of three
# directions (each then paid one more float64 gradient at 1e-8, where it passed), and on
# resnet18 and the ViT, where 1e-7 passed, 1e-8 passed with errors 2-9 times smaller (the
# one-sided difference's truncation error, O(eps), was the larger part; rounding, O(1/eps),
# stays four orders below rtol). The steps tried are the same set as before, so a direction
# fails exactly when it failed before (see HVP_EPS_SWEEP).
HVP_EPS = 1e-8
# Larger steps too: a model whose float64 instance still runs part of its path in float32
# (the reference FNO code allocates its spectrum with a hard-coded dtype=torch.cfloat) has
# gradients with float32 rounding, which the small steps' differences amplify (the error grows
# as 1/eps, from 1e-5 of the product at eps=1e-3 to 1e-1 at 1e-7). A wrong double backward
# fails at every step.
# Tried in this order, stopping at the first that passes: a smaller step first, because the
# usual reason the default fails on a large ReLU network is a kink crossing (millions of
# pre-activations: a step of 1e-8 of the RMS can still move a few across 0), which a smaller
# step cures; the larger steps (rounding) after it. A direction fails only when every step
# fails, so the order changes what a passing direction costs, never the verdict.
HVP_EPS_SWEEP: tuple[float, ...] = (1e-9, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3)
# One-sided differences up to this step (see the module docstring), central above it.
FORWARD_MAX_EPS = 1e-6
# The differentiated tensors and their gradients, still attached to the double-backward graph.
Graph = tuple[list[torch.Tensor], list[torch.Tensor | None]]

NEARBY = 1e-3  # size of the move to a nearby point, relative to each tensor's RMS


def _norm(ts: Sequence[torch.Tensor]) -> float:
    # One foreach kernel for all tensors, not three small kernels per tensor.
    return float(torch.nn.utils.get_total_norm(list(ts), foreach=True)) if ts else 0.0


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
        self.saved: list[torch.Tensor] | None = None

    def current(self) -> list[torch.Tensor]:
        """The parameters' and the input's values now, as detached views (no copy)."""
        return [p.detach() for p in self.params] + ([self.x] if self.with_x else [])

    def saved_point(self) -> list[torch.Tensor]:
        """A copy of the probe point (the parameters as they were, and the input), made on
        first use, which must come before the parameters are first moved: :func:`_compare`
        makes it once the double backwards are done and their graph is freed, so that the
        copy (one float64 copy of the weights) is not held beside that graph at the check's
        peak. Each parameter is copied in float32 when that keeps it bit for bit (float64
        weights cast from float32 ones, as trained weights are: half the copy, 0.35 GiB on
        UNETR's 93 M parameters; copying back casts exactly), as the shared model's snapshot
        is. :meth:`restore` puts it back."""
        if self.saved is None:
            self.saved = [exact_copy(p) for p in self.params] + ([self.x] if self.with_x else [])
        return self.saved

    def restore(self) -> None:
        """The parameters back at the probe point (if they were ever moved from it)."""
        if self.saved is not None:
            self.load(self.saved)

    def load_shifted(
        self, values: list[torch.Tensor], direction: list[torch.Tensor], step: float
    ) -> torch.Tensor:
        """:meth:`load` of ``values + step * direction``, formed in the parameters themselves
        (no weight-sized temporary); the shifted input is returned."""
        count = len(self.params)
        if self.params:
            with torch.no_grad():
                params = list[torch.Tensor](self.params)
                torch._foreach_copy_(params, values[:count])
                torch._foreach_add_(params, direction[:count], alpha=step)
        if not self.with_x:
            return self.x
        return (values[-1] + step * direction[-1]).detach().requires_grad_(True)

    def load(self, values: list[torch.Tensor]) -> torch.Tensor:
        if self.params:
            with torch.no_grad():
                torch._foreach_copy_(list[torch.Tensor](self.params), values[: len(self.params)])
        return values[-1].detach().clone().requires_grad_(True) if self.with_x else self.x

    def gradient(
        self,
        values: list[torch.Tensor] | None,
        create_graph: bool,
        shift: tuple[list[torch.Tensor], float] | None = None,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
        """The gradient at ``values`` (moved by ``step * direction`` when ``shift`` is given;
        at the parameters' current values when ``values`` is None)."""
        if values is None:
            x = self.x.detach().clone().requires_grad_(True) if self.with_x else self.x
        elif shift is None:
            x = self.load(values)
        else:
            x = self.load_shifted(values, *shift)
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


def _owned(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """``tensors``, each one safe to write in place: autograd may hand back one tensor as the
    gradient of two inputs (an addition's backward), slices of one buffer, or an expanded
    view; such a tensor is copied (rare: parameter gradients are their own tensors)."""
    seen: set[int] = set()
    out = []
    for t in tensors:
        storage = t.untyped_storage().data_ptr()
        out.append(t.clone() if storage in seen or not t.is_contiguous() else t)
        seen.add(storage)
    return out


def _hessian_vector_products(
    wrt: list[torch.Tensor],
    raw: list[torch.Tensor | None],
    directions: Directions,
    chosen: Sequence[int],
) -> list[list[torch.Tensor]]:
    """``H v`` for every chosen direction by double backward through the gradient's graph.

    One backward per direction: batching them (``is_grads_batched``) was measured slower on
    CPU convolutions (vmap over the double backward), so it is not used."""
    tracked = [i for i, g in enumerate(raw) if g is not None and g.requires_grad]
    if not tracked:
        return [[torch.zeros_like(w) for w in wrt] for _ in chosen]
    outputs = [g for g in raw if g is not None and g.requires_grad]
    products = []
    for k in chosen:
        direction = directions(k)
        hv = torch.autograd.grad(
            outputs,
            wrt,
            grad_outputs=[direction[i] for i in tracked],
            retain_graph=True,
            allow_unused=True,
        )
        del direction
        products.append(
            [
                torch.zeros_like(w) if h is None else _held(h.detach())
                for w, h in zip(wrt, hv, strict=True)
            ]
        )
    return products


# float32 keeps a product's elements to 6e-8 of each: four orders of magnitude below the
# check's rtol (1e-3) and below the float64 differences' own error (about 4e-7 on the models
# measured). Elements outside float32's normal range would lose more, so such a tensor is kept
# in float64.
_HELD_RANGE = (2.0**-120, 2.0**120)


def _held(product: torch.Tensor) -> torch.Tensor:
    """A Hessian-vector product as held until its finite differences are compared with it:
    in float32 when its elements lie in float32's normal range (or are 0), else as it is.
    The products of every direction are held together while the gradient's graph or the
    differences are alive; in float64 they were three of the ten weight-sized tensors of the
    check's peak (on the MONAI ViT, 84 MiB each)."""
    if product.dtype != torch.float64 or product.numel() == 0:
        return product
    magnitude = product.abs()
    nonzero = magnitude[magnitude != 0]
    if not bool(torch.isfinite(magnitude).all()) or (
        nonzero.numel()
        and (float(nonzero.min()) < _HELD_RANGE[0] or float(nonzero.max()) > _HELD_RANGE[1])
    ):
        return product
    return product.to(torch.float32)


def _compare(
    objective: _Objective,
    point: list[torch.Tensor] | None,
    directions: Directions,
    chosen: Sequence[int],
    rtol: float,
    atol: float,
    graph: list[Graph] | None = None,
) -> list[dict[str, Any]]:
    """Double-backward Hv at ``point`` for each chosen direction, against finite differences.

    ``graph`` holds the gradient at ``point`` already built with ``create_graph`` (reused):
    popped, so that no caller's reference keeps it alive while the differences run. ``point``
    None: the probe point, where the parameters are (copied once the graph is freed)."""
    wrt, raw = graph.pop() if graph else objective.gradient(point, create_graph=True)
    # The gradient at the point, detached: the one-sided differences' base (the graph it
    # hangs on is freed with ``raw`` once the double backwards are done).
    here = [g.detach() for g in _zeros_for_none(raw, wrt)]
    g_norm = _norm(here)
    # Every double backward first: the finite differences below load shifted values into the
    # parameters in place, which would invalidate the tensors this graph saved.
    products = _hessian_vector_products(wrt, raw, directions, chosen)
    del raw
    if point is None:
        point = objective.saved_point()
    outcomes: list[dict[str, Any]] = []
    for k in chosen:
        # this direction's product in the differences' dtype; dropped with its comparison
        hv = [h.to(w.dtype) for h, w in zip(products.pop(0), wrt, strict=True)]
        hv_norm = _norm(hv)
        direction = directions(k)
        sides: dict[float, NonFinite | None] = {}  # per step: the sides not finite, if any

        def error_at(
            eps: float,
            direction: list[torch.Tensor] = direction,
            hv: list[torch.Tensor] = hv,
            hv_norm: float = hv_norm,
            sides: dict[float, NonFinite | None] = sides,
        ) -> StepError:
            # The difference is formed in the gradient's own tensors (fresh from autograd),
            # then hv is taken from it in place: no weight-sized temporaries beyond them.
            _, plus = objective.gradient(point, create_graph=False, shift=(direction, eps))
            fd = _owned(_zeros_for_none(plus, wrt))
            del plus
            differenced = max(_norm(fd), g_norm)
            if eps <= FORWARD_MAX_EPS:  # one-sided (see the module docstring)
                torch._foreach_sub_(fd, here)
                torch._foreach_div_(fd, eps)
            else:
                _, raw_minus = objective.gradient(
                    point, create_graph=False, shift=(direction, -eps)
                )
                minus = _zeros_for_none(raw_minus, wrt)
                del raw_minus
                differenced = max(differenced, _norm(minus))
                # foreach kernels: one per step of the arithmetic, not one per tensor
                torch._foreach_sub_(fd, minus)
                del minus
                torch._foreach_div_(fd, 2 * eps)
            fd_norm = _norm(fd)
            if fd:
                torch._foreach_sub_(fd, hv)
            diff = _norm(fd)
            # infinity when a side is not finite, naming it (attest.collection.nonfinite)
            error, sides[eps] = hvp_error(hv_norm, fd_norm, diff, atol * g_norm)
            scale = max(hv_norm, fd_norm, atol * g_norm)
            # the mismatch vector, for the rounding floor's spread (hvp_steps), only when
            # this step fails: a passing step ends the sweep
            residual = [_held(t) for t in fd] if error > rtol and math.isfinite(error) else None
            del fd
            return StepError(eps, error, scale, differenced, residual)

        swept = sweep(error_at, HVP_EPS, HVP_EPS_SWEEP, rtol)
        outcomes.append(
            {
                "max_rel_error": finite_or_none(swept.error),
                "eps": swept.eps,
                "difference": "forward" if swept.eps <= FORWARD_MAX_EPS else "central",
                "passed": swept.passed,
                "within_floor": swept.within_floor,
                "unresolved": swept.unresolved,
                "rounding_floor": finite_or_none(swept.floor()),
                "step_spread": None if swept.spread is None else finite_or_none(swept.spread),
                # the sides non-finite at the step kept (attest.collection.nonfinite)
                "nonfinite": sides.get(swept.eps),
                "hv_norm": finite_or_none(hv_norm),
                "grad_norm": finite_or_none(g_norm),
                "error_curve": swept.curve,
            }
        )
    return outcomes


def hvp_error(
    hv_norm: float, fd_norm: float, diff: float, floor: float
) -> tuple[float, NonFinite | None]:
    """``diff / max(||Hv_ad||, ||Hv_fd||, floor)`` and None; or infinity and the sides that are
    not finite (analytic: the double backward's Hv; numeric: the differences of the gradient)."""
    bad = nonfinite({"analytic": hv_norm, "numeric": fd_norm})
    if bad is not None or not math.isfinite(diff):
        return math.inf, bad
    scale = max(hv_norm, fd_norm, floor)
    return (diff / scale if scale > 0 else 0.0), None


def _first_graph(objective: _Objective, point: list[torch.Tensor] | None, sub_batch: bool) -> Graph:
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
    try:
        # Held in a list that _compare empties: the graph (the largest thing this check
        # allocates) is freed as soon as the double backwards are done.
        held = [graph.pop() if graph else _first_graph(objective, None, sub_batch)]
        live = [g is not None for g in held[0][1]]
        padding = padding_rows(model)
        still = {i: padding[id(p)] for i, p in enumerate(objective.params) if id(p) in padding}
        drawn = Directions(objective.current(), live, seed, still)
        outcomes = _compare(objective, None, drawn, range(directions), rtol, atol, held)
        failing = [k for k, outcome in enumerate(outcomes) if not outcome["passed"]]
        if failing:
            moves = drawn(directions, NEARBY)  # a draw of its own (key: the count)
            point = objective.saved_point()
            nearby = [t + m if ok else t for t, m, ok in zip(point, moves, live, strict=True)]
            del moves
            # the directions at the nearby point are those at the probe point (scaled by the
            # probe point's RMS), so that a kink, not another direction, explains a pass
            retried = _compare(objective, nearby, drawn, failing, rtol, atol)
            for k, second in zip(failing, retried, strict=True):
                outcomes[k]["nearby"] = {
                    key: second[key] for key in ("max_rel_error", "eps", "passed")
                }
                if second["passed"]:
                    outcomes[k]["passed"] = True
                    outcomes[k]["on_kink"] = True
        for k, outcome in enumerate(outcomes):
            outcome["direction"] = k
            outcome["padding_rows_held"] = len(still)
        return outcomes
    finally:
        objective.restore()
