"""The ``batch_invariance`` check: each example's output and input gradient do not depend on the
batch it is computed in, and the declared training batch sizes stay finite.

A model certified on a probe batch is trained at other batch sizes. Two things go wrong there
that a single probe batch cannot show: values that become NaN or infinite only from some batch
size on (a count used as a divisor, an index past a buffer), and examples that interact (a
BatchNorm left in training mode inside ``forward``, a hand-written batch-mean subtraction), so
that an example's output, and its gradient, change with the rest of the batch.

In eval mode and the deployed precision, for each declared batch size ``b`` the probe examples
are repeated to fill the batch (example ``j % N`` in row ``j``) and one forward+backward pass of
the summed target scalar runs under the operator capture. The reference is each example alone
(batch size 1) and, for the error scale, the same example alone in float64: a batch
deviation within :data:`TOLERANCE_FACTOR` times the float64 error of that operator (at least the
unit roundoff) is kernel blocking in the last bits; more means the examples interact. Per batch
size: non-finite values (the first operator that makes them), and for outputs and input
gradients the bit-exact rate and the largest relative deviation per example; the first
operator whose per-example outputs leave their tolerance names where examples start to
interact. Cost: every example alone twice (the deployed precision and float64), then one pass
per batch size: in proportion to the sum of the batch sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from attest.collection.capture.capture import CaptureObserver, ForwardCall
from attest.collection.capture.records import target_scalar
from attest.collection.capture.run import _classes_for
from attest.collection.context import CollectContext, precision_dtype
from attest.collection.nonfinite import one_sided_nonfinite
from attest.collection.training.amp_common import (
    KeyAligner,
    count_nonfinite,
    floating,
    op_label,
    probe_inputs,
    traced_pass,
    unit_roundoff,
)
from attest.collection.training.batch_rows import max_rel, per_example, row_deviation
from attest.evidence.model import CheckItem, CheckResult, ItemStatus, Subject

__all__ = ["TOLERANCE_FACTOR", "run"]

TOLERANCE_FACTOR = 32.0  # a batch deviation above this many float64 error scales is interaction


class _Recorder(CaptureObserver):
    """One pass: the first operator with non-finite values, and (``store``) every operator's
    floating outputs, or (``compare``) each one's deviation from the examples alone."""

    wants_grads = True
    wants_backward_calls = False

    def __init__(self, store: bool = False, compare: _Comparison | None = None) -> None:
        self.store, self.compare = store, compare
        self.keys: list[tuple[str, str]] = []
        self.outputs: list[list[torch.Tensor]] = []
        self.nonfinite: tuple[int, str, str, str] | None = None  # (id, op, module, phase)
        self.nonfinite_values = 0

    def forward(self, call: ForwardCall) -> None:
        self.keys.append((call.op, call.module))
        floats = floating(call.outputs)
        bad = count_nonfinite(floats)
        self.nonfinite_values += bad
        if bad and self.nonfinite is None:
            self.nonfinite = (call.index, call.op, call.module, "forward")
        if self.store:
            self.outputs.append([t.detach().clone() for t in floats])
        if self.compare is not None:
            self.compare.operator(call.index, call.op, call.module, floats)

    def grads(
        self,
        op_id: int,
        grad_outputs: Sequence[torch.Tensor | None],
        grad_inputs: Sequence[torch.Tensor | None],
    ) -> None:
        bad = count_nonfinite(grad_inputs)
        self.nonfinite_values += bad
        if bad and self.nonfinite is None and op_id < len(self.keys):
            op, module = self.keys[op_id]
            self.nonfinite = (op_id, op, module, "backward")


@dataclass
class _Comparison:
    """The examples-alone reference of one batch size, compared operator by operator."""

    keys: list[tuple[str, str]]
    stacks: list[list[torch.Tensor]]  # per reference operator: its outputs, examples stacked
    scales: list[float]  # per reference operator: the float64 error scale
    rows: torch.Tensor  # example index of each batch row
    floor: float
    first: tuple[int, str, str, float, float] | None = None  # (id, op, module, dev, tol)
    aligner: KeyAligner = field(init=False)

    def __post_init__(self) -> None:
        self.aligner = KeyAligner(self.keys)

    def operator(self, op_id: int, op: str, module: str, outputs: list[torch.Tensor]) -> None:
        ref = self.aligner.align(op, module)
        if self.first is not None or ref is None or ref >= len(self.stacks):
            return
        tol = TOLERANCE_FACTOR * max(self.scales[ref], self.floor)
        for t, stack in zip(outputs, self.stacks[ref], strict=False):
            pair = per_example(t, stack.index_select(0, self.rows), int(self.rows.numel()))
            found = row_deviation(*pair) if pair is not None else None
            if found is not None and found[0].numel():
                dev = float(found[0].max())
                if dev > tol:
                    self.first = (op_id, op, module, dev, tol)
                    return


