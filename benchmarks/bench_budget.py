"""Does ``--budget`` hold on a real-size model? (issue 38, "A budget that holds").

For each model of ``bench_certify.py`` (same spec, weights and probe, with ``repeats: 100``,
clinical-strict's floor), ``attest certify --policy clinical-strict`` runs twice as child
processes, wall time measured by this script from the start of each process:

1. with ``--budget SMALL`` (default 60s): expected to be refused at the start (exit 2) with the
   smallest budget that meets the policy's floors named in seconds; the time it took to refuse
   is printed (start, preflight, run 0 and the calibration);
2. with that named minimum: expected to be accepted and to finish within 1.1x of it (the
   certify's verdict is the policy's business: these random-weight models with a 4-example
   probe fail clinical-strict's other rules, exit 1, which is not the point here);
3. with 1.5x the minimum (``--scale``): expected within 1.1x of it, the time above the
   floors spent on optional work (more repeats, a finer IG tolerance...).

Printed per model: the refusal's message and time, then the budget, the wall time, their
ratio, the evidence's ``budget`` record (calibration, estimates, correction, what was reduced)
and each phase's planned against actual seconds (``budget.phases``: the plan made just before
the phase started). ``--json FILE`` writes every figure.

    .venv/bin/python benchmarks/bench_budget.py [--models resnet18,examples/volume3d/attest.yaml]
        [--small 60s] [--scale 1.5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_certify  # benchmarks/bench_certify.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
MINIMUM = re.compile(r"smallest budget that meets them is (\d+) s")


def certify(folder: Path, spec: Path, budget: str) -> dict[str, Any]:
    """One ``attest certify --budget`` child: exit code, wall time, stderr's tail."""
    argv = [
        str(VENV_BIN / "attest"), "certify", str(spec),
        "--policy", str(ROOT / "policies" / "clinical-strict.yaml"),
        "--key", str(folder / "bench.key"), "-o", str(folder / "cert.json"),
        "--evidence-out", str(folder / "evidence.json"), "--budget", budget, "--quiet",
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return {
        "budget": budget,
        "exit": proc.returncode,
        "wall_s": time.perf_counter() - start,
        "stderr": proc.stderr[-2000:],
    }


def prepare(kind: str, work: Path) -> tuple[Path, Path]:
    """The spec folder (a bench_certify model at repeats 100, or an example's folder copied
    as it is, for ``kind`` a path to its attest.yaml) and a throwaway key."""
    folder = work / Path(kind).parent.name if kind.endswith(".yaml") else work / kind
    if kind.endswith(".yaml"):
        shutil.copytree(Path(kind).parent, folder)
        spec = folder / Path(kind).name
    else:
        folder.mkdir()
        spec = bench_certify.write_spec(folder, kind)
        spec.write_text(spec.read_text().replace("repeats: 20", "repeats: 100"))
    subprocess.run(
        [str(VENV_BIN / "attest"), "keygen", "--out", str(folder / "bench"), "--unencrypted"],
        check=True,
        capture_output=True,
    )
    return folder, spec


def bench_model(kind: str, work: Path, small: str, scale: float) -> dict[str, Any]:
    folder, spec = prepare(kind, work)
    refused = certify(folder, spec, small)
    print(f"{kind}: --budget {small}: exit {refused['exit']} after {refused['wall_s']:.1f} s")
    print("  " + refused["stderr"].strip().replace("\n", "\n  "), flush=True)
    found = MINIMUM.search(refused["stderr"])
    result: dict[str, Any] = {"model": kind, "refused": refused}
    if refused["exit"] != 2 or found is None:
        result["error"] = "the small budget was not refused with a minimum"
        return result
    minimum = int(found.group(1))
    result["minimum_s"] = minimum
    result["runs"] = [held_run(folder, spec, minimum, "minimum")]
    if scale > 0:
        result["runs"].append(held_run(folder, spec, round(scale * minimum), f"{scale}x minimum"))
    return result


def held_run(folder: Path, spec: Path, budget: int, label: str) -> dict[str, Any]:
    """One certify at ``budget`` seconds: its wall time against the budget and its record."""
    evidence_path = folder / "evidence.json"
    evidence_path.unlink(missing_ok=True)
    held = certify(folder, spec, f"{budget}s")
    held.update(label=label, budget_s=budget)
    if not evidence_path.exists():  # refused: the named minimum was not met
        print(f"  --budget {budget}s: exit {held['exit']}: {held['stderr'].strip()}", flush=True)
        held["error"] = "refused (no evidence)"
        return held
    evidence = json.loads(evidence_path.read_text())
    held["ratio"] = held["wall_s"] / budget
    held.update(
        record=evidence.get("budget"),
        repeats=evidence["checks"]["determinism"].get("parameters", {}).get("repeats"),
        phases=[(p["phase"], round(p["duration_s"], 2)) for p in evidence.get("phases", [])],
    )
    report(held)
    return held


def report(held: dict[str, Any]) -> None:
    record = held["record"] or {}
    print(
        f"  --budget {held['budget_s']}s ({held['label']}): wall {held['wall_s']:.1f} s = "
        f"{held['ratio']:.3f}x the budget (exit {held['exit']}; target <= 1.1x); "
        f"repeats {held['repeats']}"
    )
    rows = record.get("phases") or {}
    print(
        "  planned / actual s: "
        + ", ".join(f"{k} {v['planned_s']:.1f} / {v['actual_s']:.1f}" for k, v in rows.items())
    )
    print(f"  record: {json.dumps({k: v for k, v in record.items() if k != 'phases'})}")
    print(f"  phases: {held['phases']}")
    if held["stderr"].strip():
        print("  stderr: " + held["stderr"].strip()[-600:], flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", default="resnet18", help="bench_certify models, or paths to an attest.yaml"
    )
    parser.add_argument("--small", default="60s", help="the budget expected to be refused")
    parser.add_argument("--scale", type=float, default=1.5, help="then this x the minimum (0: no)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-budget-"))
    results = []
    for kind in args.models.split(","):
        results.append(bench_model(kind, work, args.small, args.scale))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
