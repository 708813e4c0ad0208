"""The ``gradient_flow`` check: every trainable parameter gets a finite, non-zero gradient.

One forward and backward pass of the probe loss (the spec's loss on the probe targets when
it has one, else ``sum_n F(x_n)``), in float64 so that rounding cannot zero a gradient that
exists (that is the ``numerics`` and ``fidelity`` checks' business). Per parameter:

- frozen (``requires_grad=False``): listed as frozen, not a failure;
- a finite gradient with a non-zero entry: pass;
- no gradient, or an identically zero or non-finite one: fail, with the reason found;
- an identically zero gradient the model's structure explains (zero at random points for
  random output cotangents: a bias before a softmax, a bias a siamese difference cancels,
  an embedding's padding row; :mod:`attest.collection.gradients.structural`): ``warn``,
  reason kind ``structural``, with the mechanism and the evidence.

Reasons come from a second, instrumented forward pass, run only when some parameter lacks a
gradient; an in-place write to a tensor saved for backward (backward raises "modified by an
inplace operation") is caught and located: both live in
:mod:`attest.collection.gradients.diagnosis`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from attest.collection.capture.run import mixed_precision_hint, model_output_tensor
from attest.collection.context import CollectContext, LoadedSpec, target_scalar
from attest.collection.gradients.diagnosis import (
    INPLACE_MARKERS,
    locate_inplace,
    module_phrase,
    owner_of,
)
from attest.collection.gradients.flow_diagnosis import Diagnosis
from attest.collection.gradients.hvp_conv_slabs import ConvSlabs
from attest.collection.gradients.outside_objective import (
    embedding_gradients,
    unselected_output_parameters,
)
from attest.collection.gradients.state import GradientGraph
from attest.collection.gradients.structural import ZERO_RTOL, structural_reasons
from attest.collection.gradients.sub_probe import crop_shape
from attest.evidence.model import CheckItem, CheckResult, Subject

__all__ = [
    "GradientGraph",
    "ParameterGradients",
    "parameter_gradients",
    "probe_input",
    "probe_objective",
    "run",
    "second_order_rows",
]


def probe_objective(
    spec: LoadedSpec, output: torch.Tensor, labels: torch.Tensor | None
) -> torch.Tensor:
    """The scalar the gradient checks differentiate: the spec's loss on the probe targets when
    both exist, else ``sum_n F(x_n)`` (the quantity IG and saliency differentiate)."""
    if spec.loss_fn is not None and labels is not None:
        return spec.loss_fn(output, labels)
    return target_scalar(output, spec, labels).sum()


def probe_input(ctx: CollectContext, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The probe inputs on the spec's device: floating ones in ``dtype`` (default: the
    deployed precision), integer ones (token ids, label maps) unchanged."""
    if ctx.spec.inputs.is_floating_point():
        return ctx.inputs(dtype)
    return ctx.spec.inputs.to(ctx.spec.device)


def second_order_rows(ctx: CollectContext, n: int) -> int:
    """How many of the ``n`` probe examples ``second_order``'s Hessian-vector products use:
    ``settings.second_order_batch`` of them (all when it is None or not smaller)."""
    rows = ctx.settings.second_order_batch
    return rows if rows is not None and 0 < rows < n else n


@dataclass
class ParameterGradients:
    """Gradients of the probe objective, or where the pass raised."""

    grads: dict[str, torch.Tensor | None] = field(default_factory=dict)
    frozen: list[str] = field(default_factory=list)
    input_grad: torch.Tensor | None = None
    error: BaseException | None = None
    phase: str | None = None  # "forward" | "backward" when ``error`` is set
    # With ``create_graph``: the differentiated tensors (trainable parameters, then the input
    # when floating) and their gradients still attached to the double-backward graph.
    graph: tuple[list[torch.Tensor], list[torch.Tensor | None]] | None = None
    # With ``create_graph``: the model's output, whose autograd graph is the forward pass
    output: torch.Tensor | None = None