@dataclass
class _Pass:
    recorder: _Recorder
    output: torch.Tensor | None = None
    input_grad: torch.Tensor | None = None
    classes: torch.Tensor | None = None
    failure: str | None = None


def _forward_backward(
    ctx: CollectContext,
    model: nn.Module,
    x: torch.Tensor,
    labels: torch.Tensor | None,
    classes: torch.Tensor | None,
    recorder: _Recorder,
) -> _Pass:
    """One pass of the summed target scalar; ``classes`` fixes the class of each example
    (None: chosen by the spec's target on this pass's output, and returned)."""
    spec = ctx.spec
    x = x.detach().clone().requires_grad_(x.is_floating_point())
    params = [p for p in model.parameters() if p.requires_grad]
    result = _Pass(recorder)

    def objective(out: torch.Tensor) -> torch.Tensor:
        chosen = classes if classes is not None else _classes_for(out.detach(), spec, labels)
        result.classes = chosen
        fixed = replace(spec, target="label") if chosen is not None else spec
        return target_scalar(out, fixed, chosen if chosen is not None else labels).sum()

    def backward(value: torch.Tensor) -> None:
        wrt = ([x] if x.requires_grad else []) + params
        if wrt and value.requires_grad:
            grads = torch.autograd.grad(value, wrt, allow_unused=True)
            if x.requires_grad and grads[0] is not None:
                result.input_grad = grads[0].detach()

    outcome = traced_pass(model, x, [recorder], objective, backward, seed=ctx.settings.seed)
    result.output, result.failure = outcome.output, outcome.failure
    return result


@dataclass
class _Reference:
    """Every example alone: outputs per operator, the float64 error scales, model outputs."""

    keys: list[tuple[str, str]] = field(default_factory=list)
    stacks: list[list[torch.Tensor]] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)
    outputs: list[torch.Tensor] = field(default_factory=list)
    input_grads: list[torch.Tensor | None] = field(default_factory=list)
    classes: list[torch.Tensor | None] = field(default_factory=list)
    output_scale: float = 0.0
    grad_scale: float = 0.0
    nonfinite: tuple[int, str, str, str] | None = None
    nonfinite_values: int = 0
    failure: str | None = None
    localizable: bool = True


def _reference(
    ctx: CollectContext, x: torch.Tensor, x64: torch.Tensor, labels: torch.Tensor | None, m: int
) -> _Reference:
    """The first ``m`` examples alone, in the deployed precision and in float64."""
    ref = _Reference()
    model = ctx.fresh_model(precision_dtype(ctx.spec.precision))
    model64 = ctx.fresh_model(torch.float64)
    per_example: list[list[list[torch.Tensor]]] = []
    scales: dict[int, float] = {}
    for i in range(m):
        lab = labels[i : i + 1] if labels is not None else None
        low = _forward_backward(ctx, model, x[i : i + 1], lab, None, _Recorder(store=True))
        if low.failure is not None or low.output is None:
            ref.failure = f"example {i} alone: {low.failure}"
            return ref
        if ref.nonfinite is None and low.recorder.nonfinite is not None:
            ref.nonfinite = low.recorder.nonfinite
        ref.nonfinite_values += low.recorder.nonfinite_values
        if i == 0:
            ref.keys = low.recorder.keys
        elif low.recorder.keys != ref.keys:
            ref.localizable = False  # examples alone run different operators
        per_example.append(low.recorder.outputs)
        ref.outputs.append(low.output)
        ref.input_grads.append(low.input_grad)
        ref.classes.append(low.classes)
        wide = _forward_backward(
            ctx, model64, x64[i : i + 1], lab, low.classes, _Recorder(store=True)
        )
        if wide.failure is None:
            aligner = KeyAligner(low.recorder.keys)
            for key, outs64 in zip(wide.recorder.keys, wide.recorder.outputs, strict=True):
                r = aligner.align(*key)
                if r is not None and r < len(low.recorder.outputs):
                    for lo, hi in zip(low.recorder.outputs[r], outs64, strict=False):
                        scales[r] = max(scales.get(r, 0.0), max_rel(lo[None], hi[None]))
            ref.output_scale = max(ref.output_scale, max_rel(low.output, wide.output))
            ref.grad_scale = max(ref.grad_scale, max_rel(low.input_grad, wide.input_grad))
        del wide
    if ref.localizable:
        for r in range(len(ref.keys)):
            first = per_example[0][r]
            same = all(
                len(o[r]) == len(first)
                and all(t.shape == f.shape for t, f in zip(o[r], first, strict=True))
                for o in per_example
            )
            ref.stacks.append(
                [torch.stack([o[r][k] for o in per_example]) for k in range(len(first))]
                if same
                else []
            )
        ref.scales = [scales.get(r, 0.0) for r in range(len(ref.keys))]
    return ref


