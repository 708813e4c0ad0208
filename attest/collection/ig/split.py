"""The integrated-gradient checks' runner in pieces (:mod:`attest.collection.pieces`).

- ``inputs/NNN``: IG of one contiguous group of probe inputs (at most :data:`GROUPS` groups,
  fixed by the probe, never by the number of workers); the join concatenates the groups'
  results (:func:`merge_results`) and reads ``ig_completeness``, ``ig_convergence``,
  ``ig_baseline`` and ``ig_monotonicity`` off them. A model's rounding can depend on the batch
  it runs in, so one process computes the groups one by one too: the groups are the unit
  either way, and their attributions are the same bits wherever they are computed;
- ``randomization/NN``: stage NN of Adebayo et al.'s cascade: 0 the trained model's maps,
  NN > 0 the maps after the top layers up to the NN-th checkpoint are re-initialized (each
  layer seeded by its place in the cascade, so a stage is rebuilt from a fresh model without
  the stages before it);
- ``repeats``: ``ig_determinism``'s repeated batch of path points (its repeats stay in one
  process: they compare a process with itself).

Every piece differentiates the same target classes (:func:`target_classes`): the spec's class,
the probe's labels, or each input's argmax as the reference capture computed it (all
processes capture the same bits), so no piece waits for another's classes.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CheckSettings, CollectContext, precision_dtype, spec_threads
from attest.collection.ig.analysis import cascade_layers, randomize_layer
from attest.collection.ig.attribution import (
    IGResult,
    integrated_gradients,
    share_sample_bytes,
)
from attest.collection.ig.baselines import call_baseline
from attest.collection.ig.evaluator import argmax_classes, eval_mode
from attest.collection.ig.fixed import fixed_rule_maps
from attest.collection.ig.path_checks import checkpoints, determinism
from attest.collection.pieces import Piece

__all__ = [
    "GROUPS",
    "Prepared",
    "effective_tolerance",
    "input_groups",
    "merge_results",
    "pieces",
    "prepare",
    "run_piece",
    "target_classes",
]

# At most this many input groups: each is one IG computation of a few inputs.
GROUPS = 8
# The integrand (the model's gradient) is computed in the deployed precision, so completeness
# cannot be asked of it much finer than that precision's unit roundoff: the checks' tolerance
# is at least this many eps (bfloat16: 2 * 2^-7 = 1.6 %; float16 0.2 %; float32 2.4e-7).
PRECISION_FLOOR_EPS = 2.0


def effective_tolerance(tolerance: float, precision: str) -> float:
    """The completeness tolerance the checks apply: the setting, floored at the precision."""
    return max(tolerance, PRECISION_FLOOR_EPS * float(torch.finfo(precision_dtype(precision)).eps))


@dataclass
class Prepared:
    """What every IG piece starts from: the settings (tolerance floored at the precision), the
    inputs analysed, their labels, baselines (float64) and target classes."""

    settings: CheckSettings
    inputs: torch.Tensor
    labels: torch.Tensor | None
    baseline: torch.Tensor
    classes: torch.Tensor


def prepare(ctx: CollectContext) -> Prepared | str:
    """The pieces' common start, or why the IG checks cannot be computed (not an error)."""
    spec = ctx.spec
    settings = dataclasses.replace(
        ctx.settings, ig_tolerance=effective_tolerance(ctx.settings.ig_tolerance, spec.precision)
    )
    inputs = ctx.inputs()
    labels = spec.labels
    if settings.ig_max_inputs is not None:
        inputs = inputs[: settings.ig_max_inputs]
        labels = None if labels is None else labels[: settings.ig_max_inputs]
    if spec.target == "label" and labels is None:
        return "target is 'label' but the probe has no 'target' tensor"
    kind = None if spec.call else spec.baseline  # named inputs: each input's own baseline
    baseline = call_baseline(spec.call, kind, inputs, seed=settings.seed)
    return Prepared(settings, inputs, labels, baseline, target_classes(ctx, inputs, labels))


