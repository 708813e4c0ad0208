"""The ``resume`` check: training saved and resumed mid-way equals training without a break.

With the spec's loss and ``training.optimizer`` on the probe batch (its ``target`` as labels),
in training mode, from the trained weights and the check's seed:

- *uninterrupted*: ``steps`` optimizer steps, the save point, ``steps`` more;
- *resumed*: at the save point ``model.state_dict()``, ``optimizer.state_dict()``, the loss
  scaler's state (with ``grad_scaler``) and the RNG states go through ``torch.save`` into
  memory; a model built anew (the spec's factory) and a new optimizer (the spec's factory on
  its parameters) load them, the RNG state is restored from the checkpoint, and ``steps``
  more steps run.

Parameters and gradients after the last step must be bit for bit equal on a deterministic
backend (CPU, or ``torch.use_deterministic_algorithms``); elsewhere within ``rtol`` of the
float64 scale of the uninterrupted run (max |difference| / max |value|, both in float64;
``64 u * steps``, u the unit roundoff of the deployed precision, or
``settings.extra["resume_rtol"]``). To say what was not restored, the uninterrupted and the
resumed object graphs are diffed at the save point (:mod:`.state_diff`): tensors, numbers and
generators a module keeps as plain attributes or non-persistent buffers, optimizer attributes
and state outside ``state_dict()``, the scaler's attributes. Each difference is an item (fail
when the runs diverged, warn when it did not change these steps). ``3 * steps``
forward+backward passes (9 with the default ``steps: 3``).
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CollectContext
from attest.collection.gradients.flow import probe_input
from attest.collection.profile.op_metrics import UNIT_ROUNDOFF
from attest.collection.training.state_diff import (
    Difference,
    Entry,
    diff_snapshots,
    model_snapshot,
    object_snapshot,
    optimizer_snapshot,
    parameter_labels,
)
from attest.collection.training.tensor_compare import comparison_item
from attest.evidence.model import CheckItem, CheckResult, CheckStatus, Metric, Subject
from attest.spec.model import TrainingConfig

__all__ = ["run"]

NO_TARGET = "the probe inputs have no 'target' tensor for the loss"
_FIXES: dict[str, str] = {
    "plain attribute": "a value the module keeps as a plain attribute, which Module.state_dict() "
    "does not save; register a tensor with self.register_buffer(name, tensor) (a number as a "
    "0-d buffer), or save and restore it with the checkpoint",
    "non-persistent buffer": "a buffer registered with persistent=False, which "
    "Module.state_dict() leaves out; register it as persistent",
    "optimizer attribute": "optimizer state kept in an attribute, which Optimizer.state_dict() "
    "does not save; keep per-parameter state in self.state[param] (saved with the optimizer)",
    "optimizer state": "optimizer state that load_state_dict did not restore",
    "optimizer param_group": "a hyperparameter of the optimizer's param_groups that "
    "load_state_dict did not restore",
    "scaler state": "loss-scaler state that GradScaler.load_state_dict did not restore",
    "parameter": "a parameter that load_state_dict did not restore",
    "buffer": "a buffer that load_state_dict did not restore",
}


@dataclass
class _Training:
    """One training run's objects and the losses of its steps."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: Any = None  # torch.amp.GradScaler
    losses: list[float] = field(default_factory=list)

    def snapshot(self) -> dict[str, Entry]:
        labels = parameter_labels(self.model, self.optimizer)
        found = {**model_snapshot(self.model), **optimizer_snapshot(self.optimizer, labels)}
        if self.scaler is not None:
            # GradScaler creates its scale tensor lazily and keeps the loaded values as
            # "initial" ones until then: its state_dict() is the comparable view
            found |= object_snapshot(self.scaler.state_dict(), "grad_scaler", kind="scaler state")
        return found


def _start(ctx: CollectContext, training: TrainingConfig) -> _Training:
    """A model built anew (trained weights, training mode) with its optimizer and scaler."""
    model = ctx.fresh_model()
    model.train()
    assert training.make_optimizer is not None
    optimizer = training.make_optimizer(model.parameters())
    scaler = None
    if training.grad_scaler:
        scaler = torch.amp.GradScaler(torch.device(ctx.spec.device).type)
    return _Training(model, optimizer, scaler)


