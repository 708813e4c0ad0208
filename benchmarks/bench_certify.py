"""The whole ``attest collect`` under clinical-strict's evidence floors, on real-size models,
against one forward+backward (issue #38's targets; issue #18's before them).

Each model is a published architecture from MONAI with random weights (random weights are fine
for timing and memory; the checks' verdicts on them are printed too, item by item, so a reader
sees which failures are true findings on these clean models):

- ``resnet18``: ``resnet18(spatial_dims=2, n_input_channels=3, num_classes=2)``, probe
  4x3x224x224, cross-entropy loss, target argmax;
- ``segresnet``: ``SegResNet(spatial_dims=3, in_channels=1, out_channels=2, init_filters=16)``,
  probe 1x1x64x64x64, voxel cross-entropy loss, target channel 1;
- ``vit``: ``ViT(in_channels=3, img_size=224, patch_size=16, hidden_size=384, mlp_dim=1536,
  num_layers=6, num_heads=6, classification=True, num_classes=2, spatial_dims=2)``, probe
  2x3x224x224 (2D: the probe is an image), its logits;
- ``swinunetr``: ``SwinUNETR(in_channels=1, out_channels=2, feature_size=24)`` (MONAI 1.6: no
  ``img_size``, the size comes from the input), probe 1x1x64x64x64, voxel cross-entropy;
- ``unetr``: ``UNETR(in_channels=1, out_channels=2, img_size=96, feature_size=16)``, probe
  1x1x96x96x96, voxel cross-entropy.

The spec: ``baseline: mean``, ``threads: 2``, no export, and ``repeats:`` at clinical-strict's
floor, read from the shipped policy (rule ``min_repeats``, 100); the policy's other floor,
``min_probe_examples`` (8), is printed beside each probe's example count: the probes keep the
issue's shapes, on which F is defined, so only resnet18's 4 and the ViT's 2 come near it.

For each model three child processes run, one after the other, each measured by the parent
with ``os.wait4`` (wall time from the fork, user+system CPU time, peak RSS, the same way):

1. bare: imports torch and MONAI, builds the model, loads the weights and the probe, and runs
   one forward+backward of the probe batch with the loss as training would, ``--passes`` + 1
   times, timing all but the first (which warms the allocator);
2. ``attest collect SPEC -o evidence.json --progress plain`` (its lines go to
   ``collect.log`` in the work folder, readable while it runs; ``--work DIR`` keeps it):
   process start and imports included;
3. bare again. F is the median of both bare children's timed passes, so a shared machine
   that slows down or speeds up during the collect moves F with it; the bare peak RSS is the
   lower of the two children's.

Targets (issue #38), each printed PASS or MISS: the collect's wall at most 160 F (resnet18,
SegResNet) or 180 F (SwinUNETR, UNETR); a model whose F is under 0.5 s (the ViT) instead at
most 60 s of wall; the collect's peak RSS at most 3x the bare child's. Printed besides: wall /
F at each bare child's own F (how far F's drift alone moves the verdict), CPU time / F, CPU
utilization (CPU time / wall / the spec's 2 threads), each phase's and each check's share of
the wall (from evidence.json's ``phases`` and check durations; "start" is the wall no phase
covers: imports, the spec, writing the evidence), and every failed or errored item.

``--quick``: tiny sizes of the same architectures (benchmarks/real_models.py), 3 repeats, 2
timed passes: a smoke run of the harness, whose targets mean nothing. ``--models tiny`` (quick
only) is a small plain-torch CNN, without MONAI. ``--json FILE`` writes every figure.

    .venv/bin/python benchmarks/bench_certify.py [--models swinunetr,resnet18,segresnet,vit,unetr]
        [--quick] [--passes 7] [--budget 30m] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import real_models  # benchmarks/real_models.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
THREADS = 2  # the spec's threads: and the cores CPU utilization is counted against
POLICY = "clinical-strict"

MODEL_PY = textwrap.dedent(
    f'''
    """Architectures from MONAI for benchmarks/bench_certify.py."""
    import sys

    import torch
    import torch.nn.functional as F

    sys.path.insert(0, {str(ROOT / "benchmarks")!r})


    def build(kind: str, quick: bool = False) -> torch.nn.Module:
        if kind == "tiny":  # plain torch, no MONAI import: the harness's own smoke test
            return torch.nn.Sequential(
                torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                torch.nn.Linear(4 * 8 * 8, 2),
            )
        import real_models  # the models bench_gradients_real.py and bench_ig_real.py measure

        if kind == "vit":
            return ViTLogits(real_models.build("vit", quick))
        return real_models.build(kind, quick)


    class ViTLogits(torch.nn.Module):
        """MONAI's ViT returns (logits, hidden states): the model a classifier ships is the
        logits."""

        def __init__(self, vit: torch.nn.Module) -> None:
            super().__init__()
            self.vit = vit

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.vit(x)[0]


    def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target.long())
    '''
)

# target: the spec's target (argmax for a classifier, channel 1 of a segmentation);
# target_f: the wall-time target in F (issue #38), for a model whose F is at least CHEAP_F_S
MODELS: dict[str, dict[str, Any]] = {
    "resnet18": {"target": "argmax", "segmentation": False, "target_f": 160},
    "segresnet": {"target": 1, "segmentation": True, "target_f": 160},
    "vit": {"target": "argmax", "segmentation": False, "target_f": 160},
    "swinunetr": {"target": 1, "segmentation": True, "target_f": 180},
    "unetr": {"target": 1, "segmentation": True, "target_f": 180},
    "tiny": {"target": "argmax", "segmentation": False, "target_f": 160, "quick_only": True},
}
TINY_SHAPE = (4, 1, 8, 8)
CHEAP_F_S = 0.5  # a model with a cheaper F meets the wall target in CHEAP_WALL_S seconds
CHEAP_WALL_S = 60.0
RSS_TARGET = 3.0
QUICK_REPEATS = 3

BARE = textwrap.dedent(
    """
    import json, sys, time
    import torch
    sys.path.insert(0, sys.argv[1])
    import model
    from safetensors.torch import load_file
    torch.set_num_threads(int(sys.argv[5]))
    net = model.build(sys.argv[2], sys.argv[3] == "quick")
    net.load_state_dict(load_file(sys.argv[1] + "/weights.safetensors"))
    probe = load_file(sys.argv[1] + "/probe.safetensors")
    x, y = probe["x"], probe["target"]
    times, PASSES = [], int(sys.argv[4])
    for _ in range(1 + PASSES):
        net.zero_grad(set_to_none=True)
        start = time.perf_counter()
        out = net(x)
        model.loss(out, y).backward()
        times.append(time.perf_counter() - start)
        del out
    print(json.dumps(times[1:]))
    """
)


def policy_floors(policy: str = POLICY) -> dict[str, int]:
    """The shipped policy's evidence floors: ``repeats`` (rule ``min_repeats``) and
    ``probe_examples`` (rule ``min_probe_examples``), as the policy states them."""
    from attest.policy.model import load_policy

    thresholds = {rule.id: rule.threshold for rule in load_policy(policy).rules}
    floors = {"repeats": "min_repeats", "probe_examples": "min_probe_examples"}
    missing = [rule for rule in floors.values() if not isinstance(thresholds.get(rule), int)]
    if missing:
        raise SystemExit(f"policy {policy} has no integer threshold for {missing}")
    return {key: int(thresholds[rule]) for key, rule in floors.items()}  # type: ignore[arg-type]


def probe_shape(kind: str, quick: bool) -> tuple[int, ...]:
    if kind == "tiny":
        return TINY_SHAPE
    return (real_models.QUICK_PROBE_SHAPES if quick else real_models.PROBE_SHAPES)[kind]


def write_spec(folder: Path, kind: str, quick: bool = False, repeats: int = 20) -> Path:
    """attest.yaml, model.py, random weights and a seeded probe for one architecture
    (``repeats``: the spec's; 20, the default, for bench_workers.py)."""
    import torch
    from safetensors.torch import save_file

    sys.path.insert(0, str(folder))
    (folder / "model.py").write_text(MODEL_PY)
    import model  # type: ignore[import-not-found]

    sys.path.remove(str(folder))
    torch.manual_seed(0)
    net = model.build(kind, quick)
    save_file(
        {k: v.contiguous() for k, v in net.state_dict().items()}, folder / "weights.safetensors"
    )
    sys.modules.pop("model", None)
    info = MODELS[kind]
    shape = probe_shape(kind, quick)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=generator)
    labels_shape = (shape[0], *shape[2:]) if info["segmentation"] else (shape[0],)
    labels = torch.randint(0, 2, labels_shape, generator=generator)
    save_file({"x": x, "target": labels}, folder / "probe.safetensors")
    factory_args = f"{{kind: {kind}, quick: {str(quick).lower()}}}"
    (folder / "attest.yaml").write_text(
        textwrap.dedent(
            f"""
            model:
              name: bench-{kind}
              version: "1"
              factory: model:build
              factory_args: {factory_args}
              weights: weights.safetensors
            inputs:
              probe: probe.safetensors
            target: {info["target"]}
            loss: model:loss
            baseline: mean
            threads: {THREADS}
            repeats: {repeats}
            """
        )
    )
    return folder / "attest.yaml"


