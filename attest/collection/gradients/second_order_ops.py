"""The operator level of ``second_order``: is an operator's (or a custom Function's) backward
itself differentiable?

:func:`second_order_check` builds the gradient map ``x -> J(x)^T u`` (:func:`gradient_map`,
seeded ``u``) with ``create_graph=True`` and checks its derivative by double backward
against central differences of the gradient, like a backward. :func:`operator_item` turns
that into an item (one seeded direction as a probe, or the full ``K`` directions plus
``gradgradcheck`` on small inputs); :func:`operator_case` and :func:`custom_case` build the
float64 cases, reusing ``gradcheck``'s; :func:`defer_to_root_causes` keeps failures a
first-order defect explains as warnings.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from attest.collection.capture.aten_args import BoundCall, to_float64
from attest.collection.capture.records import OpRecord
from attest.collection.gradients.finite_differences import (
    BackwardCheck,
    FiniteDifferenceSettings,
    GaussianPool,
    NotDifferentiable,
    check_backward,
    describe,
)
from attest.collection.gradients.gradcheck_cases import (
    CaseSkipped,
    is_random,
    nudge_off_kinks,
    prepare_case,
)
from attest.collection.nonfinite import nonfinite
from attest.evidence.model import CheckItem, ItemStatus, Subject

__all__ = [
    "TensorFn",
    "custom_case",
    "defer_to_root_causes",
    "gradient_map",
    "missing_double_backward",
    "operator_case",
    "operator_item",
    "second_order_check",
    "twice_differentiable",
]

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
    if check.nonfinite is not None:  # analytic: the double backward; numeric: differences
        return False, "its gradient map " + describe(check).removeprefix("backward "), check
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
    bad = nonfinite({"gradient": here, "numeric": change})
    if bad is not None:  # ``nan > tol`` is False: it would read as "linear"
        return False, f"its gradient map cannot be compared: {bad.describe()}", None
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


def operator_case(
    record: OpRecord,
    settings: FiniteDifferenceSettings,
    prepared: dict[str, tuple[OpRecord, list[int]]],
) -> tuple[TensorFn, list[torch.Tensor]]:
    """The float64, kink-nudged case of ``record``'s operator. When gradcheck checked it, it
    kept which call and which inputs (not the case: its float64 copies of a large network's
    activations would be held through the other checks for a probe that rarely runs), and
    the case is rebuilt as gradcheck built it, nudged the same way (seeded)."""
    if record.op in prepared:
        checked, use = prepared[record.op]
        call = BoundCall.of(checked.func, to_float64(checked.args), to_float64(checked.kwargs))
        nudge_off_kinks(checked, call, list(range(len(call.tensors))), settings.seed)
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


def operator_item(
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


def custom_case(call: Any) -> Callable[[], tuple[TensorFn, list[torch.Tensor]]]:
    from attest.collection.gradients.custom_ops import case_function

    def case() -> tuple[TensorFn, list[torch.Tensor]]:
        args64, kwargs64 = to_float64((call.args, call.kwargs))
        use = [i for i, f in enumerate(call.differentiate) if f] or list(
            range(len(call.differentiate))
        )
        return case_function(call.cls.apply, args64, kwargs64, use)

    return case


def defer_to_root_causes(
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
