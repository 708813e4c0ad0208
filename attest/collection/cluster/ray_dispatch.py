"""``attest collect SPEC --ray ADDRESS --targets targets.yaml``: one Ray task per hardware target.

The driver packs the spec's folder (:mod:`.bundle`) and puts it in Ray's object store once;
each target's task asks for that target's resources (:mod:`.targets`), unpacks the bytes on
its node into a private folder, checks their digests, runs the ordinary
:func:`attest.collection.collect` there and returns the evidence with the exported ONNX file
and probe bundle. A task whose worker process dies is run again by Ray (``max_retries``, per
target); every start is counted by a small tracker actor, so the evidence records how many
attempts a target took and where it finally ran (:class:`attest.evidence.model.DispatchRecord`).
A collect that raises is not retried: it fails the same way on the same bytes. A retried
attempt resumes: every attempt of a target collects with the same work folder
(:func:`target_work_dir`, :mod:`attest.collection.workdir`), so the phases the lost attempt
finished are reused when the retry can see that folder: always with ``--work-dir`` on storage
every node mounts, else (the default, node-local) when Ray retries on the same node.

Ray is used as the scheduler and transport, not re-implemented: resources, placement, retries
and the object store are Ray's. Hand-written here are only what Ray does not say by itself:
that a target can never be placed (Ray would leave the task pending forever; we fail it after
``schedule_timeout_s`` naming the resource no node offers) and which attempt is running where.

The result: each target's evidence (``targets`` = the target's name) with its exported files in
``<out stem>.targets/<name>/`` (what ``attest certify --evidence`` takes), and, when every target
succeeded, their merge in ``out``. A failed target fails the whole command: no merged evidence
is written, so a partial set never reaches a signature.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attest.collection.cluster.bundle import SpecBundle, pack_spec, unpack_spec
from attest.collection.cluster.ray_connect import connect
from attest.collection.cluster.targets import TargetRequirements
from attest.core.io import atomic_write_bytes, atomic_write_json
from attest.errors import AttestError, CollectError
from attest.evidence.merge import merge_evidence
from attest.evidence.model import DispatchRecord, Evidence

__all__ = ["RayCollect", "collect_on_ray", "collect_target", "target_folder", "target_work_dir"]

Say = Callable[[str], None]
_POLL_S = 0.5


@dataclass(frozen=True)
class RayCollect:
    """What :func:`collect_on_ray` wrote: each target's evidence file, and the merge."""

    evidence: Evidence
    out: Path
    per_target: dict[str, Path]


def target_folder(out: Path, name: str) -> Path:
    """Where one target's evidence and exported files go: ``<out stem>.targets/<name>/``."""
    return out.parent / f"{out.stem}.targets" / name


class _Attempts:
    """A Ray actor counting each start of each target's task (Ray does not tell a task, or
    its caller, which attempt it is)."""

    def __init__(self) -> None:
        self.starts: dict[str, list[dict[str, Any]]] = {}

    def start(self, name: str, pid: int, node: str, hostname: str) -> int:
        entry = {"pid": pid, "node": node, "hostname": hostname, "at": time.time()}
        self.starts.setdefault(name, []).append(entry)
        return len(self.starts[name])

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        return self.starts


def target_work_dir(root: str | Path | None, run: str, name: str) -> Path:
    """The work folder of one target's task (:mod:`attest.collection.workdir`):
    ``<root>/<run>/<name>``, the same for every attempt of the task, so a retried attempt
    resumes from the phases the lost one finished wherever it can see that folder. ``root``
    None: ``attest-work`` in the node's temporary directory (a retry on the same node resumes,
    one on another node starts over); give shared storage to resume on any node."""
    base = Path(root) if root is not None else Path(tempfile.gettempdir()) / "attest-work"
    return base / run / name


def _run_target(
    name: str, bundle: SpecBundle, tracker: Any, workers: int = 1, work: str | None = None
) -> dict[str, Any]:
    """The task on the target's node (module docstring). Returns plain data."""
    import ray

    node = str(ray.get_runtime_context().get_node_id())
    attempt = ray.get(tracker.start.remote(name, os.getpid(), node, socket.gethostname()))
    result = collect_target(name, bundle, workers, Path(work) if work is not None else None)
    return {**result, "attempt": attempt, "node": node}


