"""Why a parameter gets no gradient, and where an in-place write broke backward: the
diagnosis behind the ``gradient_flow`` check (:mod:`attest.collection.gradients.flow`), run only
when a gradient is missing or backward raises.

Reasons come from a second, instrumented forward pass. A
:class:`~torch.overrides.TorchFunctionMode` follows each such parameter's values through every
torch call (a bit per parameter, carried from inputs to outputs) and notes the module where the
path was cut: ``detach``/``.data`` (stop-gradient), a cast to an integer or bool dtype, a trip
outside torch (``.numpy()``, ``.tolist()``, ``.item()``), work under ``torch.no_grad()``, or
zero-derivative operations (``round``, ``floor``, ``sign``...). A parameter whose values never
enter a torch call is unused in forward. The dispatch-level operator capture cannot see these
Python-level exits, which is why this tracker exists.

An in-place write to a tensor saved for backward makes backward raise ("modified by an inplace
operation"). A forward pass under ``torch.autograd.graph.saved_tensors_hooks`` finds the module
that wrote into the saved tensor (its version counter moved between two module boundaries) and
the module that saved it. Hooks are only used for that diagnosis, never for the gradients
themselves (saved-tensor hooks bypass autograd's own version check).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from attest.collection.capture.capture import _ModuleStack
from attest.collection.capture.run import model_output_tensor

__all__ = [
    "INPLACE_MARKERS",
    "SEVERING_KINDS",
    "Trace",
    "locate_inplace",
    "module_phrase",
    "modules_run_in_training",
    "owner_of",
    "parameters_reaching_output_in_training",
    "reason_for",
    "trace_parameters",
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
INPLACE_MARKERS = ("modified by an inplace operation",)


@dataclass
class _Event:
    kind: str  # "severed" | "integer" | "outside" | "no_grad" | "zero_derivative"
    what: str
    module: str


@dataclass
class Trace:
    used: int = 0  # bitmask of parameters read by some torch call
    reached: int = 0  # bitmask of parameters whose values reach the output
    events: dict[int, list[_Event]] = field(default_factory=dict)
    ran: set[str] = field(default_factory=set)


class _ParameterTracker(TorchFunctionMode):
    """Carries one bit per tracked parameter from the inputs of every torch call to its outputs."""

    def __init__(self, bits: dict[int, int], modules: _ModuleStack, trace: Trace) -> None:
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


def trace_parameters(
    model: nn.Module, x: torch.Tensor, names: list[str]
) -> tuple[Trace, dict[str, int]]:
    params = dict(model.named_parameters())
    bits = {name: 1 << i for i, name in enumerate(names)}
    trace = Trace()
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


def modules_run_in_training(model: nn.Module, x: torch.Tensor) -> set[str]:
    """The modules one training-mode forward pass calls (empty when it raises: a batch-norm
    on one sample, say; the eval-mode verdict then stands)."""
    trace = Trace()
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


def parameters_reaching_output_in_training(model: nn.Module, x: torch.Tensor) -> set[str]:
    """The parameters that get a gradient from a training-mode forward pass's outputs (empty
    when it raises): a branch that eval mode computes and discards (a deep-supervision head,
    whose output joins the model's only in training) is trained there."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    try:
        model.train()
        with torch.enable_grad():
            outputs = [
                t
                for t in tree_flatten(model(x))[0]
                if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()
            ]
            if not outputs or not params:
                return set()
            total = torch.stack([t.sum() for t in outputs]).sum()
            grads = torch.autograd.grad(total, [p for _, p in params], allow_unused=True)
    except Exception:
        return set()
    return {n for (n, _), g in zip(params, grads, strict=True) if g is not None}


def _mark_ran(trace: Trace, name: str) -> Callable[..., None]:
    def hook(module: nn.Module, args: Any) -> None:
        trace.ran.add(name)

    return hook


def owner_of(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def module_phrase(module: str) -> str:
    return f"module {module!r}" if module else "the root module's forward"


def reason_for(name: str, bit: int, trace: Trace, zero: bool) -> tuple[str, str]:
    """(kind, sentence): why parameter ``name`` (tracked as ``bit``) gets no usable gradient."""
    events = trace.events.get(bit, [])
    owner = owner_of(name)
    if not trace.used & bit:
        if owner and owner not in trace.ran:
            return "unused", f"unused in forward: its module {owner!r} is never called"
        return "unused", f"unused in forward: {module_phrase(owner)} runs but never reads it"
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
            return kind, f"{label} {first.what} in {module_phrase(first.module)}"
    zeros = [e for e in events if e.kind == "zero_derivative"]
    if zeros:
        return "zero_derivative", (
            f"every path goes through zero-derivative operations ({zeros[0].what} in {module_phrase(zeros[0].module)})"
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


def locate_inplace(model: nn.Module, x: torch.Tensor) -> list[dict[str, str]]:
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