def _wait_child(
    argv: list[str], env: dict[str, str] | None = None, log: Path | None = None
) -> dict[str, Any]:
    """Popen.communicate reaps the child itself; to read its own rusage, wait4 must reap it,
    so the output goes to files and the parent waits with os.wait4. ``log``: the child's
    stderr goes there (a collect's progress lines, readable while it runs)."""
    with (
        tempfile.TemporaryFile("w+") as out,
        log.open("w+") if log else tempfile.TemporaryFile("w+") as err,
    ):
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} exited {proc.returncode}: {stderr[-3000:]}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
        "stdout": stdout,
    }


def _attest_env() -> dict[str, str]:
    """The environment of the attest child: this checkout first on its path, so it runs the
    code beside this script (a worktree), not whatever the venv has installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def failed_items(evidence: dict[str, Any]) -> list[dict[str, Any]]:
    """Every check that failed or errored, and every failed or errored item, in the order of
    the evidence: what a reader must judge as a true finding or a false alarm."""
    found = []
    for cid, result in evidence["checks"].items():
        bad = [i for i in result.get("items", []) if i.get("status") in ("fail", "error")]
        if result["status"] in ("fail", "error") and not bad:
            found.append({"check": cid, "status": result["status"], "subject": "check",
                          "message": result.get("reason") or ""})  # fmt: skip
        for item in bad:
            subject = item["subject"]
            label = " ".join(
                str(subject[k]) for k in ("kind", "operator_id", "op", "name", "module")
                if subject.get(k) not in (None, "")
            )  # fmt: skip
            found.append({"check": cid, "status": item["status"], "subject": label,
                          "message": item.get("message", "")})  # fmt: skip
    return found


def bench_model(kind: str, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    folder = work / kind
    folder.mkdir()
    spec = write_spec(folder, kind, args.quick, args.repeats)
    mode = "quick" if args.quick else "full"
    bare_argv = [
        sys.executable,
        "-c",
        BARE,
        str(folder),
        kind,
        mode,
        str(args.passes),
        str(THREADS),
    ]
    bare = _wait_child(bare_argv)
    before_s = json.loads(bare["stdout"].strip().splitlines()[-1])
    print(f"{kind}: bare child F = {statistics.median(before_s):.2f} s (passes "
          f"{', '.join(f'{t:.2f}' for t in before_s)}); collect log {folder / 'collect.log'}",
          flush=True)  # fmt: skip
    evidence_path = folder / "evidence.json"
    attest = [sys.executable, "-m", "attest"]
    if args.certify:
        key = folder / "bench.key"
        subprocess.run(
            [*attest, "keygen", "--out", str(folder / "bench"), "--unencrypted"],
            check=True, capture_output=True, env=_attest_env(),
        )  # fmt: skip
        argv = [
            *attest, "certify", str(spec), "--policy", POLICY,
            "--key", str(key), "-o", str(folder / "cert.json"),
            "--evidence-out", str(evidence_path),
        ]  # fmt: skip
    else:
        argv = [*attest, "collect", str(spec), "-o", str(evidence_path)]
    argv += ["--progress", "plain"]  # one line a phase and a minute, to collect.log
    if args.budget:
        argv += ["--budget", args.budget]
    run = _wait_child(argv, env=_attest_env(), log=folder / "collect.log")
    after = _wait_child(bare_argv)
    after_s = json.loads(after["stdout"].strip().splitlines()[-1])
    f_s = statistics.median(before_s + after_s)
    f_children = sorted([statistics.median(before_s), statistics.median(after_s)])
    bare["peak_rss_bytes"] = min(bare["peak_rss_bytes"], after["peak_rss_bytes"])
    evidence = json.loads(evidence_path.read_text())
    # The collect resets its own peak-RSS counter per phase (attest/collection/resources.py),
    # which also resets what wait4 reports for it: the process's peak is the highest of the
    # phases' peaks and what wait4 saw.
    phase_peaks = [p.get("peak_rss_bytes") or 0 for p in evidence.get("phases", [])]
    run["peak_rss_bytes"] = max([run["peak_rss_bytes"], *phase_peaks])
    topology = evidence["checks"].get("topology", {}).get("summary", {})
    determinism = evidence["checks"].get("determinism", {}).get("summary", {})
    return {
        "model": kind,
        "quick": args.quick,
        "probe_shape": list(probe_shape(kind, args.quick)),
        "repeats": args.repeats,
        "determinism_runs": determinism.get("runs"),
        "probe_examples": topology.get("inputs"),
        "probe_examples_floor": args.floors["probe_examples"],
        "f_s": f_s,
        "f_before_s": statistics.median(before_s),
        "f_after_s": statistics.median(after_s),
        "f_passes_s": before_s + after_s,
        "bare": {k: v for k, v in bare.items() if k != "stdout"},
        "collect": {k: v for k, v in run.items() if k != "stdout"},
        "wall_over_f": run["wall_s"] / f_s,
        "wall_over_f_range": [run["wall_s"] / f_children[1], run["wall_s"] / f_children[0]],
        "cpu_over_f": run["cpu_s"] / f_s,
        "cpu_utilization": run["cpu_s"] / run["wall_s"] / THREADS,
        "rss_ratio": run["peak_rss_bytes"] / bare["peak_rss_bytes"],
        "phases": evidence.get("phases", []),
        "checks": {
            cid: {
                "status": r["status"],
                "duration_s": r.get("duration_s"),
                "fail": sum(1 for i in r.get("items", []) if i.get("status") == "fail"),
            }
            for cid, r in evidence["checks"].items()
        },
        "failed_items": failed_items(evidence),
        "budget": evidence.get("budget"),
    }


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue #38's targets for one result: the wall (in F, or in seconds when F is under
    CHEAP_F_S) and the peak RSS ratio, each with ``passed``."""
    wall, f = result["collect"]["wall_s"], result["f_s"]
    if f < CHEAP_F_S:
        wall_target = {"name": "wall", "value": f"{wall:.0f} s", "target": f"<= {CHEAP_WALL_S:.0f} s (F < {CHEAP_F_S} s)", "passed": wall <= CHEAP_WALL_S}  # fmt: skip
    else:
        limit = MODELS[result["model"]]["target_f"]
        wall_target = {"name": "wall", "value": f"{wall / f:.0f} F", "target": f"<= {limit} F", "passed": wall / f <= limit}  # fmt: skip
    rss = {"name": "peak RSS", "value": f"{result['rss_ratio']:.2f}x", "target": f"<= {RSS_TARGET:.0f}x", "passed": result["rss_ratio"] <= RSS_TARGET}  # fmt: skip
    return [wall_target, rss]


