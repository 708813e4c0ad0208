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

One run is driven by :func:`attest.collection.capture.run.run_model`; what is measured during it is up
to the :class:`CaptureObserver` objects passed in (the profiler's phases, see
``profiler.py``). The values the calls take and return are handled by
:mod:`attest.collection.capture.tensors` (walking them, and the copy-on-write :class:`TensorVault`).

The autograd engine's own bookkeeping is hidden from observers: the ``aten.detach`` it issues
when it saves a differentiable output for backward is not an operator of the model.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode,
    _pop_mode_temporarily,
)

from attest.collection.capture.tensors import (
    _written_args,
    flat_tensors,
    measured_outputs,
    op_name,
    saved_tensors_hooks_active,
    saved_tensors_of,
    snapshot_written,
)

__all__ = [
    "BackwardCall",
    "CaptureObserver",
    "ForwardCall",
    "OperatorCapture",
]

_DETACH = torch.ops.aten.detach.default


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
        self.packed_saved: dict[int, int] = {}  # op id -> saved values a pack hook holds
        self.forward_ns: list[int] = []
        self.backward_ns: dict[int, int] = {}
        self.in_flight: tuple[int | None, str, str | None] | None = None  # (id, module, op)
        self.backward_op: int | None = None  # forward op whose node is running in backward
        self.in_backward_phase = False  # set by run_model around the backward call
        # (op id, outputs, whether a saved-tensors hook pair was active when it ran)
        self._pending: tuple[int, list[torch.Tensor], bool] | None = None
        self._settling = False
        self._deferred: list[tuple[Any, tuple[Any, ...], dict[str, Any], Any, str, int, bool]] = []
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
        op_id, outputs, hooked = self._pending
        self._pending = None
        self._settling = True
        try:
            self._settle(op_id, outputs, hooked)
        finally:
            self._settling = False

    def _settle(self, op_id: int, outputs: list[torch.Tensor], hooked: bool) -> None:
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
            # Values a saved-tensors hook packed (a non-reentrant checkpoint region) are not
            # read: unpacking them would recompute the region now (see saved_tensors_of).
            saved, packed = saved_tensors_of(node, hooks_active=hooked)
            # The engine detaches each differentiable output it saves for backward, right
            # after the operator returns: bookkeeping, not operators of the model. (A packed
            # output is handed to the pack hook without that detach.)
            engine_detaches = sum(1 for t in saved if t.grad_fn is node)
            if engine_detaches:
                self.engine_detaches[op_id] = engine_detaches
            if packed:  # its saved bytes are unknown: observers are not handed a partial list
                self.packed_saved[op_id] = packed
            elif self._wants_saved:
                for obs in self.observers:
                    if obs.wants_saved:
                        obs.saved(op_id, saved)
            self._hook_node(op_id, node)
        deferred, self._deferred = self._deferred, []
        for func, args, kwargs, out, module, elapsed, hooks in deferred:
            if engine_detaches > 0 and any(
                isinstance(args[0], torch.Tensor) and _same_view(args[0], o) for o in outputs
            ):
                engine_detaches -= 1
                continue
            self._register(func, args, kwargs, out, module, elapsed, hooks=hooks)

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
            elapsed = time.perf_counter_ns() - t0
            hooks = saved_tensors_hooks_active()
            self._deferred.append((func, args, kwargs, out, self.modules.current, elapsed, hooks))
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
        hooks = saved_tensors_hooks_active()
        self._register(func, args, kwargs, out, module, elapsed, delta, before, hooks=hooks)
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
        *,
        hooks: bool = False,
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
        self._pending = (op_id, outputs, hooks)

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
