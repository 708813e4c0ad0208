"""Phase 2 of the profiler: the model in float64, compared with run 0 operator by operator.

Accumulated fidelity compares each operator's outputs and the gradient flowing into it with
run 0's (kept by :func:`attest.collect.profiler.capture_reference` in a memory-mapped
:class:`~attest.collect.spill.SpillFile`, so the float64 run, which needs twice the model's
memory itself, runs next to no other run's tensors), operators aligned by name and module
(:class:`Aligner`). Local fidelity re-runs each operator (and each of its backward ATen calls)
alone in the deployed precision on its float64 inputs cast down, and compares with the
float64 result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from attest.collect.capture import BackwardCall, CaptureObserver, ForwardCall
from attest.collect.context import CollectContext, precision_dtype
from attest.collect.metrics import relative_error, squared_error_sums
from attest.collect.run import run_model
from attest.collect.tensors import (
    _written_args,
    flat_tensors,
    map_tensors,
    measured_outputs,
    op_name,
)

if TYPE_CHECKING:
    from attest.collect.profiler import OpMeasure, Profile

__all__ = ["Aligner", "measure_fidelity", "run_alone"]


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

    def align(self, op_id: int, op: str, module: str) -> int | None:
        key = (op, module)
        end = min(len(self.keys), self.pointer + self.WINDOW)
        for ref_id in range(self.pointer, end):
            if self.keys[ref_id] == key:
                self.mapping[op_id] = ref_id
                self.pointer = ref_id + 1
                return ref_id
        self.unaligned += 1
        return None


class _FidelityObserver(CaptureObserver):
    wants_grads = True
    wants_inputs = True  # local re-runs read what the operator read, not what it wrote

    def __init__(self, reference: list[OpMeasure], low: torch.dtype) -> None:
        self.reference = reference
        self.low = low
        # Comparisons work in float64 blocks whose two temporaries come to 1/8 of run 0's
        # saved activations (at least 16Ki elements): scratch memory in proportion to the
        # model, and few enough blocks that Python stays out of the way on large tensors.
        saved = sum(m.memory_delta_bytes or 0 for m in reference)  # each storage once
        self.block = max(1 << 14, saved // 128)
        self.aligner = Aligner(reference)

    def forward(self, call: ForwardCall) -> None:
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
        measure.out_err = relative_error(pairs, block=self.block)
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
        ref_id = self.aligner.mapping.get(op_id)
        if ref_id is None:
            return
        measure = self.reference[ref_id]
        if measure.grad_outputs is None:
            return
        pairs = [
            (box.value, g)
            for box, g in zip(measure.grad_outputs, grad_outputs, strict=False)
            if box is not None and g is not None
        ]
        if pairs:
            measure.grad_err = relative_error(pairs, block=self.block)

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
        for lo, ref in zip(local, call.outputs, strict=False):
            if not (ref.is_floating_point() and lo.is_floating_point()) or lo.shape != ref.shape:
                continue
            sums = squared_error_sums(lo, ref, block=self.block)
            if sums is None:
                measure.local_grad_failed = "non-finite values in the backward computation"
                return
            measure.local_grad_sq[0] += sums[0]
            measure.local_grad_sq[1] += sums[1]


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
    model = ctx.fresh_model(torch.float64)
    x = ctx.inputs(torch.float64)
    observer = _FidelityObserver(profile.ops, low)
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
    profile.float64_unaligned_ops = sum(1 for m in profile.ops if not m.float64_aligned)