def _train(ctx: CollectContext, run: _Training, steps: int, x: torch.Tensor, y: Any) -> None:
    """``steps`` optimizer steps on the probe batch (autocast and scaler as declared)."""
    training = ctx.spec.training
    assert training is not None and ctx.spec.loss_fn is not None
    device_type = torch.device(ctx.spec.device).type
    for _ in range(steps):
        run.optimizer.zero_grad(set_to_none=True)
        autocast = (
            torch.autocast(device_type, dtype=getattr(torch, training.autocast))
            if training.autocast
            else contextlib.nullcontext()
        )
        with torch.enable_grad(), autocast:
            loss = ctx.spec.loss_fn(model_output_tensor(run.model(x)), y)
        if run.scaler is not None:
            run.scaler.scale(loss).backward()
            run.scaler.step(run.optimizer)
            run.scaler.update()
        else:
            loss.backward()  # type: ignore[no-untyped-call]
            run.optimizer.step()
        run.losses.append(float(loss.detach()))


def _rng_state(device: str) -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if device.startswith("cuda"):
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


def _resumed(ctx: CollectContext, training: TrainingConfig, data: bytes) -> _Training:
    """A new object graph loaded from the checkpoint bytes."""
    # Our own bytes, written a moment ago: a custom optimizer's state may hold any picklable
    # object, which the weights-only unpickler would refuse.
    saved = torch.load(io.BytesIO(data), weights_only=False)
    run = _start(ctx, training)
    run.model.load_state_dict(saved["model"])
    run.optimizer.load_state_dict(saved["optimizer"])
    if run.scaler is not None and saved["scaler"] is not None:
        run.scaler.load_state_dict(saved["scaler"])
    return run


def run(ctx: CollectContext) -> CheckResult:
    """The ``resume`` result: two items (parameters, gradients) and one per unrestored state."""
    spec, training = ctx.spec, ctx.spec.training
    steps = training.steps if training is not None else 3
    deterministic = spec.device == "cpu" or torch.are_deterministic_algorithms_enabled()
    unit = UNIT_ROUNDOFF[spec.precision]
    rtol = 0.0 if deterministic else float(ctx.settings.extra.get("resume_rtol", 64 * unit * steps))
    parameters: dict[str, Any] = {
        "steps": steps,
        "seed": ctx.settings.seed,
        "optimizer": training.optimizer if training is not None else None,
        "autocast": training.autocast if training is not None else None,
        "grad_scaler": training.grad_scaler if training is not None else False,
        "saved": ["model.state_dict()", "optimizer.state_dict()", "scaler", "rng"],
        "deterministic_backend": deterministic,
        "comparison": "bit for bit"
        if deterministic
        else "max|diff| / max|uninterrupted| (float64)",
        "rtol": rtol,
    }
    reason = _not_applicable(ctx)
    if reason is not None:
        status: CheckStatus = "not_computed" if reason == NO_TARGET else "not_applicable"
        return CheckResult(check="resume", status=status, parameters=parameters, reason=reason)
    assert training is not None and spec.labels is not None
    x = probe_input(ctx)
    y = spec.labels.to(spec.device)
    devices = [torch.device(spec.device).index or 0] if spec.device != "cpu" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(ctx.settings.seed)
        whole = _start(ctx, training)
        _train(ctx, whole, steps, x, y)
        rng = _rng_state(spec.device)
        buffer = io.BytesIO()
        torch.save(
            {
                "model": whole.model.state_dict(),
                "optimizer": whole.optimizer.state_dict(),
                "scaler": whole.scaler.state_dict() if whole.scaler is not None else None,
                "rng": rng,
            },
            buffer,
        )
        try:
            resumed = _resumed(ctx, training, buffer.getvalue())
        except Exception as exc:
            return _unloadable(parameters, exc)
        differences = diff_snapshots(whole.snapshot(), resumed.snapshot())
        _set_rng_state(rng)  # building the new model drew random numbers: as at the save point
        _train(ctx, whole, steps, x, y)
        saved_rng = torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)["rng"]
        _set_rng_state(saved_rng)
        _train(ctx, resumed, steps, x, y)
    result = _result(whole, resumed, differences, parameters, rtol)
    del whole, resumed, buffer
    return result


