"""The profiler's runner in pieces (:mod:`attest.collection.pieces`): the float64 fidelity pass,
each determinism repeat and the thread-count run.

``fidelity`` writes its figures into this process's profile, from which the evidence's
per-operator rows are built, so it runs here (``Piece.here``). A repeat (``repeat/NNN``) or the
thread-count run (``threads``) is plain data (:class:`~attest.collection.profile.repeats.ComparedRun`)
that the join counts into the profile in key order, as one process counts them one after
another.

A repeat computed in another process was compared with that process's own run 0. It stands for
a comparison with this process's run 0 only when the two are the same bits, so it carries the
digest of everything the comparison reads of its run 0 (:func:`reference_digest`); when the
digest differs from this process's (a backend whose run 0 is not reproducible across processes),
the join runs that repeat again here. The figures then are exactly one process's.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from attest.collection.context import CollectContext
from attest.collection.pieces import Piece
from attest.collection.preflight import float64_after_fidelity
from attest.collection.profile.measures import Profile
from attest.collection.profile.op_metrics import tensor_sha256
from attest.collection.profile.repeats import (
    apply_repeat,
    apply_threads,
    repeat_run,
    thread_run,
)
from attest.errors import AttestError
from attest.evidence.model import CheckResult

__all__ = ["join", "pieces", "reference_digest", "run_piece"]

# Estimated costs in forward+backward units, as bench_certify.py measured the profile phase
# on resnet18 (docs/benchmarks.md: 37 F with 19 repeats): they only balance the workers.
_FIDELITY, _REPEAT, _THREADS = 8.0, 1.3, 2.0


def _profile(ctx: CollectContext) -> Profile:
    profile = ctx.profiler.profile
    assert profile is not None, "the reference capture runs before the profiler's pieces"
    return profile


def pieces(ctx: CollectContext) -> list[Piece]:
    """``fidelity`` (here), then the repeats 1..R-1 and ``threads`` when run 0 succeeded."""
    profile = _profile(ctx)
    if profile.failure is not None:
        return [Piece("fidelity", _FIDELITY, here=True)]
    repeats = max(1, ctx.spec.repeats)
    planner = ctx.extras.get("budget_planner")
    if planner is not None:  # under a --budget the repeats go on while they fit
        repeats = max(1, planner.repeat_ceiling(ctx.spec))
    width = max(3, len(str(repeats - 1)))
    return [
        Piece("fidelity", _FIDELITY, here=True),
        # keys sort in run order however many runs (a thousand and more: wider numbers)
        *(Piece(f"repeat/{r:0{width}d}", _REPEAT) for r in range(1, repeats)),
        Piece("threads", _THREADS),
    ]


def run_piece(ctx: CollectContext, key: str) -> Any:
    """The fidelity pass (into this profile), or one compared run as data."""
    from attest.collection.profile.float64_pass import measure_fidelity

    profile = _profile(ctx)
    if key == "fidelity":
        if profile.failure is None:
            if ctx.progress is not None:
                ctx.progress("float64 fidelity")
            try:
                measure_fidelity(ctx, profile)
            except AttestError:
                raise
            except Exception:
                float64_after_fidelity(ctx, failed=True)  # the plain pass says where, if it can
                raise
            float64_after_fidelity(ctx, failed=profile.float64_failure is not None)
        return None
    if key == "threads":
        if ctx.progress is not None:
            ctx.progress("thread sensitivity")
        run = thread_run(ctx, profile)
    else:
        index = int(key.partition("/")[2])
        if not _budget_allows(ctx, index):
            return None  # above the floor and past the budget: the determinism check says so
        if ctx.progress is not None:
            ctx.progress(f"determinism run {index + 1}/{max(1, ctx.spec.repeats)}")
        run = repeat_run(ctx, profile, index)
    # a worker's run was compared with its own run 0: say which bits those were
    digest = reference_digest(ctx) if ctx.extras.get("part") is not None else None
    return {"run": run, "reference": digest}


def _budget_allows(ctx: CollectContext, index: int) -> bool:
    """Whether repeat ``index`` runs: always without a ``--budget``; with one, while the
    planner finds time for it and the phases after it (never below the floor; ``spec.repeats``
    follows the runs made, :mod:`attest.collection.budget`)."""
    planner = ctx.extras.get("budget_planner")
    if planner is None:
        return True
    return bool(planner.repeat_allowed(index, ctx.spec))


def join(ctx: CollectContext, outputs: dict[str, Any]) -> list[CheckResult]:
    """Count the repeats, then the thread-count run, into the profile; the profiler's checks."""
    from attest.collection.profile import results as checks

    profile = _profile(ctx)
    for key, output in outputs.items():
        if output is None:
            continue
        run = output["run"]
        if output["reference"] is not None and output["reference"] != reference_digest(ctx):
            run = run_piece(ctx, key)["run"]  # compared with other bits than ours: again here
        if key == "threads":
            apply_threads(profile, run)
        else:
            apply_repeat(profile, run)
    return checks.build_results(ctx, profile)


def reference_digest(ctx: CollectContext) -> str:
    """sha256 of what a compared run reads of run 0 (once per process): each operator's name,
    its outputs (allocations apart: their bytes are garbage, never compared), the gradients
    it computed and received, and the model's output and gradients."""
    cached = ctx.extras.get("reference_digest")
    if cached is not None:
        return str(cached)
    profile = _profile(ctx)
    h = hashlib.sha256()

    def add(t: torch.Tensor | None) -> None:
        if t is None:
            h.update(b"none;")
        else:
            tensor_sha256(t, h)

    for measure in profile.ops:
        h.update(f"{measure.op};{measure.uninitialized};".encode())
        for box in [] if measure.uninitialized else measure.outputs:
            add(box.value)
        for grads in (measure.grad_inputs, measure.grad_outputs):
            for ref in grads or []:
                add(None if ref is None else ref.value)
    reference = profile.reference
    add(reference.output)
    add(reference.input_grad)
    for name in sorted(reference.param_grads):
        h.update(name.encode())
        add(reference.param_grads[name])
    digest = h.hexdigest()
    ctx.extras["reference_digest"] = digest
    return digest
