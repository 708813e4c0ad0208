"""Does ``--budget`` hold on a real-size model? (issue 38, "A budget that holds").

For each model of ``bench_certify.py`` (same spec, weights and probe, with ``repeats: 100``,
clinical-strict's floor), ``attest certify --policy clinical-strict`` runs twice as child
processes, wall time measured by this script from the start of each process:

1. with ``--budget SMALL`` (default 60s): expected to be refused at the start (exit 2) with the
   smallest budget that meets the policy's floors named in seconds; the time it took to refuse
   is printed (start, preflight, run 0 and the calibration);
2. with that named minimum: expected to finish within 1.1x of it (the certify's verdict is
   the policy's business: these random-weight models with a 4-example probe fail
   clinical-strict's other rules, exit 1, which is not the point here).

Printed per model: the refusal's message and time, then the budget, the wall time, their
ratio, the evidence's ``budget`` record (calibration, estimates, correction, what was reduced)
and each phase's wall time. ``--json FILE`` writes every figure.

    .venv/bin/python benchmarks/bench_budget.py [--models resnet18,examples/volume3d/attest.yaml]
        [--small 60s] [--json out.json]
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


def bench_model(kind: str, work: Path, small: str) -> dict[str, Any]:
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
    held = certify(folder, spec, f"{minimum}s")
    if not (folder / "evidence.json").exists():  # refused again: the machine slowed down
        print(f"  --budget {minimum}s: exit {held['exit']}: {held['stderr'].strip()}", flush=True)
        result.update(minimum_s=minimum, held=held, error="no evidence at the minimum")
        return result
    evidence = json.loads((folder / "evidence.json").read_text())
    held["ratio"] = held["wall_s"] / minimum
    result.update(
        minimum_s=minimum,
        held=held,
        record=evidence.get("budget"),
        repeats=evidence["checks"]["determinism"].get("parameters", {}).get("repeats"),
        phases=[(p["phase"], round(p["duration_s"], 2)) for p in evidence.get("phases", [])],
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", default="resnet18", help="bench_certify models, or paths to an attest.yaml"
    )
    parser.add_argument("--small", default="60s", help="the budget expected to be refused")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-budget-"))
    results = []
    for kind in args.models.split(","):
        result = bench_model(kind, work, args.small)
        results.append(result)
        if "held" in result:
            held, record = result["held"], result["record"] or {}
            print(
                f"  --budget {result['minimum_s']}s: wall {held['wall_s']:.1f} s = "
                f"{held['ratio']:.3f}x the budget (exit {held['exit']}; target <= 1.1x); "
                f"repeats {result['repeats']}"
            )
            print(f"  record: {json.dumps(record)}")
            print(f"  phases: {result['phases']}")
            if held["stderr"].strip():
                print("  stderr: " + held["stderr"].strip()[-600:])
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
