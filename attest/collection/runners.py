"""The check runners of a collect and how one phase runs (shared by :func:`attest.collection.collect`
and the worker processes of :mod:`attest.collection.parallel`).

A runner is ``"module:function"`` (imported lazily) or a callable taking a
:class:`~attest.collection.context.CollectContext` and returning ``list[CheckResult]``. A runner
whose module is not in this build reports its checks as ``not_implemented``; a runner that
raises reports ``error`` naming where. Neither ever passes, and neither stops the others. Every
runner starts from the same random state (:func:`reseed`) and is measured as one phase
(wall, CPU, peak RSS).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from attest.collection.budget import BudgetPlanner
from attest.collection.checkpointing import checkpointing_off
from attest.collection.context import CheckSettings, CollectContext, LoadedSpec
from attest.collection.phase_state import phase_state, restore_state
from attest.collection.pieces import in_key_order, join_split, reseed, split_of
from attest.collection.resources import (
    PhaseMeter,
    PhaseUsage,
    current_rss,
    is_out_of_memory,
    out_of_memory_error,
    release_memory,
    require_headroom,
)
from attest.collection.workdir import WorkFolder
from attest.core.progress import step_message
from attest.errors import AttestError
from attest.evidence.model import (
    CHECK_IDS,
    EXPORT_CHECKS,
    GRADIENT_CHECKS,
    IG_CHECKS,
    PROFILE_CHECKS,
    TOPOLOGY_CHECKS,
    TRAINING_CHECKS,
    CheckResult,
    PhaseRecord,
)

__all__ = [
    "CHECK_RUNNERS",
    "RUNNER_CHECKS",
    "PieceFailure",
    "Runner",
    "capture_and_run",
    "completed",
    "end_of_phase",
    "join_pieces",
    "measure_capture",
    "phase_name",
    "reseed",
    "run_checks",
    "run_pieces",
    "unit_seconds",
]


Runner = str | Callable[[CollectContext], list[CheckResult]]

# Order matters: topology first (the others read ctx.topology_ok), the profiler's own checks
# next, then the gradient checks and the integrated-gradient checks.
CHECK_RUNNERS: list[Runner] = [
    "attest.collection.profile.topology:run",
    "attest.collection.profile.profiler:run",
    "attest.collection.gradients.runner:run",
    "attest.collection.ig.checks:run",
    "attest.collection.export.check:run",
    "attest.collection.training.runner:run",
]

# The check ids each named runner produces: reported as not_implemented when its module is
# missing, as error when it raises.
RUNNER_CHECKS: dict[str, tuple[str, ...]] = {
    "attest.collection.profile.topology:run": TOPOLOGY_CHECKS,
    "attest.collection.profile.profiler:run": PROFILE_CHECKS,
    "attest.collection.gradients.runner:run": GRADIENT_CHECKS,
    "attest.collection.ig.checks:run": IG_CHECKS,
    "attest.collection.export.check:run": EXPORT_CHECKS,
    "attest.collection.training.runner:run": TRAINING_CHECKS,
}


def _runner_name(runner: Runner) -> str:
    if isinstance(runner, str):
        return runner
    module = getattr(runner, "__module__", "?")
    return f"{module}:{getattr(runner, '__qualname__', repr(runner))}"


def _resolve(runner: Runner) -> Callable[[CollectContext], list[CheckResult]] | str:
    """The callable of a runner, or a string saying why the module is not in this build."""
    if not isinstance(runner, str):
        return runner
    module_name, _, attr = runner.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            return f"{module_name} is not part of this build"
        raise
    func = getattr(module, attr or "run", None)
    if not callable(func):
        return f"{module_name} has no runner {attr or 'run'}()"
    return func  # type: ignore[no-any-return]


def _error_results(check_ids: tuple[str, ...], reason: str) -> list[CheckResult]:
    return [CheckResult(check=c, status="error", reason=reason) for c in check_ids]  # type: ignore[arg-type]


def phase_name(runner: Runner) -> str:
    """The phase a runner is recorded under: ``gradients`` for attest.collection.gradients..."""
    name = _runner_name(runner)
    module = name.partition(":")[0]
    parts = module.split(".")
    if module == "attest.collection.profile.topology":
        return "topology"
    if len(parts) >= 3 and parts[:2] == ["attest", "collection"]:
        return {"profile": "profile"}.get(parts[2], parts[2])
    return name


def run_checks(
    ctx: CollectContext,
    runners: list[Runner],
    progress: Callable[[str], None] | None,
    phases: list[PhaseRecord],
    planner: BudgetPlanner | None = None,
    *,
    fill_missing: bool = True,
    work: WorkFolder | None = None,
) -> dict[str, CheckResult]:
    """Every runner in order, each measured as one phase; with a ``work`` folder, a phase it
    holds is reused (its results, record and hand-on state put back) and each phase run is
    saved there as it finishes (:mod:`attest.collection.workdir`)."""
    results: dict[str, CheckResult] = {}
    for index, runner in enumerate(runners):
        name = _runner_name(runner)
        saved = work.reuse(index, phase_name(runner), ctx.output_dir) if work else None
        if saved is not None:
            restore_state(ctx, saved.phase, saved.state)
            phases.append(saved.record)
            for result in saved.results:
                results.setdefault(result.check, result)
            if progress is not None:
                done = sum(1 for check_id in CHECK_IDS if check_id in results)
                progress(step_message(done, len(CHECK_IDS), f"checks: {saved.phase} reused"))
            continue
        if planner is not None:  # plan again with the time actually left
            planner.plan([phase_name(r) for r in runners[index:]], ctx.settings, ctx.spec)
        if phases and phases[0].phase == "capture":
            _require_headroom(phases[0], phase_name(runner))
        if progress is not None:  # steps: the check ids finished so far, of all of them
            done = sum(1 for check_id in CHECK_IDS if check_id in results)
            progress(step_message(done, len(CHECK_IDS), f"checks: {phase_name(runner)}"))
        if work is not None:
            work.begin(phase_name(runner))
        # the training checks run checkpointed regions as the model does; the others plainly
        plain = (
            contextlib.nullcontext() if phase_name(runner) == "training" else checkpointing_off()
        )
        with PhaseMeter() as meter, plain:
            produced = _run_one(ctx, runner, name)
            end_of_phase(ctx)
        usage = meter.usage
        if planner is not None:  # how it compared with its estimate corrects the later ones
            planner.finished(phase_name(runner), usage.duration_s, ctx.spec)
        record = _phase_record(phase_name(runner), [r.check for r in produced], usage)
        phases.append(record)
        for result in produced:
            if result.duration_s is None:
                result.duration_s = round(usage.duration_s / max(1, len(produced)), 6)
            if result.peak_rss_bytes is None:
                result.peak_rss_bytes = usage.peak_rss_bytes
            results.setdefault(result.check, result)
        if work is not None:
            phase = phase_name(runner)
            work.save(index, phase, produced, record, partial(phase_state, ctx, phase))
    if planner is not None and progress is not None:  # how each phase compared with its plan
        progress(planner.account.summary())
    return completed(results) if fill_missing else results


def completed(results: dict[str, CheckResult]) -> dict[str, CheckResult]:
    """Every check id, in order; one no runner produced is ``not_implemented`` (never a pass)."""
    for check_id in CHECK_IDS:
        results.setdefault(
            check_id,
            CheckResult(
                check=check_id,  # type: ignore[arg-type]
                status="not_implemented",
                reason="no check runner in this build produces this check",
            ),
        )
    return {check_id: results[check_id] for check_id in CHECK_IDS}


def _run_one(ctx: CollectContext, runner: Runner, name: str) -> list[CheckResult]:
    """One runner's results; an import failure, a missing module or a raising runner gives
    its expected checks as error / not_implemented results (never a pass)."""
    expected = RUNNER_CHECKS.get(name, ())
    try:
        func = _resolve(runner)
    except Exception as exc:
        return _error_results(
            expected, f"importing runner {name} raised {type(exc).__name__}: {exc}"
        )
    if isinstance(func, str):
        return [
            CheckResult(check=check_id, status="not_implemented", reason=func)  # type: ignore[arg-type]
            for check_id in expected
        ]
    try:
        reseed(ctx.settings.seed)
        produced = func(ctx)
        if not isinstance(produced, list) or not all(isinstance(r, CheckResult) for r in produced):
            raise TypeError(
                f"runner returned {type(produced).__name__}, expected list[CheckResult]"
            )
    except AttestError:
        raise
    except Exception as exc:
        if is_out_of_memory(exc):  # a clear error, not a check 'error' the user must decode
            raise out_of_memory_error(exc, f"the {phase_name(runner)} checks") from None
        return _error_results(expected, f"runner {name} raised {_raised(exc)}")
    return produced


def end_of_phase(ctx: CollectContext) -> None:
    """What a phase built and dropped goes before the next one starts: the collector runs
    (autograd graphs in reference cycles), glibc gives the freed heap back
    (:func:`~attest.collection.resources.release_memory`) and run 0's spill pages read are
    given back. Without the trim, the heap a phase freed stayed resident into the next one:
    on a SwinUNETR (``feature_size=12``, 64^3) 2.09 GiB at the gradient phase's start against
    0.66 GiB after a trim, and gradcheck's operator groups peaked on top of it
    (docs/benchmarks.md, "What the collect holds between checks")."""
    release_memory()
    ctx.release_spill_pages()


def _require_headroom(capture: PhaseRecord, phase: str) -> None:
    """Refuse a phase the machine has no memory for: each phase holds at most about what run
    0 held at its peak (the model's activations and gradients plus run 0's reference before it
    moved to the spill file) on top of what the process already holds."""
    if capture.peak_rss_bytes is None or capture.rss_start_bytes is None:
        return
    working = capture.peak_rss_bytes - capture.rss_start_bytes
    # what the process already holds above its start (freed heap the allocator kept) is
    # reused, not asked of the machine again: only the rest must be free
    held = max(0, (current_rss() or capture.rss_start_bytes) - capture.rss_start_bytes)
    if working - held > 0:
        require_headroom(working - held, f"the {phase} checks")


def unit_seconds(profile: Any) -> float:
    """One forward+backward of the model in seconds, as run 0 measured its operators (without
    the capture's own overhead): the unit of the budget's cost model."""
    forward = sum(profile.model_forward_ns[:1]) / 1e9
    backward = sum(profile.model_backward_ns[:1]) / 1e9
    return float(max(forward + backward, 1e-4))


def _phase_record(phase: str, checks: list[str], usage: PhaseUsage) -> PhaseRecord:
    return PhaseRecord(
        phase=phase,
        checks=checks,
        duration_s=usage.duration_s,
        cpu_s=usage.cpu_s,
        peak_rss_bytes=usage.peak_rss_bytes,
        rss_start_bytes=usage.rss_start_bytes,
        rss_end_bytes=usage.rss_end_bytes,
        peak_method=usage.peak_method,  # type: ignore[arg-type]
    )


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {Path(last.filename).name}:{last.lineno} in {last.name})"


def measure_capture(ctx: CollectContext) -> PhaseRecord:
    """The reference capture (run 0), measured as the first phase."""
    from attest.collection.profile.profiler import capture_reference

    with PhaseMeter() as meter, checkpointing_off():
        try:
            capture_reference(ctx)
        except (MemoryError, RuntimeError) as exc:
            if is_out_of_memory(exc):
                raise out_of_memory_error(exc, "the reference capture") from None
            raise
        end_of_phase(ctx)
    return _phase_record("capture", [], meter.usage)


class PieceFailure:
    """A piece that raised (picklable): the reason its runner's checks are ``error`` with,
    as :func:`run_checks` would give it for the whole runner."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def run_pieces(
    ctx: CollectContext,
    units: list[tuple[str, str]],
    progress: Callable[[str], None] | None,
    phases: list[PhaseRecord],
) -> dict[str, dict[str, Any]]:
    """The pieces ``(runner, key)`` of :mod:`attest.collection.pieces`, each from
    :func:`reseed`: every runner's outputs by key, one phase record per runner naming them.
    After a piece raises, the runner's later pieces here are left out (its join reports it)."""
    outputs: dict[str, dict[str, Any]] = {}
    for runner in dict.fromkeys(r for r, _ in units):
        split = split_of(runner)
        assert split is not None, f"{runner} declares no pieces"
        keys = [k for r, k in units if r == runner]
        found = outputs.setdefault(runner, {})
        plain = (
            contextlib.nullcontext() if phase_name(runner) == "training" else checkpointing_off()
        )
        with PhaseMeter() as meter, plain:
            for key in keys:
                if progress is not None:
                    progress(f"checks: {phase_name(runner)} {key}")
                reseed(ctx.settings.seed)
                try:
                    found[key] = split.run_piece(ctx, key)
                except AttestError:
                    raise
                except Exception as exc:
                    if is_out_of_memory(exc):
                        raise out_of_memory_error(exc, f"the {phase_name(runner)} checks") from None
                    found[key] = PieceFailure(f"runner {runner} raised {_raised(exc)}")
                    break
            end_of_phase(ctx)
        record = _phase_record(phase_name(runner), [], meter.usage)
        record.pieces = keys
        phases.append(record)
    return outputs


