"""Operator capture: every ATen call of a forward (+ backward) pass, attributed to its module.

:class:`OperatorCapture` is a :class:`~torch.utils._python_dispatch.TorchDispatchMode`, so it
sees the model at the level of ATen operators (``aten.convolution.default``), below autograd.
Module paths come from forward pre/post hooks on the model's own modules (named as in
``model.named_modules()``, the naming ``torch.onnx`` writes into node metadata).

Backward attribution: after each forward operator returns through the autograd layer, the
``grad_fn`` of its outputs is the autograd node that differentiates it; the capture maps that
node to the operator's id. During backward, ``torch._C._current_autograd_node()`` names the
node running each backward ATen call, hence the forward operator it differentiates. Node
pre/post hooks hand observers the gradient flowing into each operator's outputs
(``grad_outputs``) and the gradient it computes for its inputs (``grad_inputs``).

One run is driven by :func:`run_model`; what is measured during it is up to the
:class:`CaptureObserver` objects passed in (the profiler's phases, see ``profiler.py``).
:func:`capture_operators` is the plain inventory used to fill ``CollectContext.operators``.

The autograd engine's own bookkeeping is hidden from observers: the ``aten.detach`` it issues
when it saves a differentiable output for backward is not an operator of the model.
"""

from __future__ import annotations

import gc
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode,
    _pop_mode_temporarily,
)
from torch.utils._pytree import tree_flatten, tree_map

from attest.collect.context import LoadedSpec, OpRecord, target_scalar

__all__ = [
    "BackwardCall",
    "CaptureObserver",
    "ForwardCall",
    "ModelFailure",
    "OperatorCapture",
    "RunOutcome",
    "TensorVault",
    "VaultBox",
    "capture_operators",
    "model_output_tensor",
    "op_name",
    "run_model",
]

_DETACH = torch.ops.aten.detach.default


def op_name(func: Any) -> str:
    """``aten.convolution.default`` for an OpOverload."""
    return str(func)


def _collect_tensors(value: Any, out: list[torch.Tensor]) -> bool:
    """Append the tensors of an ATen argument or output (a tensor, scalar, None, or plain
    list/tuple/dict of them, nested) to ``out``; False for any other container."""
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif type(value) in (list, tuple):
        for v in value:
            if not _collect_tensors(v, out):
                return False
    elif type(value) is dict:
        for v in value.values():
            if not _collect_tensors(v, out):
                return False
    elif isinstance(value, (list, tuple, dict)):  # namedtuple, OrderedDict...: pytree's job
        return False
    return True


def flat_tensors(value: Any) -> list[torch.Tensor]:
    """All tensors in a (nested) op output or argument structure, in pytree order.

    ATen arguments and outputs are plain lists, tuples and dicts: walked directly, because
    ``tree_flatten`` costs several microseconds per call and this runs for every operator of
    every run; anything else goes through pytree.
    """
    out: list[torch.Tensor] = []
    if _collect_tensors(value, out):
        return out
    leaves, _ = tree_flatten(value)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def map_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    """``value`` with every tensor replaced by ``fn(tensor)`` (same containers); a direct
    walk of plain lists/tuples/dicts as in :func:`flat_tensors`, pytree for anything else."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    kind = type(value)
    if kind is list or kind is tuple:
        return kind(map_tensors(fn, v) for v in value)
    if kind is dict:
        return {k: map_tensors(fn, v) for k, v in value.items()}
    if isinstance(value, (list, tuple, dict)):
        return tree_map(lambda v: fn(v) if isinstance(v, torch.Tensor) else v, value)
    return value


# Outputs that are a kernel's scratch space, not a result: fused RNN kernels return their
# workspace/reserve buffer (read only by their own backward), whose bytes are partly
# uninitialized. Comparing them between runs, or against float64, measures nothing; the
# operator's real outputs are still measured. (index of the output in the op's returns)
SCRATCH_OUTPUTS: dict[str, frozenset[int]] = {
    "aten.mkldnn_rnn_layer.default": frozenset({3}),
    "aten._cudnn_rnn.default": frozenset({3}),
    "aten.miopen_rnn.default": frozenset({3}),
}


def measured_outputs(op: str, out: Any) -> list[torch.Tensor]:
    """The op's output tensors that carry results (:data:`SCRATCH_OUTPUTS` left out)."""
    scratch = SCRATCH_OUTPUTS.get(op)
    if scratch and isinstance(out, (tuple, list)):
        return [v for k, v in enumerate(out) if isinstance(v, torch.Tensor) and k not in scratch]
    return flat_tensors(out)