def target_classes(
    ctx: CollectContext, inputs: torch.Tensor, labels: torch.Tensor | None
) -> torch.Tensor:
    """The class each input's F is read at: the spec's class, the label, or the argmax of the
    model's output as the reference capture computed it (a forward pass when there is none;
    once per process)."""
    n = int(inputs.shape[0])
    target = ctx.spec.target
    if isinstance(target, int) and not isinstance(target, bool):
        return torch.full((n,), target, dtype=torch.long)
    if target == "label":
        assert labels is not None
        return labels.detach().reshape(-1).to(torch.long).cpu()
    profile = ctx.profiler.profile
    captured = None if profile is None or profile.failure is not None else profile.reference
    if captured is not None and captured.classes is not None and captured.classes.numel() >= n:
        return captured.classes.detach().reshape(-1)[:n].to(torch.long).cpu()
    cached = ctx.extras.get("ig_classes")
    if cached is None or cached.shape[0] != n:
        model = ctx.fresh_model()
        with torch.no_grad(), eval_mode(model):
            cached = argmax_classes(model_output_tensor(model(inputs)))
        ctx.extras["ig_classes"] = cached
    return torch.as_tensor(cached)


def input_groups(n: int) -> list[tuple[int, int]]:
    """(start, end) of each contiguous input group: at most :data:`GROUPS`, sizes within one."""
    count = min(GROUPS, max(1, n))
    bounds = [round(g * n / count) for g in range(count + 1)]
    return [(bounds[g], bounds[g + 1]) for g in range(count)]


# Estimated costs in forward+backward units on resnet18 (docs/benchmarks.md: the adaptive path
# 25 F at a tolerance of 1e-3 from 32 samples, about 15 evaluations per input from the 5 of
# ig_steps' default, so about 11 F; ig_randomization 15 F over 4 stages, ig_determinism 3 F at
# 2 repeats): they only balance the workers.
_IG, _STAGE, _REPEAT = 11.0, 3.7, 1.5


def pieces(ctx: CollectContext) -> list[Piece]:
    """The input groups, the randomization stages (0: the trained model) and ``repeats``."""
    n = int(ctx.spec.inputs.shape[0])
    if ctx.settings.ig_max_inputs is not None:
        n = min(n, ctx.settings.ig_max_inputs)
    groups = input_groups(n)
    main = _IG * (1e-3 / ctx.settings.ig_tolerance) ** 0.25
    stages = max(1, ctx.settings.ig_randomization_max_layers)
    return [
        *(Piece(f"inputs/{g:03d}", main * (e - s) / max(1, n)) for g, (s, e) in enumerate(groups)),
        *(Piece(f"randomization/{j:02d}", _STAGE) for j in range(stages + 1)),
        Piece("repeats", _REPEAT * max(2, ctx.settings.ig_repeats)),
    ]


def run_piece(ctx: CollectContext, key: str) -> Any:
    """One piece's output (plain data); an exception is returned as its text."""
    say = ctx.progress if ctx.progress is not None else (lambda _text: None)
    with spec_threads(ctx.spec.threads):
        try:
            prepared = prepare(ctx)
            if isinstance(prepared, str):
                return None
            if key.startswith("inputs/"):
                index = int(key.partition("/")[2])
                if index == 0:
                    settings = prepared.settings
                    say(
                        f"integrated gradients: {settings.ig_method}, up to {settings.ig_max_steps} steps"
                    )
                started = time.perf_counter()
                result = _group(ctx, prepared, index)
                return {"result": result, "duration_s": time.perf_counter() - started}
            started = time.perf_counter()  # the piece's time counts in its check's duration_s
            if key.startswith("randomization/"):
                stage = int(key.partition("/")[2])
                if stage == 0:
                    say("integrated gradients: ig_randomization")
                maps = _stage(ctx, prepared, stage)
                if maps is not None:
                    maps["duration_s"] = time.perf_counter() - started
                return maps
            say("integrated gradients: ig_determinism")
            model = _model(ctx)
            checked = determinism(ctx, model, prepared.inputs, prepared.baseline,
                                  prepared.classes.numpy(), {})  # fmt: skip
            return {"result": checked, "duration_s": time.perf_counter() - started}
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}


def _model(ctx: CollectContext) -> nn.Module:
    """A fresh model; it takes the probe-step measurement of one this process already measured
    (activation memory and layout do not depend on the weights), so it spends no probe step."""
    model = ctx.fresh_model()
    donor = ctx.extras.get("ig_measured_model")
    if donor is not None:
        share_sample_bytes(donor, model)
    return model


def _group(ctx: CollectContext, prepared: Prepared, index: int) -> IGResult:
    start, end = input_groups(int(prepared.inputs.shape[0]))[index]
    settings = prepared.settings
    model = _model(ctx)
    result = integrated_gradients(
        model,
        prepared.inputs[start:end],
        target=prepared.classes[start:end],
        baseline=prepared.baseline[start:end],
        method=settings.ig_method,
        steps=settings.ig_steps,
        tolerance=settings.ig_tolerance,
        max_steps=settings.ig_max_steps,
        memory_budget_bytes=settings.ig_memory_budget_bytes,
        stall_halvings=settings.ig_stall_halvings,
        stop_on_steep=settings.ig_stop_on_steep,
        probe_batch=int(prepared.inputs.shape[0]),
    )
    ctx.extras.setdefault("ig_measured_model", model)
    return result


