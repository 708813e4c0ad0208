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

The result: each target's evidence (``targets`` = the target's name, its dispatch record, the
export paths where the driver puts the files) is written on the node in its final form and,
when the node has a collector key, signed there (:mod:`.node_signing`); its bytes and the
statement's come back and are written as they are, with its exported files, in
``<out stem>.targets/<name>/`` (what ``attest certify --evidence`` takes), and, when every target
succeeded, their merge in ``out``. A failed target (or one whose evidence came back unsigned
when signing was asked for) fails the whole command: no merged evidence is written, so a
partial set never reaches a signature.
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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from attest.certificate.evidence_statement import statement_path
from attest.collection.cluster.bundle import SpecBundle, pack_spec, unpack_spec
from attest.collection.cluster.node_signing import (
    NodeKey,
    load_node_collector,
    returned_statement,
    sign_on_node,
)
from attest.collection.cluster.ray_connect import connect
from attest.collection.cluster.targets import TargetRequirements
from attest.core.io import atomic_write_bytes, atomic_write_json
from attest.errors import AttestError, CollectError
from attest.evidence.merge import merge_evidence
from attest.evidence.model import DispatchRecord, Evidence

__all__ = [
    "RayCollect",
    "TargetOrder",
    "collect_on_ray",
    "collect_target",
    "target_folder",
    "target_work_dir",
]

Say = Callable[[str], None]
_POLL_S = 0.5


@dataclass(frozen=True)
class RayCollect:
    """What :func:`collect_on_ray` wrote: each target's evidence file, and the merge;
    ``signed_by``: each target's collector (``NAME (key ID) on HOST``), None when unsigned."""

    evidence: Evidence
    out: Path
    per_target: dict[str, Path]
    signed_by: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class TargetOrder:
    """What the driver tells one target's task besides the spec: where the target's files will
    lie on the driver (the evidence's export paths name them), the dispatch facts it knows, and
    the collector key's path on the node (never the key)."""

    folder: str = ""
    address: str = "local"
    engine_version: str = ""
    requested: dict[str, Any] = field(default_factory=dict)
    key: NodeKey | None = None


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
    name: str,
    bundle: SpecBundle,
    tracker: Any,
    workers: int = 1,
    work: str | None = None,
    order: TargetOrder | None = None,
) -> dict[str, Any]:
    """The task on the target's node (module docstring). Returns plain data."""
    import ray

    node = str(ray.get_runtime_context().get_node_id())
    attempt = ray.get(tracker.start.remote(name, os.getpid(), node, socket.gethostname()))
    result = collect_target(
        name, bundle, workers, Path(work) if work is not None else None, order,
        node=node, attempt=attempt,
    )  # fmt: skip
    return {**result, "attempt": attempt, "node": node}