def parameter_gradients(
    model: nn.Module,
    x: torch.Tensor,
    spec: LoadedSpec,
    labels: torch.Tensor | None,
    *,
    create_graph: bool = False,
    keep_output: bool = False,
) -> ParameterGradients:
    """One forward and backward pass of :func:`probe_objective`; exceptions are returned.

    With ``create_graph`` the backward also builds the graph of the gradient (kept in
    ``graph``); if that backward raises, a plain one decides (the gradients are the same).
    ``output`` keeps the model's output (its graph's nodes, their saved tensors freed by
    the backward unless ``create_graph``) with ``create_graph`` or ``keep_output``."""
    result = ParameterGradients()
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    result.frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    x = x.detach().clone().requires_grad_(x.is_floating_point())
    try:
        with torch.enable_grad():
            output = model_output_tensor(model(x))
            objective = probe_objective(spec, output, labels)
    except Exception as exc:
        result.error, result.phase = exc, "forward"
        return result
    wrt = [p for _, p in trainable] + ([x] if x.requires_grad else [])
    if keep_output:
        result.output = output
    if not objective.requires_grad:
        result.grads = {n: None for n, _ in trainable}
        return result
    grads: tuple[torch.Tensor | None, ...] | None = None
    if create_graph:
        try:
            grads = torch.autograd.grad(objective, wrt, create_graph=True, allow_unused=True)
            result.graph = (wrt, list(grads))
            result.output = output
        except Exception:
            grads = None  # the graph is retained: a plain backward below decides
    try:
        if grads is None:
            grads = torch.autograd.grad(objective, wrt, allow_unused=True)
    except Exception as exc:
        result.error, result.phase = exc, "backward"
        return result
    plain = [None if g is None else g.detach() for g in grads]
    result.grads = {n: g for (n, _), g in zip(trainable, plain, strict=False)}
    if x.requires_grad:
        result.input_grad = plain[-1]
    return result


# -- the check ---------------------------------------------------------------------------------


def _labels(ctx: CollectContext) -> torch.Tensor | None:
    labels = ctx.spec.labels
    return None if labels is None else labels.to(ctx.spec.device)


def run(ctx: CollectContext) -> CheckResult:
    """The ``gradient_flow`` result: one item per parameter (plus the input and any in-place write)."""
    model = ctx.shared_model(torch.float64)
    x = probe_input(ctx, torch.float64)
    labels = _labels(ctx)
    parameters = {
        "dtype": "float64",
        "objective": "loss" if ctx.spec.loss_fn is not None and labels is not None else "target",
    }
    state = ctx.gradients
    # The graph of the gradient is second_order's only when its products use the whole batch
    # (a batch no larger than second_order_batch, not cropped); otherwise they run on a sub-batch and
    # building (and holding) a full-batch double-backward graph here would only cost time and
    # memory: several times the float64 activations.
    n = int(x.shape[0]) if x.dim() else 1
    graph = (
        state.keep_graph
        and second_order_rows(ctx, n) == n
        and crop_shape(x, ctx.settings.second_order_crop) is None
    )
    # Large float64 3D convolutions in slabs, as second_order's products run them (their
    # column buffers bounded: attest.collection.gradients.hvp_conv_slabs).
    with ConvSlabs(model):
        measured = parameter_gradients(
            model, x, ctx.spec, labels, create_graph=graph, keep_output=state.keep_graph
        )
    if measured.graph is not None:
        wrt, graph_grads = measured.graph
        leaf = wrt[-1] if x.is_floating_point() else x
        state.graph = GradientGraph(model, leaf, wrt, graph_grads)
    if state.keep_graph:
        state.output = measured.output
    measured.graph = measured.output = None
    state.flow_error = measured.error
    if measured.error is None and parameters["objective"] == "loss":
        # The float64 full-batch loss gradient: the accumulation check's reference. A copy: the
        # embedding tables' routed gradients added below are not in the micro-batches'
        # gradients, which differentiate the embeddings, not the lookup.
        state.full_batch_loss_gradients = dict(measured.grads)
    if measured.error is not None:
        return _result(parameters, _raised_items(ctx, model, x, measured), measured)
    for name, grad in embedding_gradients(ctx.spec, model, x, measured.input_grad).items():
        if measured.grads.get(name) is None:  # the lookup the embedded input replaced
            measured.grads[name] = grad
    severed: list[str] = []
    state.severed = severed
    items = _parameter_items(ctx, model, x, measured, severed)
    if x.is_floating_point():
        items.append(_input_item(measured.input_grad))
    return _result(parameters, items, measured)


