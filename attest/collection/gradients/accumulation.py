"""The ``accumulation`` check: gradients accumulated over micro-batches equal the full batch's.

With a loss in the spec and targets in the probe, the probe batch is split into ``k``
contiguous micro-batches (``k`` = 2 and 4 by default; ``torch.tensor_split``, so sizes differ
by at most one) and the loss gradients of the micro-batches are accumulated, in float64, with
the model in eval mode (so that batch statistics cannot couple examples). Two accumulation
conventions are correct and both are tried:

- mean-reduced losses: ``sum_i (n_i / N) * grad L(B_i)`` (scale each micro-batch loss by its
  share of the examples, the usual ``loss / k`` for equal sizes);
- sum-reduced losses: ``sum_i grad L(B_i)``.

The check passes when either reproduces ``grad L(B)`` within ``rtol`` (relative L2 norm over
all trainable parameters). A loss that normalizes by a count of its own micro-batch (tokens,
pixels, valid labels: the denominator defect) matches neither whenever that count varies
between micro-batches; the item then gives the relative error and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CollectContext
from attest.collection.gradients.finite_differences import finite_or_none
from attest.collection.gradients.flow import probe_input
from attest.collection.nonfinite import NonFinite, nonfinite
from attest.evidence.model import CheckItem, CheckResult, Subject

__all__ = ["CANDIDATE", "FIX_SENTENCE", "REFERENCE", "nonfinite_item", "run"]

FIX_SENTENCE = (
    "The loss most likely normalizes by a count taken inside each micro-batch (tokens, pixels, "
    "valid labels), so micro-batches with different counts get different weights. Fix: reduce "
    "the per-element loss with a sum inside each micro-batch and divide by the count over the "
    "whole batch (or weight each micro-batch's loss by its share of that global count). A loss "
    "that couples the examples of a batch (a Cox partial likelihood's risk sets, a ranking or "
    "contrastive loss) fails too: on a micro-batch it is another loss, and accumulating "
    "micro-batches does not train the model on the full batch's."
)


def _loss_gradients(
    model: nn.Module,
    params: list[tuple[str, nn.Parameter]],
    loss_fn: Any,
    x: torch.Tensor,
    y: torch.Tensor,
) -> list[torch.Tensor]:
    """The loss gradient of every trainable parameter (zeros where autograd gives none)."""
    with torch.enable_grad():
        loss = loss_fn(model_output_tensor(model(x)), y)
    grads = torch.autograd.grad(loss, [p for _, p in params], allow_unused=True)
    return [
        torch.zeros_like(p) if g is None else g for (_, p), g in zip(params, grads, strict=True)
    ]


def _norms(tensors: Sequence[torch.Tensor]) -> list[float]:
    """The L2 norm of each tensor, by foreach kernels (a few per call, not per parameter)."""
    return torch.stack(torch._foreach_norm(list(tensors))).tolist() if tensors else []


def _total(norms: Sequence[float]) -> float:
    """The L2 norm of all the tensors together, from their norms."""
    return math.sqrt(sum(n * n for n in norms))


def run(ctx: CollectContext) -> CheckResult:
    """The ``accumulation`` result: one item per micro-batch count."""
    spec = ctx.spec
    rtol = float(ctx.settings.extra.get("accumulation_rtol", 1e-6))
    counts = tuple(int(k) for k in ctx.settings.accumulation_microbatches)
    parameters: dict[str, Any] = {
        "microbatches": list(counts),
        "rtol": rtol,
        "dtype": "float64",
        "conventions": ["mean (weights n_i/N)", "sum (weights 1)"],
        "split": "tensor_split",
    }
    if spec.loss_fn is None:
        return CheckResult(
            check="accumulation",
            status="not_applicable",
            parameters=parameters,
            reason="the spec has no loss (add `loss: module:callable` to attest.yaml to enable this check)",
        )
    if spec.labels is None:
        return CheckResult(
            check="accumulation",
            status="not_computed",
            parameters=parameters,
            reason="the probe inputs have no 'target' tensor for the loss",
        )
    model = ctx.shared_model(torch.float64)
    x = probe_input(ctx, torch.float64)
    y = spec.labels.to(spec.device)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    shared = ctx.gradients.full_batch_loss_gradients  # from gradient_flow, same model
    try:
        if shared is not None and all(n in shared for n, _ in params):
            full = [torch.zeros_like(p) if (g := shared[n]) is None else g for n, p in params]
        else:
            full = _loss_gradients(model, params, spec.loss_fn, x, y)
    except Exception as exc:
        return CheckResult(
            check="accumulation",
            status="not_computed",
            parameters=parameters,
            reason=f"the loss gradient cannot be computed (see gradient_flow): {type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:300]}",
        )
    full_norm = _total(_norms(full))
    bad = nonfinite({REFERENCE: full}) if not math.isfinite(full_norm) else None
    if bad is not None:  # a NaN reference is no reference: fail, naming it (not "nothing to do")
        item = nonfinite_item(Subject(kind="model", name="full batch"), bad)
        return CheckResult(
            check="accumulation",
            status="computed",
            parameters=parameters,
            summary={"max_rel_error": None, "failed": 1},
            items=[item],
        )
    if full_norm == 0.0 or not math.isfinite(full_norm):
        return CheckResult(
            check="accumulation",
            status="not_computed",
            parameters=parameters,
            reason=f"the full-batch loss gradient has norm {full_norm}: nothing to compare",
        )
    reference = _FullBatch(model, params, spec.loss_fn, x, y, full, full_norm)
    items = [reference.item(k, rtol) for k in counts]
    failed = [i for i in items if i.status == "fail"]
    errors_seen = [i.metrics.get("max_rel_error") for i in items]
    finite = [e for e in errors_seen if isinstance(e, float)]
    summary: dict[str, Any] = {
        "max_rel_error": max(finite) if finite else None,
        "failed": len(failed),
    }
    return CheckResult(
        check="accumulation", status="computed", parameters=parameters, summary=summary, items=items
    )


# The two sides of the comparison, as messages name them.
REFERENCE = "reference (full-batch gradient)"
CANDIDATE = "candidate (accumulated micro-batch gradients)"


def nonfinite_item(
    subject: Subject, bad: NonFinite, metrics: dict[str, Any] | None = None
) -> CheckItem:
    """A failing item for a comparison with a NaN or infinity on a side (``bad`` names it)."""
    return CheckItem(
        subject=subject,
        status="fail",
        metrics={**(metrics or {}), "max_rel_error": None, "nonfinite_side": bad.label},
        message=(
            f"the accumulated and full-batch gradients cannot be compared: {bad.describe()} "
            "(see gradient_flow and numerics for where it starts)"
        ),
    )


class _FullBatch:
    """The full batch's loss gradient, per parameter, against which accumulated micro-batch
    gradients are compared (as a whole and parameter by parameter).

    Kept as the parameters' own list of tensors: a flat copy of it, of each accumulation and
    of their differences, and an int64 owner index per element, were nine float64 copies of
    the weights at this check's peak (0.76 GiB on the MONAI ViT); with foreach kernels over
    the list it holds the gradient, the two accumulations and one difference."""

    def __init__(
        self,
        model: nn.Module,
        params: list[tuple[str, nn.Parameter]],
        loss_fn: Any,
        x: torch.Tensor,
        y: torch.Tensor,
        full: list[torch.Tensor],
        norm: float,
    ) -> None:
        self.model, self.params, self.loss_fn = model, params, loss_fn
        self.x, self.y, self.full, self.norm = x, y, full, norm
        self.param_norms = _norms(full)

    def item(self, k: int, rtol: float) -> CheckItem:
        """The item of ``k`` micro-batches."""
        n, x = self.x.shape[0], self.x
        subject = Subject(kind="model", name=f"{k} micro-batches")
        if n < k:
            return CheckItem(
                subject=subject,
                status="not_computed",
                message=f"the probe batch has {n} examples, fewer than {k} micro-batches",
            )
        chunks = torch.arange(n, device=x.device).tensor_split(k)
        try:
            mean_acc, sum_acc = self._accumulate(chunks)
        except Exception as exc:
            return CheckItem(
                subject=subject,
                status="error",
                message=f"the loss of a micro-batch raised {type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
            )
        distances = {"mean": self._distances(mean_acc), "sum": self._distances(sum_acc)}
        errors = {c: _total(d) / self.norm for c, d in distances.items()}
        # before min() picks a convention: it would compare NaN errors as it pleases
        bad = None
        if not all(math.isfinite(e) for e in errors.values()):
            bad = nonfinite({REFERENCE: self.full, CANDIDATE: [mean_acc, sum_acc]})
        del mean_acc, sum_acc
        if bad is not None:
            return nonfinite_item(subject, bad, {"microbatches": k, "rtol": rtol})
        convention = min(errors, key=lambda c: errors[c])
        error = errors[convention]
        worst_name, worst = self._worst_parameter(distances[convention])
        passed = error <= rtol
        metrics: dict[str, Any] = {
            "microbatches": k,
            "max_rel_error": finite_or_none(error),
            "rel_error_mean_convention": finite_or_none(errors["mean"]),
            "rel_error_sum_convention": finite_or_none(errors["sum"]),
            "convention": convention,
            "rtol": rtol,
            "worst_parameter": worst_name,
            "worst_parameter_rel_error": finite_or_none(worst),
        }
        sizes = [len(c) for c in chunks]
        if passed:
            message = (
                f"{k} micro-batches of sizes {sizes} accumulate to the full-batch gradient "
                f"(relative error {error:.1e}, {convention}-reduction convention)"
            )
        else:
            message = (
                f"{k} micro-batches of sizes {sizes} accumulate to a gradient {error:.2%} away from the "
                f"full batch's (relative L2; best convention: {convention}). {FIX_SENTENCE}"
            )
        return CheckItem(
            subject=subject,
            status="pass" if passed else "fail",
            metrics=metrics,
            message=message,
            details={"microbatch_sizes": sizes},
        )

    def _accumulate(
        self, chunks: Sequence[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The micro-batches' loss gradients accumulated by both conventions, per parameter
        with foreach kernels (two per micro-batch)."""
        n = self.x.shape[0]
        means = [torch.zeros_like(p) for _, p in self.params]
        sums = [torch.zeros_like(p) for _, p in self.params]
        for idx in chunks:
            grads = _loss_gradients(self.model, self.params, self.loss_fn, self.x[idx], self.y[idx])
            if grads:
                torch._foreach_add_(means, grads, alpha=len(idx) / n)
                torch._foreach_add_(sums, grads)
            del grads
        return means, sums

    def _distances(self, acc: list[torch.Tensor]) -> list[float]:
        """Each parameter's L2 distance between ``acc`` and the full batch's gradient."""
        if not acc:
            return []
        difference = torch._foreach_sub(acc, self.full)
        return _norms(difference)

    def _worst_parameter(self, distances: list[float]) -> tuple[str, float]:
        """The parameter whose accumulated gradient is relatively furthest from the full
        batch's, and that relative error."""
        worst_name, worst = "", 0.0
        for (name, _), diff_norm, norm in zip(
            self.params, distances, self.param_norms, strict=True
        ):
            if norm > 0:
                rel = diff_norm / norm
                if rel > worst:
                    worst_name, worst = name, rel
        return worst_name, worst
