"""What one determinism repeat costs, in F, on a real-size model (issue #38, "lean repeats").

F is one float32 forward+backward of the probe batch as training runs it (the loss's
backward, as ``bench_certify.py``'s bare child). After the profiler's reference run, each
round times, one after the other in the same process: F, a lean repeat comparing inline
(``RunComparison``: the model waits for each operator's comparison), a lean repeat comparing
on a worker thread (``QueuedComparison``, :mod:`attest.collection.profile.compare_worker`),
and F again. A repeat's cost is its wall time over the mean of the two F around it, so the
ratio holds when the machine's speed drifts (a shared machine drifts by tens of percent
within minutes); the median and the spread over the rounds are printed. ``*_cpu_F`` is the
same ratio of the CPU time of the model's own thread (``time.thread_time``): with
``--threads 1`` all of torch's work runs on that thread, so it is the work the model waits for,
which a busy machine distorts far less than wall time (the worker's own CPU is not in it). Both repeats must
find the run bit-exact (a clean model), else the script fails.

    .venv/bin/python benchmarks/bench_repeats.py [--model resnet18] [--rounds 7]
        [--threads 2] [--json out.json]

``--threads`` is torch's intra-op thread count; the collect compares on a worker thread only
when the process may use more cores than that (``spare_core``), so on a 2-core machine
``--threads 1`` shows the worker with a core of its own and ``--threads 2`` without.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import real_models  # benchmarks/real_models.py, beside this script
import torch
import torch.nn.functional as F

KEYS = ("inline_F", "queued_F", "inline_cpu_F", "queued_cpu_F")


def _context(name: str, threads: int) -> Any:
    from attest.collection.context import CheckSettings, CollectContext, LoadedSpec

    torch.manual_seed(0)
    state = real_models.build(name).state_dict()

    def build_model() -> torch.nn.Module:
        model = real_models.build(name)
        model.load_state_dict(state)
        return model

    generator = torch.Generator().manual_seed(1)
    x = torch.randn(*real_models.PROBE_SHAPES[name], generator=generator)
    spec = LoadedSpec(
        path=Path("attest.yaml"),
        name=name,
        version="0",
        factory=f"monai:{name}",
        factory_args={},
        build_model=build_model,
        inputs=x,
        labels=None,
        threads=threads,
    )
    return CollectContext(spec=spec, settings=CheckSettings())


def _timed(fn: Any) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this thread) of one call."""
    wall, cpu = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - wall, time.thread_time() - cpu


def _bare_pass(model: torch.nn.Module, x: torch.Tensor) -> tuple[float, float]:
    def run() -> None:
        model.zero_grad(set_to_none=True)
        out = model(x)
        out = out[0] if isinstance(out, (tuple, list)) else out
        labels = torch.zeros(out.shape[0], dtype=torch.long)
        loss = F.cross_entropy(out.reshape(out.shape[0], out.shape[1], -1).mean(-1), labels)
        loss.backward()

    return _timed(run)


def measure(name: str, rounds: int, threads: int) -> dict[str, Any]:
    from attest.collection.capture.spill import Pager
    from attest.collection.profile.profiler import capture_reference
    from attest.collection.profile.repeat_capture import RunComparison
    from attest.collection.profile.repeats import _compare_run

    torch.set_num_threads(threads)
    ctx = _context(name, threads)
    profile = capture_reference(ctx)
    model = ctx.fresh_model()
    x = ctx.inputs()
    _bare_pass(model, x)  # warms the allocator

    def repeat(kind: type[RunComparison]) -> tuple[float, float]:
        observer = kind(profile.ops, Pager(ctx.release_spill_pages))
        runs: list[Any] = []
        elapsed = _timed(lambda: runs.append(_compare_run(ctx, profile, observer, detailed=False)))
        run = runs[0]
        if getattr(observer, "conflict", False) or not run.matches or not all(run.exact.values()):
            raise SystemExit(f"{kind.__name__}: the clean model's repeat was not bit-exact")
        return elapsed

    try:  # absent before issue #38: the script then measures the inline repeats only
        from attest.collection.profile.compare_worker import QueuedComparison
    except ImportError:
        QueuedComparison = None

    rows: list[dict[str, float]] = []
    for _ in range(rounds):
        f_before = _bare_pass(model, x)
        inline = repeat(RunComparison)
        queued = repeat(QueuedComparison) if QueuedComparison is not None else None
        f_after = _bare_pass(model, x)
        f = (f_before[0] + f_after[0]) / 2
        f_cpu = (f_before[1] + f_after[1]) / 2
        row = {"F_s": f, "inline_F": inline[0] / f, "inline_cpu_F": inline[1] / f_cpu}
        if queued is not None:
            row["queued_F"] = queued[0] / f
            row["queued_cpu_F"] = queued[1] / f_cpu
        rows.append(row)
        shown = "  ".join(f"{k} {v:.3f}" for k, v in row.items() if k != "F_s")
        print(f"  F {f_before[0]:.3f}/{f_after[0]:.3f} s  {shown}", file=sys.stderr)
    summary: dict[str, Any] = {"model": name, "threads": threads, "operators": len(profile.ops)}
    for key in [k for k in KEYS if k in rows[0]]:
        values = [r[key] for r in rows]
        summary[key] = {
            "median": statistics.median(values),
            "min": min(values),
            "max": max(values),
        }
    summary["F_s_median"] = statistics.median(r["F_s"] for r in rows)
    summary["rounds"] = rows
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18", choices=sorted(real_models.PROBE_SHAPES))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = measure(args.model, args.rounds, args.threads)
    for key in [k for k in KEYS if k in result]:
        s = result[key]
        print(
            f"{args.model} threads={args.threads} {key}: median {s['median']:.3f} "
            f"(min {s['min']:.3f}, max {s['max']:.3f}) over {args.rounds} rounds, "
            f"F {result['F_s_median']:.3f} s"
        )
    # the figure the target (at most 1.05 F per repeat) is about: the path a collect takes here
    try:
        from attest.collection.profile.compare_worker import spare_core

        worker = spare_core() and "queued_F" in result
    except ImportError:
        worker = False
    key = "queued_F" if worker else "inline_F"
    s = result[key]
    result["per_repeat_F"] = s
    print(
        f"{args.model} per-repeat cost at threads={args.threads} "
        f"({'worker thread' if worker else 'inline'}, as a collect here compares): "
        f"{s['median']:.3f} F median (min {s['min']:.3f}, max {s['max']:.3f}); target 1.05 F"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