def collect_target(
    name: str,
    bundle: SpecBundle,
    workers: int = 1,
    work: Path | None = None,
    order: TargetOrder | None = None,
    *,
    node: str | None = None,
    attempt: int = 1,
) -> dict[str, Any]:
    """One target's collect on this node, without Ray: load the node's collector key (if
    any), unpack the spec, collect (resuming from ``work`` when an earlier attempt left phases
    there), check the digests, write the target's final evidence and sign it. Plain data back:
    the evidence's bytes, the statement's (None when unsigned), the exported files."""
    from attest.collection import collect  # torch: after the start is on record

    order = order or TargetOrder()
    started = time.perf_counter()
    started_at = datetime.now(timezone.utc)
    collector = load_node_collector(name, order.key)  # a bad key fails before any work
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
        record = DispatchRecord(
            target=name,
            engine="ray",
            engine_version=order.engine_version,
            address=order.address,
            node=node,
            hostname=socket.gethostname(),
            attempts=attempt,
            requested=order.requested,
            duration_s=round(time.perf_counter() - started, 3),
        )
        path = _final_evidence(folder / "_evidence", order.folder, name, evidence, record)
        statement = None
        if collector is not None:
            statement = sign_on_node(path, spec_path, collector, name, started_at, order.address)
        return {
            "evidence": path.read_bytes(),
            "statement": statement,
            "files": files,
            "hostname": record.hostname,
            "duration_s": record.duration_s,
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _final_evidence(
    where: Path, driver_folder: str, name: str, evidence: Evidence, record: DispatchRecord
) -> Path:
    """The target's evidence as the driver will keep it (its target name, its dispatch record,
    the exported files where the driver puts them), written to ``where/evidence.json`` so that
    the node can sign these exact bytes."""
    export = evidence.export
    if export is not None:
        export = export.model_copy(
            update={
                "onnx": export.onnx.model_copy(
                    update={"path": str(Path(driver_folder) / export.onnx.name)}
                ),
                "probe_bundle": export.probe_bundle.model_copy(
                    update={"path": str(Path(driver_folder) / export.probe_bundle.name)}
                ),
            }
        )
    final = evidence.model_copy(update={"targets": [name], "export": export, "dispatch": [record]})
    where.mkdir(parents=True, exist_ok=True)
    return atomic_write_json(where / "evidence.json", final.model_dump(mode="json"))


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
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
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
    return results, failures


def _write_target(out: Path, name: str, result: dict[str, Any]) -> tuple[Evidence, Path]:
    """The target's files as its node sent them: the evidence and its statement byte for byte
    (a stale statement of an earlier run is removed when this one is unsigned)."""
    folder = target_folder(out, name)
    folder.mkdir(parents=True, exist_ok=True)
    evidence = Evidence.model_validate_json(result["evidence"])
    for file_name, data in result["files"].items():
        atomic_write_bytes(folder / Path(file_name).name, data)
    path = atomic_write_bytes(folder / "evidence.json", result["evidence"])
    if result.get("statement") is not None:
        atomic_write_bytes(statement_path(path), result["statement"])
    else:
        statement_path(path).unlink(missing_ok=True)
    return evidence, path


def _signed_or_refused(
    name: str, result: dict[str, Any], required: bool
) -> tuple[str | None, str | None]:
    """(who signed the target's evidence, why the target is refused): the statement checked
    against the evidence it came with; unsigned evidence refused when ``required``."""
    try:
        signer = returned_statement(name, result["evidence"], result.get("statement"))
    except CollectError as exc:
        return None, exc.message
    if signer is None and required:
        return None, (
            f"target {name}: its evidence came back unsigned from node {result['hostname']}, "
            "and signing was asked for (--require-signed, or a collector_key in targets.yaml): "
            "give the target a collector_key in targets.yaml or set ATTEST_COLLECTOR_KEY on "
            "its nodes"
        )
    return signer, None


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
    require_signed: bool = False,
) -> RayCollect:
    """Collect ``spec`` once per target on the Ray cluster at ``address`` (module docstring).

    ``address`` is what ``ray.init`` takes: ``auto`` (the cluster this machine belongs to),
    ``HOST:PORT`` of a head node, or ``local`` (start a cluster on this machine).
    ``work_root``: under it each target's task keeps its work folder (:func:`target_work_dir`).
    ``require_signed``: a target whose evidence comes back unsigned fails (also when any target
    names a ``collector_key``).
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
                name, bundle_ref, tracker, workers, str(target_work_dir(work_root, run, name)),
                _order(out_path, name, req, address, str(ray.__version__)),
            )
            for name, req in targets.items()
        }  # fmt: skip
        report(f"dispatched {len(refs)} target(s): {', '.join(refs)}")
        results, failures = _watch(ray, refs, tracker, schedule_timeout_s, report)
    finally:
        ray.shutdown()
    required = require_signed or any(t.collector_key for t in targets.values())
    written: dict[str, Path] = {}
    evidences: dict[str, Evidence] = {}
    signed_by: dict[str, str | None] = {}
    for name, result in results.items():
        signed_by[name], refused = _signed_or_refused(name, result, required)
        if refused is not None:
            failures[name] = refused
            report(refused)
            continue
        evidences[name], written[name] = _write_target(out_path, name, result)
    if failures:
        done = f"; evidence of the others is in {target_folder(out_path, '*')}" if written else ""
        raise CollectError(
            "; ".join(failures[n] for n in targets if n in failures) + done,
            hint="no merged evidence was written: a partial set of targets is never certified",
        )
    ordered = [evidences[n] for n in targets]
    merged = ordered[0] if len(ordered) == 1 else merge_evidence(ordered, list(targets))
    atomic_write_json(out_path, merged.model_dump(mode="json"))
    return RayCollect(
        evidence=merged,
        out=out_path,
        per_target={n: written[n] for n in targets},
        signed_by={n: signed_by[n] for n in targets},
    )


def _order(
    out: Path, name: str, req: TargetRequirements, address: str, version: str
) -> TargetOrder:
    key = None
    if req.collector_key is not None or req.collector_name is not None:
        key = NodeKey(path=req.collector_key, name=req.collector_name)
    return TargetOrder(
        folder=str(target_folder(out, name)),
        address=address,
        engine_version=version,
        requested=req.ray_options(),
        key=key,
    )
