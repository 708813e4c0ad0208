"""The ``mixed_precision`` check: the gradients as ``torch.autocast`` (and the loss scaler)
produce them in training, against a float64 reference.

Training in float16 or bfloat16 changes the gradients in two ways the deployed-precision checks
never see: autocast runs each operator in the dtype its policy picks, and the gradient flowing
backward through a reduced-precision operator is itself reduced, so small gradients underflow to
zero (float16: below 2^-14 they lose precision, below 2^-24 they vanish) unless a loss scaler
multiplies the loss by S first. This check runs, on the probe batch in training mode (dropout
off, so runs compare), with the spec's loss (else the target scalar):

1. a float64 pass, recording the gradient flowing into every operator (the truth);
2. a float32 pass without autocast: each parameter gradient's float32 error, the reference's
   own error scale (a gradient that is 0 by cancellation is noise in every precision);
3. autocast passes (``torch.autocast(device, dtype)``), with ``torch.amp.GradScaler`` when the
   spec declares ``grad_scaler: true``: scale, ``backward``, ``unscale_``, the scaler's
   inf check and ``update``, repeated while the scaler backs off (at most
   :data:`MAX_AUTOCAST_PASSES`); the last pass is measured.

Per operator: the dtype autocast chose, non-finite values, and the underflow (elements whose
float64 gradient times the loss scale is below the reduced dtype's smallest normal number; the
share of the gradient norm they lose, at most what representing them costs, as the safe range
below counts it). An element that is 0 under autocast although its scaled float64 value is
representable did not underflow: rounding moved a kink (a ReLU's input) across 0; it is counted
(``kink_zeros``) and left to the parameter's fidelity. Per parameter: the unscaled gradient's relative error against float64, held against the
dtype's unit roundoff times the float32 error scale. For the model: the loss scale used, whether
the scaled loss or gradients overflow, the range of power-of-two loss scales under which no
operator's float64 gradient would overflow or lose more than the tolerance to underflow, and the
scale the scaler settles at. Tolerances in docs/training.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from attest.collection.capture.records import target_scalar
from attest.collection.capture.run import _classes_for, model_output_tensor
from attest.collection.context import CollectContext
from attest.collection.training.amp_common import (
    AutocastObserver,
    OpStats,
    ReferenceGrads,
    count_nonfinite,
    dropout_off,
    loss_scale_range,
    op_label,
    param_grads,
    probe_inputs,
    seeded,
    traced_pass,
    unit_roundoff,
)
from attest.collection.training.mixed_precision_grads import (
    FAIL_FACTOR,
    WARN_FACTOR,
    param_item,
)
from attest.evidence.model import CheckItem, CheckResult, ItemStatus, Subject

__all__ = ["FAIL_FACTOR", "MAX_AUTOCAST_PASSES", "WARN_FACTOR", "run"]

MAX_AUTOCAST_PASSES = 8  # with the float64 and float32 passes: at most 10 passes
_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def _objective(
    ctx: CollectContext, labels: torch.Tensor | None, classes: torch.Tensor | None
) -> Callable[[torch.Tensor], torch.Tensor]:
    spec = ctx.spec
    loss_fn = spec.loss_fn
    if loss_fn is not None and labels is not None:
        lab = labels

        def loss(out: torch.Tensor) -> torch.Tensor:
            y = (
                lab.to(torch.float64)
                if out.dtype == torch.float64 and lab.is_floating_point()
                else lab
            )
            return loss_fn(out, y)

        return loss
    fixed = replace(spec, target="label") if classes is not None else spec
    return lambda out: target_scalar(out, fixed, classes if classes is not None else labels).sum()


def run(ctx: CollectContext) -> CheckResult:
    """The ``mixed_precision`` result: the model, each parameter, each operator."""
    training = ctx.spec.training
    if training is None or training.autocast is None:
        return CheckResult(
            check="mixed_precision",
            status="not_applicable",
            reason="the spec's training: mapping declares no autocast dtype "
            "(add `autocast: float16` or `bfloat16` to check the gradients of mixed-precision training)",
        )
    low = _DTYPES[training.autocast]
    u = unit_roundoff(low)
    spec = ctx.spec
    use_loss = spec.loss_fn is not None and spec.labels is not None
    parameters: dict[str, Any] = {
        "autocast": training.autocast,
        "grad_scaler": training.grad_scaler,
        "unit_roundoff": u,
        "warn_factor": WARN_FACTOR,
        "fail_factor": FAIL_FACTOR,
        "underflow_warn": WARN_FACTOR * u,
        "underflow_fail": FAIL_FACTOR * u,
        "objective": "loss" if use_loss else "target scalar (sum over the batch)",
        "mode": "train",
        "max_autocast_passes": MAX_AUTOCAST_PASSES,
        "reference": "float64",
        "seed": ctx.settings.seed,
    }
    labels = spec.labels.to(spec.device) if spec.labels is not None else None
    state = _Passes(ctx, low, labels)
    try:
        return state.result(parameters)
    finally:
        state.release()


class _Passes:
    """The float64, float32 and autocast passes of one check, and the items they give."""

    def __init__(self, ctx: CollectContext, low: torch.dtype, labels: torch.Tensor | None) -> None:
        self.ctx, self.low, self.labels = ctx, low, labels
        self.seed = ctx.settings.seed
        self.model64: nn.Module | None = None
        self.model: nn.Module | None = None

    def release(self) -> None:
        self.model64 = self.model = None

    def result(self, parameters: dict[str, Any]) -> CheckResult:
        ctx, spec = self.ctx, self.ctx.spec
        self.model64 = ctx.fresh_model(torch.float64).train()
        dropout = dropout_off(self.model64)
        parameters["dropout_off"] = dropout
        params64 = [p for _, p in self.model64.named_parameters() if p.requires_grad]
        if not params64:
            return CheckResult(
                check="mixed_precision",
                status="not_computed",
                parameters=parameters,
                reason="the model has no trainable parameters",
            )
        reference = ReferenceGrads()
        obj64 = _objective(ctx, self.labels, None)

        def backward64(value: torch.Tensor) -> None:
            value.backward()  # type: ignore[no-untyped-call]

        out64 = traced_pass(
            self.model64,
            probe_inputs(ctx, torch.float64),
            [reference],
            obj64,
            backward64,
            seed=self.seed,
        )
        if out64.failure is not None or out64.output is None:
            return CheckResult(
                check="mixed_precision",
                status="not_computed",
                parameters=parameters,
                reason=f"the float64 reference pass failed: {out64.failure}",
            )
        classes = (
            None
            if spec.loss_fn is not None and self.labels is not None
            else (_classes_for(out64.output, spec, self.labels))
        )
        grads64 = {
            k: (v.double() if v is not None else None) for k, v in param_grads(self.model64).items()
        }
        self.model64 = None
        objective = _objective(ctx, self.labels, classes)
        self.model = ctx.fresh_model(torch.float32).train()
        dropout_off(self.model)
        grads32 = self._float32_grads(objective)
        run = self._autocast_passes(objective, out64.ops, reference.by_op)
        if run.failure is not None:
            return CheckResult(
                check="mixed_precision",
                status="not_computed",
                parameters=parameters,
                reason=f"the autocast pass failed: {run.failure}",
            )
        u = float(parameters["unit_roundoff"])
        k_lo, k_hi = loss_scale_range(
            run.stats, reference.by_op, run.ref_of, self.low, WARN_FACTOR * u
        )
        model_item = _model_item(run, k_lo, k_hi, bool(parameters["grad_scaler"]))
        param_items = [
            param_item(name, run.grads.get(name), g64, grads32.get(name), u)
            for name, g64 in grads64.items()
        ]
        op_items = [
            _op_item(i, s, u, run.scale)
            for i, s in sorted(run.stats.items())
            if s.dtype is not None
        ]
        items = [model_item, *param_items, *op_items]
        errors = [  # a gradient that is 0 but for rounding has no meaningful relative error
            e
            for i in param_items
            if isinstance(e := i.metrics.get("grad_rel_error"), float)
            and not i.metrics.get("cancelled")
        ]
        shares = [
            e for i in op_items if isinstance(e := i.metrics.get("underflow_error_share"), float)
        ]
        summary: dict[str, Any] = {
            "loss_scale": run.scale,
            "max_grad_rel_error": max(errors) if errors else None,
            "max_underflow_error_share": max(shares) if shares else None,
            "failed": sum(1 for i in items if i.status == "fail"),
            "warned": sum(1 for i in items if i.status == "warn"),
            "passes": run.passes + 2,
        }
        return CheckResult(
            check="mixed_precision",
            status="computed",
            parameters=parameters,
            summary=summary,
            items=items,
        )

    def _float32_grads(
        self, objective: Callable[[torch.Tensor], torch.Tensor]
    ) -> dict[str, torch.Tensor | None]:
        assert self.model is not None
        # backward() into .grad, not autograd.grad: a model that checkpoints its own blocks
        # with use_reentrant=True refuses autograd.grad (and backward(inputs=...)).
        for p in self.model.parameters():
            p.grad = None
        with seeded(self.seed), torch.enable_grad():
            value = objective(
                model_output_tensor(self.model(probe_inputs(self.ctx, torch.float32)))
            )
            value.backward()  # type: ignore[no-untyped-call]
        grads = param_grads(self.model)
        for p in self.model.parameters():
            p.grad = None
        return grads

    def _autocast_passes(
        self,
        objective: Callable[[torch.Tensor], torch.Tensor],
        keys: Sequence[tuple[str, str]],
        reference: dict[int, list[torch.Tensor | None]],
    ) -> _AutocastRun:
        ctx, model = self.ctx, self.model
        assert model is not None and ctx.spec.training is not None
        training = ctx.spec.training
        params = [p for _, p in model.named_parameters() if p.requires_grad]
        make = training.make_optimizer
        optimizer = make(params) if make is not None else torch.optim.SGD(params, lr=0.0)
        device = torch.device(ctx.spec.device).type
        scaler = torch.amp.GradScaler(device) if training.grad_scaler else None
        x = probe_inputs(ctx, torch.float32)
        result = _AutocastRun()
        for attempt in range(MAX_AUTOCAST_PASSES):
            for p in params:
                p.grad = None
            scale = float(scaler.get_scale()) if scaler is not None else 1.0
            observer = AutocastObserver(keys, reference, scale)

            def backward(value: torch.Tensor, scaler: Any = scaler) -> None:
                (scaler.scale(value) if scaler is not None else value).backward()

            outcome = traced_pass(
                model, x, [observer], objective, backward, autocast=self.low, seed=self.seed
            )
            result.passes = attempt + 1
            result.failure = outcome.failure
            if outcome.failure is not None or outcome.objective is None:
                return result
            if attempt == 0:
                result.initial_scale = scale
                scaled = outcome.objective * scale
                result.scaled_loss_overflow = not bool(torch.isfinite(scaled).all())
            if scaler is not None:
                scaler.unscale_(optimizer)
            grads = param_grads(model)
            found_inf = count_nonfinite(list(grads.values())) > 0
            if attempt == 0:
                result.initial_overflow = found_inf
            result.scale, result.grads, result.found_inf = scale, grads, found_inf
            result.stats, result.ref_of = observer.stats, observer.ref_of
            if scaler is None or not found_inf:
                break
            scaler.update()
            result.backoffs += 1
        return result


@dataclass
class _AutocastRun:
    passes: int = 0
    failure: str | None = None
    scale: float = 1.0
    initial_scale: float = 1.0
    backoffs: int = 0
    scaled_loss_overflow: bool = False
    initial_overflow: bool = False
    found_inf: bool = False
    grads: dict[str, torch.Tensor | None] = field(default_factory=dict)
    stats: dict[int, OpStats] = field(default_factory=dict)
    ref_of: dict[int, int] = field(default_factory=dict)


def _model_item(run: _AutocastRun, k_lo: int, k_hi: int, scaler: bool) -> CheckItem:
    scale_log2 = math.log2(run.scale) if run.scale > 0 else -math.inf
    empty = k_lo > k_hi
    in_range = not empty and k_lo <= scale_log2 <= k_hi
    settle = run.scale if scaler else 2.0 ** min(16, k_hi)
    metrics: dict[str, Any] = {
        "loss_scale": run.scale,
        "initial_loss_scale": run.initial_scale,
        "scaler_backoffs": run.backoffs,
        "scaled_loss_overflow": run.scaled_loss_overflow,
        "grads_overflow_at_initial_scale": run.initial_overflow,
        "grads_nonfinite": run.found_inf,
        "safe_loss_scale_log2_min": None if empty else k_lo,
        "safe_loss_scale_log2_max": None if empty else k_hi,
        "safe_loss_scale_min": None if empty else 2.0**k_lo,
        "safe_loss_scale_max": None if empty else 2.0**k_hi,
        "loss_scale_in_safe_range": in_range,
        "scaler_settle_scale": settle,
        "scaler_settle_source": "measured" if scaler else "predicted",
    }
    status: ItemStatus
    if run.found_inf:
        status, message = (
            "fail",
            (
                f"the gradients are not finite at loss scale {run.scale:g} after "
                f"{run.passes} autocast pass(es)"
                + ("" if scaler else "; declare grad_scaler: true or compute the loss in float32")
            ),
        )
    elif empty:
        status, message = (
            "fail",
            (
                "no power-of-two loss scale keeps every reduced-precision gradient both below "
                "overflow and above underflow: the gradients span more than the dtype's range"
            ),
        )
    elif scale_log2 < k_lo:
        status, message = (
            "fail",
            (
                f"at loss scale {run.scale:g} the gradients underflow (safe scales 2^{k_lo} to "
                f"2^{k_hi})"
                + ("" if scaler else "; declare grad_scaler: true (torch.amp.GradScaler)")
            ),
        )
    elif scale_log2 > k_hi:
        status, message = (
            "warn",
            (
                f"loss scale {run.scale:g} is above the safe range 2^{k_lo} to 2^{k_hi}: "
                "a larger gradient would overflow"
            ),
        )
    else:
        status, message = (
            "pass",
            (
                f"loss scale {run.scale:g} lies in the safe range 2^{k_lo} to 2^{k_hi}"
                + (f"; the scaler settled after {run.backoffs} back-off(s)" if scaler else "")
            ),
        )
    return CheckItem(subject=Subject(kind="model"), status=status, metrics=metrics, message=message)


def _op_item(op_id: int, s: OpStats, u: float, scale: float) -> CheckItem:
    fraction = (
        s.underflow / s.nonzero if s.has_grad and s.nonzero else (0.0 if s.has_grad else None)
    )
    share = (
        math.sqrt(s.lost_sq / s.ref_sq)
        if s.has_grad and s.ref_sq > 0
        else (0.0 if s.has_grad else None)
    )
    metrics: dict[str, Any] = {
        "dtype": s.dtype,
        "grad_dtype": s.grad_dtype,
        "nonfinite_outputs": s.nonfinite_outputs,
        "nonfinite_grads": s.nonfinite_grads,
        "aligned": s.aligned,
        "underflow_fraction": fraction,
        "underflow_error_share": share,
        "kink_zeros": s.kink_zeros if s.has_grad else None,
    }
    where = op_label(s.op, s.module)
    status: ItemStatus
    if s.nonfinite_outputs or s.nonfinite_grads:
        status = "fail"
        message = f"{where}: {s.nonfinite_outputs} non-finite outputs, {s.nonfinite_grads} non-finite gradient values"
    elif share is not None and share > FAIL_FACTOR * u:
        status = "fail"
        message = f"{where}: underflow in {s.grad_dtype} ({fraction:.1%} of the elements below its smallest normal at loss scale {scale:g}) makes an error of {share:.1%} of the gradient norm"
    elif share is not None and share > WARN_FACTOR * u:
        status = "warn"
        message = f"{where}: underflow in {s.grad_dtype} makes an error of {share:.2%} of the gradient norm"
    else:
        status = "pass"
        message = f"{where} runs in {s.dtype}" + (
            "" if share is None else f", underflow share {share:.1e}"
        )
    return CheckItem(
        subject=Subject(kind="operator", operator_id=op_id, op=s.op, module=s.module),
        status=status,
        metrics=metrics,
        message=message,
    )
