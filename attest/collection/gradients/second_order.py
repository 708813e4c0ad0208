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
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from attest.collection.capture.aten_args import BoundCall, to_float64
from attest.collection.context import CollectContext, OpRecord
from attest.collection.gradients.finite_differences import (
    BackwardCheck,
    FiniteDifferenceSettings,
    GaussianPool,
    NotDifferentiable,
    check_backward,
    describe,
)
from attest.collection.gradients.flow import GRAPH, GradientGraph, probe_input
from attest.collection.gradients.gradcheck import (
    CaseSkipped,
    fd_settings,
    is_random,
    nudge_off_kinks,
    prepare_case,
)
from attest.collection.gradients.hessian_vector import HVP_EPS, HVP_EPS_SWEEP, hessian_vector_check
from attest.evidence.model import CheckItem, CheckResult, ItemStatus, Subject

__all__ = ["gradient_map", "run", "second_order_check", "twice_differentiable"]

TensorFn = Callable[..., Sequence[torch.Tensor]]


def _norm(ts: Sequence[torch.Tensor]) -> float:
    return math.sqrt(sum(float((t.detach() * t.detach()).sum()) for t in ts))


def gradient_map(
    fn: TensorFn, inputs: list[torch.Tensor], seed: int, pool: GaussianPool | None = None
) -> TensorFn:
    """``x -> J(x)^T u`` for ``fn`` (seeded cotangent ``u``), built with ``create_graph``."""
    pool = pool if pool is not None else GaussianPool(seed + 31)
    with torch.no_grad():
        outputs = [o for o in fn(*inputs) if o.is_floating_point()]
    # The cotangent requires grad, as the incoming gradient does inside a double backward of
    # the model: ``@once_differentiable`` only arms its error when it does.
    cotangents = [pool.like(o).clone().requires_grad_(True) for o in outputs]

    def vjp(*xs: torch.Tensor) -> list[torch.Tensor]:
        leaves = [x if x.requires_grad else x.detach().requires_grad_(True) for x in xs]
        with torch.enable_grad():
            outs = [o for o in fn(*leaves) if o.is_floating_point()]
            pairs = [(o, u) for o, u in zip(outs, cotangents, strict=True) if o.requires_grad]
            if not pairs:
                return [torch.zeros_like(x) for x in xs]
            grads = torch.autograd.grad(
                [o for o, _ in pairs],
                leaves,
                [u for _, u in pairs],
                create_graph=True,
                allow_unused=True,
            )
        return [torch.zeros_like(x) if g is None else g for x, g in zip(xs, grads, strict=True)]

    return vjp


def second_order_check(
    fn: TensorFn,
    inputs: list[torch.Tensor],
    settings: FiniteDifferenceSettings,
    pool: GaussianPool | None = None,
) -> tuple[bool, str, BackwardCheck | None]:
    """(twice differentiable?, why, the check): ``fn``'s gradient map vs finite differences.

    The gradient map ``x -> J(x)^T u`` is checked like a backward: its derivative by double
    backward against central differences of the gradient. A double backward that raises,
    or one that misses how the gradient changes with ``x`` (a backward run under ``no_grad``,
    a ``@once_differentiable`` Function, whose derivative autograd sees as zero), fails.
    """
    vjp = gradient_map(fn, inputs, settings.seed, pool)
    try:
        check = check_backward(vjp, inputs, settings, pool=pool)
    except RuntimeError as exc:
        return False, "double backward raises: " + " ".join(str(exc).split())[:300], None
    except NotDifferentiable:
        return _untracked_gradient_map(vjp, inputs, settings)
    if check.passed:
        return True, "its gradient map " + describe(check).removeprefix("backward "), check
    return (
        False,
        (
            "its gradient changes with the input in a way double backward does not reproduce "
            f"(max relative error {check.max_rel_error:.2e} against central differences of the "
            "gradient): the backward is not (correctly) differentiable"
        ),
        check,
    )