def _raised_items(
    ctx: CollectContext, model: nn.Module, x: torch.Tensor, measured: ParameterGradients
) -> list[CheckItem]:
    """The items when the forward or backward pass raised: the in-place writes to tensors
    saved for backward when that is why (located by an instrumented run), else the error;
    then every trainable parameter, not computed."""
    assert measured.error is not None
    items: list[CheckItem] = []
    message = " ".join(str(measured.error).split())[:400]
    if measured.phase == "backward" and any(m in message for m in INPLACE_MARKERS):
        for hit in locate_inplace(ctx.fresh_model(torch.float64), x) or [
            {"writer": "?", "saved_by": "?"}
        ]:
            items.append(
                CheckItem(
                    subject=Subject(
                        kind="module", module=hit["writer"] if hit["writer"] != "?" else None
                    ),
                    status="fail",
                    metrics={"inplace_on_saved_tensor": True},
                    message=(
                        f"in-place write in {module_phrase(hit['writer'])} modifies a tensor saved for backward "
                        f"by {module_phrase(hit['saved_by'])}; backward raises: {message}"
                    ),
                    details=hit,
                )
            )
    else:
        items.append(
            CheckItem(
                subject=Subject(kind="model"),
                status="error",
                message=f"the model raised {type(measured.error).__name__} in {measured.phase}: "
                f"{message}{mixed_precision_hint(message)}",
            )
        )
    for name, p in model.named_parameters():
        if p.requires_grad:
            items.append(
                CheckItem(
                    subject=Subject(kind="parameter", name=name),
                    status="not_computed",
                    message=f"no gradient could be computed: the {measured.phase} pass raised",
                )
            )
    return items


def _parameter_items(
    ctx: CollectContext,
    model: nn.Module,
    x: torch.Tensor,
    measured: ParameterGradients,
    severed: list[str],
) -> list[CheckItem]:
    """One item per parameter of a pass that did not raise: frozen, missing or zero (with the
    reason an instrumented run finds; ``severed`` collects the parameters whose path is cut),
    non-finite, or a pass."""
    stats = _gradient_stats(measured.grads)
    total = math.sqrt(sum(n * n for finite, n, _ in stats.values() if finite))
    problems: dict[str, tuple[str, bool]] = {}  # name -> (what is wrong, zero)
    for name, grad in measured.grads.items():
        if grad is None:
            problems[name] = ("receives no gradient", False)
        elif not stats[name][0]:  # not finite
            continue
        elif stats[name][2] == 0:
            problems[name] = ("gradient is identically zero", True)
    # parameters that feed only outputs F does not read: not dead branches (the spec's design)
    outside = unselected_output_parameters(ctx.spec, model, x, list(problems)) if problems else {}
    for name in outside:
        del problems[name]
    # gradients zero (or at rounding level) that the structure may explain, tested at once
    tiny = [
        n
        for n, (finite, norm, _) in stats.items()
        if finite and norm <= ZERO_RTOL * total and n not in outside
    ]
    structural = structural_reasons(
        lambda: ctx.fresh_model(torch.float64), x, tiny, ctx.settings.seed
    )
    diagnosis = Diagnosis(ctx, model, x, list(problems), structural)
    items: list[CheckItem] = []
    for name, _param in model.named_parameters():
        subject = Subject(kind="parameter", name=name, module=owner_of(name))
        if name in measured.frozen:
            items.append(
                CheckItem(
                    subject=subject,
                    status="pass",
                    metrics={"frozen": True},
                    message="frozen (requires_grad=False): receives no gradient by design",
                )
            )
            continue
        grad = measured.grads.get(name)
        if name in outside:
            items.append(
                CheckItem(
                    subject=subject,
                    status="pass",
                    metrics={
                        "has_grad": grad is not None,
                        "frozen": False,
                        "reason_kind": "unselected_output",
                    },
                    message=f"no gradient from F by the spec's design: it feeds only "
                    f"{outside[name]}; not a dead branch",
                )
            )
            continue
        if name in problems:
            what, zero = problems[name]
            items.append(diagnosis.item(subject, name, what, zero, grad, severed))
            continue
        assert grad is not None
        if name in structural:  # rounding-level, and zero by construction
            items.append(_structural_item(subject, stats[name][1], structural[name]))
        else:
            items.append(_measured_item(subject, grad, stats[name]))
    return items


