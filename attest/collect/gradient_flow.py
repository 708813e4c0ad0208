"""The ``gradient_flow`` check: every trainable parameter gets a finite, non-zero gradient.

One forward and backward pass of the probe loss (the spec's loss on the probe targets when
it has one, else ``sum_n F(x_n)``), in float64 so that rounding cannot zero a gradient that
exists (that is the ``numerics`` and ``fidelity`` checks' business). Per parameter:

- frozen (``requires_grad=False``): listed as frozen, not a failure;
- a finite gradient with a non-zero entry: pass;
- no gradient, or an identically zero or non-finite one: fail, with the reason found.

Reasons come from a second, instrumented forward pass, run only when some parameter lacks a
gradient. A :class:`~torch.overrides.TorchFunctionMode` follows each such parameter's values
through every torch call (a bit per parameter, carried from inputs to outputs) and notes the
module where the path was cut: ``detach``/``.data`` (stop-gradient), a cast to an integer or
bool dtype, a trip outside torch (``.numpy()``, ``.tolist()``, ``.item()``), work under
``torch.no_grad()``, or zero-derivative operations (``round``, ``floor``, ``sign``...). A
parameter whose values never enter a torch call is unused in forward. The dispatch-level
operator capture cannot see these Python-level exits, which is why this tracker exists.

An in-place write to a tensor saved for backward makes backward raise ("modified by an
inplace operation"). That error is caught, and a forward pass under
``torch.autograd.graph.saved_tensors_hooks`` finds the module that wrote into the saved
tensor (its version counter moved between two module boundaries) and the module that saved
it; both are reported. Hooks are only used for that diagnosis, never for the gradients
themselves (saved-tensor hooks bypass autograd's own version check).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from attest.collect.capture import _ModuleStack
from attest.collect.context import CollectContext, LoadedSpec, target_scalar
from attest.collect.run import model_output_tensor
from attest.evidence import CheckItem, CheckResult, ItemStatus, Subject

__all__ = [
    "GRAPH",
    "KEEP_GRAPH",
    "GradientGraph",
    "ParameterGradients",
    "parameter_gradients",
    "probe_input",
    "probe_objective",
    "run",
]

_SEVERING = {"detach": "detach()", "detach_": "detach_()"}
_LEAVES_TORCH = {
    "numpy": ".numpy()",
    "__array__": "numpy.asarray()",
    "tolist": ".tolist()",
    "item": ".item()",
    "__float__": "float()",
    "__int__": "int()",
    "__bool__": "bool()",
    "__index__": "an index",
}
SEVERING_KINDS = ("severed", "outside", "integer", "no_grad")
_ZERO_DERIVATIVE = {"round", "floor", "ceil", "trunc", "fix", "sign", "sgn", "heaviside"}
_INPLACE_MARKERS = ("modified by an inplace operation",)


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


@dataclass
class GradientGraph:
    """The probe objective's gradient with its graph, handed from ``gradient_flow`` to
    ``second_order`` (which would otherwise rebuild the very same graph on the very same
    float64 model and probe batch). ``wrt``/``grads`` as :attr:`ParameterGradients.graph`."""

    model: nn.Module
    x: torch.Tensor
    wrt: list[torch.Tensor]
    grads: list[torch.Tensor | None]


# ``ctx.extras`` keys of that hand-off. ``gradchecks.run`` sets KEEP_GRAPH and runs
# ``second_order`` right after ``gradient_flow``, which pops GRAPH: the second-order graph
# lives from one check to the next and no longer. Without KEEP_GRAPH (a check run alone)
# nothing is kept.
KEEP_GRAPH = "gradient_flow_keep_graph"
GRAPH = "gradient_flow_graph"


def parameter_gradients(
    model: nn.Module,
    x: torch.Tensor,
    spec: LoadedSpec,
    labels: torch.Tensor | None,
    *,
    create_graph: bool = False,
) -> ParameterGradients:
    """One forward and backward pass of :func:`probe_objective`; exceptions are returned.

    With ``create_graph`` the backward also builds the graph of the gradient (kept in
    ``graph``); if that backward raises, a plain one decides (the gradients are the same)."""
    result = ParameterGradients()
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    result.frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    x = x.detach().clone().requires_grad_(x.is_floating_point())
    try:
        with torch.enable_grad():
            objective = probe_objective(spec, model_output_tensor(model(x)), labels)
    except Exception as exc:
        result.error, result.phase = exc, "forward"
        return result
    wrt = [p for _, p in trainable] + ([x] if x.requires_grad else [])
    if not objective.requires_grad:
        result.grads = {n: None for n, _ in trainable}
        return result
    grads: tuple[torch.Tensor | None, ...] | None = None
    if create_graph:
        try:
            grads = torch.autograd.grad(objective, wrt, create_graph=True, allow_unused=True)
            result.graph = (wrt, list(grads))
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


# -- why a parameter has no gradient ---------------------------------------------------------


@dataclass
class _Event:
    kind: str  # "severed" | "integer" | "outside" | "no_grad" | "zero_derivative"
    what: str
    module: str


@dataclass
class _Trace:
    used: int = 0  # bitmask of parameters read by some torch call
    reached: int = 0  # bitmask of parameters whose values reach the output
    events: dict[int, list[_Event]] = field(default_factory=dict)
    ran: set[str] = field(default_factory=set)


class _ParameterTracker(TorchFunctionMode):
    """Carries one bit per tracked parameter from the inputs of every torch call to its outputs."""

    def __init__(self, bits: dict[int, int], modules: _ModuleStack, trace: _Trace) -> None:
        super().__init__()
        self.taint: dict[int, int] = dict(bits)
        self.modules = modules
        self.trace = trace
        self.keep: list[Any] = []  # holds every tainted object so ids are never reused

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        leaves, _ = tree_flatten((args, kwargs))
        mask = 0
        grad_in = False
        for leaf in leaves:
            mask |= self.taint.get(id(leaf), 0)
            grad_in = grad_in or (isinstance(leaf, torch.Tensor) and leaf.requires_grad)
        out = func(*args, **kwargs)
        if not mask:
            return out
        name = getattr(func, "__name__", "")
        getter = (
            getattr(getattr(func, "__self__", None), "__name__", None)
            if name == "__get__"
            else None
        )
        if name == "__get__" and getter != "data":
            return out  # shape, dtype, grad_fn...: metadata, not a use
        module = self.modules.current
        self.trace.used |= mask
        outputs = [leaf for leaf in tree_flatten(out)[0] if leaf is not None]
        if name.endswith("_") or name in ("__setitem__", "copy_"):
            outputs.extend(leaf for leaf in leaves[:1] if isinstance(leaf, torch.Tensor))
        event: _Event | None = None
        if getter == "data":
            event = _Event("severed", ".data", module)
        elif name in _SEVERING:
            event = _Event("severed", _SEVERING[name], module)
        elif name in _LEAVES_TORCH:
            event = _Event("outside", f"{_LEAVES_TORCH[name]} (computation outside torch)", module)
        elif any(
            isinstance(o, torch.Tensor) and not (o.is_floating_point() or o.is_complex())
            for o in outputs
        ):
            dtypes = sorted({str(o.dtype) for o in outputs if isinstance(o, torch.Tensor)})
            event = _Event("integer", f"{name} producing {', '.join(dtypes)}", module)
        elif grad_in and not torch.is_grad_enabled():
            event = _Event("no_grad", f"{name} under torch.no_grad()", module)
        elif name in _ZERO_DERIVATIVE:
            event = _Event("zero_derivative", name, module)
        if event is not None:
            bit = 1
            while bit <= mask:
                if mask & bit:
                    self.trace.events.setdefault(bit, []).append(event)
                bit <<= 1
        for obj in outputs:
            self.taint[id(obj)] = self.taint.get(id(obj), 0) | mask
            self.keep.append(obj)
        return out


def _trace_parameters(
    model: nn.Module, x: torch.Tensor, names: list[str]
) -> tuple[_Trace, dict[str, int]]:
    params = dict(model.named_parameters())
    bits = {name: 1 << i for i, name in enumerate(names)}
    trace = _Trace()
    with _ModuleStack(model) as modules:
        handles = [
            m.register_forward_pre_hook(_mark_ran(trace, n)) for n, m in model.named_modules()
        ]
        tracker = _ParameterTracker({id(params[n]): b for n, b in bits.items()}, modules, trace)
        try:
            # Only the model's own forward is traced: the objective's target selection
            # (``output.detach().argmax``) is ours, not the model's.
            with torch.enable_grad(), tracker:
                output = model_output_tensor(model(x))
            trace.reached = tracker.taint.get(id(output), 0)
        except Exception:
            pass  # the diagnosis is best effort; the gradients were already measured
        finally:
            for handle in handles:
                handle.remove()
    return trace, bits


def _modules_run_in_training(model: nn.Module, x: torch.Tensor) -> set[str]:
    """The modules one training-mode forward pass calls (empty when it raises: a batch-norm
    on one sample, say; the eval-mode verdict then stands)."""
    trace = _Trace()
    handles = [m.register_forward_pre_hook(_mark_ran(trace, n)) for n, m in model.named_modules()]
    try:
        model.train()
        with torch.no_grad():
            model(x)
    except Exception:
        return set()
    finally:
        for handle in handles:
            handle.remove()
    return trace.ran


def _mark_ran(trace: _Trace, name: str) -> Callable[..., None]:
    def hook(module: nn.Module, args: Any) -> None:
        trace.ran.add(name)

    return hook


def _owner(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def _where(module: str) -> str:
    return f"module {module!r}" if module else "the root module's forward"


def _reason(name: str, bit: int, trace: _Trace, zero: bool) -> tuple[str, str]:
    """(kind, sentence): why parameter ``name`` (tracked as ``bit``) gets no usable gradient."""
    events = trace.events.get(bit, [])
    owner = _owner(name)
    if not trace.used & bit:
        if owner and owner not in trace.ran:
            return "unused", f"unused in forward: its module {owner!r} is never called"
        return "unused", f"unused in forward: {_where(owner)} runs but never reads it"
    for kind in SEVERING_KINDS:
        found = [e for e in events if e.kind == kind]
        if found:
            first = found[0]
            label = {
                "severed": "path severed by",
                "outside": "path leaves torch through",
                "integer": "path goes through an integer/bool dtype:",
                "no_grad": "path computed with gradients disabled:",
            }[kind]
            return kind, f"{label} {first.what} in {_where(first.module)}"
    zeros = [e for e in events if e.kind == "zero_derivative"]
    if zeros:
        return "zero_derivative", (
            f"every path goes through zero-derivative operations ({zeros[0].what} in {_where(zeros[0].module)})"
        )
    if not trace.reached & bit:
        return (
            "dead_branch",
            "used in forward, but nothing computed from it reaches the output (a dead branch)",
        )
    if zero:
        return (
            "zero",
            "the gradient is exactly zero on the probe batch (e.g. units inactive on every probe example)",
        )
    return (
        "untracked",
        "its values reach the output only through operations autograd does not differentiate",
    )


# -- in-place writes to saved tensors ----------------------------------------------------------


def _locate_inplace(model: nn.Module, x: torch.Tensor) -> list[dict[str, str]]:
    """Modules that wrote into a tensor saved for backward, and the module that saved it."""
    saved: list[tuple[torch.Tensor, int, str]] = []
    found: list[dict[str, str]] = []
    flagged: set[int] = set()

    def check(writer: str) -> None:
        for i, (tensor, version, saver) in enumerate(saved):
            if i not in flagged and tensor._version != version:
                flagged.add(i)
                found.append({"writer": writer, "saved_by": saver})

    with _ModuleStack(model) as modules:

        def pack(t: torch.Tensor) -> torch.Tensor:
            saved.append((t, t._version, modules.current))
            return t

        def pre(name: str) -> Callable[..., None]:
            def hook(module: nn.Module, args: Any) -> None:
                check(modules.current)  # code of the enclosing module ran since the last boundary

            return hook

        def post(name: str) -> Callable[..., None]:
            def hook(module: nn.Module, args: Any, output: Any) -> None:
                check(name)

            return hook

        handles = []
        for name, module in model.named_modules():
            # prepend: run before the module stack pushes ``name``, while ``current`` is still
            # the enclosing module whose own code ran since the last boundary
            handles.append(module.register_forward_pre_hook(pre(name), prepend=True))
            handles.append(module.register_forward_hook(post(name)))
        try:
            with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                model(x.detach().clone().requires_grad_(x.is_floating_point()))
            check("")
        except Exception:
            pass
        finally:
            for handle in handles:
                handle.remove()
    return found


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
    keep = bool(ctx.extras.get(KEEP_GRAPH))
    measured = parameter_gradients(model, x, ctx.spec, labels, create_graph=keep)
    if measured.graph is not None:
        wrt, graph_grads = measured.graph
        leaf = wrt[-1] if x.is_floating_point() else x
        ctx.extras[GRAPH] = GradientGraph(model, leaf, wrt, graph_grads)
        measured.graph = None
    ctx.extras["gradient_flow_error"] = measured.error
    if measured.error is None and parameters["objective"] == "loss":
        # The float64 full-batch loss gradient: the accumulation check's reference.
        ctx.extras["full_batch_loss_gradients"] = measured.grads
    items: list[CheckItem] = []
    if measured.error is not None:
        message = " ".join(str(measured.error).split())[:400]
        if measured.phase == "backward" and any(m in message for m in _INPLACE_MARKERS):
            for hit in _locate_inplace(ctx.fresh_model(torch.float64), x) or [
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
                            f"in-place write in {_where(hit['writer'])} modifies a tensor saved for backward "
                            f"by {_where(hit['saved_by'])}; backward raises: {message}"
                        ),
                        details=hit,
                    )
                )
        else:
            items.append(
                CheckItem(
                    subject=Subject(kind="model"),
                    status="error",
                    message=f"the model raised {type(measured.error).__name__} in {measured.phase}: {message}",
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
        return _result(parameters, items, measured)

    stats = _gradient_stats(measured.grads)
    problems: dict[str, tuple[str, bool]] = {}  # name -> (what is wrong, zero)
    for name, grad in measured.grads.items():
        if grad is None:
            problems[name] = ("receives no gradient", False)
        elif not stats[name][0]:  # not finite
            continue
        elif stats[name][2] == 0:
            problems[name] = ("gradient is identically zero", True)
    trace: _Trace = _Trace()
    bits: dict[str, int] = {}
    severed: list[str] = []
    ctx.extras["gradient_flow_severed"] = severed
    if problems:
        trace, bits = _trace_parameters(ctx.fresh_model(torch.float64), x, list(problems))
    training_ran: set[str] | None = None  # modules a training-mode forward calls (on demand)
    for name, _param in model.named_parameters():
        subject = Subject(kind="parameter", name=name, module=_owner(name))
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
        if name in problems:
            what, zero = problems[name]
            kind, reason = _reason(name, bits[name], trace, zero)
            if kind in SEVERING_KINDS or kind == "untracked":
                severed.append(name)
            status: ItemStatus = "fail"
            if kind == "unused" and _owner(name) not in trace.ran:
                if training_ran is None:
                    training_ran = _modules_run_in_training(ctx.fresh_model(torch.float64), x)
                if _owner(name) in training_ran:
                    # an auxiliary branch (a VAE regularizer, an auxiliary classifier) that
                    # forward calls in training only: trained there, just not by this probe
                    status = "warn"
                    reason += " in eval mode; it runs in training mode, where it gets gradients"
            items.append(
                CheckItem(
                    subject=subject,
                    status=status,
                    metrics={
                        "has_grad": grad is not None,
                        "grad_norm": 0.0 if grad is not None else None,
                        "frozen": False,
                        "reason_kind": kind,
                    },
                    message=f"{what}: {reason}",
                    details={"reason": reason},
                )
            )
            continue
        assert grad is not None
        finite, norm, nonzero = stats[name]
        metrics: dict[str, Any] = {
            "has_grad": True,
            "frozen": False,
            "finite": finite,
            "nonzero_fraction": nonzero / grad.numel() if grad.numel() else float("nan"),
        }
        if finite:
            metrics["grad_norm"] = norm
            items.append(CheckItem(subject=subject, status="pass", metrics=metrics))
        else:
            metrics["nan_count"] = int(torch.isnan(grad).sum())
            metrics["inf_count"] = int(torch.isinf(grad).sum())
            items.append(
                CheckItem(
                    subject=subject,
                    status="fail",
                    metrics=metrics,
                    message="gradient has non-finite entries (see the numerics check for where)",
                )
            )
    if x.is_floating_point():
        g = measured.input_grad
        ok = g is not None and bool(torch.isfinite(g).all()) and bool((g != 0).any())
        items.append(
            CheckItem(
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
        )
    return _result(parameters, items, measured)


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
