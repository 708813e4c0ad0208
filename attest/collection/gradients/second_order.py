"""The ``second_order`` check: Hessian-vector products and twice-differentiable operators.

Model level (:mod:`attest.collection.gradients.hessian_vector`): for ``second_order_directions`` seeded
directions, ``Hv`` of the probe objective by double backward against central differences of
the gradient, in float64.

Operator level: each custom ``torch.autograd.Function`` (always) and, when a model-level
direction fails or raises (or ``settings.extra["second_order_operator_probe"]`` is true),
each distinct ATen operator of the forward pass (its first call) is probed for
twice-differentiability on its captured inputs: the gradient map ``x -> J(x)^T u`` (seeded
``u``) is built with ``create_graph=True`` and differentiated once more. An operator fails, and is named, when that double backward
raises (no double-backward formula, a Function marked ``@once_differentiable``), or when the
gradient map depends on ``x`` for finite differences while autograd does not track it (a
backward computed under ``no_grad`` or from detached values). When an operator's gradient
map is tracked, it is a pass; a gradient map that is constant for both is a linear operator.

The probe is one seeded direction; custom Functions, and every operator when localizing a
model-level failure, get the full ``K`` directions (plus ``torch.autograd.gradgradcheck`` on
small inputs). When the model-level products agree, every operator's double backward has
already been exercised along random directions, so the ATen operators are not probed alone.

Second-order failures that a first-order defect explains (a custom Function with a wrong
backward, a gradient path severed by ``detach``) are kept as warnings that name the cause.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any

import torch

from attest.collection.capture.aten_args import BoundCall
from attest.collection.context import CollectContext
from attest.collection.gradients.finite_differences import FiniteDifferenceSettings, GaussianPool
from attest.collection.gradients.flow import probe_input, second_order_rows
from attest.collection.gradients.gradcheck import fd_settings
from attest.collection.gradients.hessian_vector import (
    FORWARD_MAX_EPS,
    HVP_EPS,
    HVP_EPS_SWEEP,
    Unrepresentative,
    hessian_vector_check,
)
from attest.collection.gradients.hvp_conv_slabs import ConvSlabs
from attest.collection.gradients.hvp_steps import FLOOR_CAP
from attest.collection.gradients.known_rules import PADDING_RULE, embedding_padding
from attest.collection.gradients.second_order_ops import (
    custom_case,
    defer_to_root_causes,
    gradient_map,
    missing_double_backward,
    operator_case,
    operator_item,
    second_order_check,
    twice_differentiable,
)
from attest.collection.gradients.sub_probe import (
    crop_input,
    crop_labels,
    crop_shapes,
    operator_names,
    same_operators,
)
from attest.evidence.model import CheckItem, CheckResult, Subject

__all__ = [
    "gradient_map",
    "missing_double_backward",
    "run",
    "second_order_check",
    "twice_differentiable",
]

_HVP = Subject(kind="model", name="hessian-vector product")


def _math_attention() -> contextlib.AbstractContextManager[None]:
    """Scaled-dot-product attention forced onto its math backend, which PyTorch can
    differentiate twice (the fused CPU/CUDA kernels have no double backward)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.MATH])


def _rows(labels: torch.Tensor | None, rows: int, n: int) -> torch.Tensor | None:
    return labels[:rows] if labels is not None and labels.dim() and labels.shape[0] == n else labels


def _sub_probes(
    ctx: CollectContext, x: torch.Tensor, labels: torch.Tensor | None
) -> list[tuple[int, tuple[int, ...] | None]]:
    """The smaller probes to try before the whole one, smallest first: (examples, crop sides).
    The first ``second_order_batch`` examples, central-cropped as
    :func:`~attest.collection.gradients.sub_probe.crop_shapes` allows (every spatial side
    halved, then fewer of them), then uncropped."""
    n = int(x.shape[0]) if x.dim() else 1
    rows = second_order_rows(ctx, n)
    if rows < n and not (labels is None or (labels.dim() and labels.shape[0] == n)):
        rows = n  # labels that are not per example cannot follow a sub-batch
    attempts: list[tuple[int, tuple[int, ...] | None]] = [
        (rows, sides) for sides in crop_shapes(x, ctx.settings.second_order_crop)
    ]
    if rows < n:
        attempts.append((rows, None))
    return attempts