def _gib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f}"


def _share(seconds: float | None, result: dict[str, Any]) -> str:
    if seconds is None:
        return "- | -"
    return f"{seconds / result['collect']['wall_s']:.1%} | {seconds / result['f_s']:.1f}"


def report(result: dict[str, Any]) -> list[str]:
    f, wall = result["f_s"], result["collect"]["wall_s"]
    low, high = result["wall_over_f_range"]
    verdicts = "; ".join(
        f"{t['name']} {t['value']} (target {t['target']}): {'PASS' if t['passed'] else 'MISS'}"
        for t in targets(result)
    )
    lines = [
        f"## {result['model']}{' (quick)' if result['quick'] else ''} "
        f"{'x'.join(map(str, result['probe_shape']))}: F = {f:.2f} s (median before / after "
        f"the collect {result['f_before_s']:.2f} / {result['f_after_s']:.2f} s); collect "
        f"{wall:.0f} s = {result['wall_over_f']:.0f} F wall ({low:.0f}-{high:.0f} F at either "
        f"bare child's F), CPU {result['cpu_over_f']:.0f} F, CPU utilization "
        f"{result['cpu_utilization']:.0%} of {THREADS} cores; peak RSS "
        f"{_gib(result['collect']['peak_rss_bytes'])} GiB vs bare "
        f"{_gib(result['bare']['peak_rss_bytes'])} GiB",
        f"repeats {result['repeats']} (determinism runs {result['determinism_runs']}), probe "
        f"examples {result['probe_examples']} (policy floor {result['probe_examples_floor']})",
        f"targets: {verdicts}",
        "",
        "| phase | checks | share of wall | wall / F | CPU / F | peak RSS GiB |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    covered = 0.0
    for phase in result["phases"]:
        covered += phase["duration_s"]
        lines.append(
            f"| {phase['phase']} | {', '.join(phase['checks'])} | "
            f"{_share(phase['duration_s'], result)} | {phase['cpu_s'] / f:.1f} | "
            f"{_gib(phase.get('peak_rss_bytes'))} |"
        )
    lines.append(f"| start, spec, writing | | {_share(wall - covered, result)} | | |")
    lines += ["", "| check | status | failed items | share of wall | wall / F |"]
    lines.append("| --- | --- | ---: | ---: | ---: |")
    for cid, check in result["checks"].items():
        lines.append(
            f"| {cid} | {check['status']} | {check['fail']} | {_share(check['duration_s'], result)} |"
        )
    failed = result["failed_items"]
    lines += ["", f"failed or errored: {len(failed) or 'none'}"]
    lines += [f"- {i['check']} {i['status']}: {i['subject']}: {i['message'][:300]}" for i in failed]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", default="swinunetr,resnet18,segresnet,vit,unetr")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repeats: a smoke run")
    parser.add_argument("--passes", type=int, default=None, help="timed passes per bare child")
    parser.add_argument("--certify", action="store_true", help="attest certify, not collect")
    parser.add_argument("--budget", default=None, help="pass --budget to attest")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None, help="keep the specs and logs here")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.models.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; choose from {sorted(MODELS)}")
    if not args.quick and any(MODELS[k].get("quick_only") for k in kinds):
        parser.error("--models tiny runs only with --quick")
    args.floors = policy_floors()
    args.repeats = QUICK_REPEATS if args.quick else args.floors["repeats"]
    args.passes = args.passes or (2 if args.quick else 7)
    print(f"{POLICY} floors: {args.floors}; repeats {args.repeats}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)  # fmt: skip
    results = []
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-certify-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        for kind in kinds:
            result = bench_model(kind, work, args)
            result["load_average_after"] = os.getloadavg()
            results.append(result)
            print("\n".join(report(result)), "", sep="\n", flush=True)
            if args.json:  # after every model: a long run keeps what it measured
                args.json.write_text(json.dumps(results, indent=2))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    verdicts = {r["model"]: all(t["passed"] for t in targets(r)) for r in results}
    summary = ", ".join(f"{k} {'PASS' if v else 'MISS'}" for k, v in verdicts.items())
    print(f"targets: {summary}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
