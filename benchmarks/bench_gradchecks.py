"""Cost of the gradient correctness checks against one float64 forward+backward pass.

For each model and probe batch: the median time of one float64 forward+backward of the probe
objective (the alternative a user would run anyway) and of each check of
``attest.collection.gradients.runner`` at the default settings (K = 4 directions, 2 Hessian-vector
directions, micro-batches 2 and 4), over rounds that alternate the two in one process (see
:func:`measure`). Reports the ratio (target: at most 30x), each check's share, and how the
ratio grows with the operator count (depth series) and the input size (resolution series);
the example models (``examples/digits``, ``phantom-seg``, ``volume3d``, loaded from their
``attest.yaml`` as ``attest collect`` loads them) are rows too. The operator capture that fills
``ctx.operators`` belongs to the profiler and is reported apart. Times are the process's CPU
time with one intra-op thread (``--threads``), so that neighbours on a shared machine do not
distort the ratio.

    .venv/bin/python benchmarks/bench_gradchecks.py            # the full table
    .venv/bin/python benchmarks/bench_gradchecks.py --quick    # two small configurations
    .venv/bin/python benchmarks/bench_gradchecks.py --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from attest.collection.capture.run import capture_operators, model_output_tensor
from attest.collection.context import CheckSettings, CollectContext, LoadedSpec
from attest.collection.gradients import runner as gradchecks
from attest.collection.gradients.flow import probe_objective

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradcheck_floor import prepare_floor  # this folder's helper, on the path above


class ConvNet(nn.Module):
    """``depth`` Conv-BatchNorm-ReLU blocks with a max-pool after the first, then a linear head."""

    def __init__(self, depth: int, width: int = 8, classes: int = 4) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 1
        for i in range(depth):
            layers += [
                nn.Conv2d(channels, width, 3, padding=1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
            ]
            if i == 0:
                layers.append(nn.MaxPool2d(2))
            channels = width
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


def _loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target.long())


def _context(
    build: Callable[[], nn.Module], shape: tuple[int, ...], classes: int = 4
) -> CollectContext:
    torch.manual_seed(0)
    model = build()
    with torch.no_grad():  # trained-looking batch-norm statistics
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
    state = model.state_dict()

    def build_model() -> nn.Module:
        fresh = build()
        fresh.load_state_dict(state)
        return fresh

    generator = torch.Generator().manual_seed(1)
    spec = LoadedSpec(
        path=Path("bench.yaml"),
        name="bench",
        version="0",
        factory="bench:build",
        factory_args={},
        build_model=build_model,
        inputs=torch.randn(*shape, generator=generator),
        labels=torch.randint(0, classes, (shape[0],), generator=generator),
        loss_fn=_loss,
        loss="bench:loss",
        threads=1,
    )
    return CollectContext(spec=spec, settings=CheckSettings())


def _forward_backward_seconds(ctx: CollectContext, repeats: int) -> list[float]:
    model = ctx.fresh_model(torch.float64)
    x = ctx.inputs(torch.float64)
    times = []
    for _ in range(repeats):
        start = _clock()
        xx = x.detach().requires_grad_(True)
        objective = probe_objective(ctx.spec, model_output_tensor(model(xx)), ctx.spec.labels)
        torch.autograd.grad(objective, [xx, *model.parameters()])
        times.append(_clock() - start)
    return times


def _load() -> str:
    try:
        import os

        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "?"


def _clock() -> float:
    # CPU time of this process: on a shared machine, wall time mostly measures the neighbours.
    # With one intra-op thread it is the work done; both sides of the ratio use it.
    return time.process_time()


def measure(name: str, ctx: CollectContext, repeats: int, rounds: int = 3) -> dict[str, Any]:
    """One row: baseline, capture, each check's time, the ratio.

    ``rounds`` times: ``repeats`` baseline passes, then every check in order. A check's time is
    its median over the rounds and the baseline the median of all its passes, so a neighbour's
    burst on a shared machine moves one sample, not the ratio; the per-round ratios (each
    round's checks over that round's baseline) give the spread."""
    _forward_backward_seconds(ctx, 1)  # warm-up
    start = _clock()
    records, _ = capture_operators(
        ctx.fresh_model(), ctx.inputs(), ctx.spec, labels=ctx.spec.labels, backward=False
    )
    capture_s = _clock() - start
    ctx.operators = records
    floor_once = prepare_floor(ctx)
    floor_once()  # warm-up
    floors: list[float] = []
    baselines: list[float] = []
    samples: dict[str, list[float]] = {check_id: [] for check_id, _ in gradchecks.CHECKS}
    round_ratios: list[float] = []
    results = []
    for _ in range(rounds):
        # A full collection of the process's heap (90-110 ms here, whatever runs when it
        # triggers) belongs to neither side: start every round with none pending.
        gc.collect()
        here = _forward_backward_seconds(ctx, repeats)
        baselines += here
        floors.append(floor_once())
        results = []
        spent = 0.0
        # As ``gradchecks.run`` runs them: in execution order, with the hand-offs on.
        each = gradchecks.run_each(ctx)
        while True:
            start = _clock()
            try:
                check_id, result = next(each)
            except StopIteration:
                break
            took = _clock() - start
            results.append(result)
            samples[check_id].append(took)
            spent += took
        round_ratios.append(spent / statistics.median(here))
    baseline = statistics.median(baselines)
    floor = statistics.median(floors)
    per_check = {k: statistics.median(v) for k, v in samples.items()}
    total = sum(per_check.values())
    flagged = sorted(r.check for r in results if r.failed_items or r.status == "error")
    return {
        "model": name,
        "operators": len(records),
        "input_numel": ctx.spec.inputs.numel(),
        "baseline_ms": baseline * 1e3,
        "capture_ratio": capture_s / baseline,
        "total_s": total,
        "ratio": total / baseline,
        "floor_ratio": floor / baseline,
        "share_pct": {k: 100 * v / total for k, v in per_check.items()},
        "check_ratio": {k: v / baseline for k, v in per_check.items()},
        "flagged": flagged,
        "round_ratios": round_ratios,
    }


ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ("digits", "phantom-seg", "volume3d")


def _example(name: str) -> CollectContext:
    """An example model loaded from its ``attest.yaml`` as ``attest collect`` loads it (trained
    weights, its probe batch, its loss), with the default check settings."""
    from attest.spec import load_spec

    return CollectContext(
        spec=load_spec(ROOT / "examples" / name / "attest.yaml"), settings=CheckSettings()
    )


def steady_allocator() -> bool:
    """Keep glibc's malloc from returning freed memory to the kernel, for both sides alike
    (as ``bench_collect.py`` does; see its ``steady_allocator``).

    Otherwise whether a float64 forward+backward finds its activation buffers still mapped
    depends on what the checks freed before it: the baseline moved by up to 2.4x between
    processes (page faults, mostly system time), and the ratio with it. Returns False where
    ``mallopt`` is not available (not glibc)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(mallopt(m_trim_threshold, 1 << 30)) and bool(mallopt(m_mmap_threshold, 1 << 25))