def join_pieces(
    ctx: CollectContext, runner: str, outputs: dict[str, Any], phases: list[PhaseRecord]
) -> list[CheckResult]:
    """``runner``'s results from its pieces' outputs, wherever they ran (measured as a phase
    of this process, ``pieces: ["join"]``); a piece that raised makes them ``error``, as the
    whole runner raising would."""
    split = split_of(runner)
    assert split is not None, f"{runner} declares no pieces"
    expected = RUNNER_CHECKS.get(runner, ())
    failure = next((o for o in in_key_order(outputs).values() if isinstance(o, PieceFailure)), None)
    with PhaseMeter() as meter, checkpointing_off():
        if failure is not None:
            produced = _error_results(expected, failure.reason)
        else:
            try:
                produced = join_split(ctx, split, outputs)
            except AttestError:
                raise
            except Exception as exc:
                if is_out_of_memory(exc):
                    raise out_of_memory_error(exc, f"the {phase_name(runner)} checks") from None
                produced = _error_results(expected, f"runner {runner} raised {_raised(exc)}")
        gc.collect()
    usage = meter.usage
    record = _phase_record(phase_name(runner), [r.check for r in produced], usage)
    record.pieces = ["join"]
    phases.append(record)
    for result in produced:
        if result.duration_s is None:
            result.duration_s = round(usage.duration_s / max(1, len(produced)), 6)
        if result.peak_rss_bytes is None:
            result.peak_rss_bytes = usage.peak_rss_bytes
    return produced


def capture_and_run(
    loaded: LoadedSpec,
    settings: CheckSettings,
    runners: list[str],
    output_dir: Path,
    pieces: list[tuple[str, str]] | None = None,
    part: int | None = None,
) -> tuple[CollectContext, list[CheckResult], list[PhaseRecord], dict[str, dict[str, Any]]]:
    """One part of a collect split over workers (:mod:`attest.collection.parallel`): the
    runtime, the reference capture, ``runners`` whole and the runners' ``pieces``, nothing
    assembled or joined (``part``: the part's number, which pieces may read from
    ``ctx.extras["part"]``)."""
    from attest.collection import runtime_info as environment

    with environment.runtime(loaded, settings):
        ctx = CollectContext(spec=loaded, settings=settings, output_dir=output_dir)
        ctx.extras["part"] = part
        phases = [measure_capture(ctx)]
        found = run_checks(ctx, list(runners), None, phases, fill_missing=False)
        outputs = run_pieces(ctx, list(pieces or []), None, phases)
    return ctx, list(found.values()), phases, outputs


def _raised(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}{_where(exc)}"
