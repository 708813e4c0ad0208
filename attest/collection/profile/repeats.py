"""The profiler's repeated runs (phases 3 and 4): every operator compared bitwise with run 0.

:func:`measure_repeats` (runs 1..R-1, determinism) and :func:`measure_thread_sensitivity` (one
run at another intra-op thread count) run the model again and again and compare every
operator's output and computed gradient with run 0 (the reference kept by the profiler),
under the lean :class:`~attest.collection.profile.repeat_capture.RepeatCapture` (that module
says what is compared and why, and how memory is counted). The first :data:`DETAILED_RUNS`
repeats also time each operator's backward and measure memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from attest.collection.capture.capture import CaptureObserver, _ModuleStack
from attest.collection.capture.run import ModelFailure, RunOutcome, run_model
from attest.collection.capture.spill import Pager
from attest.collection.context import CollectContext
from attest.collection.profile.compare_worker import QueuedComparison, spare_core
from attest.collection.profile.op_metrics import bits_equal
from attest.collection.profile.repeat_capture import (
    LiveBytes,
    RepeatCapture,
    RunComparison,
    is_view_op,
    storage_ptrs,
)

if TYPE_CHECKING:
    from attest.collection.profile.measures import OpMeasure, Profile

__all__ = [
    "DETAILED_RUNS",
    "ComparedRun",
    "LiveBytes",
    "RepeatCapture",
    "RunComparison",
    "allocated_bytes",
    "apply_repeat",
    "apply_threads",
    "attach_backward_times",
    "is_view_op",
    "measure_repeats",
    "measure_thread_sensitivity",
    "parameter_storages",
    "repeat_run",
    "storage_ptrs",
    "thread_run",
]


def parameter_storages(model: torch.nn.Module) -> set[int]:
    """Storage addresses of the model's parameters and buffers."""
    return storage_ptrs([*model.parameters(), *model.buffers()])


def attach_backward_times(ops: list[OpMeasure], backward_ns: dict[int, int]) -> None:
    """Append one run's backward time per operator to the operators' timings."""
    for op_id, ns in backward_ns.items():
        if op_id < len(ops):
            ops[op_id].backward_ns.append(ns)


def allocated_bytes(device: torch.device) -> int:
    """CUDA: bytes the caching allocator has handed out; 0 elsewhere."""
    return int(torch.cuda.memory_allocated(device)) if device.type == "cuda" else 0


def _outcome_matches(outcome: RunOutcome, reference: RunOutcome) -> bool:
    pairs = [(outcome.output, reference.output), (outcome.input_grad, reference.input_grad)]
    pairs += [(outcome.param_grads.get(n), g) for n, g in reference.param_grads.items()]
    for a, b in pairs:
        if (a is None) != (b is None):
            return False
        if a is not None and b is not None and not bits_equal(a, b):
            return False
    return outcome.failure is None and reference.failure is None


# The first DETAILED_RUNS repeats also time each operator's backward (autograd node pre and
# post hooks) and, on the CPU, track storage lifetimes for the memory figures (forward and
# backward deltas, their spread across runs, peak); later repeats only compare bits. A
# Python finalizer per tensor and two hooks per node cost more than a small model's own
# operators, and these figures are medians and spreads that a few runs establish.
DETAILED_RUNS = 3


@dataclass
class RunMemory:
    """One compared run's memory figures: forward and backward deltas, peak, fragmentation."""

    forward: int
    backward: int
    peak: int
    fragmentation: float | None = None


@dataclass
class ComparedRun:
    """What one run compared with run 0 found, as plain data (a repeat or the thread-count
    run): computed anywhere, applied to the profile by :func:`apply_repeat` /
    :func:`apply_threads` (the collect split over workers computes repeats in other processes,
    :mod:`attest.collection.profile.split`)."""

    exact: dict[int, bool]
    deviation: dict[int, float]
    origins: set[int]
    diverged_at: int | None
    ops: int
    failure: ModelFailure | None
    matches: bool  # output and every gradient equal to run 0's
    forward_ns: list[int] = field(default_factory=list)
    backward_ns: dict[int, int] = field(default_factory=dict)
    backward_wall_ns: int | None = None
    memory: RunMemory | None = None
    threads: tuple[int, int] | None = None  # the thread-count run: (configured, the other)
    nonfinite: dict[int, str] = field(default_factory=dict)  # NaN or inf in one run only


