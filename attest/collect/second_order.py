"""The ``second_order`` check: Hessian-vector products by double backward vs finite differences.

Model level (Pearlmutter): for seeded random directions ``v`` over the trainable parameters
and the probe input (each tensor's part scaled by that tensor's RMS, so the step is relative),
``Hv`` by double backward of the probe objective (``torch.autograd.grad`` with
``create_graph=True``, in float64) is compared with central differences of the gradient,
``(g(theta + eps v) - g(theta - eps v)) / (2 eps)``:
``rel_error = ||Hv_ad - Hv_fd|| / max(||Hv_ad||, ||Hv_fd||, atol * ||g||)``, pass at
``rel_error <= rtol``, the step swept over several orders when the default fails. If no step
works at the probe point and one works at a nearby point, the probe point lies on a kink (a
ReLU input at exactly 0 makes the gradient jump): the item passes and says so, the ``kinks``
check being the one that reports such points.

Operator level: for each distinct ATen operator of the forward pass (first call of each) and
each custom ``torch.autograd.Function``, the gradient ``x -> J(x)^T u`` (fixed seeded ``u``)
is itself checked against finite differences the way ``gradcheck`` checks a backward
(``torch.autograd.gradgradcheck`` when the inputs are small). An operator whose backward
cannot be differentiated (double backward raises, or the gradient depends on the input but
autograd does not track it, e.g. a Function marked ``@once_differentiable`` or computing its
backward under ``no_grad``) is named as not twice differentiable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from attest.collect.aten_args import BoundCall, to_float64
from attest.collect.capture import model_output_tensor
from attest.collect.context import CollectContext, LoadedSpec, OpRecord
from attest.collect.finite_differences import (
    EPS_SWEEP,
    BackwardCheck,
    FiniteDifferenceSettings,
    NotDifferentiable,
    check_backward,
    describe,
    finite_or_none,
)
from attest.collect.gradcheck_ops import CaseSkipped, nudge_off_kinks, fd_settings, prepare_case
from attest.collect.gradient_flow import probe_objective
from attest.evidence import CheckItem, CheckResult, Subject

__all__ = ["hessian_vector_check", "run", "second_order_of"]

HVP_EPS = 1e-5


# -- model level -------------------------------------------------------------------------------


def _gradient(
    model: nn.Module, spec: LoadedSpec, x: torch.Tensor, labels: torch.Tensor | None,
    params: list[nn.Parameter], create_graph: bool,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    wrt = [*params, x] if x.requires_grad else list(params)
    with torch.enable_grad():
        objective = probe_objective(spec, model_output_tensor(model(x)), labels)
        grads = torch.autograd.grad(objective, wrt, create_graph=create_graph, allow_unused=True)
    return wrt, [torch.zeros_like(w) if g is None else g for w, g in zip(wrt, grads, strict=True)]


def _shifted(values: list[torch.Tensor], direction: list[torch.Tensor], step: float) -> list[torch.Tensor]:
    return [v + step * d for v, d in zip(values, direction, strict=True)]


def _norm(ts: Sequence[torch.Tensor]) -> float:
    return math.sqrt(sum(float((t.detach() * t.detach()).sum()) for t in ts))


def hessian_vector_check(
    model: nn.Module, spec: LoadedSpec, x: torch.Tensor, labels: torch.Tensor | None,
    directions: int, seed: int, rtol: float, atol: float,
) -> list[dict[str, Any]]:
    """Per direction: double-backward Hv vs central differences of the gradient (see module doc)."""
    params = [p for p in model.parameters() if p.requires_grad]
    base = [p.detach().clone() for p in params]
    x = x.detach().clone().requires_grad_(x.is_floating_point())
    x_base = x.detach().clone()
    generator = torch.Generator().manual_seed(seed)
    results: list[dict[str, Any]] = []

    def load(values: list[torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            for p, v in zip(params, values, strict=False):
                p.copy_(v)
        if x.requires_grad:
            return values[-1].detach().clone().requires_grad_(True)
        return x_base

    for k in range(directions):
        point = [*base, x_base] if x.requires_grad else list(base)
        direction = []
        for t in point:
            rms = float(t.pow(2).mean().sqrt()) if t.numel() else 0.0
            direction.append(torch.randn(t.shape, generator=generator, dtype=torch.float64).to(t.device) * max(rms, 1e-3))
        outcome = _hvp_at(model, spec, labels, params, point, direction, load, rtol, atol)
        outcome["direction"] = k
        if not outcome["passed"]:
            nearby = [t + 1e-3 * d for t, d in zip(point, direction, strict=True)]
            nudge = []
            for t in point:
                rms = float(t.pow(2).mean().sqrt()) if t.numel() else 0.0
                nudge.append(torch.randn(t.shape, generator=generator, dtype=torch.float64).to(t.device) * max(rms, 1e-3) * 1e-3)
            nearby = _shifted(point, nudge, 1.0)
            second = _hvp_at(model, spec, labels, params, nearby, direction, load, rtol, atol)
            outcome["nearby"] = {key: second[key] for key in ("max_rel_error", "eps", "passed")}
            if second["passed"]:
                outcome["passed"] = True
                outcome["on_kink"] = True
        load(point)
        results.append(outcome)
    return results


def _hvp_at(
    model: nn.Module, spec: LoadedSpec, labels: torch.Tensor | None, params: list[nn.Parameter],
    point: list[torch.Tensor], direction: list[torch.Tensor], load: Callable[[list[torch.Tensor]], torch.Tensor],
    rtol: float, atol: float,
) -> dict[str, Any]:
    xx = load(point)
    wrt, grads = _gradient(model, spec, xx, labels, params, create_graph=True)
    dot = sum((g * d).sum() for g, d in zip(grads, direction, strict=True))
    if not isinstance(dot, torch.Tensor) or not dot.requires_grad:
        hv = [torch.zeros_like(g) for g in grads]
    else:
        hv_raw = torch.autograd.grad(dot, wrt, allow_unused=True)
        hv = [torch.zeros_like(w) if h is None else h.detach() for w, h in zip(wrt, hv_raw, strict=True)]
    g_norm = _norm(grads)
    hv_norm = _norm(hv)

    def error_at(eps: float) -> float:
        _, g_plus = _gradient(model, spec, load(_shifted(point, direction, eps)), labels, params, False)
        _, g_minus = _gradient(model, spec, load(_shifted(point, direction, -eps)), labels, params, False)
        fd = [(a - b) / (2 * eps) for a, b in zip(g_plus, g_minus, strict=True)]
        diff = _norm([h - f for h, f in zip(hv, fd, strict=True)])
        scale = max(hv_norm, _norm(fd), atol * g_norm)
        if not math.isfinite(diff):
            return math.inf
        return diff / scale if scale > 0 else 0.0

    curve: dict[str, float | None] = {}
    error = error_at(HVP_EPS)
    eps = HVP_EPS
    if error > rtol:
        curve[f"{HVP_EPS:.0e}"] = finite_or_none(error)
        for candidate in (1e-2, 1e-3, 1e-4, 1e-6, 1e-7, 1e-8):
            e = error_at(candidate)
            curve[f"{candidate:.0e}"] = finite_or_none(e)
            if e < error:
                error, eps = e, candidate
    return {"max_rel_error": finite_or_none(error), "eps": eps, "passed": error <= rtol,
            "hv_norm": finite_or_none(hv_norm), "grad_norm": finite_or_none(g_norm), "error_curve": curve}


# -- operator level ----------------------------------------------------------------------------


def second_order_of(
    fn: Callable[..., Sequence[torch.Tensor]], inputs: list[torch.Tensor], settings: FiniteDifferenceSettings
) -> BackwardCheck:
    """Check the gradient map ``x -> J(x)^T u`` of ``fn`` like a backward (``u`` seeded).

    Raises :class:`NotDifferentiable` when the gradient does not depend on ``x`` through
    autograd *and* finite differences agree it does not (a linear operator); raises
    ``RuntimeError`` with the reason when it does depend on ``x`` but autograd cannot follow.
    """
    generator = torch.Generator().manual_seed(settings.seed + 31)
    with torch.no_grad():
        shapes = [o for o in fn(*inputs) if o.is_floating_point()]
    cotangents = [torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o.device) for o in shapes]

    def vjp(*xs: torch.Tensor) -> list[torch.Tensor]:
        leaves = [x if x.requires_grad else x.detach().requires_grad_(True) for x in xs]
        with torch.enable_grad():
            outs = [o for o in fn(*leaves) if o.is_floating_point()]
            pairs = [(o, u) for o, u in zip(outs, cotangents, strict=True) if o.requires_grad]
            if not pairs:
                return [torch.zeros_like(x) for x in xs]
            grads = torch.autograd.grad([o for o, _ in pairs], leaves, [u for _, u in pairs],
                                        create_graph=True, allow_unused=True)
        return [torch.zeros_like(x) if g is None else g for x, g in zip(xs, grads, strict=True)]

    try:
        return check_backward(vjp, inputs, settings)
    except NotDifferentiable:
        pass
    # The gradient is constant for autograd: it must be constant for finite differences too.
    direction = [torch.randn(x.shape, generator=generator, dtype=torch.float64).to(x.device) for x in inputs]
    with torch.no_grad():
        plus = vjp(*[x + 1e-4 * d for x, d in zip(inputs, direction, strict=True)])
        minus = vjp(*[x - 1e-4 * d for x, d in zip(inputs, direction, strict=True)])
        here = vjp(*inputs)
    change = _norm([a - b for a, b in zip(plus, minus, strict=True)]) / 2e-4
    scale = max(_norm(here), 1e-300)
    if change > settings.rtol * scale:
        raise RuntimeError(
            "its gradient changes with the input (finite differences) but autograd does not track "
            "that dependence: the backward is not differentiable"
        )
    raise NotDifferentiable("its gradient does not depend on the input (second derivative zero)")


def _op_item(record: OpRecord, settings: FiniteDifferenceSettings) -> CheckItem:
    subject = Subject(kind="operator", operator_id=record.id, op=record.op, module=record.module)
    if torch.Tag.nondeterministic_seeded in getattr(record.func, "tags", ()):
        return CheckItem(subject=subject, status="not_computed", metrics={"skipped": True},
                         message="skipped (not differentiable): random operator")
    try:
        call = BoundCall.of(record.func, to_float64(record.args), to_float64(record.kwargs))
        if not call.tensors:
            raise CaseSkipped("no floating-point tensor input")
        use, _fixed = prepare_case(call)
        if not use:
            raise CaseSkipped("no floating-point input is differentiable")
        nudge_off_kinks(record, call, use, settings.seed)
        fn = call.function(use)
        inputs = [call.tensors[i] for i in use]
    except (CaseSkipped, NotDifferentiable) as exc:
        return CheckItem(subject=subject, status="not_computed", metrics={"skipped": True},
                         message=f"skipped (not differentiable): {exc}")
    except Exception as exc:
        return CheckItem(subject=subject, status="not_computed",
                         message=f"could not re-run the operator alone in float64: {type(exc).__name__}: {exc}")
    return _second_order_item(subject, fn, inputs, settings)


def _second_order_item(
    subject: Subject, fn: Callable[..., Sequence[torch.Tensor]], inputs: list[torch.Tensor],
    settings: FiniteDifferenceSettings,
) -> CheckItem:
    try:
        check = second_order_of(fn, inputs, settings)
    except NotDifferentiable as exc:
        return CheckItem(subject=subject, status="pass", metrics={"twice_differentiable": True, "linear": True},
                         message=f"twice differentiable: {exc}")
    except RuntimeError as exc:
        text = " ".join(str(exc).split())[:300]
        return CheckItem(subject=subject, status="fail", metrics={"twice_differentiable": False},
                         message=f"not twice differentiable: {text}")
    metrics = check.metrics()
    metrics["twice_differentiable"] = True
    ggc: bool | None = None
    if check.mode == "full_jacobian":
        ggc = bool(torch.autograd.gradgradcheck(
            lambda *xs: tuple(o for o in fn(*xs) if o.is_floating_point()),
            tuple(x.detach().clone().requires_grad_(True) for x in inputs),
            eps=check.eps, atol=max(settings.atol, 1e-10), rtol=settings.rtol, raise_exception=False,
        ))
        metrics["torch_gradgradcheck"] = ggc
    passed = check.passed and ggc is not False
    return CheckItem(subject=subject, status="pass" if passed else "fail", metrics=metrics,
                     message=f"gradient map: {describe(check)}", details={"error_curve": check.error_curve})


def run(ctx: CollectContext) -> CheckResult:
    """The ``second_order`` result: model-level HVP items, then one item per distinct operator
    and per custom Function."""
    settings = fd_settings(ctx)
    extra = ctx.settings.extra
    rtol = float(extra.get("second_order_rtol", 1e-3))
    atol = float(extra.get("second_order_atol", 1e-6))
    directions = ctx.settings.second_order_directions
    parameters: dict[str, Any] = {
        "directions": directions, "seed": ctx.settings.seed, "eps": HVP_EPS, "eps_sweep": list(EPS_SWEEP[:3]),
        "atol": atol, "rtol": rtol, "dtype": "float64", "operator_directions": settings.directions,
    }
    spec = ctx.spec
    labels = None if spec.labels is None else spec.labels.to(spec.device)
    model = ctx.fresh_model(torch.float64)
    x = ctx.inputs(torch.float64) if spec.inputs.is_floating_point() else spec.inputs.to(spec.device)
    items: list[CheckItem] = []
    try:
        outcomes = hessian_vector_check(model, spec, x, labels, directions, ctx.settings.seed, rtol, atol)
    except Exception as exc:
        text = " ".join(str(exc).split())[:300]
        if ctx.extras.get("gradient_flow_error") is not None or "inplace" in text:
            return CheckResult(check="second_order", status="not_computed", parameters=parameters,
                               reason=f"the model's backward raises (see gradient_flow): {text}")
        outcomes = []
        items.append(CheckItem(subject=Subject(kind="model", name="hessian-vector product"), status="fail",
                               metrics={"twice_differentiable": False},
                               message=f"double backward of the probe objective raised {type(exc).__name__}: {text}; "
                                       "see the operator items for the ones that are not twice differentiable"))
    for outcome in outcomes:
        message = (f"direction {outcome['direction']}: double-backward Hv vs central differences of the gradient, "
                   f"relative error {outcome['max_rel_error']} at eps={outcome['eps']:.0e}")
        if outcome.get("on_kink"):
            message += "; failed at the probe point but agrees at a nearby point (the probe point lies on a kink)"
        metrics = {key: outcome[key] for key in ("max_rel_error", "eps", "hv_norm", "grad_norm")}
        metrics.update({"direction": outcome["direction"], "seed": ctx.settings.seed, "rtol": rtol, "atol": atol,
                        "on_kink": bool(outcome.get("on_kink", False))})
        items.append(CheckItem(subject=Subject(kind="model", name="hessian-vector product"),
                               status="pass" if outcome["passed"] else "fail", metrics=metrics, message=message,
                               details={"error_curve": outcome["error_curve"], "nearby": outcome.get("nearby")}))
    seen: set[str] = set()
    for record in ctx.operators or []:
        if record.op in seen:
            continue
        seen.add(record.op)
        items.append(_op_item(record, settings))
    for call in ctx.extras.get("custom_calls", []):
        name = f"{call.cls.__module__}.{call.cls.__qualname__}"
        if name in seen:
            continue
        seen.add(name)
        items.append(_custom_item(call, name, settings))
    summary: dict[str, Any] = {
        "hvp_directions": len(outcomes),
        "operators_checked": sum(1 for i in items if i.subject.kind in ("operator", "custom_op")),
        "not_twice_differentiable": ", ".join(
            i.subject.op or i.subject.name or "?" for i in items if i.metrics.get("twice_differentiable") is False
        ),
        "failed": sum(1 for i in items if i.status == "fail"),
    }
    reason = None if ctx.operators is not None else "operator capture unavailable: operator-level items omitted"
    return CheckResult(check="second_order", status="computed", parameters=parameters, summary=summary,
                       items=items, reason=reason)


def _custom_item(call: Any, name: str, settings: FiniteDifferenceSettings) -> CheckItem:
    from attest.collect.custom_ops import case_function

    subject = Subject(kind="custom_op", name=name, module=call.module)
    args64, kwargs64 = to_float64((call.args, call.kwargs))
    use = [i for i, f in enumerate(call.differentiate) if f] or list(range(len(call.differentiate)))
    try:
        fn, values = case_function(call.cls.apply, args64, kwargs64, use)
    except Exception as exc:
        return CheckItem(subject=subject, status="not_computed", message=f"could not run it in float64: {exc}")
    return _second_order_item(subject, fn, values, settings)
