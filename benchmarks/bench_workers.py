"""``attest collect --workers 2`` against one process, and a local Ray cluster against a pool.

Issue #24's figures: on the resnet18 workload of bench_certify.py (MONAI
``resnet18(spatial_dims=2, n_input_channels=3, num_classes=2)``, probe 4x3x224x224, random
weights, ``threads: 2``, ``repeats: 20``), three child processes run one after the other, each
measured the same way (``os.wait4``: wall time, CPU time):

1. ``attest collect SPEC`` (one process);
2. ``attest collect SPEC --workers 2`` (a local process pool: the runners' pieces, such as
   gradcheck's operator groups, the determinism repeats, IG's input groups and randomization
   stages, split over two processes, the second repeating the reference capture);
3. ``attest collect SPEC --ray local --workers 2`` (the same split as Ray tasks on a Ray
   cluster the command starts on this machine: the cluster's start-up is part of its time).

Printed: each wall time, CPU time and CPU utilization (CPU s / wall s: how many cores were
busy on average; a child's CPU includes the pool's worker processes, not Ray's), the speed-up
of 2 over 1 (wall 1 / wall 2), the overhead of Ray over the pool (wall 3 / wall 2), the load
average around the runs, and which pieces each worker ran (from the evidence's phases). These
machines are shared and noisy; the ratios measured in one run are what to compare. The
evidence of runs 1 and 2 is also compared figure for figure (every field apart from times,
memory and paths), as the unit test does on a small model. ``--spec PATH`` measures another
spec instead (e.g. examples/digits/attest.yaml).

    .venv/bin/python benchmarks/bench_workers.py [--model resnet18] [--spec PATH] [--no-ray]
        [--append docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_certify  # benchmarks/bench_certify.py, beside this script

VOLATILE = ("_ns", "duration_s", "peak_rss_bytes", "created_at", "path", "cpu_s", "rss_")


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _stable(v)
            for k, v in value.items()
            if k not in ("phases",) and not any(s in k for s in VOLATILE)
        }
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def run(spec: Path, out: Path, extra: list[str]) -> dict[str, Any]:
    attest = str(bench_certify.VENV_BIN / "attest")
    result = bench_certify._wait_child([attest, "collect", str(spec), "-o", str(out), "-q", *extra])
    result.pop("stdout", None)
    return result


def split_of(evidence: dict[str, Any]) -> str:
    """phase: pieces per worker (0: the collecting process), as the evidence records them."""
    out: dict[str, list[str]] = {}
    for phase in evidence.get("phases", []):
        pieces = phase.get("pieces")
        if pieces and pieces != ["join"]:
            out.setdefault(phase["phase"], []).append(f"w{phase['worker'] or 0}:{len(pieces)}")
    return "; ".join(f"{name} {' '.join(parts)}" for name, parts in out.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18", choices=sorted(bench_certify.MODELS))
    parser.add_argument("--spec", type=Path, default=None, help="measure this spec instead")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray run")
    parser.add_argument("--append", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    try:
        if args.spec is not None:
            folder = work / "spec"
            shutil.copytree(args.spec.resolve().parent, folder)
            spec = folder / args.spec.name
            label = str(args.spec)
        else:
            (work / args.model).mkdir()
            spec = bench_certify.write_spec(work / args.model, args.model)
            label = args.model
        runs: dict[str, dict[str, Any]] = {}
        plans = [("one process", []), ("--workers 2", ["--workers", "2"])]
        if not args.no_ray:
            plans.append(("--ray local --workers 2", ["--ray", "local", "--workers", "2"]))
        evidence = {}
        load_before = os.getloadavg()
        for name, extra in plans:
            out = work / f"{len(runs)}" / "evidence.json"
            runs[name] = run(spec, out, extra)
            evidence[name] = json.loads(out.read_text())
            r = runs[name]
            print(f"{name:<26} wall {r['wall_s']:8.1f} s   cpu {r['cpu_s']:8.1f} s   "
                  f"({r['cpu_s'] / r['wall_s']:.2f} cores)", flush=True)  # fmt: skip
        load_after = os.getloadavg()
        same = _stable(evidence["one process"]) == _stable(evidence["--workers 2"])
        pieces = split_of(evidence["--workers 2"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    speedup = runs["one process"]["wall_s"] / runs["--workers 2"]["wall_s"]
    lines = [
        f"| run ({label}) | wall s | CPU s | cores busy |",
        "| --- | ---: | ---: | ---: |",
        *[
            f"| {n} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['cpu_s'] / r['wall_s']:.2f} |"
            for n, r in runs.items()
        ],
        "",
        f"load average before {load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f}, "
        f"after {load_after[0]:.2f} / {load_after[1]:.2f} / {load_after[2]:.2f}",
        f"pieces per worker (--workers 2): {pieces}",
        f"speed-up of --workers 2 over one process: {speedup:.2f}x; "
        f"evidence identical apart from times, memory and paths: {same}",
    ]
    if "--ray local --workers 2" in runs:
        overhead = runs["--ray local --workers 2"]["wall_s"] / runs["--workers 2"]["wall_s"]
        lines.append(f"local Ray cluster over the process pool: {overhead:.2f}x the wall time")
    print("\n".join(lines))
    if args.append:
        header = (
            f"\n### bench_workers, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
            f"{os.cpu_count()} CPUs\n\nReproduce: `.venv/bin/python benchmarks/bench_workers.py"
            f"{' --spec ' + str(args.spec) if args.spec else ' --model ' + args.model}`\n\n"
        )
        with args.append.open("a") as handle:
            handle.write(header + "\n".join(lines) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
