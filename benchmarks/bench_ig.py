"""Integrated gradients: speed against Captum, and model evaluations per quadrature rule.

Part 1, speed. Same model, inputs, targets, method (Gauss-Legendre) and step count (50) as
Captum's ``IntegratedGradients.attribute`` with its default settings (one batch of every
step), timed alternately in one process; the attributions must match (relative L2 <= 1e-6).
Then Captum again with its best ``internal_batch_size`` from a sweep on this machine, where
ours must be no slower. Workloads: every example under ``examples/`` with an ``attest.yaml``
(trained weights, probe inputs, the spec's target) and a CNN of three conv layers (seeded
initialization) on 3x32x32 and 3x64x64 inputs, sizes at which one batch of every step
(Captum's default) outgrows the CPU's caches. Targets: ratio >= 1.5 against the default, >= 1.0 against the best.

Part 2, evaluations per rule. For each example model and probe input, the adaptive ladder
from ``--start`` steps (cells doubled, nested rules re-using their evaluations) until the
completeness error is <= 1e-3 relative, or ``--cap``; reported: the model evaluations
(forward+backward passes) per input spent, mean, median and max. The digits model (cheap)
runs every probe input with every baseline (zero, mean, blur, uniform); the larger examples
run their spec's baseline on their first ``--inputs`` probe inputs.

    .venv/bin/python benchmarks/bench_ig.py [--threads 1] [--rounds 7] [--append docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attest.collect.ig import BASELINES, METHODS, integrated_gradients  # noqa: E402

STEPS = 50
TOLERANCE = 1e-3
SPEED_TARGET = 1.5


def _cifar_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).eval()


def _examples() -> list[tuple[str, nn.Module, torch.Tensor, torch.Tensor, str]]:
    """(name, model, inputs, target classes, baseline) of every example with a spec."""
    from attest.collect.context import CollectContext
    from attest.spec import load_spec

    found = []
    for spec_path in sorted((ROOT / "examples").glob("*/attest.yaml")):
        try:
            spec = load_spec(spec_path)
        except Exception as exc:  # an example still being built: say so, skip it
            print(f"skipping {spec_path.parent.name}: {exc}", file=sys.stderr)
            continue
        ctx = CollectContext(spec=spec)
        model, x = ctx.fresh_model(), ctx.inputs()
        with torch.no_grad():
            out = model(x)
        if spec.target == "label" and spec.labels is not None:
            classes = spec.labels.long()
        elif isinstance(spec.target, int):
            classes = torch.full((x.shape[0],), spec.target, dtype=torch.long)
        else:
            classes = out.reshape(x.shape[0], out.shape[1], -1).sum(dim=2).argmax(dim=1)
        found.append((spec_path.parent.name, model, x, classes, spec.baseline))
    return found


def _captum_target(model: nn.Module, x: torch.Tensor, classes: torch.Tensor) -> tuple[Any, Any]:
    """Captum needs (N,) classes for classifiers; segmentation sums the class channel first."""
    with torch.no_grad():
        out = model(x[:1])
    if out.dim() <= 2:
        return model, classes.tolist()

    class Summed(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, z: torch.Tensor) -> torch.Tensor:
            y = self.inner(z)
            return y.reshape(y.shape[0], y.shape[1], -1).sum(dim=2)

    return Summed(model).eval(), classes.tolist()


def _as_float64(model: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(model).double().eval()


def _time(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def speed(
    name: str, model: nn.Module, x: torch.Tensor, classes: torch.Tensor, rounds: int
) -> dict[str, Any]:
    from captum.attr import IntegratedGradients

    forward, target = _captum_target(model, x, classes)
    captum = IntegratedGradients(forward)

    def theirs(batch: int | None = None) -> torch.Tensor:
        return captum.attribute(x, target=target, n_steps=STEPS, internal_batch_size=batch)

    def ours() -> torch.Tensor:
        return integrated_gradients(
            model, x, target=classes, method="gausslegendre", steps=STEPS
        ).attributions

    reference, mine = theirs().double(), ours()
    rel = float((mine - reference).norm() / reference.norm())
    # The exact answer to the same quadrature: the model and inputs in float64. Where a
    # float32 model has ReLU kinks or max-pool ties within an ulp of some path point, a
    # one-ulp difference in the path point flips a unit, so two float32 implementations can
    # differ by more than rounding; this column says which one is nearer the truth.
    exact = integrated_gradients(
        _as_float64(model), x.double(), target=classes, method="gausslegendre", steps=STEPS
    ).attributions
    rel_ours_exact = float((mine - exact).norm() / exact.norm())
    rel_theirs_exact = float((reference - exact).norm() / exact.norm())
    times: dict[str, list[float]] = {"ours": [], "captum": []}
    for _ in range(rounds):  # alternate, so that load from other processes hits both alike
        times["captum"].append(_time(theirs))
        times["ours"].append(_time(ours))
    n = x.shape[0]
    sweep: dict[int, float] = {}
    for per_batch in (1, 2, 5, 10, 25):
        batch = n * per_batch
        sweep[batch] = statistics.median(
            _time(lambda b=batch: theirs(b)) for _ in range(max(3, rounds // 2))
        )
    best_batch = min(sweep, key=lambda b: sweep[b])
    best_times: dict[str, list[float]] = {"ours": [], "captum": []}
    for _ in range(rounds):
        best_times["captum"].append(_time(lambda: theirs(best_batch)))
        best_times["ours"].append(_time(ours))
    ours_s, captum_s = statistics.median(times["ours"]), statistics.median(times["captum"])
    ours_b, captum_b = (
        statistics.median(best_times["ours"]),
        statistics.median(best_times["captum"]),
    )
    return {
        "workload": name,
        "inputs": tuple(x.shape),
        "ours_s": ours_s,
        "captum_default_s": captum_s,
        "speedup_vs_default": captum_s / ours_s,
        "captum_best_batch": best_batch,
        "captum_best_s": captum_b,
        "ours_again_s": ours_b,
        "speedup_vs_best": captum_b / ours_b,
        "attribution_rel_l2": rel,
        "ours_vs_float64": rel_ours_exact,
        "captum_vs_float64": rel_theirs_exact,
    }


def evaluations(
    name: str,
    model: nn.Module,
    x: torch.Tensor,
    classes: torch.Tensor,
    baselines: tuple[str, ...],
    start: int,
    cap: int,
) -> list[dict[str, Any]]:
    rows = []
    for method in METHODS:
        per_input: list[int] = []
        converged = True
        for baseline in baselines:
            first = start + 1 if method == "trapezoid" else start
            result = integrated_gradients(
                model,
                x,
                target=classes,
                baseline=baseline,
                method=method,
                steps=first,
                tolerance=TOLERANCE,
                max_steps=cap,
                return_diagnostics=False,
            )
            per_input += result.evaluations.tolist()
            converged &= bool(result.converged.all())
        rows.append(
            {
                "model": name,
                "method": method,
                "paths": len(per_input),
                "baselines": ", ".join(baselines),
                "mean_evaluations": float(np.mean(per_input)),
                "median_evaluations": float(np.median(per_input)),
                "max_evaluations": int(np.max(per_input)),
                "all_converged": converged,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--start", type=int, default=8, help="first step count of the ladder")
    parser.add_argument("--cap", type=int, default=4096, help="max steps of the ladder")
    parser.add_argument("--inputs", type=int, default=2, help="probe inputs of larger examples")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--append", type=Path, default=None, help="append a Markdown section here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    examples = _examples()
    cifar = _cifar_cnn()
    workloads = [(n, m, x, c) for n, m, x, c, _ in examples]
    inputs = torch.rand(8, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    workloads.append(("cifar-cnn (seeded init)", cifar, inputs, torch.arange(8) % 10))
    larger = torch.rand(8, 3, 64, 64, generator=torch.Generator().manual_seed(2))
    workloads.append(("cifar-cnn at 64x64", cifar, larger, torch.arange(8) % 10))

    speed_rows = []
    for n, m, x, c in [] if args.skip_speed else workloads:
        row = speed(n, m, x, c, args.rounds)
        speed_rows.append(row)
        print(
            f"{row['workload']:28s} ours {row['ours_s'] * 1e3:8.1f} ms  captum default {row['captum_default_s'] * 1e3:8.1f} ms"
            f"  x{row['speedup_vs_default']:.2f}  | captum best (batch {row['captum_best_batch']}) "
            f"{row['captum_best_s'] * 1e3:8.1f} ms vs ours {row['ours_again_s'] * 1e3:8.1f} ms  x{row['speedup_vs_best']:.2f}"
            f"  | rel L2 {row['attribution_rel_l2']:.1e} (vs float64: ours {row['ours_vs_float64']:.1e},"
            f" captum {row['captum_vs_float64']:.1e})",
            flush=True,
        )
    eval_rows = []
    for name, model, x, classes, baseline in examples:
        if name == "digits":
            rows = evaluations(name, model, x, classes, BASELINES, args.start, args.cap)
        else:
            k = args.inputs
            rows = evaluations(name, model, x[:k], classes[:k], (baseline,), args.start, args.cap)
        eval_rows += rows
        for row in rows:
            print(
                f"{row['model']:10s} {row['method']:15s} paths {row['paths']:3d}  evaluations mean {row['mean_evaluations']:7.1f}"
                f"  median {row['median_evaluations']:6.0f}  max {row['max_evaluations']:6d}  converged {row['all_converged']}",
                flush=True,
            )
    if args.append is not None:
        _append(args, speed_rows, eval_rows)


def _append(
    args: argparse.Namespace, speed_rows: list[dict[str, Any]], eval_rows: list[dict[str, Any]]
) -> None:
    lines = [
        "",
        "## Integrated gradients (`benchmarks/bench_ig.py`)",
        "",
        f"Machine: {platform.machine()}, {platform.processor() or 'unknown CPU'}, Python {platform.python_version()}, "
        f"torch {torch.__version__}, {args.threads} intra-op thread(s), shared with other processes; {date.today().isoformat()}.",
        f"Command: `.venv/bin/python benchmarks/bench_ig.py --threads {args.threads} --rounds {args.rounds}` "
        f"(medians of {args.rounds} alternating runs).",
        "",
    ]
    if speed_rows:
        lines += [
            f"Speed: Gauss-Legendre, {STEPS} steps, same inputs and targets. Targets: >= {SPEED_TARGET} against "
            "Captum's default (one batch of every step), >= 1.0 against Captum's best `internal_batch_size`.",
            "",
            "| workload | inputs | ours | Captum default | speed-up | Captum best batch | Captum best | ours | speed-up "
            "| ours vs Captum, rel. L2 | ours vs float64 | Captum vs float64 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in speed_rows:
            lines.append(
                f"| {r['workload']} | {'x'.join(map(str, r['inputs']))} | {r['ours_s'] * 1e3:.1f} ms | {r['captum_default_s'] * 1e3:.1f} ms "
                f"| {r['speedup_vs_default']:.2f} | {r['captum_best_batch']} | {r['captum_best_s'] * 1e3:.1f} ms "
                f"| {r['ours_again_s'] * 1e3:.1f} ms | {r['speedup_vs_best']:.2f} | {r['attribution_rel_l2']:.1e} "
                f"| {r['ours_vs_float64']:.1e} | {r['captum_vs_float64']:.1e} |"
            )
        lines.append("")
    if eval_rows:
        lines += [
            f"Model evaluations per input to reach a completeness error <= {TOLERANCE:g} relative: adaptive ladder "
            f"from {args.start} steps (trapezoid {args.start + 1}), cap {args.cap}; digits: every probe input with "
            f"each baseline; the other examples: their spec's baseline, first {args.inputs} probe inputs.",
            "",
            "| model | baselines | rule | paths | mean | median | max | all converged |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in eval_rows:
            lines.append(
                f"| {r['model']} | {r['baselines']} | {r['method']} | {r['paths']} | {r['mean_evaluations']:.1f} | {r['median_evaluations']:.0f} "
                f"| {r['max_evaluations']} | {r['all_converged']} |"
            )
        lines.append("")
    with args.append.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines))


if __name__ == "__main__":
    main()