def _not_applicable(ctx: CollectContext) -> str | None:
    spec = ctx.spec
    if spec.loss_fn is None:
        return "the spec has no loss (add `loss: module:callable`): resume trains with it"
    if spec.training is None or spec.training.make_optimizer is None:
        return (
            "the spec declares no training.optimizer (`optimizer: module:callable`, "
            "callable(params) -> torch.optim.Optimizer): resume trains with it"
        )
    if spec.labels is None:
        return NO_TARGET
    return None


def _unloadable(parameters: dict[str, Any], exc: Exception) -> CheckResult:
    text = " ".join(str(exc).split())[:300]
    item = CheckItem(
        subject=Subject(kind="model", name="checkpoint"),
        status="fail",
        message=f"the checkpoint saved at step {parameters['steps']} cannot be loaded into a "
        f"new model and optimizer: {type(exc).__name__}: {text}",
    )
    summary: dict[str, Metric] = {"loaded": False, "failed": 1}
    return CheckResult(
        check="resume", status="computed", parameters=parameters, summary=summary, items=[item]
    )


def _difference_item(d: Difference, diverged: bool) -> CheckItem:
    fix = _FIXES.get(d.kind.removesuffix(" (a torch.Generator)"), "state not restored")
    if d.kind.endswith("(a torch.Generator)"):
        fix += "; a torch.Generator's state is saved with get_state() and set_state()"
    model_side = d.owner not in ("optimizer", "grad_scaler")
    where = f"{d.path} (module {d.owner})" if model_side else d.path
    subject = (
        Subject(kind="module", module="" if d.owner == "<root>" else d.owner, name=d.attribute)
        if model_side
        else Subject(kind="model", name=d.path)
    )
    return CheckItem(
        subject=subject,
        status="fail" if diverged else "warn",
        metrics={
            "kind": d.kind,
            "path": d.path,
            "max_relative_deviation": d.deviation,
        },
        message=f"{where} is not restored on resume: {d.before} at the save point, {d.after} "
        f"after loading the checkpoint: {fix}",
    )


def _result(
    whole: _Training,
    resumed: _Training,
    differences: list[Difference],
    parameters: dict[str, Any],
    rtol: float,
) -> CheckResult:
    params_a = {n: p.detach() for n, p in whole.model.named_parameters()}
    params_b: dict[str, torch.Tensor | None] = {
        n: p.detach() for n, p in resumed.model.named_parameters()
    }
    grads_a = {n: p.grad for n, p in whole.model.named_parameters()}
    grads_b = {n: p.grad for n, p in resumed.model.named_parameters()}
    items = [
        comparison_item(
            f"{what} after resume",
            a,
            b,
            rtol,
            same=f"the {what} of the resumed run equal the uninterrupted run's",
            differ=f"{what} differ between the resumed and the uninterrupted run",
            sides=("uninterrupted run", "resumed run"),
        )
        for what, a, b in (("parameters", params_a, params_b), ("gradients", grads_a, grads_b))
    ]
    diverged = any(i.status == "fail" for i in items)
    items += [_difference_item(d, diverged) for d in differences]
    steps = parameters["steps"]
    if diverged and not differences:
        items[0].message += (
            "; no state differs between the two at the save point: look for state outside the "
            "model, optimizer and scaler (module-level globals, a schedule, the data order)"
        )
    items[0].details["losses_uninterrupted"] = whole.losses[steps:]
    items[0].details["losses_resumed"] = resumed.losses
    summary: dict[str, Any] = {
        "params_bit_exact": items[0].metrics["bit_exact"],
        "params_max_relative_deviation": items[0].metrics["max_relative_deviation"],
        "grads_bit_exact": items[1].metrics["bit_exact"],
        "grads_max_relative_deviation": items[1].metrics["max_relative_deviation"],
        "losses_equal": whole.losses[steps:] == resumed.losses,
        "unrestored_state": len(differences),
        "failed": sum(i.status == "fail" for i in items),
    }
    return CheckResult(
        check="resume", status="computed", parameters=parameters, summary=summary, items=items
    )
