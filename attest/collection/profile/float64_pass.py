"""Phase 2 of the profiler: the model in float64, compared with run 0 operator by operator.

Accumulated fidelity compares each operator's outputs and the gradient flowing into it with
run 0's (kept by :func:`attest.collection.profile.profiler.capture_reference` in a memory-mapped
:class:`~attest.collection.capture.spill.SpillFile`, so the float64 run, which needs twice the model's
memory itself, runs next to no other run's tensors), operators aligned by name and module
(:class:`Aligner`). Local fidelity re-runs each operator (and each of its backward ATen calls)
alone in the deployed precision on its float64 inputs cast down, and compares with the
float64 result.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from attest.collection.capture.capture import BackwardCall, CaptureObserver, ForwardCall
from attest.collection.capture.run import run_model
from attest.collection.capture.spill import Pager
from attest.collection.capture.tensors import (
    _written_args,
    flat_tensors,
    map_tensors,
    measured_outputs,
    op_name,
)
from attest.collection.context import CollectContext, precision_dtype
from attest.collection.profile.op_metrics import (
    compared_error,
    relative_error,
    squared_error_sums,
)
from attest.collection.resources import release_memory

if TYPE_CHECKING:
    from attest.collection.profile.measures import OpMeasure, Profile

__all__ = ["CANCELLED", "Aligner", "cancelled", "measure_fidelity", "run_alone"]


def _cast_down(value: Any, low: torch.dtype) -> Any:
    """``value`` (an ATen argument: tensor, dtype, scalar, or a list/tuple/dict of them) with
    float64 tensors cast to ``low`` and the dtype float64 replaced by ``low``.

    A plain recursion rather than ``tree_map``: ATen arguments are at most one level of
    lists, and this runs for every forward and backward call of the float64 run.
    """
    if isinstance(value, torch.Tensor):
        return value.detach().to(low) if value.dtype == torch.float64 else value
    if isinstance(value, torch.dtype):
        return low if value == torch.float64 else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_down(v, low) for v in value)
    if isinstance(value, dict):
        return {k: _cast_down(v, low) for k, v in value.items()}
    return value


class Aligner:
    """Maps operator ids of another run onto the reference run's, tolerating local changes
    of the sequence (an op a precision adds or drops) by searching a short window ahead."""

    WINDOW = 64

    def __init__(self, reference: Sequence[OpMeasure]) -> None:
        self.keys = [(m.op, m.module) for m in reference]
        self.pointer = 0
        self.mapping: dict[int, int] = {}
        self.unaligned = 0
        self.seen: list[tuple[str, str]] = []  # this run's (op, module) sequence

    def align(self, op_id: int, op: str, module: str) -> int | None:
        key = (op, module)
        self.seen.append(key)
        end = min(len(self.keys), self.pointer + self.WINDOW)
        for ref_id in range(self.pointer, end):
            if self.keys[ref_id] == key:
                self.mapping[op_id] = ref_id
                self.pointer = ref_id + 1
                return ref_id
        self.unaligned += 1
        return None

    def divergent_modules(self) -> set[str]:
        """Modules whose own operator sequence in this run differs from the reference's.

        There the two runs took different kernels (on CPU, float32 ``nn.LSTM`` runs one fused
        ``mkldnn_rnn_layer`` per layer and direction, float64 the decomposed cell), and an
        operator matched by name and module may compute another quantity: the input ``clone``
        feeds both directions in one run and only one in the other, so its gradients differ
        by far more than rounding. Such matches are not comparisons of the same value.
        """
        ours: dict[str, list[str]] = {}
        theirs: dict[str, list[str]] = {}
        for op, module in self.keys:
            ours.setdefault(module, []).append(op)
        for op, module in self.seen:
            theirs.setdefault(module, []).append(op)
        return {m for m in ours.keys() | theirs.keys() if ours.get(m) != theirs.get(m)}


# A float64 result whose norm is below this fraction of the norm of the terms it was formed
# from is 0 but for rounding (float64's unit roundoff 1.1e-16, grown by the square root of up to
# 1e8 terms): the exact value is 0, by cancellation, and a relative error against it is noise.
CANCELLED = 1e-12


def _norm(tensors: Iterable[torch.Tensor]) -> float:
    """The 2-norm of the floating and complex tensors of ``tensors`` together, in float64."""
    return math.sqrt(
        sum(
            float(
                torch.linalg.vector_norm(
                    t, dtype=torch.complex128 if t.is_complex() else torch.float64
                )
            )
            ** 2
            for t in tensors
            if t.is_floating_point() or t.is_complex()
        )
    )


def cancelled(norm: float, scale: float) -> bool:
    """Whether a float64 value of 2-norm ``norm``, formed from terms of 2-norm ``scale``,
    is 0 but for rounding (see :data:`CANCELLED`)."""
    return math.isfinite(scale) and scale > 0.0 and norm <= CANCELLED * scale


class _FidelityObserver(CaptureObserver):
    wants_grads = True
    wants_inputs = True  # local re-runs read what the operator read, not what it wrote

    def __init__(self, reference: list[OpMeasure], low: torch.dtype, pager: Pager) -> None:
        self.reference = reference
        self.low = low
        # the two sides of every comparison, as messages name them
        self.sides = (f"deployed-precision ({str(low).removeprefix('torch.')})", "float64")
        self.pager = pager  # gives back run 0's pages as the comparisons go
        # Comparisons work in float64 blocks whose two temporaries come to 1/8 of run 0's
        # saved activations (at least 16Ki elements): scratch memory in proportion to the
        # model, and few enough blocks that Python stays out of the way on large tensors.
        saved = sum(m.memory_delta_bytes or 0 for m in reference)  # each storage once
        self.block = max(1 << 14, saved // 128)
        self.aligner = Aligner(reference)
        # The dataflow of this run: which operators read each operator's outputs, and the
        # norm of the float64 gradient flowing into each operator's outputs (the scale of a
        # gradient formed by cancellation, see grads()).
        self.producers: dict[int, tuple[weakref.ref[torch.Tensor], int]] = {}
        self.consumers: dict[int, set[int]] = {}
        self.grad_norms: dict[int, float] = {}

    def _record_dataflow(self, call: ForwardCall) -> None:
        for t in flat_tensors((call.args, call.kwargs)):
            entry = self.producers.get(id(t))
            if entry is not None and entry[0]() is t and entry[1] != call.index:
                self.consumers.setdefault(entry[1], set()).add(call.index)
        for out in call.outputs:
            self.producers[id(out)] = (weakref.ref(out), call.index)

    def forward(self, call: ForwardCall) -> None:
        self.pager.tick()
        self._record_dataflow(call)
        ref_id = self.aligner.align(call.index, call.op, call.module)
        if ref_id is None:
            return
        measure = self.reference[ref_id]
        measure.float64_aligned = True
        pairs = [
            (box.value, out)
            for box, out in zip(measure.outputs, call.outputs, strict=False)
            if out.is_floating_point() and box.value.is_floating_point()
        ]
        if not pairs:
            return
        measure.out_err, bad = compared_error(pairs, self.sides, block=self.block)
        if bad is not None:
            measure.nonfinite = f"outputs: {bad.describe()}"
        if measure.random:
            measure.local_out_failed = (
                "random operator: re-running it alone draws different numbers"
            )
            return
        try:
            local = run_alone(call.func, *call.inputs(), self.low)
        except Exception as exc:
            measure.local_out_failed = (
                f"re-running in the deployed precision raised {type(exc).__name__}: {exc}"
            )
            return
        measure.local_out_err = relative_error(
            (
                (lo, out)
                for lo, out in zip(local, call.outputs, strict=False)
                if out.is_floating_point() and lo.is_floating_point()
            ),
            block=self.block,
        )

    def grads(
        self,
        op_id: int,
        grad_outputs: Sequence[torch.Tensor | None],
        grad_inputs: Sequence[torch.Tensor | None],
    ) -> None:
        self.pager.tick()
        ref_id = self.aligner.mapping.get(op_id)
        measure = self.reference[ref_id] if ref_id is not None else None
        pairs = [
            (box.value, g)
            for box, g in zip(
                (measure.grad_outputs or ()) if measure is not None else (),
                grad_outputs,
                strict=False,
            )
            if box is not None and g is not None
        ]
        if len(pairs) < sum(g is not None for g in grad_outputs):
            # not every gradient is compared: their norm is not a by-product of the comparison
            self.grad_norms[op_id] = _norm(g for g in grad_outputs if g is not None)
        if measure is None or not pairs:
            return

        def floor(reference_sq: float) -> float:  # the float64 gradients' norm, squared
            self.grad_norms.setdefault(op_id, math.sqrt(reference_sq))
            return self._floor(op_id)

        measure.grad_err, bad = compared_error(pairs, self.sides, block=self.block, floor=floor)
        if bad is not None and measure.nonfinite is None:
            measure.nonfinite = f"output gradients: {bad.describe()}"

    def _floor(self, op_id: int) -> float:
        """The scale to take this operator's gradient error relative to, when its float64
        gradient is 0 but for rounding (else 0: the plain relative error).

        Some gradients are 0 in exact arithmetic, formed by cancellation: into
        ``x.max(-1, keepdim=True)`` of a hand-written stable softmax flows the row sum of the
        softmax input's gradient. Both runs then return rounding of the size of the terms
        that cancelled, the gradients flowing into the operators that read this one's outputs
        (their backward runs first), and ``||g - g64|| / ||g64||`` compares two roundings.
        The error is taken relative to that scale instead. Only a float64 gradient at float64
        rounding level counts (:data:`CANCELLED`): a gradient that is merely small (scaled by
        a layer-scale 1e-6, or underflowing in float16) keeps the plain relative error.
        """
        scale = max(
            (self.grad_norms.get(c, 0.0) for c in self.consumers.get(op_id, ())), default=0.0
        )
        return scale if cancelled(self.grad_norms.get(op_id, 0.0), scale) else 0.0

    def backward(self, call: BackwardCall) -> None:
        if call.op_id is None:
            return
        ref_id = self.aligner.mapping.get(call.op_id)
        if ref_id is None:
            return
        measure = self.reference[ref_id]
        floats = [t for t in call.outputs if t.is_floating_point()]
        if not floats or measure.local_grad_failed:
            return
        try:
            local = run_alone(call.func, *call.inputs(), self.low)
        except Exception as exc:
            measure.local_grad_failed = f"re-running backward {call.op} in the deployed precision raised {type(exc).__name__}: {exc}"
            return
        scale: float | None = None
        for lo, ref in zip(local, call.outputs, strict=False):
            if not (ref.is_floating_point() and lo.is_floating_point()) or lo.shape != ref.shape:
                continue
            sums = squared_error_sums(lo, ref, block=self.block)
            if sums is None:
                measure.local_grad_failed = "non-finite values in the backward computation"
                return
            measure.local_grad_sq[0] += sums[0]
            ref_sq = sums[1]
            if sums[0] > 1e-8 * ref_sq:  # a relative error above 1e-4: was it cancellation?
                if scale is None:  # the terms the call combined (a reduction's, see _floor)
                    scale = _norm(flat_tensors(call.inputs()))
                if cancelled(math.sqrt(ref_sq), scale):
                    ref_sq = scale * scale
            measure.local_grad_sq[1] += ref_sq


def run_alone(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], low: torch.dtype
) -> list[torch.Tensor]:
    """Run one ATen call on its float64 inputs cast down to ``low`` (``args``/``kwargs`` as
    the call read them, see ``ForwardCall.inputs``); a written argument that the cast left
    as it was is copied first, so the float64 run is not disturbed."""
    low_args = _cast_down(args, low)
    low_kwargs = _cast_down(kwargs, low)
    written = _written_args(func, low_args, low_kwargs)
    if written:
        originals = {id(t) for t in flat_tensors((args, kwargs))}
        shared = {id(t) for t in written if id(t) in originals}
        if shared:

            def copy(v: torch.Tensor) -> torch.Tensor:
                return v.clone() if id(v) in shared else v

            low_args = map_tensors(copy, low_args)
            low_kwargs = map_tensors(copy, low_kwargs)
    with torch.no_grad():
        out = func(*low_args, **low_kwargs)
    return measured_outputs(op_name(func), out)


def measure_fidelity(ctx: CollectContext, profile: Profile) -> None:
    """Phase 2: the float64 run with accumulated and local fidelity per operator."""
    spec = ctx.spec
    low = precision_dtype(spec.precision)
    # What run 0 and the phases before freed is still the process's: glibc keeps it in its
    # arenas, and run 0's pages read so far stay mapped. The float64 run is the collect's
    # largest (twice the model's activations): it starts from the smallest footprint.
    ctx.release_spill_pages()
    release_memory()
    model = ctx.fresh_model(torch.float64)
    x = ctx.inputs(torch.float64)
    observer = _FidelityObserver(profile.ops, low, Pager(ctx.release_spill_pages))
    outcome = run_model(
        model,
        x,
        spec,
        [observer],
        labels=spec.labels,
        classes=profile.reference.classes,
        seed=ctx.settings.seed,
    )
    profile.float64_failure = outcome.failure
    if outcome.failure is None:
        divergent = observer.aligner.divergent_modules()
        for m in profile.ops:
            if m.module in divergent:  # no trustworthy counterpart: not measured (and why)
                m.float64_aligned = False
                m.out_err = m.grad_err = m.local_out_err = None
                m.local_out_failed = m.local_grad_failed = (
                    f"the float64 run takes other operators in module {m.module or '<root>'!r}"
                )
    profile.float64_unaligned_ops = sum(1 for m in profile.ops if not m.float64_aligned)