def _untracked_gradient_map(
    vjp: TensorFn, inputs: list[torch.Tensor], settings: FiniteDifferenceSettings
) -> tuple[bool, str, None]:
    """Autograd sees the gradient map as constant: finite differences must agree."""
    generator = torch.Generator().manual_seed(settings.seed + 41)
    direction = [
        torch.randn(x.shape, generator=generator, dtype=torch.float64).to(x.device) for x in inputs
    ]
    with torch.no_grad():
        plus = vjp(*[x + 1e-4 * d for x, d in zip(inputs, direction, strict=True)])
        minus = vjp(*[x - 1e-4 * d for x, d in zip(inputs, direction, strict=True)])
        here = vjp(*inputs)
    change = _norm([a - b for a, b in zip(plus, minus, strict=True)]) / 2e-4
    if change > settings.rtol * max(_norm(here), 1e-300):
        return (
            False,
            (
                "its gradient changes with the input (finite differences) but autograd does not "
                "track that dependence: the backward is not (correctly) differentiable"
            ),
            None,
        )
    return True, "linear: its gradient does not depend on the input", None


def twice_differentiable(
    fn: TensorFn, inputs: list[torch.Tensor], settings: FiniteDifferenceSettings
) -> tuple[bool, str]:
    """(verdict, sentence) from :func:`second_order_check` along one seeded direction."""
    ok, why, _ = second_order_check(fn, inputs, dataclasses.replace(settings, directions=1))
    return ok, why


def _operator_case(
    record: OpRecord,
    settings: FiniteDifferenceSettings,
    prepared: dict[str, tuple[BoundCall, list[int]]],
) -> tuple[TensorFn, list[torch.Tensor]]:
    if record.op in prepared:  # gradcheck already built (and nudged) this operator's case
        call, use = prepared[record.op]
        return call.function(use), [call.tensors[i] for i in use]
    if is_random(record):
        raise CaseSkipped("random operator")
    call = BoundCall.of(record.func, to_float64(record.args), to_float64(record.kwargs))
    if not call.tensors:
        raise CaseSkipped("no floating-point tensor input")
    use, _fixed = prepare_case(call)
    if not use:
        raise CaseSkipped("no floating-point input is differentiable")
    nudge_off_kinks(record, call, use, settings.seed)
    return call.function(use), [call.tensors[i] for i in use]


def _item(
    subject: Subject,
    case: Callable[[], tuple[TensorFn, list[torch.Tensor]]],
    settings: FiniteDifferenceSettings,
    finite_differences: bool,
    pool: GaussianPool,
) -> CheckItem:
    """One operator's second-order item: one seeded direction as a probe, or the full
    ``K`` directions (plus ``gradgradcheck`` on small inputs) when ``finite_differences``."""
    probe = settings if finite_differences else dataclasses.replace(settings, directions=1)
    try:
        fn, inputs = case()
        ok, why, check = second_order_check(fn, inputs, probe, pool)
    except (CaseSkipped, NotDifferentiable) as exc:
        return CheckItem(
            subject=subject,
            status="not_computed",
            metrics={"skipped": True},
            message=f"skipped (not differentiable): {exc}",
        )
    except Exception as exc:
        return CheckItem(
            subject=subject,
            status="not_computed",
            message=f"could not re-run it alone in float64: {type(exc).__name__}: {exc}",
        )
    metrics: dict[str, Any] = {"twice_differentiable": ok}
    details: dict[str, Any] = {}
    if check is not None:
        metrics.update(check.metrics())
        details["error_curve"] = check.error_curve
    if ok and check is not None and finite_differences and check.mode == "full_jacobian":
        verdict = bool(
            torch.autograd.gradgradcheck(
                lambda *xs: tuple(o for o in fn(*xs) if o.is_floating_point()),
                tuple(x.detach().clone().requires_grad_(True) for x in inputs),
                eps=check.eps,
                atol=max(settings.atol, 1e-10),
                rtol=settings.rtol,
                raise_exception=False,
            )
        )
        metrics["torch_gradgradcheck"] = verdict
        ok = verdict
    prefix = "twice differentiable: " if ok else "not twice differentiable: "
    status: ItemStatus = "pass" if ok else "fail"
    if not ok and missing_double_backward(why):
        status = "warn"
        why += " (PyTorch has no double-backward formula for this kernel; not a gradient defect)"
    return CheckItem(
        subject=subject,
        status=status,
        metrics=metrics,
        message=prefix + why,
        details=details,
    )


