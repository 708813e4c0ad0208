"""What ``mixed_precision`` and ``batch_invariance`` share: one traced forward+backward pass.

:func:`traced_pass` runs the model under the operator capture
(:class:`~attest.collection.capture.capture.OperatorCapture`, the dispatch mode every check
uses to see ATen calls with their module), optionally inside ``torch.autocast``, and hands the
objective to a caller-supplied backward (``autograd.grad`` for input gradients, a
``GradScaler``-scaled ``backward()`` for the loss scaler). :class:`KeyAligner` maps the
operators of one run onto another's by name and module (autocast adds casts; another batch
size may add or drop a reshape), as the profiler's aligner does for its float64 run.

The loss-scale side of ``mixed_precision`` lives here too (:class:`ReferenceGrads`,
:class:`AutocastObserver`: the gradient flowing into each operator in float64 and under
autocast, and the underflow between them; :func:`loss_scale_range`: the power-of-two loss
scales that neither overflow nor underflow), so that the check module stays its orchestration.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from attest.collection.capture.capture import (
    CaptureObserver,
    ForwardCall,
    OperatorCapture,
    _ModuleStack,
)
from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CollectContext

__all__ = [
    "SCALE_SEARCH",
    "AutocastObserver",
    "KeyAligner",
    "OpStats",
    "PassOutcome",
    "ReferenceGrads",
    "count_nonfinite",
    "dropout_off",
    "floating",
    "loss_scale_range",
    "op_label",
    "param_grads",
    "probe_inputs",
    "relative_error",
    "seeded",
    "traced_pass",
    "unit_roundoff",
]


SCALE_SEARCH = (-64, 64)  # the log2 loss scales the safe range is searched in


def unit_roundoff(dtype: torch.dtype) -> float:
    """Half the machine epsilon: 2^-11 for float16, 2^-8 for bfloat16, 2^-24 for float32."""
    return float(torch.finfo(dtype).eps) / 2.0


def count_nonfinite(tensors: Sequence[torch.Tensor | None]) -> int:
    """NaN and infinite elements among the floating tensors of ``tensors``."""
    total = 0
    for t in tensors:
        if t is not None and t.is_floating_point() and t.numel():
            total += int(t.numel() - int(torch.isfinite(t).sum()))
    return total


def op_label(op: str, module: str) -> str:
    """``aten.addmm.default @ fc1`` (``<root>`` for the model itself)."""
    return f"{op} @ {module or '<root>'}"


def probe_inputs(ctx: CollectContext, dtype: torch.dtype) -> torch.Tensor:
    """The probe inputs on the spec's device: floating ones in ``dtype``, others as they are."""
    if ctx.spec.inputs.is_floating_point():
        return ctx.inputs(dtype)
    return ctx.spec.inputs.to(ctx.spec.device)