def _stage(ctx: CollectContext, prepared: Prepared, stage: int) -> dict[str, Any] | None:
    """Randomization stage ``stage``'s maps (k, features), or None past the last checkpoint."""
    settings = prepared.settings
    k = max(1, min(settings.ig_randomization_inputs, int(prepared.inputs.shape[0])))
    x, b = prepared.inputs[:k], prepared.baseline[:k]
    model = _model(ctx)
    names = ctx.extras.get("ig_cascade")
    if names is None:  # the cascade's order: one forward pass, once per process
        names = [name for name, _ in cascade_layers(model, x[:1])]
        ctx.extras["ig_cascade"] = names
    if not names:
        return {"layers": []}
    stops = checkpoints(len(names), settings)
    if stage > len(stops):
        return None
    stop = 0 if stage == 0 else stops[stage - 1]
    modules = {name or "<root>": module for name, module in model.named_modules()}
    for j in range(stop):
        randomize_layer(modules[names[j]], seed=settings.seed + j)
    steps = max(1, int(settings.ig_randomization_steps))
    maps = None
    if _draws_nothing(ctx):  # the maps alone: no forward pass for F(x), F(b)
        maps = fixed_rule_maps(model, x, prepared.classes[:k], b, _RULE, steps,
                               settings.ig_memory_budget_bytes)  # fmt: skip
    if maps is None:
        maps = integrated_gradients(
            model,
            x,
            target=prepared.classes[:k],
            baseline=b,
            method=_RULE,
            steps=steps,
            memory_budget_bytes=settings.ig_memory_budget_bytes,
            return_diagnostics=False,
        ).attributions
    return {"layers": names, "stop": stop, "maps": maps.reshape(k, -1).cpu().numpy()}


# The randomization stages' rule: coarse, fixed (docs/ig.md).
_RULE = "gausslegendre"


def _draws_nothing(ctx: CollectContext) -> bool:
    """Whether the model's forward draws no random numbers: run 0 (the same architecture in
    eval mode) ran to the end and called no ATen random operator. Only then can a stage leave
    out a forward pass without changing what the path's passes draw."""
    profile = ctx.profiler.profile
    if profile is None or profile.failure is not None or not profile.ops:
        return False
    return not any(measure.random for measure in profile.ops)


def merge_results(parts: list[IGResult]) -> IGResult:
    """The input groups' results as one result over all inputs, in group order (each level of
    a group's error curve names its inputs by their place in the whole probe)."""
    first = parts[0]
    offsets = np.cumsum([0] + [len(p.f_input) for p in parts])

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])

    curve = [
        {**level, "inputs": [int(i) + int(offset) for i in level["inputs"]]}
        for p, offset in zip(parts, offsets, strict=False)
        for level in p.error_curve
    ]
    model_info = dict(first.model_info)
    if "adaptive_recomputed_panels" in model_info:
        model_info["adaptive_recomputed_panels"] = sum(
            p.model_info.get("adaptive_recomputed_panels", 0) for p in parts
        )
    merged = dataclasses.replace(
        first,
        attributions=torch.cat([p.attributions for p in parts]),
        baseline=torch.cat([p.baseline for p in parts]),
        target_classes=None if first.target_classes is None else cat("target_classes"),
        error_curve=curve,
        path=_joined([p.path for p in parts]),
        panels=_joined([p.panels for p in parts]),
        local_error=None if first.local_error is None else cat("local_error"),
        error_scale=None if first.error_scale is None else cat("error_scale"),
        stalls=_joined([p.stalls for p in parts], [len(p.f_input) for p in parts]),
        model_info=model_info,
    )
    for name in (
        "f_input",
        "f_baseline",
        "attribution_sum",
        "completeness_abs_error",
        "completeness_rel_error",
        "steps_used",
        "evaluations",
        "converged",
    ):
        setattr(merged, name, cat(name))
    return merged


def _joined(lists: list[Any], sizes: list[int] | None = None) -> Any:
    """Per-input lists of the groups, concatenated (None when no group has one; a group
    without one, among groups that have, gives None per input)."""
    if all(part is None for part in lists):
        return None
    out: list[Any] = []
    for g, part in enumerate(lists):
        out += list(part) if part is not None else [None] * (sizes[g] if sizes else 0)
    return out