def _custom_case(call: Any) -> Callable[[], tuple[TensorFn, list[torch.Tensor]]]:
    from attest.collection.gradients.custom_ops import case_function

    def case() -> tuple[TensorFn, list[torch.Tensor]]:
        args64, kwargs64 = to_float64((call.args, call.kwargs))
        use = [i for i, f in enumerate(call.differentiate) if f] or list(
            range(len(call.differentiate))
        )
        return case_function(call.cls.apply, args64, kwargs64, use)

    return case


def _defer_to_root_causes(
    items: list[CheckItem], custom_failed: list[str], severed: list[str]
) -> None:
    """Second-order failures that a first-order defect already explains become warnings.

    A custom Function whose backward is wrong (``custom_ops`` failed) makes second derivatives
    wrong too; a path severed by ``detach``/integer casts (``gradient_flow`` failed) hides from
    autograd a dependence that finite differences see. Those failures point at the finding
    that explains them instead of failing a second time.
    """
    causes = []
    if custom_failed:
        causes.append(
            f"custom Function(s) with a wrong backward: {', '.join(custom_failed)} (see custom_ops)"
        )
    if severed:
        causes.append(f"severed gradient paths of {', '.join(severed[:5])} (see gradient_flow)")
    if not causes:
        return
    for item in items:
        if item.status != "fail":
            continue
        if item.subject.kind == "model" or (
            item.subject.kind == "custom_op" and item.subject.name in custom_failed
        ):
            item.status = "warn"
            item.metrics["inherited"] = True
            item.message += "; inherited from " + " and ".join(causes)


def missing_double_backward(text: str) -> bool:
    """True when PyTorch itself has no double-backward formula for a kernel (a fused attention
    kernel, say): the function is twice differentiable, this implementation of it is not.
    That leaves second order unverified (a warning), it does not make a gradient wrong."""
    return "derivative for" in text and "not implemented" in text


