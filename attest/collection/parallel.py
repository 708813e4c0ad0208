"""``attest collect --workers N``: one collect's independent work split over N processes.

The unit is a runner's piece (:mod:`attest.collection.pieces`): gradcheck's operator groups,
kinks and the gradient checks that hand each other data; the profiler's float64 pass, each
determinism repeat and the thread-count run; IG's input groups, each randomization stage and
the repeated batch of ``ig_determinism``. A runner that declares no pieces (export, training)
is one unit. Every piece depends only on the spec, the settings, the reference capture and its
key (and random state seeded from them), and a runner in one process computes the very same
pieces one after another and joins them with the same code, so the split collect gives the
same checks, figures and attributions as one process, bit for bit where the backend is
deterministic (tests/unit/collection/test_parallel.py holds a two-worker collect to a
one-worker one).

Part 0 runs in this process: the topology check, the pieces marked ``here`` (the float64 pass
writes the per-operator rows' figures into this process's profile) and its share of the rest;
:func:`plan_parts` gives every other unit, largest first, to the least loaded part by its
estimated cost (forward+backward units, :mod:`attest.collection.budget`). Every other part
repeats the reference capture (about one forward+backward) and the topology check, and checks
that it captured the same operators (:func:`operators_digest`). The joins run here once every
part is back. The parts run in a local process pool (``spawn``: a fresh interpreter each) or,
with ``--ray ADDRESS``, as Ray tasks that receive the spec's folder through the object store
(:mod:`attest.collection.cluster.bundle`). A part's exported files come back as bytes and are
written where this collect writes them. The evidence's phases say which worker ran which
pieces (``PhaseRecord.worker``, ``PhaseRecord.pieces``).

Why hand-written: torch's own parallel tools (DataParallel, torch.distributed) split one
model's batch, not a collect's independent checks; concurrent.futures and Ray do the process
work, this module only decides which piece goes where and joins the results.
"""

from __future__ import annotations

import functools
import hashlib
import multiprocessing
import shutil
import tempfile
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attest.collection.budget import phase_units
from attest.collection.context import CheckSettings, CollectContext, LoadedSpec, frozen_heap
from attest.errors import CollectError, InputError
from attest.evidence.model import CheckResult, ExportRecord, PhaseRecord

__all__ = [
    "MAX_WORKERS",
    "Unit",
    "operators_digest",
    "plan_parts",
    "run_parallel",
    "run_part",
    "units_of",
]

MAX_WORKERS = 64
_TOPOLOGY = "attest.collection.profile.topology:run"
_PROFILE = "attest.collection.profile.profiler:run"


def _phase(runner: str) -> str:
    from attest.collection.runners import phase_name

    return phase_name(runner)


def _cost(runner: str, settings: CheckSettings, spec: LoadedSpec) -> float:
    phase = _phase(runner)
    if phase == "training" and spec.training is None:
        return 0.1  # not_applicable at once
    return max(phase_units(phase, settings, spec), 0.1)


@dataclass(frozen=True)
class Unit:
    """What the plan places: a runner's piece (``key``, :mod:`attest.collection.pieces`) or,
    for a runner that declares none, the whole runner (``key`` None), with its estimated cost
    in forward+backward units and whether it must run in this process (``here``)."""

    runner: str
    key: str | None
    cost: float
    here: bool = False


def units_of(ctx: CollectContext, runners: list[str]) -> list[Unit]:
    """Every runner's pieces (from this process's capture), or the runner whole; the topology
    runner is not among them (every part runs it first)."""
    from attest.collection.pieces import split_of

    units: list[Unit] = []
    for runner in runners:
        if runner == _TOPOLOGY:
            continue
        try:
            split = split_of(runner)
            found = None if split is None else split.pieces(ctx)
        except Exception:  # not importable, or no pieces: the whole runner says why, as alone
            found = None
        if found is None:
            cost = _cost(runner, ctx.settings, ctx.spec)
            units.append(Unit(runner, None, cost, here=runner == _PROFILE))
        else:
            units += [Unit(runner, p.key, p.cost, p.here) for p in found]
    return units


