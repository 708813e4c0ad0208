"""The floor of the gradient checks: the work the issue prescribes, with nothing else.

``bench_gradchecks.py`` times it in the same rounds as the checks, so that the ratio of the
checks to one float64 forward+backward can be read against the ratio this bare work alone
already costs. The work, at the default settings, done with plain torch calls (no kink
scans, no error figures, no step sweep, no evidence):

- one float64 instance of the model (built as ``attest collect`` builds it);
- ``gradcheck``: every captured operator with a differentiable floating input, in float64:
  ``torch.autograd.gradcheck`` in slow mode when its inputs are small (at most 64 elements,
  the full Jacobian), otherwise one forward with grad, one backward per output cotangent (as
  many as the checks use: K when the output has at most 1,024 elements, else 1) and 2K
  perturbed forwards; and ``torch.autograd.gradcheck`` in slow mode on one representative
  slice per distinct pointwise operator (as the checks do);
- ``gradient_flow`` + ``second_order``: one forward and a backward that builds the gradient's
  graph, a double backward per Hessian-vector direction, and the central differences of the
  gradient along each (two forward+backward passes per direction);
- ``accumulation``: a forward+backward per micro-batch (2 + 4).

``custom_ops`` and ``kinks`` add nothing here: on a model without custom Functions or kinks
they have nothing to check (their discovery and scans are the checks' own overhead).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from attest.collection.capture.aten_args import BoundCall, to_float64
from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CollectContext
from attest.collection.gradients.flow import probe_input, probe_objective
from attest.collection.gradients.gradcheck_cases import (
    SLICE_NUMEL,
    CaseSkipped,
    is_random,
    prepare_case,
    signature,
    slice_pointwise,
)

__all__ = ["prepare_floor"]

_Case = tuple[Callable[..., list[torch.Tensor]], list[torch.Tensor], int]


def _operator_cases(ctx: CollectContext) -> tuple[list[_Case], list[_Case]]:
    """(random-direction cases, full-Jacobian cases: small operators and the representative
    slices), prepared outside the timing."""
    settings = ctx.settings
    cases: list[_Case] = []
    slices: list[_Case] = []
    signatures: set[str] = set()
    for record in ctx.operators or []:
        if is_random(record):
            continue
        try:
            call = BoundCall.of(record.func, to_float64(record.args), to_float64(record.kwargs))
            if not call.tensors:
                continue
            use, _ = prepare_case(call)
        except (CaseSkipped, RuntimeError, TypeError, ValueError):
            continue
        fn = call.function(use)
        xs = [call.tensors[i] for i in use]
        with torch.no_grad():
            n_out = sum(o.numel() for o in fn(*xs) if o.is_floating_point())
        n_in = sum(x.numel() for x in xs)
        if n_in <= settings.gradcheck_full_jacobian_max_numel and n_out <= 1024:
            slices.append((fn, xs, 0))  # small: the full Jacobian, by torch's gradcheck
            continue
        cotangents = settings.gradcheck_directions if n_out <= 1024 else 1
        cases.append((fn, xs, cotangents))
        if n_in > settings.gradcheck_full_jacobian_max_numel and torch.Tag.pointwise in getattr(
            record.func, "tags", ()
        ):
            key = signature(record)
            if key not in signatures:
                signatures.add(key)
                small = slice_pointwise(call, use, SLICE_NUMEL // max(len(use), 1))
                if small is not None:
                    slices.append((small.function(use), [small.tensors[i] for i in use], 0))
    return cases, slices


def _operator_work(cases: list[_Case], slices: list[_Case], directions: int) -> None:
    for fn, xs, cotangents in cases:
        leaves = [x.detach().requires_grad_(True) for x in xs]
        with torch.enable_grad():
            outs = [o for o in fn(*leaves) if o.requires_grad]
        if outs:
            for _ in range(cotangents):
                torch.autograd.grad(
                    outs,
                    leaves,
                    [torch.ones_like(o) for o in outs],
                    retain_graph=True,
                    allow_unused=True,
                )
        with torch.no_grad():
            for _ in range(2 * directions):
                fn(*xs)
    for fn, xs, _ in slices:
        leaves = [x.detach().clone().requires_grad_(True) for x in xs]

        def first(*args: torch.Tensor, fn: Callable[..., list[torch.Tensor]] = fn) -> Any:
            return tuple(o for o in fn(*args) if o.is_floating_point())

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.autograd.gradcheck(first, tuple(leaves), raise_exception=False)


def _model_work(ctx: CollectContext) -> None:
    spec = ctx.spec
    settings = ctx.settings
    model = ctx.fresh_model(torch.float64)
    x = probe_input(ctx, torch.float64)
    labels = spec.labels
    params = [p for p in model.parameters() if p.requires_grad]
    generator = torch.Generator().manual_seed(0)

    def gradient(inputs: torch.Tensor, target: torch.Tensor | None, graph: bool) -> Any:
        leaf = inputs.detach().requires_grad_(inputs.is_floating_point())
        with torch.enable_grad():
            objective = probe_objective(spec, model_output_tensor(model(leaf)), target)
        wrt = [*params, leaf] if leaf.requires_grad else params
        return wrt, torch.autograd.grad(objective, wrt, create_graph=graph, allow_unused=True)

    wrt, grads = gradient(x, labels, True)
    live = [i for i, g in enumerate(grads) if g is not None and g.requires_grad]
    directions = [
        [torch.randn(w.shape, generator=generator, dtype=w.dtype) for w in wrt]
        for _ in range(settings.second_order_directions)
    ]
    for v in directions:
        torch.autograd.grad(
            [grads[i] for i in live],
            [wrt[i] for i in live],
            [v[i] for i in live],
            retain_graph=True,
            allow_unused=True,
        )
    del grads
    saved = [p.detach().clone() for p in params]
    with_x = len(wrt) > len(params)
    for v in directions:
        for sign in (1e-7, -1e-7):
            with torch.no_grad():
                torch._foreach_add_(params, v[: len(params)], alpha=sign)
            gradient(x + sign * v[-1] if with_x else x, labels, False)
            with torch.no_grad():
                torch._foreach_copy_(params, saved)
    if spec.loss_fn is not None and labels is not None:
        for k in settings.accumulation_microbatches:
            for idx in torch.arange(x.shape[0]).tensor_split(k):
                gradient(x[idx], labels[idx], False)


def prepare_floor(ctx: CollectContext) -> Callable[[], float]:
    """A function that does the floor's work once and returns its CPU seconds (the operator
    cases are prepared now, outside the timing)."""
    cases, slices = _operator_cases(ctx)
    directions = ctx.settings.gradcheck_directions

    def run() -> float:
        start = time.process_time()
        _model_work(ctx)
        _operator_work(cases, slices, directions)
        return time.process_time() - start

    return run
