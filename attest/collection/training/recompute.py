"""The ``recompute`` check: activation checkpointing changes neither the gradients nor the state.

Under ``torch.utils.checkpoint`` a region's activations are dropped after the forward pass and
recomputed in the backward pass: exact only with the same random numbers (the RNG state
restored) and no side effects (a BatchNorm in training mode updates its running statistics
again). One training step of the probe batch (the spec's loss, else the target scalar) runs
from the same weights and seed, in training mode, *with* recomputation (the model's own
regions, plus the modules matching ``training.checkpoint`` globs, outermost matches, wrapped in
``checkpoint(use_reentrant=False)``) and *without* (every region run plainly). The gradients
must be bit for bit equal on a deterministic backend (CPU, or deterministic algorithms), else
within twice the run-to-run deviation of a third run. Random operators recomputed with other
numbers and state written during the backward pass are named (:class:`.state_diff.StepObserver`);
saved-tensor bytes and forward time per region and module give a greedy "adaptive recompute"
plan (advice, in the parameters). docs/training.md, "recompute". 2-3 forward+backward passes.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any

import torch

from attest.collection.capture.records import target_scalar
from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CollectContext
from attest.collection.gradients.flow import probe_input
from attest.collection.profile.op_metrics import UNIT_ROUNDOFF
from attest.collection.training import state_diff as sd
from attest.collection.training.checkpoint_regions import (
    Figures,
    Region,
    Trace,
    declared_modules,
    patched_checkpoint,
    wrap,
)
from attest.collection.training.tensor_compare import compare_tensors, comparison_item
from attest.evidence.model import CheckItem, CheckResult, ItemStatus, Metric, Subject

__all__ = ["Figures", "Region", "Trace", "run"]

NO_REGIONS_REASON = (
    "the model runs no region under torch.utils.checkpoint in training mode and the spec "
    "declares no training.checkpoint modules: there is no recomputation to check"
)


@dataclass
class Step:
    """One training step's outcome: its trace, the parameter gradients and the module state
    that changed during the backward pass (with recomputation)."""

    trace: Trace
    grads: dict[str, torch.Tensor | None]
    state_changes: list[sd.Difference] = field(default_factory=list)


def training_step(ctx: CollectContext, patterns: list[str], *, recompute: bool) -> Step:
    """One forward+backward of the probe batch in training mode from the trained weights."""
    model = ctx.fresh_model()
    model.train()
    declared = declared_modules(model, patterns)
    for name in declared:
        wrap(model.get_submodule(name))
    trace = Trace(model, recompute=recompute, declared=set(declared))
    x, labels = probe_input(ctx), ctx.spec.labels
    handles = trace.hook(model)
    torch.manual_seed(ctx.settings.seed)
    observer = trace.observer if recompute else contextlib.nullcontext()
    try:
        with patched_checkpoint(trace), observer:
            with (
                torch.enable_grad(),
                torch.autograd.graph.saved_tensors_hooks(trace.pack, lambda t: t),
            ):
                output = model_output_tensor(model(x))
                if ctx.spec.loss_fn is not None and labels is not None:
                    objective = ctx.spec.loss_fn(output, labels.to(output.device))
                else:
                    objective = target_scalar(output, ctx.spec).sum()
            before = sd.model_snapshot(model) if recompute else {}
            trace.phase = "backward"
            objective.backward()  # type: ignore[no-untyped-call]
            changes = sd.diff_snapshots(before, sd.model_snapshot(model)) if recompute else []
    finally:
        for handle in handles:
            handle.remove()
    grads = {
        n: None if p.grad is None else p.grad.detach().clone()
        for n, p in model.named_parameters()
        if p.requires_grad
    }
    del model, output, objective
    return Step(trace, grads, changes)


def run(ctx: CollectContext) -> CheckResult:
    """The ``recompute`` result (not_applicable without regions or declared modules)."""
    training = ctx.spec.training
    patterns = list(training.checkpoint) if training is not None else []
    deterministic = ctx.spec.device == "cpu" or torch.are_deterministic_algorithms_enabled()
    parameters: dict[str, Any] = {
        "checkpoint_patterns": patterns,
        "seed": ctx.settings.seed,
        "mode": "train",
        "objective": "loss" if ctx.spec.loss_fn and ctx.spec.labels is not None else "target",
        "deterministic_backend": deterministic,
        "comparison": "bit for bit" if deterministic else "2 x run-to-run deviation",
        "declared_wrapping": "torch.utils.checkpoint.checkpoint(use_reentrant=False)",
    }
    devices = [torch.device(ctx.spec.device).index or 0] if ctx.spec.device != "cpu" else []
    with torch.random.fork_rng(devices=devices):
        with_step = training_step(ctx, patterns, recompute=True)
        # random draws in the backward pass outside any region: a hand-written recomputation
        handwritten = any(c.phase == "backward" for c in with_step.trace.observer.random)
        if not with_step.trace.regions and not patterns and not handwritten:
            return CheckResult(
                check="recompute",
                status="not_applicable",
                parameters=parameters,
                reason=NO_REGIONS_REASON,
            )
        plain = training_step(ctx, patterns, recompute=False)
        noise = None
        if not deterministic:
            again = training_step(ctx, patterns, recompute=False)
            noise = compare_tensors(plain.grads, again.grads)[1]
    # run-to-run noise that is infinite (NaN or infinity in one run only) is no tolerance:
    # 2 * inf would pass any difference; such gradients must then match bit for bit
    finite_noise = noise is not None and math.isfinite(noise)
    rtol = 0.0
    if noise is not None and finite_noise:
        rtol = max(2.0 * noise, 8.0 * UNIT_ROUNDOFF[ctx.spec.precision])
    parameters |= {"rtol": rtol, "run_to_run_deviation": noise if finite_noise else None}
    gradients = comparison_item(
        "gradients with recomputation",
        plain.grads,
        with_step.grads,
        rtol,
        same="the parameter gradients with recomputation equal those without",
        differ="parameter gradients differ with recomputation",
        sides=("without recomputation", "with recomputation"),
    )
    if not with_step.trace.regions:  # only a hand-written recomputation: it cannot be undone
        gradients.status, gradients.metrics = "not_computed", {}
        gradients.message = "no torch.utils.checkpoint region to run without recomputation"
    items = [gradients, *_region_items(with_step, plain)]
    items += _pattern_items(with_step, patterns)
    return _result(with_step, plain, items, parameters)


def _region_items(w: Step, plain: Step) -> list[CheckItem]:
    """One item per region, per recomputed random operator and per state written again."""
    verdicts = sd.random_verdicts(w.trace.observer.random)
    writes = sd.writes_again(w.trace.observer.writes, w.state_changes)
    items = []
    for region in w.trace.regions.values():
        bad = [
            f"{op} @ {m or '<root>'}"
            for (r, m, op), ok in verdicts.items()
            if r == region.key and not ok
        ]
        written = [p for p, e in writes.items() if e["region"] == region.key]
        items.append(_region_item(region, plain.trace.regions.get(region.key), bad, written))
    return [*items, *sd.random_items(verdicts), *sd.write_items(writes)]


def _region_item(
    region: Region, plain: Region | None, bad_random: list[str], writes: list[str]
) -> CheckItem:
    figures = plain.figures if plain is not None else None
    kind = "reentrant" if region.reentrant else "non-reentrant"
    where = f"region {region.function} @ {region.module or '<root>'} ({kind})"
    status: ItemStatus = "pass"
    message = f"{where} recomputes the same operations"
    if bad_random or writes:
        rng = f"RNG state not restored, preserve_rng_state={region.preserve_rng_state}"
        what = [
            f"random operator {r} recomputed with other random numbers ({rng})" for r in bad_random
        ]
        what += [f"{w} written again during recomputation" for w in writes]
        status = "fail"
        message = f"{where}: recomputation is not the same computation: " + "; ".join(what)
    elif not region.recomputed:
        status, message = "warn", f"{where} was not recomputed during the backward pass"
    metrics: dict[str, Metric] = {
        "calls": region.figures.calls,
        "reentrant": region.reentrant,
        "preserve_rng_state": region.preserve_rng_state,
        "declared": region.declared,
        "recomputed": region.recomputed,
        "random_ops_not_restored": len(bad_random),
        "state_writes_during_recompute": len(writes),
    }
    if figures is not None:
        metrics |= _memory_metrics(figures)
    return CheckItem(
        subject=Subject(kind="module", module=region.module, name=region.function),
        status=status,
        metrics=metrics,
        message=message,
    )


def _memory_metrics(figures: Figures) -> dict[str, Metric]:
    """Saved-tensor bytes without and with checkpointing, and what recomputing costs."""
    return {
        "saved_bytes_without": sum(figures.saved.values()),
        "saved_bytes_with": sum(figures.inputs.values()),
        "saved_bytes_freed": figures.freed,
        "recompute_forward_s": figures.forward_s,
        "bytes_freed_per_recompute_s": figures.freed / figures.forward_s
        if figures.forward_s > 0
        else None,
    }


def _pattern_items(w: Step, patterns: list[str]) -> list[CheckItem]:
    return [
        CheckItem(
            subject=Subject(kind="module", name=pattern),
            status="warn",
            message=f"training.checkpoint pattern {pattern!r} matches no module that ran",
        )
        for pattern in patterns
        if not any(r.declared and fnmatch(r.module, pattern) for r in w.trace.regions.values())
    ]


def adaptive_plan(trace: Trace, regions: set[str], limit: int = 16) -> list[dict[str, Any]]:
    """Greedy advice: candidate modules by saved-tensor bytes freed per second of
    recomputation, best first, skipping one inside (or around) a module already chosen.
    Candidates are the modules that hold others (blocks, stages: a leaf alone frees little
    and costs a checkpoint's bookkeeping), or the leaves when the model has no such level."""
    called = {n: f for n, f in trace.modules.items() if n and f.freed > 0 and f.forward_s > 0}
    blocks = {n: f for n, f in called.items() if any(o.startswith(n + ".") for o in trace.modules)}
    ranked = sorted((blocks or called).items(), key=lambda c: (-c[1].freed / c[1].forward_s, c[0]))
    plan: list[dict[str, Any]] = []
    total_bytes, total_s = 0, 0.0
    for name, figures in ranked:
        if any(
            name.startswith(p["module"] + ".") or p["module"].startswith(name + ".") for p in plan
        ):
            continue
        total_bytes, total_s = total_bytes + figures.freed, total_s + figures.forward_s
        plan.append(
            {
                "module": name,
                "checkpointed": name in regions,
                **_memory_metrics(figures),
                "cumulative_bytes_freed": total_bytes,
                "cumulative_recompute_s": total_s,
            }
        )
        if len(plan) >= limit:
            break
    return plan


def _result(
    w: Step, plain: Step, items: list[CheckItem], parameters: dict[str, Any]
) -> CheckResult:
    kept = dict(w.trace.packed)
    for region in w.trace.regions.values():
        kept.update(region.figures.inputs)  # what the checkpoints hold instead
    without, with_ = sum(plain.trace.packed.values()), sum(kept.values())
    regions = [i for i in items if "calls" in i.metrics]
    parameters["adaptive_recompute"] = adaptive_plan(
        plain.trace, {r.module for r in w.trace.regions.values()}
    )
    summary: dict[str, Metric] = {
        "regions": len(regions),
        "regions_failed": sum(i.status == "fail" for i in regions),
        "grad_bit_exact": items[0].metrics.get("bit_exact"),
        "grad_max_relative_deviation": items[0].metrics.get("max_relative_deviation"),
        "random_ops_not_restored": sum(
            i.subject.kind == "operator" and i.status == "fail" for i in items
        ),
        "state_writes_during_recompute": sum("writes_recompute" in i.metrics for i in items),
        "saved_bytes_without": without,
        "saved_bytes_with": with_,
        "saved_bytes_freed": without - with_,
        "extra_forward_s": sum(r.figures.forward_s for r in plain.trace.regions.values()),
        "failed": sum(i.status == "fail" for i in items),
    }
    return CheckResult(
        check="recompute", status="computed", parameters=parameters, summary=summary, items=items
    )