def relative_error(a: torch.Tensor | None, ref: torch.Tensor | None) -> float | None:
    """``||a - ref|| / ||ref||`` in float64 (inf when ``ref`` is 0 and ``a`` is not)."""
    if a is None or ref is None:
        return None
    ref_norm = float(ref.norm())
    diff = float((a.double() - ref).norm())
    if ref_norm == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / ref_norm


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """The CPU generator seeded for one pass, its state restored afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


class KeyAligner:
    """Maps operator ids of a run onto a reference run's by ``(op, module)``, searching a short
    window ahead so that operators one run adds (autocast's casts) are skipped."""

    WINDOW = 64

    def __init__(self, keys: Sequence[tuple[str, str]]) -> None:
        self.keys = list(keys)
        self.pointer = 0

    def align(self, op: str, module: str) -> int | None:
        """The reference index of the next operator ``(op, module)``, or None."""
        end = min(len(self.keys), self.pointer + self.WINDOW)
        for ref in range(self.pointer, end):
            if self.keys[ref] == (op, module):
                self.pointer = ref + 1
                return ref
        return None


@dataclass
class PassOutcome:
    """One traced pass: the output, the objective, or where the model raised."""

    ops: list[tuple[str, str]]
    output: torch.Tensor | None = None
    objective: torch.Tensor | None = None
    failure: str | None = None


def traced_pass(
    model: nn.Module,
    x: torch.Tensor,
    observers: Sequence[CaptureObserver],
    objective: Callable[[torch.Tensor], torch.Tensor],
    backward: Callable[[torch.Tensor], None],
    *,
    autocast: torch.dtype | None = None,
    seed: int = 0,
) -> PassOutcome:
    """Forward (and the objective) under the capture, then ``backward(objective)``.

    The objective is computed inside the capture (and inside autocast, as a training loop
    computes its loss), so the loss's own operators are measured too. Backward runs outside
    the dispatch mode: the observers see it through the autograd node hooks the capture
    installed (``grads``). A model that raises gives ``failure`` naming where, not an exception.
    """
    device_type = x.device.type
    cast = (
        torch.autocast(device_type, dtype=autocast)
        if autocast is not None
        else contextlib.nullcontext()
    )
    outcome = PassOutcome(ops=[])
    with seeded(seed), _ModuleStack(model) as modules:
        capture = OperatorCapture(modules, observers)
        try:
            try:
                with torch.enable_grad(), capture, cast:
                    out = model_output_tensor(model(x))
                    value = objective(out)
                    capture.settle()
            except Exception as exc:
                where = (
                    f" in {op_label(capture.in_flight[2] or '', capture.in_flight[1])}"
                    if capture.in_flight is not None
                    else ""
                )
                outcome.failure = f"forward raised {type(exc).__name__}{where}: {exc}"[:500]
                outcome.ops = list(capture.ops)
                return outcome
            outcome.output, outcome.objective = out.detach(), value.detach()
            outcome.ops = list(capture.ops)
            try:
                backward(value)
            except Exception as exc:
                outcome.failure = f"backward raised {type(exc).__name__}: {exc}"[:500]
            return outcome
        finally:
            capture.remove_hooks()


@dataclass
class OpStats:
    op: str
    module: str
    dtype: str | None = None
    grad_dtype: str | None = None
    nonfinite_outputs: int = 0
    nonfinite_grads: int = 0
    aligned: bool = False
    has_grad: bool = False
    underflow: int = 0  # elements whose scaled float64 gradient is below the smallest normal
    kink_zeros: int = 0  # elements 0 under autocast whose scaled float64 gradient is normal
    nonzero: int = 0
    lost_sq: float = 0.0
    ref_sq: float = 0.0


def dropout_off(model: nn.Module) -> list[str]:
    """Dropout modules put in eval mode (random masks differ between precisions)."""
    names = []
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            module.eval()
            names.append(name)
    return names


def param_grads(model: nn.Module) -> dict[str, torch.Tensor | None]:
    """A copy of each trainable parameter's gradient (None where it has none)."""
    return {
        n: (p.grad.detach().clone() if p.grad is not None else None)
        for n, p in model.named_parameters()
        if p.requires_grad
    }


def floating(tensors: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
    return [t for t in tensors if t is not None and t.is_floating_point()]


class ReferenceGrads(CaptureObserver):
    """The float64 pass: the gradient flowing into each operator's outputs, kept."""

    wants_grads = True
    wants_backward_calls = False

    def __init__(self) -> None:
        self.by_op: dict[int, list[torch.Tensor | None]] = {}

    def grads(
        self,
        op_id: int,
        grad_outputs: Sequence[torch.Tensor | None],
        grad_inputs: Sequence[torch.Tensor | None],
    ) -> None:
        self.by_op[op_id] = [g.detach().clone() if g is not None else None for g in grad_outputs]


class AutocastObserver(CaptureObserver):
    """One autocast pass, aligned with the float64 pass operator by operator."""

    wants_grads = True
    wants_backward_calls = False

    def __init__(
        self,
        keys: Sequence[tuple[str, str]],
        reference: dict[int, list[torch.Tensor | None]],
        scale: float,
    ) -> None:
        self.aligner = KeyAligner(keys)
        self.reference = reference
        self.scale = scale
        self.stats: dict[int, OpStats] = {}
        self.ref_of: dict[int, int] = {}

    def forward(self, call: ForwardCall) -> None:
        ref = self.aligner.align(call.op, call.module)
        stats = self.stats[call.index] = OpStats(call.op, call.module)
        floats = floating(call.outputs)
        if floats:
            stats.dtype = str(floats[0].dtype).removeprefix("torch.")
        stats.nonfinite_outputs = count_nonfinite(floats)
        if ref is not None:
            self.ref_of[call.index] = ref
            stats.aligned = True

    def grads(
        self,
        op_id: int,
        grad_outputs: Sequence[torch.Tensor | None],
        grad_inputs: Sequence[torch.Tensor | None],
    ) -> None:
        stats = self.stats.get(op_id)
        if stats is None:
            return
        stats.nonfinite_grads += count_nonfinite(grad_outputs) + count_nonfinite(grad_inputs)
        ref = self.ref_of.get(op_id)
        refs = self.reference.get(ref, []) if ref is not None else []
        for low, g64 in zip(grad_outputs, refs, strict=False):
            if low is None or g64 is None or not low.is_floating_point():
                continue
            stats.grad_dtype = str(low.dtype).removeprefix("torch.")
            if low.shape != g64.shape:
                continue
            stats.has_grad = True
            self._underflow(stats, low, g64)

    def _underflow(self, stats: OpStats, low: torch.Tensor, g64: torch.Tensor) -> None:
        """Add one gradient's underflow to ``stats``, judged as :func:`loss_scale_range` does.

        An element underflows when its float64 value times the loss scale is below the reduced
        dtype's smallest normal number: it cannot be represented there. An element that is 0
        (or tiny) under autocast while its scaled float64 value is representable did not
        underflow: rounding moved a kink such as a ReLU's input across 0 (or an upstream
        operator's error reached it), which the parameter items' fidelity tolerances judge.
        And the error charged to an underflowing element is capped at what representing it
        costs (its magnitude when it is flushed to 0, else half the subnormal spacing): the
        bound the safe loss-scale range is computed with, so a scale inside that range never
        gives an operator an underflow verdict.
        """
        finfo = torch.finfo(low.dtype)
        tiny = float(finfo.tiny)
        delta = tiny * float(finfo.eps) / 2.0  # half the subnormal spacing
        nonzero = g64 != 0
        scaled = g64.abs() * self.scale
        mask = (scaled < tiny) & nonzero
        stats.nonzero += int(nonzero.sum())
        stats.underflow += int(mask.sum())
        stats.kink_zeros += int(((low == 0) & nonzero & ~mask).sum())
        stats.ref_sq += float((g64 * g64).sum())
        if bool(mask.any()):
            ref = g64[mask]
            diff = (low.double()[mask] / self.scale - ref).abs()
            bound = torch.where(scaled[mask] < delta, ref.abs(), delta / self.scale)
            lost = torch.minimum(diff, bound)
            stats.lost_sq += float((lost * lost).sum())


def loss_scale_range(
    stats: dict[int, OpStats],
    reference: dict[int, list[torch.Tensor | None]],
    ref_of: dict[int, int],
    low: torch.dtype,
    tolerance: float,
) -> tuple[int, int]:
    """The log2 loss scales ``[k_lo, k_hi]`` (within :data:`SCALE_SEARCH`) under which no
    operator whose gradient autocast reduces would overflow (its largest float64 gradient times
    2^k stays below 2^emax) or lose more than ``tolerance`` of its gradient norm to underflow.

    The underflow error at scale 2^k is bounded per element from the float64 gradient g: an
    element below the smallest normal number keeps an absolute error of at most half the
    subnormal spacing (``delta``), and one below ``delta`` is flushed to 0 (error ``|g|``).
    Elements are binned by their binary exponent, so every scale is one small matrix.
    Empty when ``k_lo > k_hi``."""
    finfo = torch.finfo(low)
    emax = math.floor(math.log2(float(finfo.max)))
    emin = round(math.log2(float(finfo.tiny)))
    delta = float(finfo.smallest_normal) * float(finfo.eps) / 2.0  # half the subnormal spacing
    ks = torch.arange(SCALE_SEARCH[0], SCALE_SEARCH[1] + 1, dtype=torch.float64)
    k_lo, k_hi = SCALE_SEARCH
    name = str(low).removeprefix("torch.")
    for op_id, s in stats.items():
        if s.grad_dtype != name or op_id not in ref_of:
            continue
        values = [g.reshape(-1) for g in reference.get(ref_of[op_id], []) if g is not None]
        flat = torch.cat(values) if values else torch.zeros(0, dtype=torch.float64)
        flat = flat[flat != 0]
        if not flat.numel():
            continue
        exponents = torch.frexp(flat.abs()).exponent.to(torch.int64)
        unique, inverse, counts = torch.unique(exponents, return_inverse=True, return_counts=True)
        squares = torch.zeros(unique.numel(), dtype=torch.float64).index_add_(
            0, inverse, flat * flat
        )
        scaled_exp = unique.to(torch.float64)[None, :] + ks[:, None]  # |g| 2^k < 2^scaled_exp
        below = scaled_exp <= emin
        flushed = torch.exp2(scaled_exp) <= delta
        scale_sq = torch.exp2(2 * ks)[:, None]
        err_sq = torch.where(
            flushed, squares[None, :] * scale_sq, torch.where(below, counts * delta * delta, 0.0)
        ).sum(1)
        share = err_sq.sqrt() / (torch.exp2(ks) * float(squares.sum().sqrt()))
        ok = (share <= tolerance).nonzero()
        k_lo = max(k_lo, int(ks[int(ok[0])]) if ok.numel() else SCALE_SEARCH[1] + 1)
        k_hi = min(k_hi, emax - int(unique[-1]))
    return k_lo, k_hi