def _structural_item(subject: Subject, norm: float, reason: str) -> CheckItem:
    """A gradient at rounding level that the model's structure makes zero: a warning."""
    return CheckItem(
        subject=subject,
        status="warn",
        metrics={
            "has_grad": True,
            "grad_norm": norm,
            "frozen": False,
            "reason_kind": "structural",
        },
        message=f"gradient is zero up to rounding ({norm:.1e}): {reason}",
        details={"reason": reason},
    )


def _measured_item(
    subject: Subject, grad: torch.Tensor, stats: tuple[bool, float, int]
) -> CheckItem:
    """A parameter with a non-zero gradient: a pass when it is finite."""
    finite, norm, nonzero = stats
    metrics: dict[str, Any] = {
        "has_grad": True,
        "frozen": False,
        "finite": finite,
        "nonzero_fraction": nonzero / grad.numel() if grad.numel() else float("nan"),
    }
    if finite:
        metrics["grad_norm"] = norm
        return CheckItem(subject=subject, status="pass", metrics=metrics)
    metrics["nan_count"] = int(torch.isnan(grad).sum())
    metrics["inf_count"] = int(torch.isinf(grad).sum())
    return CheckItem(
        subject=subject,
        status="fail",
        metrics=metrics,
        message="gradient has non-finite entries (see the numerics check for where)",
    )


def _input_item(g: torch.Tensor | None) -> CheckItem:
    """The floating input: a usable gradient (finite, not all zero) or a warning."""
    ok = g is not None and bool(torch.isfinite(g).all()) and bool((g != 0).any())
    return CheckItem(
        subject=Subject(kind="input", name="x"),
        status="pass" if ok else "warn",
        metrics={
            "has_grad": g is not None,
            "grad_norm": float(g.norm())
            if g is not None and math.isfinite(float(g.norm()))
            else None,
        },
        message=""
        if ok
        else "the probe objective has no usable gradient with respect to the input (saliency and IG need one)",
    )


def _gradient_stats(grads: dict[str, torch.Tensor | None]) -> dict[str, tuple[bool, float, int]]:
    """(all finite, L2 norm, nonzero count) of every gradient, with one sync for them all
    (a few kernels per parameter were most of this check's time on small models). A finite
    norm means finite entries; a non-finite one is looked at entry by entry."""
    named = [(n, g) for n, g in grads.items() if g is not None]
    if not named:
        return {}
    tensors = [g for _, g in named]
    norms = torch.stack(torch._foreach_norm(tensors)).tolist()
    counts = torch.stack([torch.count_nonzero(g) for g in tensors]).tolist()
    stats: dict[str, tuple[bool, float, int]] = {}
    for (name, g), norm, count in zip(named, norms, counts, strict=True):
        finite = math.isfinite(norm) or bool(torch.isfinite(g).all())
        stats[name] = (finite, norm, int(count))
    return stats


def _result(
    parameters: dict[str, Any], items: list[CheckItem], measured: ParameterGradients
) -> CheckResult:
    params = [i for i in items if i.subject.kind == "parameter"]
    summary: dict[str, Any] = {
        "parameters": len(params),
        "frozen": sum(1 for i in params if i.metrics.get("frozen")),
        "without_gradient": sum(1 for i in params if i.status == "fail"),
        "inplace_writes": sum(1 for i in items if i.metrics.get("inplace_on_saved_tensor")),
        "raised_in": measured.phase if measured.error is not None else None,
    }
    return CheckResult(
        check="gradient_flow",
        status="computed",
        parameters=parameters,
        summary=summary,
        items=items,
    )
