"""The lean capture of the profiler's repeated runs: every operator compared bitwise with run 0.

A full :class:`~attest.collection.capture.capture.OperatorCapture` run costs several times the
model's own work (module hooks, saved-tensor introspection, every backward ATen call through
Python), so the repeat and thread-count runs (:mod:`attest.collection.profile.repeats`) use
:class:`RepeatCapture`, which keeps only what the comparison needs:

* forward: one Python dispatch per ATen call, aligned with run 0 by position and operator
  (the module path is run 0's), its outputs compared bit for bit with run 0's and its
  autograd node hooked;
* backward: no dispatch at all; each operator's autograd node hook compares the gradient it
  computed (and, only when that differs, the gradient flowing into it) with run 0's.

Why every operator is still compared, rather than only the model's output and gradients: an
operator whose bytes differ between runs can leave the final bytes equal (a difference that
a later ReLU, max-pool, comparison, rounding or multiplication by zero erases), so equal
final bytes do not prove per-operator bit-exactness, and ``bit_exact_rate`` is a per-operator
claim. What is skipped is only provably redundant: a view or alias operator (``view``,
``t``, ``slice``, ``detach``...) returns bytes of a storage it did not write; while no
operator of this run has written differing bytes into any storage (the ``tainted`` set),
such a view equals run 0's by construction, and it is compared for real as soon as its
storage is tainted. Comparisons (:class:`RunComparison`) use
:func:`~attest.collection.profile.fingerprint.same_bits`: the run's tensor is hashed once as it
is produced and its XXH3-128 fingerprint compared with run 0's (computed once from the kept
copy), with an exact byte comparison for small tensors and those whose bytes are not their
values in order; run 0's bytes are read again, for the relative deviation, only where the
fingerprints differ.

Memory (CPU): :class:`LiveBytes` counts storages created by forward operators (seen in
dispatch) and gradients returned by autograd nodes (seen in node hooks), and uncounts them
when freed. Temporaries that a backward node allocates and frees before returning are not
seen, so on CPU the backward peak is a lower bound; CUDA uses the allocator's counters.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from attest.collection.capture.capture import (
    CaptureObserver,
    OperatorCapture,
    _cuda_event,
    _ModuleStack,
)
from attest.collection.capture.spill import Pager, TensorRef
from attest.collection.capture.tensors import flat_tensors, measured_outputs, tensor_storage
from attest.collection.nonfinite import one_sided_nonfinite
from attest.collection.profile.fingerprint import same_bits
from attest.collection.profile.op_metrics import relative_deviation

if TYPE_CHECKING:
    from attest.collection.profile.measures import OpMeasure

__all__ = [
    "LiveBytes",
    "RepeatCapture",
    "RunComparison",
    "is_view_op",
    "storage_ptrs",
]

_DETACH = torch.ops.aten.detach.default
_VIEW_OPS: dict[Any, bool] = {}


def is_view_op(func: Any) -> bool:
    """True for ATen operators whose outputs alias an input without writing it (views)."""
    known = _VIEW_OPS.get(func)
    if known is None:
        schema = getattr(func, "_schema", None)
        known = bool(
            schema is not None
            and not schema.is_mutable
            and schema.returns
            and all(r.alias_info is not None for r in schema.returns)
        )
        _VIEW_OPS[func] = known
    return known


def storage_ptrs(tensors: Sequence[Any]) -> set[int]:
    """The data pointers of the storages behind the tensors in ``tensors`` (others skipped)."""
    out: set[int] = set()
    for t in tensors:
        storage = tensor_storage(t) if isinstance(t, torch.Tensor) else None
        if storage is not None:
            out.add(int(storage.data_ptr()))
    return out


class RunComparison(CaptureObserver):
    """Bitwise comparison of one run with the reference, per operator.

    Also finds where a difference starts: in forward, an operator whose output differs
    while none of its tensor inputs did (tracked by storage); in backward, an operator
    whose computed gradient differs while the gradient flowing into it and its forward
    inputs and outputs did not. Those are the ``origins``; the rest inherited.
    """

    wants_grads = True
    wants_backward_calls = False

    def __init__(self, reference: list[OpMeasure], pager: Pager | None = None) -> None:
        self.reference = reference
        self.pager = pager  # gives back run 0's pages as the comparisons go
        self.exact: dict[int, bool] = {}
        self.deviation: dict[int, float] = {}
        self.diverged_at: int | None = None
        self.forward_ns: dict[int, int] = {}
        self.tainted: set[int] = set()  # storages holding values that differ from run 0
        self.forward_tainted: set[int] = set()  # ops whose forward inputs or outputs differed
        self.origins: set[int] = set()
        # per operator: the first of its tensors NaN or infinite in one run only, named
        self.nonfinite: dict[int, str] = {}
        # gradients found equal to run 0's: id -> (the tensor, its version, the reference)
        self._equal_grads: dict[int, tuple[weakref.ref[torch.Tensor], int, TensorRef]] = {}

    def _deviation(self, ref_id: int, what: str, value: torch.Tensor, ref: torch.Tensor) -> float:
        """:func:`relative_deviation` of ``value`` from run 0's ``ref``; where it is infinite,
        the side NaN or infinite alone is named (attest.collection.nonfinite)."""
        deviation = relative_deviation(value, ref)
        if math.isinf(deviation) and ref_id not in self.nonfinite and value.shape == ref.shape:
            bad = one_sided_nonfinite({"run 0": ref, "this run": value})
            if bad is not None:
                self.nonfinite[ref_id] = f"{what}: {bad.describe()}"
        return deviation

    def _grad_equal(self, g: torch.Tensor, box: TensorRef) -> bool:
        """``same_bits(g, box)``, read once per gradient: autograd hands one tensor to
        several nodes (an addition's backward returns its incoming gradient for both inputs),
        and run 0 kept one copy of it (:meth:`SpillFile.put`), so the same tensor, unchanged
        (same version; node hooks run outside ATen calls, where the counter is up to date),
        against the same reference has the same answer. Only equality is remembered: a
        difference is compared again, for the deviation and the non-finite note of each
        operator."""
        seen = self._equal_grads.get(id(g))
        if seen is not None and seen[0]() is g and seen[1] == g._version and seen[2] is box:
            return True
        if not same_bits(g, box):
            return False
        self._equal_grads[id(g)] = (weakref.ref(g), g._version, box)
        return True

    def before_call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The model is about to call ``func`` (forward): nothing to do when comparing inline
        (:class:`~attest.collection.profile.compare_worker.QueuedComparison` waits here)."""

    def hooked(self, op_id: int, node: Any) -> None:
        """Operator ``op_id``'s autograd node ``node`` is hooked (before backward runs)."""

    def finish(self) -> None:
        """The run is over: every comparison is in the figures once this returns."""

    def _note(self, ref_id: int, exact: bool, deviation: float) -> None:
        self.exact[ref_id] = self.exact.get(ref_id, True) and exact
        if not exact:
            self.deviation[ref_id] = max(self.deviation.get(ref_id, 0.0), deviation)

    def compare_outputs(
        self,
        ref_id: int,
        outputs: list[torch.Tensor],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        view: bool,
    ) -> None:
        """Operator ``ref_id`` of this run returned ``outputs``: compare them with run 0's."""
        if self.pager is not None:
            self.pager.tick()
        measure = self.reference[ref_id]
        if measure.uninitialized:  # allocator garbage: nothing to compare, nothing tainted
            self._note(ref_id, True, 0.0)
            return
        exact = len(measure.outputs) == len(outputs)
        dev = 0.0 if exact else math.inf
        if exact and not (view and not (self.tainted and storage_ptrs(outputs) & self.tainted)):
            for box, out in zip(measure.outputs, outputs, strict=True):
                if not same_bits(out, box):
                    exact = False
                    dev = max(dev, self._deviation(ref_id, "output", out, box.value))
        self._note(ref_id, exact, dev)
        inputs_tainted = False
        if self.tainted:
            leaves = flat_tensors((args, kwargs))
            inputs_tainted = bool(storage_ptrs(leaves) & self.tainted)
        if inputs_tainted or not exact:
            self.forward_tainted.add(ref_id)
        if not exact:
            if not inputs_tainted:
                self.origins.add(ref_id)
            self.tainted |= storage_ptrs(outputs)

    def grads(
        self,
        op_id: int,
        grad_outputs: Sequence[torch.Tensor | None],
        grad_inputs: Sequence[torch.Tensor | None],
    ) -> None:
        if self.pager is not None:
            self.pager.tick()
        if op_id >= len(self.reference) or (
            self.diverged_at is not None and op_id >= self.diverged_at
        ):
            return
        measure = self.reference[op_id]
        ref = measure.grad_inputs
        if ref is None:
            self._note(op_id, False, math.inf)
            return
        exact = len(ref) == len(grad_inputs)
        dev = 0.0 if exact else math.inf
        for box, g in zip(ref, grad_inputs, strict=False):
            if (box is None) != (g is None):
                exact, dev = False, math.inf
            elif box is not None and g is not None and not self._grad_equal(g, box):
                exact = False
                dev = max(dev, self._deviation(op_id, "gradient", g, box.value))
        self._note(op_id, exact, dev)
        if not exact and op_id not in self.forward_tainted:
            incoming_exact = measure.grad_outputs is not None and all(
                (box is None) == (g is None)
                and (box is None or g is None or self._grad_equal(g, box))
                for box, g in zip(measure.grad_outputs, grad_outputs, strict=False)
            )
            if incoming_exact:
                self.origins.add(op_id)


class LiveBytes(CaptureObserver):
    """Bytes of tensors created during the run that are still alive, over time.

    Each new storage is counted when a forward operator returns it or an autograd node
    returns it as a gradient, and uncounted when it is freed (a ``weakref.finalize`` on the
    storage). Parameters, buffers and the inputs existed before the run and are not counted.
    """

    wants_grads = True
    wants_backward_calls = False

    def __init__(self, preexisting: set[int]) -> None:
        self.preexisting = preexisting
        self.live: dict[int, int] = {}
        self.current = 0
        self.peak = 0
        self.marks: dict[str, int] = {}

    def track(self, tensors: Sequence[torch.Tensor | None]) -> None:
        """Count the storages of ``tensors`` not seen yet."""
        for t in tensors:
            storage = tensor_storage(t) if t is not None else None
            if storage is None:
                continue
            ptr = int(storage.data_ptr())
            if ptr in self.live or ptr in self.preexisting:
                continue
            nbytes = int(storage.nbytes())
            self.live[ptr] = nbytes
            self.current += nbytes
            self.peak = max(self.peak, self.current)
            weakref.finalize(storage, self._free, ptr)

    def _free(self, ptr: int) -> None:
        self.current -= self.live.pop(ptr, 0)

    def grads(
        self,
        op_id: int,
        grad_outputs: Sequence[torch.Tensor | None],
        grad_inputs: Sequence[torch.Tensor | None],
    ) -> None:
        self.track(grad_inputs)

    def mark(self, event: str) -> None:
        self.marks[event] = self.current


class RepeatCapture(OperatorCapture):  # type: ignore[no-untyped-call]
    """The lean dispatch mode of the repeat runs (see the module docstring).

    Operators are aligned with the reference by position: the ``k``-th forward ATen call
    must be the reference's ``k``-th operator (the same OpOverload); the first one that is
    not ends the comparison (``comparison.diverged_at``) and the run's sequence counts as
    changed. The autograd engine's own detaches (counted per operator in run 0) are skipped.
    """

    def __init__(
        self,
        modules: _ModuleStack,
        reference: list[OpMeasure],
        comparison: RunComparison,
        live: LiveBytes | None = None,
        *,
        cuda_timing: bool = False,
        time_backward: bool = True,
    ) -> None:
        observers: list[CaptureObserver] = [comparison] if live is None else [comparison, live]
        super().__init__(modules, observers, cuda_timing=cuda_timing)
        self.wants_backward_calls = False
        self.time_backward = time_backward
        self.reference = reference
        self.comparison = comparison
        self.live = live
        self._skip_detaches = 0
        self._pending_outputs: tuple[int, list[torch.Tensor]] | None = None

    def _hook_node(self, op_id: int, node: Any) -> None:
        self.comparison.hooked(op_id, node)
        if self.time_backward:  # pre + post hooks: times the node, names it if it raises
            super()._hook_node(op_id, node)
            return
        comparison, live = self.comparison, self.live

        def posthook(
            grad_inputs: tuple[torch.Tensor | None, ...],
            grad_outputs: tuple[torch.Tensor | None, ...],
        ) -> None:
            # Backward runs outside this mode here: the comparison's calls reach no mode.
            comparison.grads(op_id, grad_outputs, grad_inputs)
            if live is not None:
                live.grads(op_id, grad_outputs, grad_inputs)

        self._hook_handles.append(node.register_hook(posthook))

    def settle(self) -> None:
        """Hook the autograd node of the last operator's outputs (as run 0 did)."""
        if self._pending_outputs is None:
            return
        op_id, outputs = self._pending_outputs
        self._pending_outputs = None
        for out in outputs:
            node = out.grad_fn
            if node is not None and node not in self.node_to_op:
                self.node_to_op[node] = op_id
                self.nodes[op_id] = node
                self._hook_node(op_id, node)
                break

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if self._settling:
            return func(*args, **kwargs)
        self.comparison.before_call(func, args, kwargs)
        if self.comparison.diverged_at is not None:
            return func(*args, **kwargs)
        if func is _DETACH and self._skip_detaches:
            self._skip_detaches -= 1  # the engine saving the previous operator's output
            return func(*args, **kwargs)
        self.settle()
        op_id = len(self.ops)
        if op_id >= len(self.reference) or self.reference[op_id].func is not func:
            self.comparison.diverged_at = op_id
            return func(*args, **kwargs)
        measure = self.reference[op_id]
        self.in_flight = (op_id, measure.module, measure.op)
        start_ev = end_ev = None
        if self._cuda_timing:
            start_ev = _cuda_event()
            end_ev = _cuda_event()
            start_ev.record()
        t0 = time.perf_counter_ns()
        out = func(*args, **kwargs)
        elapsed = time.perf_counter_ns() - t0
        if start_ev is not None and end_ev is not None:
            end_ev.record()
            self._cuda_events.append((op_id, True, start_ev, end_ev))
        self.in_flight = None
        self.ops.append((measure.op, measure.module))
        self.forward_ns.append(elapsed)
        self.comparison.forward_ns[op_id] = elapsed
        outputs = [out] if isinstance(out, torch.Tensor) else measured_outputs(measure.op, out)
        self.comparison.compare_outputs(op_id, outputs, args, kwargs, is_view_op(func))
        if self.live is not None:
            self.live.track(outputs)
        self._skip_detaches = measure.engine_detaches
        self._pending_outputs = (op_id, outputs)
        return out