def collect_target(
    name: str, bundle: SpecBundle, workers: int = 1, work: Path | None = None
) -> dict[str, Any]:
    """One target's collect on this node, without Ray: unpack the spec, collect (resuming from
    ``work`` when an earlier attempt left phases there), check the digests. Plain data back."""
    from attest.collection import collect  # torch: after the start is on record

    started = time.perf_counter()
    folder, spec_path = unpack_spec(bundle)
    try:
        # --workers inside a target: a local process pool on the target's node (not resumed)
        evidence = collect(
            spec_path,
            output_dir=folder / "_exported",
            workers=workers,
            work_dir=work if workers == 1 else None,
            resume="auto",  # what the lost attempt finished, if it matches this node's run
        )
        if work is not None:  # the collect removed its own folder: now the command's, if empty
            with contextlib.suppress(OSError):
                work.parent.rmdir()
        for role, digest in bundle.roles.items():
            recorded = evidence.artifacts.get(role, {}).get("sha256")
            if recorded != digest:
                raise CollectError(
                    f"target {name}: the collect read a {role} file with sha256 {recorded}, "
                    f"not the {digest} the driver sent"
                )
        files: dict[str, bytes] = {}
        if evidence.export is not None:
            for entry in (evidence.export.onnx, evidence.export.probe_bundle):
                files[entry.name] = Path(entry.path).read_bytes()
        return {
            "evidence": evidence.model_dump(mode="json"),
            "files": files,
            "hostname": socket.gethostname(),
            "duration_s": time.perf_counter() - started,
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _missing_resource(nodes: list[dict[str, Any]], needed: dict[str, float]) -> str | None:
    """None when some alive node offers ``needed``; else what the best node lacks."""
    best: tuple[int, str] | None = None
    for node in nodes:
        if not node.get("Alive"):
            continue
        offered = node.get("Resources") or {}
        lacking = [
            f"{key} {amount:g} (the node has {offered.get(key, 0):g})"
            for key, amount in needed.items()
            if offered.get(key, 0) < amount
        ]
        if not lacking:
            return None
        if best is None or len(lacking) < best[0]:
            best = (len(lacking), ", ".join(lacking))
    return best[1] if best else "any alive node (the cluster has none)"


def _wait_feasible(
    ray: Any, targets: dict[str, TargetRequirements], timeout_s: float, say: Say
) -> None:
    """Wait (up to ``timeout_s``: an autoscaler may be adding nodes) until every target has a
    node that offers its resources; else fail naming the target and the missing resource."""
    deadline = time.monotonic() + timeout_s
    while True:
        nodes = ray.nodes()
        missing = {
            name: lack
            for name, req in targets.items()
            if (lack := _missing_resource(nodes, req.node_resources())) is not None
        }
        if not missing:
            return
        if time.monotonic() >= deadline:
            name, lack = next(iter(missing.items()))
            raise CollectError(
                f"target {name}: no node of the Ray cluster can run it; it needs {lack}",
                hint="add a node with that resource, or change the target in targets.yaml",
            )
        say(f"waiting for a node for {', '.join(missing)}")
        time.sleep(min(2.0, max(0.1, deadline - time.monotonic())))


def _failure(ray: Any, name: str, exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, AttestError):
        return f"target {name}: {cause.message}"
    if isinstance(exc, ray.exceptions.WorkerCrashedError):
        return f"target {name}: its worker process died on every attempt ({exc})"
    first = str(cause or exc).strip().splitlines()
    return f"target {name}: {type(cause or exc).__name__}: {first[-1] if first else ''}"


def _watch(
    ray: Any,
    refs: dict[str, Any],
    tracker: Any,
    schedule_timeout_s: float,
    say: Say,
) -> tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, list[dict[str, Any]]]]:
    """Wait for every task, reporting each start; results and failures by target."""
    results: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}
    seen: dict[str, int] = {}
    pending = dict(refs)
    queued_at = time.monotonic()
    starts: dict[str, list[dict[str, Any]]] = {}
    while pending:
        ready, _ = ray.wait(list(pending.values()), num_returns=1, timeout=_POLL_S)
        starts = ray.get(tracker.snapshot.remote())
        for name, entries in starts.items():
            for number, entry in enumerate(entries[seen.get(name, 0) :], seen.get(name, 0) + 1):
                say(
                    f"target {name}: running, attempt {number} "
                    f"(pid {entry['pid']} on {entry['hostname']})"
                )
            seen[name] = len(entries)
        for name, ref in list(pending.items()):
            if ref in ready:
                del pending[name]
                try:
                    results[name] = ray.get(ref)
                    say(f"target {name}: done in {results[name]['duration_s']:.1f} s")
                except Exception as exc:
                    failures[name] = _failure(ray, name, exc)
                    say(failures[name])
            elif name not in starts and time.monotonic() - queued_at > schedule_timeout_s:
                ray.cancel(ref, force=True)
                del pending[name]
                failures[name] = (
                    f"target {name}: not started within {schedule_timeout_s:g} s "
                    "(the cluster had no free node with its resources)"
                )
                say(failures[name])
    return results, failures, ray.get(tracker.snapshot.remote())


