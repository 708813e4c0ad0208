"""Collecting evidence: profile every operator of a model and run every check.

:func:`collect` is the orchestrator. It loads the spec, fixes the runtime (threads, and on
CUDA the deterministic-algorithm flags), runs the reference capture that fills
``CollectContext.operators``, then each check runner of :data:`CHECK_RUNNERS` in order, and
assembles :class:`attest.evidence.model.Evidence`: artifact digests, the environment and
determinism envelope, model-level metrics, per-operator rows, the per-module roll-up,
``@attest.unstable_grad`` annotations and every check's result.

A runner is ``"module:function"`` (imported lazily) or a callable taking a
:class:`~attest.collection.context.CollectContext` and returning ``list[CheckResult]``. A runner
whose module is not in this build reports its checks as ``not_implemented``; a runner that
raises reports ``error`` naming where. Neither ever passes, and neither stops the others.

Example::

    from attest.collection import collect
    evidence = collect("examples/digits/attest.yaml", out="evidence.json")
    print(evidence.checks["determinism"].summary)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from attest._version import __version__
from attest.collection.budget import BudgetPlanner, phase_units
from attest.collection.budget_calibration import calibrate
from attest.collection.context import CheckSettings, CollectContext, LoadedSpec, frozen_heap
from attest.collection.parallel import operators_digest
from attest.collection.preflight import defer_float64, preflight
from attest.collection.runners import (
    CHECK_RUNNERS,
    RUNNER_CHECKS,
    Runner,
    capture_and_run,
    completed,
    measure_capture,
    phase_name,
    reseed,
    run_checks,
    unit_seconds,
)
from attest.collection.workdir import Resume, WorkFolder, default_work_dir, identity
from attest.core.progress import plan_message, step_message
from attest.errors import AttestError, InputError
from attest.evidence.model import CHECK_IDS, CheckResult, Evidence, PhaseRecord

__all__ = [
    "CHECK_RUNNERS",
    "RUNNER_CHECKS",
    "Runner",
    "capture_and_run",
    "collect",
    "phase_name",
    "reseed",
]


def collect(
    spec: str | Path | LoadedSpec,
    *,
    settings: CheckSettings | None = None,
    out: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    runners: list[Runner] | None = None,
    output_dir: str | Path | None = None,
    budget_s: float | None = None,
    workers: int = 1,
    ray_address: str | None = None,
    work_dir: str | Path | None = None,
    resume: Resume = False,
    budget_floors: dict[str, Any] | None = None,
    started: float | None = None,
) -> Evidence:
    """Profile the model of ``spec`` and run every check; return (and optionally write) evidence.

    ``spec`` is a path to ``attest.yaml`` or an already loaded spec. ``progress`` receives
    short stage descriptions, some with step counts (:mod:`attest.core.progress` writes and reads
    them; the command line shows them on a terminal). ``runners``
    replaces :data:`CHECK_RUNNERS` (tests use it to run a subset). ``output_dir`` is where the
    export check writes model.onnx and the probe bundle (default: a new temporary folder; the
    evidence records where). A model that raises gives
    evidence saying where (``Evidence.model_failure`` and ``error`` results), not an
    exception, but a model that cannot run one forward and backward of its probe in float32
    and float64 at all raises :class:`~attest.errors.CollectError` before any check
    (:mod:`attest.collection.preflight`); a spec that cannot be loaded raises
    :class:`~attest.errors.AttestError`.
    ``workers`` > 1 splits the check runners' independent pieces (gradcheck's operator
    groups, IG's input groups and randomization stages, the determinism repeats...) over that
    many processes (Ray tasks on the cluster at ``ray_address`` when given;
    :mod:`attest.collection.parallel`).
    ``work_dir`` (default: ``.attest-work/`` beside ``out``) keeps each finished phase;
    ``resume`` reuses the phases there (``"auto"``: those that match, else starts over;
    :mod:`attest.collection.workdir`).
    ``budget_s`` (default: the spec's ``budget:``) plans the work to that many seconds, counted
    from ``started`` (a ``time.perf_counter()`` reading; default: now), after a calibration on
    the model, or raises :class:`~attest.errors.InputError` at once, naming the smallest budget
    that meets the floors (``budget_floors``: the least work per setting a policy requires;
    :mod:`attest.collection.budget`).
    """
    from attest.collection import rows
    from attest.collection import runtime_info as environment
    from attest.core.io import atomic_write_json
    from attest.spec import load_spec

    loaded = spec if isinstance(spec, LoadedSpec) else load_spec(spec)
    _refuse_outputs_inside(loaded, out, output_dir)
    settings = settings or CheckSettings()
    budget_s = budget_s if budget_s is not None else loaded.budget_s
    order = list(CHECK_RUNNERS if runners is None else runners)
    _refuse_workers_with(workers, budget_s, order)
    folder = rows.folder_record(loaded) if loaded.folder else None  # hashed before any check
    work_dir = _work_dir(work_dir, out, resume, budget_s, workers)
    if budget_s is not None:  # the plan lowers settings: on copies, never the caller's objects
        loaded = dataclasses.replace(loaded)
        settings = dataclasses.replace(settings)
    started = time.perf_counter() if started is None else started
    if progress is not None:
        progress(f"loaded {loaded.name} {loaded.version}")
    with environment.runtime(loaded, settings) as envelope, frozen_heap():
        ctx = CollectContext(
            spec=loaded,
            settings=settings,
            output_dir=Path(output_dir) if output_dir is not None else None,
            progress=progress,
        )
        artifacts = rows.artifact_digests(loaded)
        work = _open_work(work_dir, resume, artifacts, settings, order, envelope, progress)
        phases, preflight_s = _preflight_and_capture(ctx, work, order, workers, budget_s)
        planner = None
        if workers != 1:
            from attest.collection.parallel import run_parallel

            def run_here(names: list[str]) -> list[CheckResult]:
                found = run_checks(ctx, list(names), progress, phases, fill_missing=False)
                return list(found.values())

            produced = run_parallel(
                ctx, [str(r) for r in order], workers, phases, ray_address=ray_address,
                run_here=run_here, progress=progress,
            )  # fmt: skip
            checks = completed({r.check: r for r in produced})
        else:
            if budget_s is not None and ctx.profiler.profile is not None:
                planner = _budget_planner(
                    ctx, order, budget_s, started, budget_floors, phases[0], preflight_s, progress
                )
            if progress is not None and ctx.profiler.profile is not None:
                progress(_plan(ctx, order[len(work.saved) if work else 0 :], planner))  # to run
            checks = run_checks(ctx, order, progress, phases, planner, work=work)
        if progress is not None:
            progress(step_message(len(CHECK_IDS), len(CHECK_IDS), "assembling the evidence"))
        profile = ctx.profiler.profile
        assert profile is not None
        evidence = Evidence(
            tool_version=__version__,
            created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            model=rows.model_section(loaded, folder),
            artifacts=artifacts,
            environment=envelope,
            model_metrics=rows.model_metrics(profile, checks),
            operators=rows.operator_rows(profile, ctx, envelope["target"]),
            checks=checks,
            annotations=rows.model_annotations(ctx),
            model_failure=rows.failure_of(profile),
            targets=[envelope["target"]],
            export=ctx.export,
            phases=phases,
            budget=planner.record(ctx.settings, ctx.spec) if planner is not None else None,
            compile=rows.compile_record(loaded),
        )
        evidence.modules = rows.module_rows(evidence.operators, evidence.annotations)
        _attach_attributions(ctx, evidence)
    if out is not None:
        atomic_write_json(out, evidence.model_dump(mode="json"))
    if work is not None:  # the evidence is whole: its phases need no resuming any more
        work.clean()
    return evidence


# The model folder's manifest is hashed in ``collect()`` before any check runs: certify hashes
# it again and refuses a folder that changed during the collect.


def _refuse_outputs_inside(
    loaded: LoadedSpec, out: str | Path | None, output_dir: str | Path | None
) -> None:
    """Nothing, not even a folder, is written inside a MONAI bundle or model folder."""
    from attest.spec.source import refuse_inside

    refuse_inside(
        loaded.folder,
        {
            "evidence": Path(out) if out else None,
            "output folder": Path(output_dir) if output_dir else None,
        },
    )


def _refuse_workers_with(workers: int, budget_s: float | None, order: list[Runner]) -> None:
    if workers != 1 and (budget_s is not None or not all(isinstance(r, str) for r in order)):
        raise InputError(
            "--workers cannot go with a --budget (or with runners that are not importable names)",
            hint="drop --budget, or collect in one process",
        )


def _open_work(
    work_dir: Path | None,
    resume: Resume,
    artifacts: dict[str, dict[str, Any]],
    settings: CheckSettings,
    order: list[Runner],
    envelope: dict[str, Any],
    progress: Callable[[str], None] | None,
) -> WorkFolder | None:
    """This collect's work folder (None: none kept); one made from other inputs is refused
    here, before any work."""
    if work_dir is None:
        return None
    names = [phase_name(r) for r in order]
    ident = identity(artifacts, settings, names, envelope)
    return WorkFolder(work_dir, ident, names, resume=resume, progress=progress)


def _preflight_and_capture(
    ctx: CollectContext,
    work: WorkFolder | None,
    order: list[Runner],
    workers: int,
    budget_s: float | None,
) -> tuple[list[PhaseRecord], list[float]]:
    """The preflight, then the reference capture measured as the first phase (a resumed
    collect's work folder then checks it recorded the killed collect's operators); the phase
    records and the preflight's pass times (the budget's calibration reads them). The float64
    pass is left to the fidelity pass where that runs next (:func:`defer_float64`)."""
    resumed = work is not None and bool(work.saved)  # phases of a killed collect, read back
    progress = ctx.progress
    if progress is not None:
        progress(step_message(0, len(CHECK_IDS), "capturing operators"))
    # Run 0 is the preflight's pass in the spec's precision: a model that cannot run its probe
    # fails there, and only then does the preflight run that precision again, plainly, to say
    # where (a CollectError, exit 2); the float64 pass follows (attest.collection.preflight).
    try:
        phases = [measure_capture(ctx)]
    except AttestError:
        raise
    except Exception:  # building the model, say: the preflight says where, else it goes on up
        preflight(ctx, [ctx.spec.precision])
        raise
    profile = ctx.profiler.profile
    if profile is not None and profile.failure is not None:
        preflight(ctx, [ctx.spec.precision])
    preflight_s: list[float] = []
    if not defer_float64(ctx, order, workers=workers, budget_s=budget_s, resumed=resumed):
        if progress is not None:
            progress(step_message(0, len(CHECK_IDS), "preflight: the probe in float64"))
        preflight_s = preflight(ctx, ["float64"])  # a model that cannot stops here (exit 2)
    if work is not None:
        work.bind_operators(operators_digest(ctx))
    return phases, preflight_s


def _work_dir(
    work_dir: str | Path | None,
    out: str | Path | None,
    resume: Resume,
    budget_s: float | None,
    workers: int,
) -> Path | None:
    """The work folder of this collect (None: none kept); see :mod:`attest.collection.workdir`."""
    if resume is True and work_dir is None and out is None:
        raise InputError("resuming needs the work folder of the killed collect (work_dir)")
    if budget_s is not None or workers != 1:
        if resume is True:
            raise InputError(
                "a collect planned to a budget (--budget, or the spec's budget:) or split over "
                "--workers cannot be resumed: its phases depend on the time or the processes "
                "the killed collect had",
                hint="collect again without --resume",
            )
        return None  # nothing a resume could use: no work folder
    if work_dir is not None:
        return Path(work_dir)
    return default_work_dir(out) if out is not None else None


def _budget_planner(
    ctx: CollectContext,
    order: list[Runner],
    budget_s: float,
    started: float,
    floors: dict[str, Any] | None,
    capture: PhaseRecord,
    preflight_s: list[float],
    progress: Callable[[str], None] | None,
) -> BudgetPlanner:
    """Calibrate on the model (inside the budget), then refuse the budget or make the plan;
    the profiler's repeats ask the planner before each run above the floor."""
    if progress is not None:
        progress(step_message(0, len(CHECK_IDS), "calibrating the budget on the model"))
    calibration = calibrate(
        ctx, capture_s=capture.duration_s, float64_s=preflight_s[-1] if preflight_s else 0.0
    )
    planner = BudgetPlanner(
        limit_s=budget_s,
        calibration=calibration,
        started=started,
        floors=dict(floors or {}),
        progress=progress,
    )
    planner.start([phase_name(r) for r in order], ctx.settings, ctx.spec)
    ctx.extras["budget_planner"] = planner
    return planner


def _plan(ctx: CollectContext, order: list[Runner], planner: BudgetPlanner | None) -> str:
    """The progress plan: each phase still to run with its planned cost (the budget planner's
    estimate at the settings it runs at), and the seconds of one pass (the calibration's when
    there is a budget, else run 0's forward+backward)."""
    assert ctx.profiler.profile is not None
    names = [phase_name(r) for r in order]
    calibration = planner.calibration if planner is not None else None
    units = {name: phase_units(name, ctx.settings, ctx.spec, calibration) for name in names}
    unit_s = calibration.unit_s if calibration else unit_seconds(ctx.profiler.profile)
    return plan_message(units, unit_s)


def _attach_attributions(ctx: CollectContext, evidence: Evidence) -> None:
    if ctx.ig.attributions is not None:  # stored by the IG checks
        evidence.attributions = ctx.ig.attributions