def plan_parts(units: list[Unit], workers: int) -> list[list[Unit]]:
    """The units of each part: the ``here`` ones in part 0, every other one (largest first) in
    the least loaded part. Empty parts other than part 0 are dropped; the order inside a part
    is the collect's."""
    if workers < 1 or workers > MAX_WORKERS:
        raise InputError(f"--workers {workers} is not between 1 and {MAX_WORKERS}")
    parts: list[list[Unit]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for unit in units:
        if unit.here:
            parts[0].append(unit)
            loads[0] += unit.cost
    for unit in sorted((u for u in units if not u.here), key=lambda u: -u.cost):
        index = min(range(workers), key=lambda i: (loads[i], i))
        parts[index].append(unit)
        loads[index] += unit.cost
    order = {(u.runner, u.key): i for i, u in enumerate(units)}
    return [
        sorted(p, key=lambda u: order[(u.runner, u.key)])
        for i, p in enumerate(parts)
        if p or i == 0
    ]


def operators_digest(ctx: CollectContext) -> str:
    """sha256 of the captured operators' names and output shapes: the pieces keyed by them
    (gradcheck's groups) mean the same operators only in a part that captured the same."""
    h = hashlib.sha256()
    for record in ctx.operators or []:
        h.update(f"{record.op}{record.output_shapes};".encode())
    return h.hexdigest()


def _part_result(
    ctx: CollectContext, results: list[CheckResult], phases: list[PhaseRecord]
) -> dict[str, Any]:
    files: dict[str, bytes] = {}
    if ctx.export is not None:
        for entry in (ctx.export.onnx, ctx.export.probe_bundle):
            files[entry.name] = Path(entry.path).read_bytes()
    return {
        "checks": [r.model_dump(mode="json") for r in results],
        "phases": [p.model_dump(mode="json") for p in phases],
        "attributions": ctx.ig.attributions,
        "export": ctx.export.model_dump(mode="json") if ctx.export is not None else None,
        "files": files,
    }


def run_part(
    spec_path: str, settings: CheckSettings, units: list[tuple[str, str | None]], digest: str,
    index: int, spec_file: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Part ``index``, in a worker process: load the spec (a bundle with its ``spec_file``),
    capture, run the topology check, the whole runners and the pieces of ``units``; plain
    data back."""
    from attest.collection.rows import artifact_digests
    from attest.collection.runners import capture_and_run
    from attest.spec import load_spec

    loaded = load_spec(spec_path, spec=spec_file)
    folder = Path(tempfile.mkdtemp(prefix="attest-part-"))
    whole = [_TOPOLOGY] + [r for r, k in units if k is None]
    pieces = [(r, k) for r, k in units if k is not None]
    try:
        with frozen_heap():
            ctx, results, phases, outputs = capture_and_run(
                loaded, settings, whole, folder, pieces, part=index
            )
        if pieces and operators_digest(ctx) != digest:
            raise CollectError(
                f"worker {index} captured other operators than this process (the model's "
                "operator sequence or shapes differ between runs), so its pieces would check "
                "other operators",
                hint="collect without --workers",
            )
        data = _part_result(ctx, results, phases)
        data["pieces"] = outputs
        data["artifacts"] = artifact_digests(loaded)
        return data
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_part_from_bundle(
    bundle: Any, settings: CheckSettings, units: list[tuple[str, str | None]], digest: str,
    index: int,
) -> dict[str, Any]:  # fmt: skip
    """One part as a Ray task: the spec's folder arrives as a checked bundle."""
    from attest.collection.cluster.bundle import unpack_spec

    folder, spec_path = unpack_spec(bundle)
    try:
        return run_part(str(spec_path), settings, units, digest, index)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class _RayParts:
    """Parts as Ray tasks on the cluster at ``address`` (each asks for the spec's threads)."""

    def __init__(self, address: str, spec: LoadedSpec) -> None:
        from attest.collection.cluster.bundle import pack_spec
        from attest.collection.cluster.ray_connect import connect

        self.ray = connect(address)
        self.bundle = self.ray.put(pack_spec(spec.path))
        self.task = self.ray.remote(run_part_from_bundle).options(
            num_cpus=max(1, int(spec.threads)), max_retries=2, retry_exceptions=False
        )

    def submit(self, settings: CheckSettings, *part: Any) -> Any:
        return self.task.remote(self.bundle, settings, *part)

    def result(self, handle: Any) -> dict[str, Any]:
        return dict(self.ray.get(handle))

    def close(self) -> None:
        self.ray.shutdown()


class _PoolParts:
    """Parts in a local pool of fresh interpreters."""

    def __init__(self, workers: int, spec: LoadedSpec) -> None:
        self.spec_path = str(spec.path)
        override = str(spec.spec_override) if spec.spec_override is not None else None
        self.run = functools.partial(run_part, spec_file=override)  # a bundle's --spec
        self.pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn")
        )

    def submit(self, settings: CheckSettings, *part: Any) -> Future[dict[str, Any]]:
        return self.pool.submit(self.run, self.spec_path, settings, *part)

    def result(self, handle: Future[dict[str, Any]]) -> dict[str, Any]:
        return handle.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _adopt(
    ctx: CollectContext, index: int, data: dict[str, Any], out_dir: Path, phases: list[PhaseRecord]
) -> list[CheckResult]:
    """Take a finished part's results into this collect."""
    from attest.collection.rows import artifact_digests

    if data["artifacts"] != artifact_digests(ctx.spec):
        raise CollectError(f"worker {index} read other spec, weights or probe bytes than this one")
    for record in data["phases"]:
        phases.append(PhaseRecord.model_validate({**record, "worker": index}))
    if data["attributions"] is not None:
        ctx.ig.attributions = data["attributions"]
    if data["export"] is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, blob in data["files"].items():
            (out_dir / Path(name).name).write_bytes(blob)
        record = ExportRecord.model_validate(data["export"])
        ctx.export = record.model_copy(
            update={
                "onnx": record.onnx.model_copy(update={"path": str(out_dir / record.onnx.name)}),
                "probe_bundle": record.probe_bundle.model_copy(
                    update={"path": str(out_dir / record.probe_bundle.name)}
                ),
            }
        )
    return [CheckResult.model_validate(c) for c in data["checks"]]


def run_parallel(
    ctx: CollectContext,
    runners: list[str],
    workers: int,
    phases: list[PhaseRecord],
    *,
    ray_address: str | None = None,
    run_here: Any,
    progress: Any = None,
) -> list[CheckResult]:
    """Run part 0 here (``run_here(runner_names) -> list[CheckResult]`` for whole runners,
    then its pieces) and the others in workers; join every split runner's pieces here. The
    results of every part, part 0's first."""
    from attest.collection.runners import join_pieces, run_pieces

    units = units_of(ctx, runners)
    parts = plan_parts(units, workers)
    if len(parts) == 1:  # nothing to spread: one process's collect
        return list(run_here(runners))
    out_dir = ctx.output_dir or Path(tempfile.mkdtemp(prefix="attest-export-"))
    backend: _RayParts | _PoolParts = (
        _RayParts(ray_address, ctx.spec)
        if ray_address is not None
        else _PoolParts(len(parts) - 1, ctx.spec)
    )
    digest = operators_digest(ctx)
    try:
        handles = [
            backend.submit(ctx.settings, [(u.runner, u.key) for u in part], digest, index)
            for index, part in enumerate(parts[1:], 1)
        ]
        topology = [_TOPOLOGY] if _TOPOLOGY in runners else []
        results = list(run_here(topology + [u.runner for u in parts[0] if u.key is None]))
        here = [(u.runner, u.key) for u in parts[0] if u.key is not None]
        outputs = run_pieces(ctx, here, progress, phases)
        done = {r.check for r in results}
        for index, handle in enumerate(handles, 1):
            try:
                data = backend.result(handle)
            except CollectError:
                raise
            except Exception as exc:
                names = sorted({_phase(u.runner) for u in parts[index]})
                raise CollectError(
                    f"worker {index} (runners {', '.join(names)}) "
                    f"failed: {type(exc).__name__}: {exc}",
                    hint="run without --workers to see the failure in this process",
                ) from None
            # the topology check ran in every part; keep part 0's
            results += [r for r in _adopt(ctx, index, data, out_dir, phases) if r.check not in done]
            for runner, found in data["pieces"].items():
                outputs.setdefault(runner, {}).update(found)
    finally:
        backend.close()
    for runner in runners:  # in the collect's order
        if runner in outputs:
            results += join_pieces(ctx, runner, outputs[runner], phases)
    return results