def _write_target(
    out: Path, name: str, result: dict[str, Any], record: DispatchRecord
) -> tuple[Evidence, Path]:
    folder = target_folder(out, name)
    folder.mkdir(parents=True, exist_ok=True)
    evidence = Evidence.model_validate(result["evidence"])
    for file_name, data in result["files"].items():
        atomic_write_bytes(folder / Path(file_name).name, data)
    export = evidence.export
    if export is not None:  # the files now lie next to this evidence file
        export = export.model_copy(
            update={
                "onnx": export.onnx.model_copy(update={"path": str(folder / export.onnx.name)}),
                "probe_bundle": export.probe_bundle.model_copy(
                    update={"path": str(folder / export.probe_bundle.name)}
                ),
            }
        )
    evidence = evidence.model_copy(
        update={"targets": [name], "export": export, "dispatch": [record]}
    )
    path = atomic_write_json(folder / "evidence.json", evidence.model_dump(mode="json"))
    return evidence, path


def collect_on_ray(
    spec: str | Path,
    targets: dict[str, TargetRequirements],
    *,
    address: str,
    out: str | Path,
    say: Say | None = None,
    schedule_timeout_s: float = 600.0,
    workers: int = 1,
    work_root: str | Path | None = None,
) -> RayCollect:
    """Collect ``spec`` once per target on the Ray cluster at ``address`` (module docstring).

    ``address`` is what ``ray.init`` takes: ``auto`` (the cluster this machine belongs to),
    ``HOST:PORT`` of a head node, or ``local`` (start a cluster on this machine).
    ``work_root``: under it each target's task keeps its work folder (:func:`target_work_dir`).
    """
    report = say or (lambda _message: None)
    out_path = Path(out)
    bundle = pack_spec(spec)
    report(f"packed {len(bundle.files)} files ({bundle.size / 1e6:.1f} MB) of {spec}")
    ray = connect(address)
    try:
        _wait_feasible(ray, targets, schedule_timeout_s, report)
        bundle_ref = ray.put(bundle)
        tracker = ray.remote(num_cpus=0)(_Attempts).options(name=f"attest-{uuid.uuid4()}").remote()
        task = ray.remote(_run_target)
        run = uuid.uuid4().hex  # one per command: every attempt of a target shares its folder
        refs = {
            name: task.options(name=f"attest-collect-{name}", **req.ray_options()).remote(
                name, bundle_ref, tracker, workers, str(target_work_dir(work_root, run, name))
            )
            for name, req in targets.items()
        }
        report(f"dispatched {len(refs)} target(s): {', '.join(refs)}")
        results, failures, starts = _watch(ray, refs, tracker, schedule_timeout_s, report)
        version = str(ray.__version__)
    finally:
        ray.shutdown()
    written: dict[str, Path] = {}
    evidences: list[Evidence] = []
    for name, result in results.items():
        record = DispatchRecord(
            target=name,
            engine="ray",
            engine_version=version,
            address=address,
            node=result["node"],
            hostname=result["hostname"],
            attempts=len(starts.get(name, [])) or int(result["attempt"]),
            requested=targets[name].ray_options(),
            duration_s=round(float(result["duration_s"]), 3),
        )
        evidence, written[name] = _write_target(out_path, name, result, record)
        evidences.append(evidence)
    if failures:
        done = f"; evidence of the others is in {target_folder(out_path, '*')}" if written else ""
        raise CollectError(
            "; ".join(failures[n] for n in targets if n in failures) + done,
            hint="no merged evidence was written: a partial set of targets is never certified",
        )
    ordered = [evidences[list(results).index(n)] for n in targets]
    merged = ordered[0] if len(ordered) == 1 else merge_evidence(ordered, list(targets))
    atomic_write_json(out_path, merged.model_dump(mode="json"))
    return RayCollect(evidence=merged, out=out_path, per_target={n: written[n] for n in targets})