def _compare_run(
    ctx: CollectContext, profile: Profile, observer: RunComparison, *, detailed: bool = True
) -> ComparedRun:
    spec = ctx.spec
    x = ctx.inputs()
    cuda = x.device.type == "cuda"
    model = ctx.fresh_model()
    before = allocated_bytes(x.device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(x.device)
    preexisting = parameter_storages(model)
    preexisting.add(int(x.untyped_storage().data_ptr()))
    live = LiveBytes(preexisting) if detailed and not cuda else None
    observers: list[CaptureObserver] = [observer] if live is None else [observer, live]

    def capture(modules: _ModuleStack) -> RepeatCapture:
        return RepeatCapture(
            modules, profile.ops, observer, live, cuda_timing=cuda, time_backward=detailed
        )

    try:
        outcome = run_model(
            model,
            x,
            spec,
            observers,
            labels=spec.labels,
            classes=profile.reference.classes,
            seed=ctx.settings.seed,
            cuda_timing=cuda,
            memory_marks=cuda,
            capture_factory=capture,
            track_modules=False,
        )
    finally:
        observer.finish()  # a queued comparison's last calls (compare_worker)
    if outcome.failure is not None and observer.diverged_at is None:
        observer.diverged_at = len(outcome.ops)  # what was not reached was not compared
    run = ComparedRun(
        exact=dict(observer.exact),
        deviation=dict(observer.deviation),
        origins=set(observer.origins),
        diverged_at=observer.diverged_at,
        ops=len(outcome.ops),
        failure=outcome.failure,
        matches=outcome.failure is None and _outcome_matches(outcome, profile.reference),
        forward_ns=list(outcome.forward_ns),
        backward_ns=dict(outcome.backward_ns),
        backward_wall_ns=outcome.backward_wall_ns,
        nonfinite=dict(observer.nonfinite),
    )
    if outcome.failure is not None:
        return run
    if cuda and outcome.memory_marks:
        after_forward, after_backward = outcome.memory_marks
        stats = torch.cuda.memory_stats(x.device)
        reserved = int(stats.get("reserved_bytes.all.peak", 0))
        run.memory = RunMemory(
            after_forward - before,
            after_backward - after_forward,
            int(torch.cuda.max_memory_allocated(x.device)) - before,
            1.0 - int(stats.get("allocated_bytes.all.peak", 0)) / reserved if reserved else None,
        )
    elif live is not None and "forward_done" in live.marks and "backward_done" in live.marks:
        run.memory = RunMemory(
            live.marks["forward_done"],
            live.marks["backward_done"] - live.marks["forward_done"],
            live.peak,
        )
    return run


def _apply_memory(profile: Profile, memory: RunMemory | None) -> None:
    if memory is None:
        return
    profile.forward_memory_bytes.append(memory.forward)
    profile.backward_memory_bytes.append(memory.backward)
    if memory.fragmentation is not None:
        profile.fragmentation = max(profile.fragmentation or 0.0, memory.fragmentation)
    profile.peak_memory_bytes = max(profile.peak_memory_bytes or 0, memory.peak)


def repeat_run(ctx: CollectContext, profile: Profile, run_index: int) -> ComparedRun:
    """Repeat ``run_index`` (1..R-1) compared bitwise with the reference; the first
    :data:`DETAILED_RUNS` also time each backward and measure memory; the others compare on
    a core torch is not using, where there is one (:mod:`attest.collection.profile.compare_worker`)."""
    detailed = run_index <= DETAILED_RUNS
    if not detailed and spare_core():
        queued = QueuedComparison(profile.ops, Pager(ctx.release_spill_pages))
        run = _compare_run(ctx, profile, queued, detailed=False)
        if not queued.conflict:
            return run
        # a compared tensor was written before it was read: the figures are not the run's
    observer = RunComparison(profile.ops, Pager(ctx.release_spill_pages))
    return _compare_run(ctx, profile, observer, detailed=detailed)


def apply_repeat(profile: Profile, run: ComparedRun) -> None:
    """Count one repeat into the profile's per-operator determinism figures."""
    profile.runs += 1
    if run.matches:
        profile.model_exact_runs += 1
    if run.diverged_at is not None or run.ops != len(profile.ops):
        profile.sequence_changed_runs += 1
    for measure in profile.ops:
        measure.runs_compared += 1
        if run.diverged_at is not None and measure.id >= run.diverged_at:
            measure.max_deviation = math.inf
            continue
        if measure.id in run.origins:
            measure.origin_runs += 1
        if measure.id in run.nonfinite and measure.repeat_nonfinite is None:
            measure.repeat_nonfinite = run.nonfinite[measure.id]
        if run.exact.get(measure.id, True):
            measure.runs_exact += 1
        else:
            measure.max_deviation = max(
                measure.max_deviation, run.deviation.get(measure.id, math.inf)
            )
        if measure.id < len(run.forward_ns):
            measure.forward_ns.append(run.forward_ns[measure.id])
    if run.failure is None:
        _apply_memory(profile, run.memory)
    attach_backward_times(profile.ops, run.backward_ns)
    profile.model_forward_ns.append(sum(run.forward_ns))
    if run.backward_ns:  # the lean repeats time no operator's backward: no sum to add
        profile.model_backward_ns.append(sum(run.backward_ns.values()))
    if run.backward_wall_ns is not None:
        profile.model_backward_wall_ns.append(run.backward_wall_ns)


def measure_repeats(
    ctx: CollectContext, profile: Profile, progress: Callable[[str], None] | None = None
) -> None:
    """Phase 3: runs 1..R-1 compared bitwise with the reference, per operator."""
    repeats = max(1, ctx.spec.repeats)
    for run_index in range(1, repeats):
        if progress is not None:
            progress(f"determinism run {run_index + 1}/{repeats}")
        apply_repeat(profile, repeat_run(ctx, profile, run_index))


def thread_run(ctx: CollectContext, profile: Profile) -> ComparedRun:
    """One run at another intra-op thread count (1, or 2 when 1 is configured), compared
    bitwise with run 0; memory measured only when no repeat measures it (repeats: 1)."""
    configured = torch.get_num_threads()
    other = 1 if configured != 1 else 2
    torch.set_num_threads(other)
    try:
        detailed = max(1, ctx.spec.repeats) <= 1
        observer = RunComparison(profile.ops, Pager(ctx.release_spill_pages))
        run = _compare_run(ctx, profile, observer, detailed=detailed)
    finally:
        torch.set_num_threads(configured)
    run.threads = (configured, other)
    return run


def apply_threads(profile: Profile, run: ComparedRun) -> None:
    """The thread-count run's figures, per operator."""
    profile.thread_counts = run.threads
    profile.thread_failure = run.failure
    if run.failure is not None:
        return
    _apply_memory(profile, run.memory)
    profile.thread_model_changed = not run.matches
    for measure in profile.ops:
        if run.diverged_at is not None and measure.id >= run.diverged_at:
            measure.thread_changed = True
            measure.thread_deviation = math.inf
            continue
        changed = not run.exact.get(measure.id, True)
        measure.thread_changed = changed
        measure.thread_deviation = run.deviation.get(measure.id, 0.0) if changed else 0.0


def measure_thread_sensitivity(ctx: CollectContext, profile: Profile) -> None:
    """Phase 4: one run at another intra-op thread count, compared bitwise with run 0."""
    apply_threads(profile, thread_run(ctx, profile))