def _math_attention() -> contextlib.AbstractContextManager[None]:
    """Scaled-dot-product attention forced onto its math backend, which PyTorch can
    differentiate twice (the fused CPU/CUDA kernels have no double backward)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.MATH])


def _model_items(ctx: CollectContext, rtol: float, atol: float) -> list[CheckItem] | str:
    """The HVP items, or the reason they cannot be computed."""
    spec = ctx.spec
    labels = None if spec.labels is None else spec.labels.to(spec.device)
    x = probe_input(ctx, torch.float64)
    subject = Subject(kind="model", name="hessian-vector product")
    # gradient_flow's gradient of the same objective on the same float64 model and batch,
    # with its double-backward graph (when gradchecks.run asked for it): popped, so that the
    # graph is freed as soon as the products are done.
    shared = ctx.extras.pop(GRAPH, None)

    def products(shared: GradientGraph | None = None) -> list[dict[str, Any]]:
        settings = ctx.settings
        if shared is not None:
            return hessian_vector_check(
                shared.model,
                spec,
                shared.x,
                labels,
                settings.second_order_directions,
                settings.seed,
                rtol,
                atol,
                graph=(shared.wrt, shared.grads),
            )
        return hessian_vector_check(
            ctx.shared_model(torch.float64),
            spec,
            x,
            labels,
            settings.second_order_directions,
            settings.seed,
            rtol,
            atol,
        )

    note = ""
    try:
        outcomes = products(shared if isinstance(shared, GradientGraph) else None)
    except Exception as exc:
        shared = None
        text = " ".join(str(exc).split())[:300]
        if ctx.extras.get("gradient_flow_error") is not None or "inplace" in text:
            return f"the model's backward raises (see gradient_flow): {text}"
        retried: list[dict[str, Any]] | None = None
        if missing_double_backward(text) and "scaled_dot_product" in text:
            try:
                with _math_attention():
                    retried = products()
            except Exception:
                retried = None
        if retried is None:
            missing = missing_double_backward(text)
            return [
                CheckItem(
                    subject=subject,
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
        outcomes = retried
        note = (
            "; attention evaluated with the math backend: the fused attention kernel has no "
            f"double backward ({text[:160]})"
        )
        ctx.extras["second_order_note"] = note.lstrip("; ")
    shared = None  # the graph is no longer needed
    items = []
    for outcome in outcomes:
        message = (
            f"direction {outcome['direction']}: double-backward Hv vs central differences of the "
            f"gradient, relative error {outcome['max_rel_error']} at eps={outcome['eps']:.0e}"
            + note
        )
        if outcome.get("on_kink"):
            message += "; failed at the probe point, agrees at a nearby point (the probe point lies on a kink)"
        if outcome["hv_norm"] is None:  # the double backward itself gave NaN or Inf
            message += (
                "; the double-backward Hv is NaN or infinite (an operator's double-backward "
                "formula at a singular point, such as the norm of an all-zero slice: see kinks)"
            )
        metrics = {key: outcome[key] for key in ("max_rel_error", "eps", "hv_norm", "grad_norm")}
        metrics.update(
            {
                "direction": outcome["direction"],
                "seed": ctx.settings.seed,
                "rtol": rtol,
                "atol": atol,
                "on_kink": bool(outcome.get("on_kink", False)),
            }
        )
        items.append(
            CheckItem(
                subject=subject,
                status="pass" if outcome["passed"] else "fail",
                metrics=metrics,
                message=message,
                details={"error_curve": outcome["error_curve"], "nearby": outcome.get("nearby")},
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
    }
    model_items = _model_items(ctx, rtol, atol)
    if isinstance(model_items, str):
        return CheckResult(
            check="second_order", status="not_computed", parameters=parameters, reason=model_items
        )
    items = list(model_items)
    fallback = ctx.extras.get("second_order_note")
    if fallback:  # name the fused kernels the products could not differentiate twice
        parameters["attention_backend"] = "math (fused kernel has no double backward)"
        fused = {r.op: r for r in ctx.operators or [] if "scaled_dot_product" in r.op}
        items += [
            CheckItem(
                subject=Subject(kind="operator", operator_id=r.id, op=r.op, module=r.module),
                status="warn",
                metrics={"twice_differentiable": False},
                message=f"not twice differentiable as implemented: {fallback}",
            )
            for r in fused.values()
            if "math" not in r.op
        ]
    # The model-level products run every operator's double backward along random directions:
    # when they agree, no operator needs probing alone. When one fails (or raises), every
    # distinct operator is checked alone, with the full K directions, to name the culprit.
    localize = any(i.status == "fail" for i in items)
    probe_all = localize or bool(extra.get("second_order_operator_probe", False))
    parameters["operators_probed"] = "all" if probe_all else "custom Functions only"
    prepared = ctx.extras.get("gradcheck_cases") or {}
    pool = ctx.extras.get("gradient_pool") or GaussianPool(settings.seed)
    seen: set[str] = set()
    for record in (ctx.operators or []) if probe_all else []:
        if record.op in seen:
            continue
        seen.add(record.op)
        subject = Subject(
            kind="operator", operator_id=record.id, op=record.op, module=record.module
        )
        case = functools.partial(_operator_case, record, settings, prepared)
        items.append(_item(subject, case, settings, localize, pool))
    for call in ctx.extras.get("custom_calls", []):
        name = f"{call.cls.__module__}.{call.cls.__qualname__}"
        if name in seen:
            continue
        seen.add(name)
        items.append(
            _item(
                Subject(kind="custom_op", name=name, module=call.module),
                _custom_case(call),
                settings,
                True,
                pool,
            )
        )
    _defer_to_root_causes(
        items,
        ctx.extras.get("custom_ops_failed") or [],
        ctx.extras.get("gradient_flow_severed") or [],
    )
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