class _Crops:
    """Crops of one probe tried in turn: the probe's operator names are read once (every
    attempt with a crop takes the same rows)."""

    def __init__(self) -> None:
        self.on_probe: set[str] | None = None

    def take(
        self,
        model: Any,
        x: torch.Tensor,
        labels: torch.Tensor | None,
        sides: tuple[int, ...] | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x`` (the probe's first rows) and ``labels`` cropped to ``sides``;
        Unrepresentative when the crop runs other operators than the probe or the labels
        cannot follow it."""
        if sides is None:
            return x, labels
        croppable, cropped_labels = crop_labels(labels, x, sides)
        if not croppable:
            raise Unrepresentative("the labels are not per example nor maps of the input")
        crop = crop_input(x, sides)
        if self.on_probe is None:
            self.on_probe = operator_names(model, x)
        why = same_operators(model, x, crop, self.on_probe)
        if why is not None:
            raise Unrepresentative(why[:160])
        return crop, cropped_labels


def _products(
    ctx: CollectContext, rtol: float, atol: float, parameters: dict[str, Any]
) -> list[dict[str, Any]]:
    """The HVP outcomes along ``second_order_directions`` seeded directions: on
    gradient_flow's graph when it handed one over (popped here, so that it is freed as soon
    as the products are done), else on the shared float64 model and a smaller probe (the
    first ``second_order_batch`` examples, central-cropped when spatial; the full probe when
    none can stand for it). Records the rows used in ``parameters["batch"]`` and the crop's
    sides in ``parameters["crop"]``."""
    spec, settings = ctx.spec, ctx.settings
    labels = None if spec.labels is None else spec.labels.to(spec.device)
    check = functools.partial(
        hessian_vector_check,
        spec=spec,
        directions=settings.second_order_directions,
        seed=settings.seed,
        rtol=rtol,
        atol=atol,
    )
    parameters["crop"] = None
    shared, ctx.gradients.graph = ctx.gradients.graph, None
    if shared is not None:
        held = [(shared.wrt, shared.grads)]
        model, x = shared.model, shared.x
        del shared
        parameters["batch"] = int(x.shape[0]) if x.dim() else 1
        return check(model=model, x=x, labels=labels, graph=held)
    model = ctx.shared_model(torch.float64)
    x = probe_input(ctx, torch.float64)
    n = int(x.shape[0]) if x.dim() else 1
    notes: list[str] = []
    crops = _Crops()
    # The products on a graph of their own: large float64 3D convolutions in slabs (their
    # column buffers bounded; hvp_conv_slabs), counted in parameters["conv3d_in_slabs"].
    slabs = ConvSlabs(model)
    parameters["conv3d_in_slabs"] = 0
    for rows, sides in _sub_probes(ctx, x, labels):
        what = f"the first {rows} example(s)" + ("" if sides is None else f" cropped to {sides}")
        try:
            sub_x, sub_labels = crops.take(model, x[:rows], _rows(labels, rows, n), sides)
            slabs.split = 0  # this attempt's
            with slabs:
                outcomes = check(model=model, x=sub_x, labels=sub_labels, sub_batch=True)
        except Unrepresentative as why:
            notes.append(f"{what} could not stand for the probe ({why})")
            model = ctx.shared_model(torch.float64)  # restored if the attempt moved it
            continue
        parameters["batch"], parameters["crop"] = rows, None if sides is None else list(sides)
        if notes:
            parameters["batch_note"] = "; ".join(notes)[:600]
        parameters["conv3d_in_slabs"] = slabs.split
        return outcomes
    if notes:
        parameters["batch_note"] = "; ".join(notes)[:600]
    parameters["batch"] = n
    slabs.split = 0
    with slabs:
        outcomes = check(model=model, x=x, labels=labels)
    parameters["conv3d_in_slabs"] = slabs.split
    return outcomes


def _model_items(
    ctx: CollectContext, rtol: float, atol: float, parameters: dict[str, Any]
) -> list[CheckItem] | str:
    """The HVP items, or the reason they cannot be computed."""
    note = ""
    try:
        outcomes = _products(ctx, rtol, atol, parameters)
    except Exception as exc:
        fallback = _after_raise(ctx, rtol, atol, exc, parameters)
        if not isinstance(fallback, tuple):
            return fallback
        outcomes, note = fallback
        ctx.gradients.second_order_note = note.lstrip("; ")
    return [_hvp_item(ctx, outcome, note, rtol, atol) for outcome in outcomes]


def _after_raise(
    ctx: CollectContext, rtol: float, atol: float, exc: Exception, parameters: dict[str, Any]
) -> tuple[list[dict[str, Any]], str] | list[CheckItem] | str:
    """The products raised: the reason when the model's backward raises anyway, the
    outcomes and a note when the math attention backend can do them, else a failing (or,
    for a kernel with no double-backward formula, warning) item."""
    text = " ".join(str(exc).split())[:300]
    if ctx.gradients.flow_error is not None or "inplace" in text:
        return f"the model's backward raises (see gradient_flow): {text}"
    retried: list[dict[str, Any]] | None = None
    if missing_double_backward(text) and "scaled_dot_product" in text:
        try:
            with _math_attention():
                retried = _products(ctx, rtol, atol, parameters)
        except Exception:
            retried = None
    if retried is not None:
        note = (
            "; attention evaluated with the math backend: the fused attention kernel has no "
            f"double backward ({text[:160]})"
        )
        return retried, note
    missing = missing_double_backward(text)
    return [
        CheckItem(
            subject=_HVP,
            status="warn" if missing else "fail",
            metrics={"twice_differentiable": False},
            message=f"double backward of the probe objective raised {type(exc).__name__}: {text}; "
            + (
                "PyTorch has no double-backward formula for that kernel, so second order "
                "is not verified (first-order gradients are unaffected)"
                if missing
                else "the operator items name the ones that are not twice differentiable"
            ),
        )
    ]


def _hvp_item(
    ctx: CollectContext, outcome: dict[str, Any], note: str, rtol: float, atol: float
) -> CheckItem:
    """One direction's item: double-backward Hv against central differences of the gradient."""
    message = (
        f"direction {outcome['direction']}: double-backward Hv vs {outcome['difference']} "
        f"differences of the gradient, relative error {outcome['max_rel_error']} at "
        f"eps={outcome['eps']:.0e}" + note
    )
    if outcome.get("within_floor"):
        message += (
            f"; above rtol but within the difference's own error at that step (rounding floor "
            f"{outcome['rounding_floor']:.1e}: 2u|g|/eps plus the spread between the "
            "neighbouring steps' differences; the gradient is a small difference of large "
            "terms, so float64 cannot resolve the product more finely)"
        )
    if outcome.get("padding_rows_held"):
        message += (
            f"; {outcome['padding_rows_held']} embedding padding row(s) left out of the "
            f"directions ({PADDING_RULE})"
        )
    unresolved = not outcome["passed"] and bool(outcome.get("unresolved"))
    if unresolved:
        message += (
            f"; not resolved: the differences at neighbouring steps disagree by more than the "
            f"mismatch (rounding floor {outcome['rounding_floor']:.1e}, above "
            f"{FLOOR_CAP:g} x rtol), so float64 finite differences cannot verify this "
            "product (a saturated softmax or another gradient that is a difference of nearly "
            "equal numbers); second order is not verified in this direction"
        )
    if outcome.get("on_kink"):
        message += (
            "; failed at the probe point, agrees at a nearby point (the probe point lies on a kink)"
        )
    bad = outcome.get("nonfinite")
    if bad is not None:  # NaN or infinity on a side, named (attest.collection.nonfinite)
        message += f"; {bad.describe()}"
    if outcome["hv_norm"] is None:  # the double backward itself gave NaN or Inf
        message += (
            "; the double-backward Hv is NaN or infinite (an operator's double-backward "
            "formula at a singular point, such as the norm of an all-zero slice: see kinks)"
        )
    metrics = {
        key: outcome[key]
        for key in (
            "max_rel_error",
            "eps",
            "difference",
            "hv_norm",
            "grad_norm",
            "rounding_floor",
            "step_spread",
        )
    }
    metrics.update(
        {
            "direction": outcome["direction"],
            "seed": ctx.settings.seed,
            "rtol": rtol,
            "atol": atol,
            "on_kink": bool(outcome.get("on_kink", False)),
            "within_floor": bool(outcome.get("within_floor", False)),
            "unresolved": unresolved,
        }
    )
    return CheckItem(
        subject=_HVP,
        status="pass" if outcome["passed"] else "warn" if unresolved else "fail",
        metrics=metrics,
        message=message,
        details={"error_curve": outcome["error_curve"], "nearby": outcome.get("nearby")},
    )


def _fused_attention_items(ctx: CollectContext, fallback: str) -> list[CheckItem]:
    """The fused attention kernels the products could not differentiate twice, named."""
    fused = {r.op: r for r in ctx.operators or [] if "scaled_dot_product" in r.op}
    return [
        CheckItem(
            subject=Subject(kind="operator", operator_id=r.id, op=r.op, module=r.module),
            status="warn",
            metrics={"twice_differentiable": False},
            message=f"not twice differentiable as implemented: {fallback}",
        )
        for r in fused.values()
        if "math" not in r.op
    ]


def _operator_items(
    ctx: CollectContext,
    settings: FiniteDifferenceSettings,
    probe_all: bool,
    localize: bool,
) -> list[CheckItem]:
    """One item per distinct ATen operator (when ``probe_all``) and per custom Function."""
    state = ctx.gradients
    prepared = state.gradcheck_cases
    pool = state.pool or GaussianPool(settings.seed)
    items: list[CheckItem] = []
    seen: set[str] = set()
    for record in (ctx.operators or []) if probe_all else []:
        if record.op in seen:
            continue
        seen.add(record.op)
        subject = Subject(
            kind="operator", operator_id=record.id, op=record.op, module=record.module
        )
        case = functools.partial(operator_case, record, settings, prepared)
        item = operator_item(subject, case, settings, localize, pool)
        pad = embedding_padding(BoundCall.of(record.func, record.args, record.kwargs))
        if pad is not None and item.status != "not_computed":
            item.metrics["known_rule"] = "padding_idx"
            item.message += f"; compared with padding_idx={pad}: {PADDING_RULE}"
        items.append(item)
    for call in state.custom_calls:
        name = f"{call.cls.__module__}.{call.cls.__qualname__}"
        if name in seen:
            continue
        seen.add(name)
        items.append(
            operator_item(
                Subject(kind="custom_op", name=name, module=call.module),
                custom_case(call),
                settings,
                True,
                pool,
            )
        )
    return items


def run(ctx: CollectContext) -> CheckResult:
    """The ``second_order`` result: model-level HVP items, then one item per distinct operator
    and per custom Function."""
    # Operator items are few (custom Functions, or a failure being localized): each direction
    # keeps its own output cotangent.
    settings = fd_settings(ctx)
    settings = dataclasses.replace(settings, cotangents=settings.directions)
    extra = ctx.settings.extra
    rtol = float(extra.get("second_order_rtol", 1e-3))
    atol = float(extra.get("second_order_atol", 1e-6))
    parameters: dict[str, Any] = {
        "directions": ctx.settings.second_order_directions,
        "seed": ctx.settings.seed,
        "eps": HVP_EPS,
        "eps_sweep": list(HVP_EPS_SWEEP),
        "atol": atol,
        "rtol": rtol,
        "dtype": "float64",
        "operator_directions": settings.directions,
        "forward_difference_max_eps": FORWARD_MAX_EPS,
        "rounding_floor": "2u|g|/eps + the spread to the neighbouring steps' differences, "
        f"admitted up to {FLOOR_CAP:g} x rtol",
        "batch_setting": ctx.settings.second_order_batch,
        "crop_setting": ctx.settings.second_order_crop,
    }
    model_items = _model_items(ctx, rtol, atol, parameters)
    if isinstance(model_items, str):
        return CheckResult(
            check="second_order", status="not_computed", parameters=parameters, reason=model_items
        )
    items = list(model_items)
    fallback = ctx.gradients.second_order_note
    if fallback:  # name the fused kernels the products could not differentiate twice
        parameters["attention_backend"] = "math (fused kernel has no double backward)"
        items += _fused_attention_items(ctx, fallback)
    # The model-level products run every operator's double backward along random directions:
    # when they agree, no operator needs probing alone. When one fails (or raises), every
    # distinct operator is checked alone, with the full K directions, to name the culprit.
    localize = any(i.status == "fail" for i in items)
    probe_all = localize or bool(extra.get("second_order_operator_probe", False))
    parameters["operators_probed"] = "all" if probe_all else "custom Functions only"
    items += _operator_items(ctx, settings, probe_all, localize)
    defer_to_root_causes(items, ctx.gradients.custom_ops_failed, ctx.gradients.severed)
    errors = [i.metrics.get("max_rel_error") for i in items if i.subject.kind == "model"]
    summary: dict[str, Any] = {
        "hvp_directions": sum(1 for i in items if i.subject.kind == "model"),
        "hvp_max_rel_error": max((e for e in errors if isinstance(e, float)), default=None),
        "operators_probed": sum(1 for i in items if i.subject.kind in ("operator", "custom_op")),
        "not_twice_differentiable": ", ".join(
            i.subject.op or i.subject.name or "?"
            for i in items
            if i.metrics.get("twice_differentiable") is False
        ),
        "failed": sum(1 for i in items if i.status == "fail"),
        # directions that passed only within their rounding floor / that float64 cannot resolve
        "within_floor": sum(1 for i in items if i.metrics.get("within_floor") is True),
        "unresolved": sum(1 for i in items if i.metrics.get("unresolved") is True),
    }
    reason = (
        None
        if ctx.operators is not None
        else "operator capture unavailable: operator-level items omitted"
    )
    return CheckResult(
        check="second_order",
        status="computed",
        parameters=parameters,
        summary=summary,
        items=items,
        reason=reason,
    )