def run(ctx: CollectContext) -> CheckResult:
    """The ``batch_invariance`` result: one item per batch size, plus the first operator that
    makes non-finite values and the first where examples interact (when there are)."""
    training = ctx.spec.training
    if training is None or not training.batch_sizes:
        return CheckResult(
            check="batch_invariance",
            status="not_applicable",
            reason="the spec's training: mapping declares no batch_sizes "
            "(add e.g. `batch_sizes: [1, 8, 32]` to check the gradients at the sizes trained with)",
        )
    spec = ctx.spec
    dtype = precision_dtype(spec.precision)
    sizes = sorted(training.batch_sizes)
    x = probe_inputs(ctx, dtype)
    labels = spec.labels.to(spec.device) if spec.labels is not None else None
    m = min(int(x.shape[0]), sizes[-1])
    u = unit_roundoff(dtype)
    parameters: dict[str, Any] = {
        "batch_sizes": sizes,
        "precision": spec.precision,
        "mode": "eval",
        "examples_alone": m,
        "tolerance_factor": TOLERANCE_FACTOR,
        "unit_roundoff": u,
        "fill": "probe examples repeated: row j holds example j % examples_alone",
        "objective": "target scalar (sum over the batch)",
        "reference": "each example alone, and alone in float64 for the error scale",
    }
    ref = _reference(ctx, x, probe_inputs(ctx, torch.float64), labels, m)
    if ref.failure is not None:
        return CheckResult(
            check="batch_invariance",
            status="not_computed",
            parameters=parameters,
            reason=f"the examples alone could not be run: {ref.failure}",
        )
    parameters["output_tolerance"] = TOLERANCE_FACTOR * max(ref.output_scale, u)
    parameters["input_grad_tolerance"] = TOLERANCE_FACTOR * max(ref.grad_scale, u)
    model = ctx.fresh_model(dtype)
    sized = [_size_item(ctx, model, ref, x, labels, b, u) for b in sizes]
    del model
    items = [item for item, _ in sized]
    items += _operator_items([(b, found) for b, (_, found) in zip(sizes, sized, strict=True)])
    summary = _summary(items, sizes, m)
    return CheckResult(
        check="batch_invariance",
        status="computed",
        parameters=parameters,
        summary=summary,
        items=items,
    )


@dataclass
class _Found:
    nonfinite: tuple[int, str, str, str] | None = None  # (id, op, module, phase)
    interacting: tuple[int, str, str, float, float] | None = None  # (id, op, module, dev, tol)


def _rows_of(values: Sequence[torch.Tensor | None], rows: torch.Tensor) -> torch.Tensor | None:
    if not values or any(v is None for v in values):
        return None
    return torch.cat([v for v in values if v is not None]).index_select(0, rows)


def _size_item(
    ctx: CollectContext,
    model: nn.Module,
    ref: _Reference,
    x: torch.Tensor,
    labels: torch.Tensor | None,
    b: int,
    u: float,
) -> tuple[CheckItem, _Found]:
    """Batch size ``b`` against every example alone."""
    subject = Subject(kind="model", name=f"batch size {b}")
    m = len(ref.outputs)
    rows = torch.arange(b, device=x.device) % m
    found = _Found()
    metrics: dict[str, Any] = {"batch_size": b}
    if b == 1:  # the examples alone are the batches of size 1
        found.nonfinite = ref.nonfinite
        metrics |= {"nonfinite_values": ref.nonfinite_values, "reference": True}
        return _verdict(subject, metrics, found, None, "each example alone"), found
    comparison = _Comparison(ref.keys, ref.stacks, ref.scales, rows, u) if ref.localizable else None
    classes = _rows_of(ref.classes, rows)
    lab = labels.index_select(0, rows) if labels is not None else None
    done = _forward_backward(
        ctx, model, x.index_select(0, rows), lab, classes, _Recorder(compare=comparison)
    )
    if done.failure is not None or done.output is None:
        return CheckItem(
            subject=subject, status="error", metrics=metrics, message=str(done.failure)
        ), found
    found.nonfinite = done.recorder.nonfinite
    metrics["nonfinite_values"] = done.recorder.nonfinite_values
    deviations: dict[str, float] = {}
    for name, got, want, scale in (
        ("output", done.output, _rows_of(ref.outputs, rows), ref.output_scale),
        ("input_grad", done.input_grad, _rows_of(ref.input_grads, rows), ref.grad_scale),
    ):
        pair = row_deviation(got, want) if got is not None and want is not None else None
        if pair is None:
            metrics |= {f"{name}_bit_exact_rate": None, f"{name}_max_deviation": None}
            continue
        dev, exact = pair
        worst = float(dev.max())
        metrics |= {
            f"{name}_bit_exact_rate": float(exact.double().mean()),
            f"{name}_max_deviation": worst if worst != float("inf") else None,
            f"{name}_tolerance": TOLERANCE_FACTOR * max(scale, u),
        }
        if worst > TOLERANCE_FACTOR * max(scale, u):
            bad = (
                one_sided_nonfinite({"batched": got, "alone": want})
                if worst == float("inf")
                else None
            )
            deviations[name if bad is None else f"{name} ({bad.describe()})"] = worst
    if deviations and comparison is not None:
        found.interacting = comparison.first
    return _verdict(subject, metrics, found, deviations, f"{b} rows"), found


