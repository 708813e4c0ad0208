"""The ``custom_ops`` check: every ``torch.autograd.Function`` the model uses, backward vs
finite differences.

Discovery walks the autograd graph of one probe forward pass from the model's output. A
custom Function's backward node is named ``<ClassName>Backward`` and is an instance of
``torch.autograd.function.BackwardCFunction``; its ``_forward_cls`` attribute is the Function
class itself (the documented names are matched against the Function subclasses when that
attribute is missing). The inputs are then captured in a second forward pass during which
each discovered class's ``forward`` is wrapped (and restored afterwards) to record its
arguments and the module that called it.

Each call (up to ``custom_op_max_calls`` per class, default 3) is checked in float64 by
:func:`~attest.collection.gradients.finite_differences.check_backward` with respect to the tensors that
required grad in the probe run. A backward that returns ``None`` for such an input counts as
a zero gradient, so a Function that silently drops a gradient fails. If the captured point
fails but a nearby point passes, the captured point lies on a kink of the function: the item
passes and says so, unless the backward alone was NaN or infinite there (a defect at that
point, never a kink: docs/gradient-checks.md, "Non-finite values").

:func:`register_custom_op` adds user-supplied sample inputs (for a Function class, or for a
plain function that calls one); an unregistered Function is still checked on the inputs
captured from the probe run.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from attest.collection.capture.aten_args import floating
from attest.collection.capture.capture import _ModuleStack
from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CollectContext
from attest.collection.gradients.finite_differences import (
    BackwardCheck,
    FiniteDifferenceSettings,
    NotDifferentiable,
    check_backward,
    describe,
    finite_or_none,
)
from attest.collection.gradients.flow import probe_input
from attest.collection.gradients.state import CustomCall
from attest.errors import InputError
from attest.evidence.model import CheckItem, CheckResult, Subject

__all__ = [
    "CustomCall",
    "captured_custom_calls",
    "case_function",
    "discover_custom_functions",
    "register_custom_op",
    "registered_custom_ops",
    "run",
]

F = TypeVar("F", bound=Callable[..., Any])

SampleInputs = Sequence[Any] | Sequence[Sequence[Any]] | Callable[[], Any]


@dataclass
class _Registration:
    fn: Callable[..., Any]
    sample_inputs: SampleInputs | None
    name: str


_REGISTRY: dict[Any, _Registration] = {}


def _qualified_name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def _is_function_class(obj: Any) -> bool:
    return inspect.isclass(obj) and issubclass(obj, torch.autograd.Function)


def register_custom_op(
    fn: F | None = None, *, sample_inputs: SampleInputs | None = None, name: str | None = None
) -> Any:
    """Register a custom autograd operation, with sample inputs, for the ``custom_ops`` check.

    ``fn`` is a ``torch.autograd.Function`` subclass, or a plain function that calls one.
    ``sample_inputs`` is one tuple of arguments, a list of such tuples, or a callable returning
    either; tensors with ``requires_grad=True`` are the ones differentiated (all floating
    tensors when none is marked). A Function class may be registered without samples (it is
    checked on the probe run's inputs anyway); a plain function needs them.

    Usable as a decorator, with or without arguments::

        @attest.register_custom_op(sample_inputs=lambda: [(torch.randn(4, 3),)])
        class MySoftplus(torch.autograd.Function): ...

        attest.register_custom_op(fused_gelu, sample_inputs=[(torch.randn(8),)])
    """
    if fn is None:
        return functools.partial(register_custom_op, sample_inputs=sample_inputs, name=name)
    if not callable(fn):
        raise InputError(
            f"register_custom_op got {type(fn).__name__}, not a function or torch.autograd.Function",
            hint="pass the Function class (or a function calling it) as the first argument",
        )
    if not _is_function_class(fn) and sample_inputs is None:
        raise InputError(
            f"register_custom_op({_qualified_name(fn)}) needs sample_inputs: it is a plain "
            "function, so there are no probe-run inputs to check it on",
            hint="pass sample_inputs=[(tensor, ...), ...] with requires_grad set on the inputs to differentiate",
        )
    _REGISTRY[fn] = _Registration(fn, sample_inputs, name or _qualified_name(fn))
    return fn


def registered_custom_ops() -> dict[Any, str]:
    """What is registered: the function or class -> its reported name."""
    return {fn: reg.name for fn, reg in _REGISTRY.items()}


def _unregister_all() -> None:  # for tests
    _REGISTRY.clear()


# -- discovery ---------------------------------------------------------------------------------


def _function_subclasses() -> dict[str, type]:
    found: dict[str, type] = {}
    stack: list[type] = [torch.autograd.Function]
    while stack:
        cls = stack.pop()
        sub: type
        for sub in cls.__subclasses__():
            found.setdefault(f"{sub.__name__}Backward", sub)
            stack.append(sub)
    return found


def discover_custom_functions(roots: Sequence[torch.Tensor]) -> list[type]:
    """The ``torch.autograd.Function`` classes in the autograd graph of ``roots``, in the
    order a breadth-first walk from the output meets them."""
    by_name: dict[str, type] | None = None
    seen: set[int] = set()
    classes: list[type] = []
    queue = [t.grad_fn for t in roots if t.grad_fn is not None]
    while queue:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            cls = getattr(node, "_forward_cls", None)
            if cls is None:
                by_name = by_name or _function_subclasses()
                cls = by_name.get(node.name())
            if cls is not None and cls not in classes:
                classes.append(cls)
        queue.extend(next_node for next_node, _ in node.next_functions if next_node is not None)
    return classes


def _snapshot(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], list[bool]]:
    leaves, _ = tree_flatten((args, kwargs))
    flags = [bool(leaf.requires_grad) for leaf in leaves if floating(leaf)]
    copy = tree_map(
        lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, (args, kwargs)
    )
    return copy[0], copy[1], flags


def captured_custom_calls(
    model: torch.nn.Module, x: torch.Tensor, classes: Sequence[Any], max_calls: int
) -> list[CustomCall]:
    """Run ``model(x)`` once with each class's ``forward`` wrapped to record its calls.

    The wrapping is temporary: each class's own ``forward`` attribute is restored (or removed,
    when it was inherited) on the way out, whatever happens in between."""
    calls: list[CustomCall] = []
    per_class: dict[Any, int] = {}
    originals: dict[Any, Any] = {}
    with _ModuleStack(model) as modules:
        try:
            for cls in classes:
                originals[cls] = cls.__dict__.get("forward")
                static = inspect.getattr_static(cls, "forward")
                inner = static.__func__ if isinstance(static, staticmethod) else static
                cls.forward = staticmethod(
                    _recording(cls, inner, calls, per_class, modules, max_calls)
                )
            with torch.enable_grad():
                model(x)
        finally:
            for cls, original in originals.items():
                if original is None:
                    delattr(cls, "forward")
                else:
                    cls.forward = original
    return calls


def _recording(
    cls: Any,
    inner: Callable[..., Any],
    calls: list[CustomCall],
    per_class: dict[Any, int],
    modules: _ModuleStack,
    max_calls: int,
) -> Callable[..., Any]:
    @functools.wraps(inner)
    def forward(*args: Any, **kwargs: Any) -> Any:
        if per_class.get(cls, 0) < max_calls:
            per_class[cls] = per_class.get(cls, 0) + 1
            user_args = (
                args[1:]
                if args and isinstance(args[0], torch.autograd.function.FunctionCtx)
                else args
            )
            snap_args, snap_kwargs, flags = _snapshot(tuple(user_args), dict(kwargs))
            calls.append(CustomCall(cls, modules.current, snap_args, snap_kwargs, flags))
        return inner(*args, **kwargs)

    return forward


# -- checking ----------------------------------------------------------------------------------


def case_function(
    target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], use: list[int]
) -> tuple[Callable[..., list[torch.Tensor]], list[torch.Tensor]]:
    """``f(*xs)`` calling ``target`` with the floating leaves ``use`` replaced; and their values."""
    leaves, spec = tree_flatten((args, kwargs))
    slots = [i for i, leaf in enumerate(leaves) if floating(leaf)]
    positions = [slots[k] for k in use]

    def call(*xs: torch.Tensor) -> list[torch.Tensor]:
        new = list(leaves)
        for pos, x in zip(positions, xs, strict=True):
            new[pos] = x
        a, k = tree_unflatten(new, spec)
        out = target(*a, **k)
        flat, _ = tree_flatten(out)
        return [t for t in flat if isinstance(t, torch.Tensor)]

    return call, [leaves[p] for p in positions]


def _check_case(
    target: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    flags: list[bool],
    settings: FiniteDifferenceSettings,
) -> tuple[BackwardCheck, BackwardCheck | None]:
    """(check at the given point, check at a nearby point when the first one failed)."""
    args64, kwargs64 = tree_map(
        lambda v: v.detach().to(torch.float64) if floating(v) else v, (args, kwargs)
    )
    use = [i for i, f in enumerate(flags) if f] or list(range(len(flags)))
    fn, values = case_function(target, args64, kwargs64, use)
    first = check_backward(fn, values, settings)
    if first.passed or analytic_only(first):
        # A backward that is NaN or infinite where the function and its differences are
        # finite is wrong there, not on a kink: no nearby point excuses it (a real PyTorch
        # ``prod`` backward was 0/0 at exact zeros and right everywhere else).
        return first, None
    generator = torch.Generator().manual_seed(settings.seed + 104729)
    nearby = []
    for v in values:
        rms = float(v.pow(2).mean().sqrt()) if v.numel() else 0.0
        noise = torch.randn(v.shape, generator=generator, dtype=torch.float64).to(v.device)
        nearby.append(v + 1e-3 * max(rms, 1e-3) * noise)
    return first, check_backward(fn, nearby, settings)


def analytic_only(check: BackwardCheck) -> bool:
    """Whether ``check`` failed on a non-finite analytic side alone (the numeric one finite)."""
    return check.nonfinite is not None and list(check.nonfinite.sides) == ["analytic"]


def _sample_cases(reg: _Registration) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    samples: Any = reg.sample_inputs
    if samples is None:
        return []
    if callable(samples):
        samples = samples()
    if isinstance(samples, torch.Tensor):
        samples = [(samples,)]
    elif isinstance(samples, tuple):
        samples = [samples]
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for case in samples:
        if isinstance(case, dict):
            cases.append(((), dict(case)))
        elif isinstance(case, (tuple, list)):
            cases.append((tuple(case), {}))
        else:
            cases.append(((case,), {}))
    return cases


def _flags_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[bool]:
    leaves, _ = tree_flatten((args, kwargs))
    return [bool(leaf.requires_grad) for leaf in leaves if floating(leaf)]


def _item(
    subject: Subject,
    source: str,
    target: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    flags: list[bool],
    settings: FiniteDifferenceSettings,
) -> CheckItem:
    try:
        first, nearby = _check_case(target, args, kwargs, flags, settings)
    except NotDifferentiable as exc:
        return CheckItem(
            subject=subject,
            status="not_computed",
            metrics={"skipped": True, "source": source},
            message=f"skipped (not differentiable): {exc}",
        )
    except Exception as exc:
        return CheckItem(
            subject=subject,
            status="not_computed",
            metrics={"source": source},
            message=f"could not run it in float64: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
        )
    metrics = first.metrics()
    metrics["source"] = source
    details: dict[str, Any] = {"error_curve": first.error_curve}
    message = f"{source}: {describe(first)}"
    passed = first.passed
    if nearby is not None:
        metrics["captured_point_failed"] = True
        metrics["nearby_max_rel_error"] = finite_or_none(nearby.max_rel_error)
        details["nearby"] = {**nearby.metrics(), "error_curve": nearby.error_curve}
        if nearby.passed:
            passed = True
            message += (
                "; at a nearby point it agrees (max relative error "
                f"{nearby.max_rel_error:.2e}): the captured point lies on a kink of the function"
            )
        else:
            message += f"; at a nearby point too ({describe(nearby)})"
    return CheckItem(
        subject=subject,
        status="pass" if passed else "fail",
        metrics=metrics,
        message=message,
        details=details,
    )


def run(ctx: CollectContext) -> CheckResult:
    """The ``custom_ops`` result: one item per checked call or registered sample."""
    from attest.collection.gradients.gradcheck import fd_settings

    # User-written backwards are where defects live and they are few: every direction gets
    # its own output cotangent (one backward each), not the shared one of ``gradcheck``.
    base = fd_settings(ctx)
    settings = dataclasses.replace(base, cotangents=base.directions)
    max_calls = int(ctx.settings.extra.get("custom_op_max_calls", 3))
    parameters = {
        "directions": settings.directions,
        "cotangents": settings.cotangents,
        "seed": settings.seed,
        "eps": settings.eps,
        "atol": settings.atol,
        "rtol": settings.rtol,
        "max_calls_per_function": max_calls,
        "dtype": "float64",
    }
    # Which Functions forward uses, from the autograd graph of the float64 instance the other
    # gradient checks share (building a model of its own cost more than the forward); their
    # calls are then captured in the deployed precision.
    x = probe_input(ctx)
    x = x.detach().requires_grad_(True) if x.is_floating_point() else x
    # gradient_flow's float64 forward, when it ran first (taken: the hand-off ends here)
    output, ctx.gradients.output = ctx.gradients.output, None
    if output is None:
        try:
            x64 = probe_input(ctx, torch.float64)
            x64 = x64.detach().requires_grad_(True) if x64.is_floating_point() else x64
            with torch.enable_grad():
                output = model_output_tensor(ctx.shared_model(torch.float64)(x64))
        except Exception:  # a model that cannot run in float64: look in the deployed precision
            with torch.enable_grad():
                output = model_output_tensor(ctx.fresh_model()(x))
    classes = discover_custom_functions([output])
    del output
    calls = captured_custom_calls(ctx.fresh_model(), x, classes, max_calls) if classes else []
    ctx.gradients.custom_functions = classes
    ctx.gradients.custom_calls = calls
    items: list[CheckItem] = []
    for call in calls:
        subject = Subject(kind="custom_op", name=_qualified_name(call.cls), module=call.module)
        items.append(
            _item(
                subject,
                "probe run",
                call.cls.apply,
                call.args,
                call.kwargs,
                call.differentiate,
                settings,
            )
        )
    for fn, reg in _REGISTRY.items():
        target = fn.apply if _is_function_class(fn) else fn
        for args, kwargs in _sample_cases(reg):
            subject = Subject(kind="custom_op", name=reg.name)
            items.append(
                _item(
                    subject,
                    "registered sample",
                    target,
                    args,
                    kwargs,
                    _flags_of(args, kwargs),
                    settings,
                )
            )
    ctx.gradients.custom_ops_failed = sorted(
        {i.subject.name or "" for i in items if i.status == "fail"}
    )
    used = {_qualified_name(c) for c in classes}
    summary: dict[str, Any] = {
        "custom_functions_found": len(classes),
        "functions": ", ".join(sorted(used)) if used else "",
        "registered": len(_REGISTRY),
        "checked_cases": sum(1 for i in items if i.status in ("pass", "fail")),
        "failed": sum(1 for i in items if i.status == "fail"),
    }
    unchecked = [c for c in classes if not any(call.cls is c for call in calls)]
    reason = None
    if unchecked:
        reason = "no call captured for " + ", ".join(_qualified_name(c) for c in unchecked)
    return CheckResult(
        check="custom_ops",
        status="computed",
        parameters=parameters,
        summary=summary,
        items=items,
        reason=reason,
    )