def configurations(quick: bool) -> list[tuple[str, Callable[[], CollectContext]]]:
    """The depth series (operator count) and the resolution series of a width-8 network (cheap
    convolutions: elementwise work and per-operator costs dominate), then two wider ones."""
    depths = (1, 2) if quick else (1, 2, 4, 8)
    sizes = (32,) if quick else (16, 32, 64, 128)
    configs: list[tuple[str, Callable[[], CollectContext]]] = []
    for depth in depths:
        configs.append(
            (
                f"depth {depth}, 8x1x64x64",
                lambda d=depth: _context(lambda: ConvNet(d), (8, 1, 64, 64)),
            )
        )
    for size in sizes:
        if size == 64 and 2 in depths:
            continue  # already in the depth series
        configs.append(
            (
                f"depth 2, 8x1x{size}x{size}",
                lambda s=size: _context(lambda: ConvNet(2), (8, 1, s, s)),
            )
        )
    # The example models users will compare with.
    for example in ("digits",) if quick else EXAMPLES:
        configs.append((f"examples/{example}", lambda e=example: _example(e)))
    if not quick:  # wider convolutions: compute-bound, as in real imaging models
        for width, size in ((32, 64), (64, 32)):
            configs.append(
                (
                    f"depth 4 width {width}, 8x1x{size}x{size}",
                    lambda w=width, s=size: _context(lambda: ConvNet(4, width=w), (8, 1, s, s)),
                )
            )
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two small configurations only")
    parser.add_argument("--repeats", type=int, default=3, help="baseline passes per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of baseline + checks")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    parser.add_argument(
        "--only", help="only the rows whose name contains this text (or one of A,B,...)"
    )
    parser.add_argument(
        "--system-allocator",
        action="store_true",
        help="leave glibc's malloc as it is (see steady_allocator)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steady = False if args.system_allocator else steady_allocator()
    rows = []
    for name, make in configurations(args.quick):
        if args.only and not any(part in name for part in args.only.split(",")):
            continue
        rows.append(measure(name, make(), args.repeats, args.rounds))
        print(
            f"{name}: {rows[-1]['ratio']:.1f}x (floor {rows[-1]['floor_ratio']:.1f}x)",
            file=sys.stderr,
            flush=True,
        )
    checks = list(rows[0]["share_pct"])
    print(
        f"# gradient checks vs one float64 forward+backward ({date.today()}, {platform.machine()}, "
        f"torch {torch.__version__}, {args.threads} thread(s), allocator "
        f"{'steady' if steady else 'as is'}, load average {_load()})"
    )
    header = [
        "model",
        "ops",
        "input",
        "fwd+bwd ms",
        "checks s",
        "ratio",
        "per round",
        "floor",
        *[f"{c} %" for c in checks],
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        cells = [
            row["model"],
            str(row["operators"]),
            str(row["input_numel"]),
            f"{row['baseline_ms']:.1f}",
            f"{row['total_s']:.2f}",
            f"{row['ratio']:.1f}x",
            f"{min(row['round_ratios']):.0f}-{max(row['round_ratios']):.0f}x",
            f"{row['floor_ratio']:.1f}x",
            *[f"{row['share_pct'][c]:.0f}" for c in checks],
        ]
        print("| " + " | ".join(cells) + " |")
    flagged = {row["model"]: row["flagged"] for row in rows if row["flagged"]}
    if flagged:
        print(f"note: checks that flagged something: {flagged}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