def _verdict(
    subject: Subject,
    metrics: dict[str, Any],
    found: _Found,
    deviations: dict[str, float] | None,
    what: str,
) -> CheckItem:
    nonfinite = found.nonfinite
    metrics["first_nonfinite_operator"] = (
        op_label(nonfinite[1], nonfinite[2]) if nonfinite is not None else None
    )
    inter = found.interacting
    metrics["first_interacting_operator"] = (
        op_label(inter[1], inter[2]) if inter is not None else None
    )
    status: ItemStatus = "pass"
    parts: list[str] = []
    if nonfinite is not None:
        status = "fail"
        parts.append(
            f"{metrics.get('nonfinite_values', 0)} non-finite values, first made by operator "
            f"{nonfinite[0]} {op_label(nonfinite[1], nonfinite[2])} ({nonfinite[3]})"
        )
    if deviations:
        status = "fail"
        worst = ", ".join(
            f"{k.replace('_', ' ')} deviates by {v:.2e}" for k, v in deviations.items()
        )
        where = (
            f"; the examples start to interact at operator {inter[0]} "
            f"{op_label(inter[1], inter[2])} (deviation {inter[3]:.2e}, tolerance {inter[4]:.2e})"
            if inter is not None
            else ""
        )
        parts.append(f"an example's result depends on the rest of the batch: {worst}{where}")
    if status == "pass":
        parts.append(
            f"{what}: finite"
            + (
                ""
                if deviations is None
                else ", each example as alone within the float64 error scale"
            )
        )
    return CheckItem(subject=subject, status=status, metrics=metrics, message="; ".join(parts))


def _operator_items(found: list[tuple[int, _Found]]) -> list[CheckItem]:
    """The first operator with non-finite values and the first where examples interact, each
    at the smallest batch size where it happens."""
    items: list[CheckItem] = []
    nonfinite = next(((b, f.nonfinite) for b, f in found if f.nonfinite is not None), None)
    if nonfinite is not None:
        b, (op_id, op, module, phase) = nonfinite
        items.append(
            CheckItem(
                subject=Subject(kind="operator", operator_id=op_id, op=op, module=module),
                status="fail",
                metrics={"batch_size": b, "phase": phase},
                message=f"non-finite values appear first at batch size {b}, made by "
                f"{op_label(op, module)} in {phase}",
            )
        )
    inter = next(((b, f.interacting) for b, f in found if f.interacting is not None), None)
    if inter is not None:
        b, (op_id, op, module, dev, tol) = inter
        items.append(
            CheckItem(
                subject=Subject(kind="operator", operator_id=op_id, op=op, module=module),
                status="fail",
                metrics={"batch_size": b, "deviation": dev, "tolerance": tol},
                message=f"examples start to interact at {op_label(op, module)} "
                f"(first at batch size {b}: deviation {dev:.2e} from the example alone, "
                f"tolerance {tol:.2e})",
            )
        )
    return items


def _summary(items: list[CheckItem], sizes: list[int], m: int) -> dict[str, Any]:
    def smallest(key: str) -> tuple[int | None, Any]:
        for item in items:
            if item.subject.kind == "model" and item.metrics.get(key) is not None:
                return int(item.metrics["batch_size"] or 0), item.metrics[key]
        return None, None

    nonfinite_b, nonfinite_op = smallest("first_nonfinite_operator")
    inter_b, inter_op = smallest("first_interacting_operator")
    out = [v for i in items if isinstance(v := i.metrics.get("output_max_deviation"), float)]
    grad = [v for i in items if isinstance(v := i.metrics.get("input_grad_max_deviation"), float)]
    return {
        "smallest_nonfinite_batch_size": nonfinite_b,
        "first_nonfinite_operator": nonfinite_op,
        "smallest_interacting_batch_size": inter_b,
        "first_interacting_operator": inter_op,
        "max_output_deviation": max(out) if out else None,
        "max_input_grad_deviation": max(grad) if grad else None,
        "failed": sum(1 for i in items if i.status == "fail"),
        "passes": 2 * m + sum(1 for b in sizes if b > 1),
        "examples": 2 * m + sum(b for b in sizes if b > 1),
    }