@dataclass
class ModelFailure:
    """Where a model raised: phase, module path, operator (when inside one) and the error."""

    phase: str  # "forward" | "backward"
    module: str | None
    operator_id: int | None
    op: str | None
    error_type: str
    message: str

    def describe(self) -> str:
        """One sentence for evidence and error items."""
        where = []
        if self.op:
            where.append(f"operator {self.operator_id} {self.op}")
        if self.module is not None:
            where.append(f"module {self.module or '<root>'!r}")
        loc = " in " + ", ".join(where) if where else ""
        return f"model raised {self.error_type} in {self.phase}{loc}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "module": self.module,
            "operator_id": self.operator_id,
            "op": self.op,
            "error_type": self.error_type,
            "message": self.message,
        }


@dataclass
class ForwardCall:
    """One forward ATen call as an observer sees it (tensors are live: snapshot to keep).

    ``args``/``kwargs`` are the live arguments: after an in-place or ``out=`` call, a written
    argument already holds the result. ``args_before``/``kwargs_before`` (set when an observer
    asks for them with ``wants_inputs``, and the call writes into an argument) are the
    arguments as the operator read them: every tensor argument sharing storage with a written
    one is a copy taken just before the call. :meth:`inputs` gives whichever applies.
    """

    index: int
    func: Any
    op: str
    module: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: list[torch.Tensor]
    elapsed_ns: int
    allocator_delta_bytes: int | None = None  # CUDA: memory_allocated() after - before
    args_before: tuple[Any, ...] | None = None
    kwargs_before: dict[str, Any] | None = None

    def inputs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments with the values the operator read (pre-write copies where written)."""
        if self.args_before is not None and self.kwargs_before is not None:
            return self.args_before, self.kwargs_before
        return self.args, self.kwargs


@dataclass
class BackwardCall:
    """One backward ATen call, attributed to the forward operator it differentiates."""

    op_id: int | None  # None: not under a captured forward op (e.g. the target selection)
    func: Any
    op: str
    node: str  # autograd node name, e.g. "AddmmBackward0"
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: list[torch.Tensor]
    elapsed_ns: int
    args_before: tuple[Any, ...] | None = None  # as in ForwardCall
    kwargs_before: dict[str, Any] | None = None

    def inputs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments with the values the call read (pre-write copies where written)."""
        if self.args_before is not None and self.kwargs_before is not None:
            return self.args_before, self.kwargs_before
        return self.args, self.kwargs


class CaptureObserver:
    """Receives the events of one run. Subclasses override what they need."""

    wants_grads: bool = False  # register node hooks to receive grad_outputs / grad_inputs
    wants_saved: bool = False  # introspect each operator's saved tensors (memory)
    wants_inputs: bool = False  # pre-write copies of arguments that in-place calls overwrite
    wants_backward_calls: bool = True  # see backward ATen calls (else only node hooks run)

    def forward(self, call: ForwardCall) -> None:
        """A forward operator finished."""

    def backward(self, call: BackwardCall) -> None:
        """A backward ATen call finished."""

    def grads(
        self,
        op_id: int,
        grad_outputs: Sequence[torch.Tensor | None],
        grad_inputs: Sequence[torch.Tensor | None],
    ) -> None:
        """Operator ``op_id``'s autograd node ran: gradients w.r.t. its outputs and its inputs."""

    def saved(self, op_id: int, tensors: list[torch.Tensor]) -> None:
        """The tensors operator ``op_id`` saved for backward."""

    def before_write(self, tensor: torch.Tensor) -> None:
        """An ATen call is about to write into ``tensor`` (in-place or out=)."""

    def mark(self, event: str) -> None:
        """``"forward_done"`` after the forward pass, ``"backward_done"`` after backward."""


class VaultBox:
    """A stable snapshot of one tensor held by a :class:`TensorVault`; read ``box.value``."""

    __slots__ = ("value",)

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value


class TensorVault:
    """Keeps tensors seen during a run unchanged without copying them up front.

    :meth:`keep` stores an alias; just before an ATen call writes into a storage the vault
    holds (an in-place op such as ``relu_`` or ``out += identity``), :meth:`before_write`
    replaces the alias by a clone (copy on write). So references cost only the memory of
    tensors that would otherwise have been freed or overwritten.
    """

    def __init__(self) -> None:
        self._by_storage: dict[int, list[VaultBox]] = {}
        self.copies = 0

    def keep(self, tensor: torch.Tensor) -> VaultBox:
        """A box holding a stable alias of ``tensor``."""
        alias = tensor.detach()
        ptr = _storage_ptr(alias)
        if ptr is None:
            return VaultBox(alias.clone())
        box = VaultBox(alias)
        self._by_storage.setdefault(ptr, []).append(box)
        return box

    def before_write(self, tensor: torch.Tensor) -> None:
        """Freeze (clone) every kept alias of ``tensor``'s storage before it is written."""
        ptr = _storage_ptr(tensor)
        if ptr is None:
            return
        boxes = self._by_storage.pop(ptr, None)
        if boxes:
            for box in boxes:
                box.value = box.value.clone()
                self.copies += 1

    def clear(self) -> None:
        """Stop watching writes (the kept tensors stay where they are)."""
        self._by_storage.clear()


def _storage_ptr(tensor: torch.Tensor) -> int | None:
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    ptr = int(storage.data_ptr())
    return ptr if ptr else None


def _written_args(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """Tensor arguments the ATen schema marks as written (``Tensor(a!)``)."""
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.is_mutable:
        return []
    out: list[torch.Tensor] = []
    for i, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is None or not info.is_write:
            continue
        value = kwargs.get(arg.name) if arg.kwarg_only or i >= len(args) else args[i]
        out.extend(flat_tensors(value))
    return out


def snapshot_written(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The arguments of a call about to write into some of them, with a copy of every tensor
    argument that shares storage with a written one (the written argument itself, and any
    other view of the same storage such as ``x.add_(x)`` or ``x[:, :2] += x[:, 2:]``).
    None when the call writes nothing. Call it just before the call runs."""
    written = _written_args(func, args, kwargs)
    if not written:
        return None
    ptrs = {p for p in (_storage_ptr(t) for t in written) if p is not None}

    def copy(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and (
            _storage_ptr(value) in ptrs or any(value is t for t in written)
        ):
            return value.detach().clone()
        return value

    return tuple(map_tensors(copy, list(args))), dict(map_tensors(copy, kwargs))


_SAVED_ATTRS: dict[type, list[str]] = {}


def saved_tensors_of(node: Any) -> list[torch.Tensor]:
    """The tensors an autograd node saved for backward (built-in and custom Function nodes)."""
    cls = type(node)
    names = _SAVED_ATTRS.get(cls)
    if names is None:
        names = [
            a
            for a in dir(cls)
            if a.startswith("_saved_") and not a.endswith(("_sym_sizes", "_sym_strides"))
        ]
        _SAVED_ATTRS[cls] = names
    found: list[torch.Tensor] = []
    for name in names:
        try:
            value = getattr(node, name)
        except Exception:  # an already-freed or non-tensor saved value
            continue
        found.extend(flat_tensors(value))
    saved = getattr(node, "saved_tensors", None)  # custom autograd.Function (ctx.save_for_backward)
    if saved is not None and not names:
        with suppress(Exception):
            found.extend(flat_tensors(tuple(saved)))
    return found


class _ModuleStack:
    """Innermost module path during forward, from hooks on the model's own modules.

    ``enabled=False`` installs no hooks (``current`` stays ``""``): for runs that align
    operators with a reference run by position and do not need attribution.
    """

    def __init__(self, model: nn.Module, enabled: bool = True) -> None:
        self.model = model
        self.enabled = enabled
        self.stack: list[str] = []
        self.failed_in: str | None = None
        self._handles: list[Any] = []

    @property
    def current(self) -> str:
        return self.stack[-1] if self.stack else ""

    def __enter__(self) -> _ModuleStack:
        if not self.enabled:
            return self
        for name, module in self.model.named_modules():
            self._handles.append(module.register_forward_pre_hook(self._push(name)))
            self._handles.append(module.register_forward_hook(self._pop(name), always_call=True))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _push(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            self.stack.append(name)

        return hook

    def _pop(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if sys.exc_info()[1] is not None and self.failed_in is None:
                self.failed_in = self.current  # innermost module pops first
            if self.stack and self.stack[-1] == name:
                self.stack.pop()
            elif name in self.stack:
                del self.stack[len(self.stack) - 1 - self.stack[::-1].index(name)]

        return hook


class OperatorCapture(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """The dispatch mode behind :func:`run_model`; see the module docstring."""

    def __init__(
        self,
        modules: _ModuleStack,
        observers: Sequence[CaptureObserver],
        *,
        cuda_timing: bool = False,
        cuda_memory: bool = False,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.modules = modules
        self.observers = list(observers)
        self.ops: list[tuple[str, str]] = []  # (op, module) per forward operator id
        self.node_to_op: dict[Any, int] = {}
        self.nodes: dict[int, Any] = {}
        self.engine_detaches: dict[int, int] = {}  # op id -> autograd-engine detaches after it
        self.forward_ns: list[int] = []
        self.backward_ns: dict[int, int] = {}
        self.in_flight: tuple[int | None, str, str | None] | None = None  # (id, module, op)
        self.backward_op: int | None = None  # forward op whose node is running in backward
        self.in_backward_phase = False  # set by run_model around the backward call
        self._pending: tuple[int, list[torch.Tensor]] | None = None
        self._settling = False
        self._deferred: list[tuple[Any, tuple[Any, ...], dict[str, Any], Any, str, int]] = []
        self._wants_saved = any(o.wants_saved for o in self.observers)
        self._wants_inputs = any(o.wants_inputs for o in self.observers)
        self._wants_grads = any(o.wants_grads for o in self.observers)
        self.wants_backward_calls = any(o.wants_backward_calls for o in self.observers)
        self._cuda_timing = cuda_timing
        self._cuda_memory = cuda_memory
        self._cuda_events: list[tuple[int, bool, Any, Any]] = []
        self._hook_handles: list[Any] = []

    # -- attribution --------------------------------------------------------------------------

    def settle(self) -> None:
        """Bind the last forward operator's outputs to their autograd node (once it exists).

        Runs when the next operator starts (the previous one has then fully returned through
        the autograd layer) and at the end of the forward pass.
        """
        if self._pending is None:
            return
        op_id, outputs = self._pending
        self._pending = None
        self._settling = True
        try:
            self._settle(op_id, outputs)
        finally:
            self._settling = False

    def _settle(self, op_id: int, outputs: list[torch.Tensor]) -> None:
        node = None
        for out in outputs:
            grad_fn = out.grad_fn
            if grad_fn is not None and grad_fn not in self.node_to_op:
                node = grad_fn
                break
        engine_detaches = 0
        if node is not None:
            self.node_to_op[node] = op_id
            self.nodes[op_id] = node
            saved = saved_tensors_of(node)
            # The engine detaches each differentiable output it saves for backward, right
            # after the operator returns: bookkeeping, not operators of the model.
            engine_detaches = sum(1 for t in saved if t.grad_fn is node)
            if engine_detaches:
                self.engine_detaches[op_id] = engine_detaches
            if self._wants_saved:
                for obs in self.observers:
                    if obs.wants_saved:
                        obs.saved(op_id, saved)
            self._hook_node(op_id, node)
        deferred, self._deferred = self._deferred, []
        for func, args, kwargs, out, module, elapsed in deferred:
            if engine_detaches > 0 and any(
                isinstance(args[0], torch.Tensor) and _same_view(args[0], o) for o in outputs
            ):
                engine_detaches -= 1
                continue
            self._register(func, args, kwargs, out, module, elapsed)

    def _hook_node(self, op_id: int, node: Any) -> None:
        # Without backward dispatch, the node's hooks time its backward (pre -> post hook).
        time_node = not self.wants_backward_calls
        started: list[Any] = [0]

        def prehook(grad_outputs: tuple[torch.Tensor | None, ...]) -> None:
            self.backward_op = op_id  # names the operator if unpacking its saved tensors fails
            if time_node:
                if self._cuda_timing:
                    started[0] = _cuda_event()
                    started[0].record()
                else:
                    started[0] = time.perf_counter_ns()

        def posthook(
            grad_inputs: tuple[torch.Tensor | None, ...],
            grad_outputs: tuple[torch.Tensor | None, ...],
        ) -> None:
            self.backward_op = None
            if time_node:
                if self._cuda_timing:
                    end = _cuda_event()
                    end.record()
                    self._cuda_events.append((op_id, False, started[0], end))
                else:
                    elapsed = time.perf_counter_ns() - int(started[0])
                    self.backward_ns[op_id] = self.backward_ns.get(op_id, 0) + elapsed
            if not self._wants_grads:
                return
            # Observers compare and copy gradients with ATen calls of their own: those must
            # not reach this mode (they are not the model's, and must not be attributed to
            # this operator's backward, timed or re-run as if they were).
            with self.quiet():
                for obs in self.observers:
                    if obs.wants_grads:
                        obs.grads(op_id, grad_outputs, grad_inputs)

        self._hook_handles.append(node.register_prehook(prehook))
        self._hook_handles.append(node.register_hook(posthook))

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """ATen calls made inside bypass this mode (the observers' own work)."""
        if _get_current_dispatch_mode() is self:
            with _pop_mode_temporarily():
                yield
            return
        settling, self._settling = self._settling, True  # not on top: pass calls through
        try:
            yield
        finally:
            self._settling = settling

    # -- dispatch -----------------------------------------------------------------------------

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if self._settling:  # our own introspection (unpacking saved tensors), not the model
            return func(*args, **kwargs)
        if self.in_backward_phase or torch._C._current_graph_task_id() != -1:
            return self._backward_call(func, args, kwargs)
        if func is _DETACH and self._pending is not None and args:
            # Maybe the engine's own detach of a saved output: decided in settle().
            t0 = time.perf_counter_ns()
            out = func(*args, **kwargs)
            self._deferred.append(
                (func, args, kwargs, out, self.modules.current, time.perf_counter_ns() - t0)
            )
            return out
        self.settle()
        before = snapshot_written(func, args, kwargs) if self._wants_inputs else None
        for tensor in _written_args(func, args, kwargs):
            for obs in self.observers:
                obs.before_write(tensor)
        op_id = len(self.ops)
        module = self.modules.current
        name = op_name(func)
        self.in_flight = (op_id, module, name)
        start_ev = end_ev = None
        if self._cuda_timing:
            start_ev = _cuda_event()
            end_ev = _cuda_event()
            start_ev.record()
        allocated = torch.cuda.memory_allocated() if self._cuda_memory else 0
        t0 = time.perf_counter_ns()
        out = func(*args, **kwargs)
        elapsed = time.perf_counter_ns() - t0
        if start_ev is not None and end_ev is not None:
            end_ev.record()
            self._cuda_events.append((op_id, True, start_ev, end_ev))
        delta = int(torch.cuda.memory_allocated() - allocated) if self._cuda_memory else None
        self.in_flight = None
        self._register(func, args, kwargs, out, module, elapsed, delta, before)
        return out

    def _register(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        out: Any,
        module: str,
        elapsed: int,
        allocator_delta: int | None = None,
        before: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
    ) -> None:
        op_id = len(self.ops)
        name = op_name(func)
        self.ops.append((name, module))
        self.forward_ns.append(elapsed)
        outputs = measured_outputs(name, out)
        call = ForwardCall(
            op_id,
            func,
            name,
            module,
            args,
            kwargs,
            outputs,
            elapsed,
            allocator_delta,
            before[0] if before else None,
            before[1] if before else None,
        )
        for obs in self.observers:
            obs.forward(call)
        self._pending = (op_id, outputs)

    def _backward_call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        node = torch._C._current_autograd_node()
        op_id = self.node_to_op.get(node) if node is not None else None
        before = snapshot_written(func, args, kwargs) if self._wants_inputs else None
        for tensor in _written_args(func, args, kwargs):
            for obs in self.observers:
                obs.before_write(tensor)
        name = op_name(func)
        self.in_flight = (op_id, "", name)
        start_ev = end_ev = None
        if self._cuda_timing:
            start_ev = _cuda_event()
            end_ev = _cuda_event()
            start_ev.record()
        t0 = time.perf_counter_ns()
        out = func(*args, **kwargs)
        elapsed = time.perf_counter_ns() - t0
        self.in_flight = None
        if op_id is not None:
            if start_ev is not None and end_ev is not None:
                end_ev.record()
                self._cuda_events.append((op_id, False, start_ev, end_ev))
            else:
                self.backward_ns[op_id] = self.backward_ns.get(op_id, 0) + elapsed
        node_name = type(node).__name__ if node is not None else ""
        call = BackwardCall(
            op_id,
            func,
            name,
            node_name,
            args,
            kwargs,
            flat_tensors(out),
            elapsed,
            before[0] if before else None,
            before[1] if before else None,
        )
        for obs in self.observers:
            obs.backward(call)
        return out

    def resolve_cuda_timings(self) -> None:
        """Replace host timings by CUDA-event timings (after a synchronize)."""
        if not self._cuda_events:
            return
        torch.cuda.synchronize()
        self.backward_ns.clear()
        for op_id, is_forward, start_ev, end_ev in self._cuda_events:
            ns = int(start_ev.elapsed_time(end_ev) * 1e6)
            if is_forward:
                self.forward_ns[op_id] = ns
            else:
                self.backward_ns[op_id] = self.backward_ns.get(op_id, 0) + ns
        self._cuda_events.clear()

    def remove_hooks(self) -> None:
        for handle in self._hook_handles:
            handle.remove()
        self._hook_handles.clear()


def _cuda_event() -> Any:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a is b:
        return True
    try:
        return (
            a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
            and a.storage_offset() == b.storage_offset()
            and a.shape == b.shape
            and a.stride() == b.stride()
        )
    except (RuntimeError, NotImplementedError):
        return False


def model_output_tensor(output: Any) -> torch.Tensor:
    """The tensor a model's output stands for: itself, the first tensor of a tuple/list, or
    ``"out"``/``"logits"``/the first tensor value of a mapping."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        for key in ("out", "logits"):
            if isinstance(output.get(key), torch.Tensor):
                return output[key]  # type: ignore[no-any-return]
    tensors = flat_tensors(output)
    if not tensors:
        raise TypeError(f"the model returned {type(output).__name__} holding no tensor")
    return tensors[0]


@dataclass
class RunOutcome:
    """What one run produced, beyond what its observers recorded."""

    ops: list[tuple[str, str]]
    output: torch.Tensor | None = None  # model output (detached)
    classes: torch.Tensor | None = None  # the class index differentiated per example
    input_grad: torch.Tensor | None = None
    param_grads: dict[str, torch.Tensor | None] = field(default_factory=dict)
    failure: ModelFailure | None = None
    forward_ns: list[int] = field(default_factory=list)
    backward_ns: dict[int, int] = field(default_factory=dict)
    no_grad_path: bool = False  # the target does not depend on anything that requires grad
    nodes: dict[int, Any] = field(default_factory=dict)
    engine_detaches: dict[int, int] = field(default_factory=dict)
    memory_marks: tuple[int, int] | None = (
        None  # CUDA memory_allocated after forward, after backward
    )


def _failure(
    phase: str,
    exc: BaseException,
    capture: OperatorCapture,
    modules: _ModuleStack | None,
    model: nn.Module,
) -> ModelFailure:
    op_id: int | None = None
    op: str | None = None
    module: str | None = None
    if capture.in_flight is not None:
        op_id, module, op = capture.in_flight
    if phase == "backward":
        if op_id is None:
            op_id = capture.backward_op
        module = None
        if op_id is not None and op_id < len(capture.ops):
            fwd_op, module = capture.ops[op_id]
            op = f"{op} (backward of {fwd_op})" if op else fwd_op
    if module is None and modules is not None:
        module = modules.failed_in
    if module is None:
        module = _module_from_traceback(exc, model)
    message = " ".join(str(exc).split())[:500]
    return ModelFailure(phase, module, op_id, op, type(exc).__name__, message)


def _module_from_traceback(exc: BaseException, model: nn.Module) -> str | None:
    names = {id(m): n for n, m in model.named_modules()}
    found: str | None = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        owner = frame.f_locals.get("self")
        if owner is not None and id(owner) in names:
            found = names[id(owner)]
    return found


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for one run, back on (if it was) afterwards.

    A run allocates many small Python objects (one per ATen call and autograd node), which
    triggers collections, and each full collection walks every live object, among them all
    that the profiler keeps of run 0: with it on, the profiler's cost per operator grew with
    the model (measured: +40 % per operator on the float64 run from 61 to 453 operators);
    off, it stays flat. Tensors are freed by reference counting either way; cycles made
    during the run are collected after it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def _seeded(seed: int | None) -> Iterator[None]:
    """Seed the generators for one run and restore their state afterwards.

    On a CPU-only build this seeds the CPU generator directly: ``torch.manual_seed`` would
    also queue lazy seeding calls for every accelerator backend, each formatting a stack
    trace, which costs more than a small model's forward pass.
    """
    if seed is None:
        yield
        return
    if torch.cuda.is_available():
        initialized = bool(torch.cuda.is_initialized())  # type: ignore[no-untyped-call]
        devices: list[int] = list(range(torch.cuda.device_count())) if initialized else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            yield
        return
    state = torch.get_rng_state()
    torch.default_generator.manual_seed(seed)
    try:
        yield
    finally:
        torch.set_rng_state(state)


def run_model(
    model: nn.Module,
    inputs: torch.Tensor,
    spec: LoadedSpec,
    observers: Sequence[CaptureObserver] = (),
    *,
    labels: torch.Tensor | None = None,
    classes: torch.Tensor | None = None,
    backward: bool = True,
    seed: int | None = 0,
    cuda_timing: bool = False,
    cuda_memory: bool = False,
    memory_marks: bool = False,
    capture_factory: Callable[[_ModuleStack], OperatorCapture] | None = None,
    track_modules: bool = True,
) -> RunOutcome:
    """One forward (+ backward) pass of ``model`` on ``inputs`` under :class:`OperatorCapture`.

    Backward differentiates ``sum_n F(x_n)`` (:func:`~attest.collect.context.target_scalar`)
    with respect to the inputs and every trainable parameter. ``classes`` fixes the class index
    per example (so that runs in other precisions differentiate the same quantity); without it
    the spec's target decides and the chosen classes are returned. A model that raises gives a
    :class:`ModelFailure` in the outcome instead of an exception. ``capture_factory`` replaces
    the dispatch mode (the profiler's repeat runs use a leaner one); ``track_modules=False``
    skips module attribution.
    """
    x = inputs.detach().clone().requires_grad_(True)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    outcome = RunOutcome(ops=[])
    with _gc_paused(), _seeded(seed), _ModuleStack(model, track_modules) as modules:
        if capture_factory is not None:
            capture = capture_factory(modules)
        else:
            capture = OperatorCapture(
                modules, observers, cuda_timing=cuda_timing, cuda_memory=cuda_memory
            )
        after_forward = 0
        try:
            try:
                with capture:
                    output = model(x)
                    capture.settle()
                if memory_marks:
                    after_forward = int(torch.cuda.memory_allocated(x.device))
                for obs in observers:
                    obs.mark("forward_done")
            except Exception as exc:
                outcome.failure = _failure("forward", exc, capture, modules, model)
                return _finish(outcome, capture)
            try:
                out_tensor = model_output_tensor(output)
                outcome.output = out_tensor.detach()
                if not backward:
                    return _finish(outcome, capture)
                if classes is None:
                    classes = _classes_for(out_tensor, spec, labels)
                outcome.classes = classes
                fixed = replace(spec, target="label") if classes is not None else spec
                objective = target_scalar(out_tensor, fixed, classes).sum()
            except Exception as exc:
                outcome.failure = ModelFailure(
                    "forward", "", None, None, type(exc).__name__, " ".join(str(exc).split())[:500]
                )
                return _finish(outcome, capture)
            if not objective.requires_grad:
                outcome.no_grad_path = True
                return _finish(outcome, capture)
            wrt = [x] + [p for _, p in params]
            try:
                capture.in_backward_phase = True
                if capture.wants_backward_calls:
                    with capture:
                        grads = torch.autograd.grad(objective, wrt, allow_unused=True)
                else:  # node hooks only: the backward ATen calls run at full speed
                    grads = torch.autograd.grad(objective, wrt, allow_unused=True)
            except Exception as exc:
                outcome.failure = _failure("backward", exc, capture, None, model)
                return _finish(outcome, capture)
            for obs in observers:
                obs.mark("backward_done")
            if memory_marks:
                outcome.memory_marks = (after_forward, int(torch.cuda.memory_allocated(x.device)))
            outcome.input_grad = grads[0].detach() if grads[0] is not None else None
            outcome.param_grads = {
                n: (g.detach() if g is not None else None)
                for (n, _), g in zip(params, grads[1:], strict=True)
            }
            return _finish(outcome, capture)
        finally:
            capture.remove_hooks()


def _classes_for(
    output: torch.Tensor, spec: LoadedSpec, labels: torch.Tensor | None
) -> torch.Tensor | None:
    if output.dim() < 2:
        return None
    n, c = output.shape[0], output.shape[1]
    if isinstance(spec.target, int):
        if spec.target >= c:
            raise ValueError(f"target class {spec.target} but the model has {c} output classes")
        return torch.full((n,), spec.target, dtype=torch.long, device=output.device)
    if spec.target == "label":
        lab = labels if labels is not None else spec.labels
        if lab is None:
            raise ValueError("target: label needs a 'target' tensor in the probe inputs")
        lab = lab.to(device=output.device, dtype=torch.long).reshape(n)
        if bool((lab >= c).any()):
            raise ValueError(
                f"probe labels go up to {int(lab.max())} but the model has {c} output classes"
            )
        return lab
    return output.detach().reshape(n, c, -1).sum(dim=2).argmax(dim=1)


def _finish(outcome: RunOutcome, capture: OperatorCapture) -> RunOutcome:
    capture.resolve_cuda_timings()
    outcome.ops = list(capture.ops)
    outcome.forward_ns = list(capture.forward_ns)
    outcome.backward_ns = dict(capture.backward_ns)
    outcome.nodes = dict(capture.nodes)
    outcome.engine_detaches = dict(capture.engine_detaches)
    return outcome


def _keep_tree(vault: TensorVault, value: Any) -> Any:
    return map_tensors(vault.keep, value)


def _unbox_tree(value: Any) -> Any:
    if isinstance(value, VaultBox):
        return value.value
    kind = type(value)
    if kind is list or kind is tuple:
        return kind(_unbox_tree(v) for v in value)
    if kind is dict:
        return {k: _unbox_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, dict)):
        return tree_map(lambda v: v.value if isinstance(v, VaultBox) else v, value)
    return value


class _RecordObserver(CaptureObserver):
    """Builds :class:`OpRecord` rows with stable snapshots of each call's arguments (as the
    operator read them: an in-place call's written argument is kept from before the write)."""

    wants_inputs = True

    def __init__(self, vault: TensorVault) -> None:
        self.vault = vault
        self.pending: list[tuple[ForwardCall, Any, Any]] = []

    def forward(self, call: ForwardCall) -> None:
        args, kwargs = call.inputs()
        kept = (call, _keep_tree(self.vault, args), _keep_tree(self.vault, kwargs))
        self.pending.append(kept)

    def before_write(self, tensor: torch.Tensor) -> None:
        self.vault.before_write(tensor)

    def records(self) -> list[OpRecord]:
        return [
            OpRecord(
                id=call.index,
                op=call.op,
                module=call.module,
                func=call.func,
                args=tuple(_unbox_tree(args)),
                kwargs=dict(_unbox_tree(kwargs)),
                output_shapes=[list(t.shape) for t in call.outputs],
                output_dtypes=[str(t.dtype).removeprefix("torch.") for t in call.outputs],
            )
            for call, args, kwargs in self.pending
        ]


def capture_operators(
    model: nn.Module,
    inputs: torch.Tensor,
    spec: LoadedSpec,
    *,
    labels: torch.Tensor | None = None,
    backward: bool = True,
    observers: Sequence[CaptureObserver] = (),
    seed: int | None = 0,
) -> tuple[list[OpRecord], RunOutcome]:
    """The operator inventory of one forward (+ backward) pass: :class:`OpRecord` per forward
    ATen call in execution order (arguments detached and kept unchanged), plus the run outcome
    (a model that raises gives ``outcome.failure`` and the records up to that point)."""
    vault = TensorVault()
    recorder = _RecordObserver(vault)
    outcome = run_model(
        model, inputs, spec, [recorder, *observers], labels=labels, backward=backward, seed=seed
    )
    records = recorder.records()
    vault.clear()
    return records, outcome
