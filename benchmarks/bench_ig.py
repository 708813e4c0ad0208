"""Integrated gradients: model evaluations per quadrature rule, and speed against Captum.

Workloads: the example models ``examples/digits``, ``examples/phantom-seg`` and
``examples/volume3d``, loaded with :func:`attest.spec.load_spec` (trained weights, float32,
eval mode), with their probe inputs, their spec's target (a class or the probe's labels) and
their spec's baseline.

Part 1, speed. Same model, inputs, targets, method (Gauss-Legendre) and step count (50) as
Captum's ``IntegratedGradients.attribute`` with its default settings (one batch of every
step), timed alternately in one process (medians of ``--rounds``, CPU time of the process
with one intra-op thread, so that other load on a shared machine counts less); the
attributions must match. Then Captum again with its best ``internal_batch_size`` on this
machine, from a sweep of N x (1, 2, 5, 10, 25, 50) (the last is its default, one batch),
timed alternately against ours. Targets: >= 1.5 against the default, >= 1.0 against the best.

Part 2, evaluations per rule. For every rule (riemann_left/right/middle, trapezoid,
gausslegendre and adaptive) and probe input, ``integrated_gradients(..., tolerance=1e-3)``
from ``--start`` steps (adaptive: from the checks' ``ig_steps``) up to ``--cap``: the model evaluations (forward+backward passes) per
input it spent, and the evaluations at which its global completeness error first met 1e-3.
digits runs every probe input; the larger examples their first ``--inputs``.

    .venv/bin/python benchmarks/bench_ig.py [--quick] [--threads 1] [--rounds 5] [--markdown out.md]
"""

from __future__ import annotations

import argparse
import copy
import os
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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attest.collection.context import CheckSettings  # noqa: E402
from attest.collection.ig.attribution import ADAPTIVE, METHODS, integrated_gradients  # noqa: E402

STEPS = 50
TOLERANCE = 1e-3
SPEED_TARGET = 1.5
EXAMPLES = ("digits", "phantom-seg", "volume3d")
RULES: tuple[str, ...] = (*METHODS, ADAPTIVE)


def _examples(
    names: tuple[str, ...],
) -> list[tuple[str, nn.Module, torch.Tensor, torch.Tensor, str]]:
    """(name, float32 model in eval mode, probe inputs, target classes, spec baseline)."""
    from attest.spec import load_spec

    found = []
    for name in names:
        spec = load_spec(ROOT / "examples" / name / "attest.yaml")
        model = spec.build_model().float().eval()
        x = spec.inputs.float()
        n = x.shape[0]
        if spec.target == "label":
            if spec.labels is None:
                raise SystemExit(f"{name}: target 'label' but the probe has no 'target' tensor")
            classes = spec.labels.long().reshape(n)
        elif isinstance(spec.target, int):
            classes = torch.full((n,), spec.target, dtype=torch.long)
        else:  # argmax at the input, as integrated_gradients does
            with torch.no_grad():
                out = model(x)
            classes = out.reshape(n, out.shape[1], -1).sum(dim=2).argmax(dim=1)
        found.append((name, model, x, classes, spec.baseline))
    return found


def _real_examples(
    names: tuple[str, ...], inputs: int
) -> list[tuple[str, nn.Module, torch.Tensor, torch.Tensor, str]]:
    """The real-size models of ``benchmarks/real_models.py`` (MONAI's own initialisation under
    ``manual_seed(0)``, eval mode), their first ``inputs`` probe examples (seeded normal
    noise, as ``bench_ig_real.py``), each input's argmax class and ``baseline: mean`` (what
    ``bench_certify.py`` certifies them with)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import real_models

    found = []
    for name in names:
        torch.manual_seed(0)
        model = real_models.build(name).float().eval()
        shape = real_models.PROBE_SHAPES[name]
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0))[:inputs]
        with torch.no_grad():
            out = model(x)
        out = out[0] if isinstance(out, tuple) else out
        classes = out.reshape(x.shape[0], out.shape[1], -1).sum(dim=2).argmax(dim=1)
        found.append((name, model, x, classes, "mean"))
    return found


def _captum_target(model: nn.Module, x: torch.Tensor, classes: torch.Tensor) -> tuple[Any, Any]:
    """Captum takes the (N,) classes as a tensor (its fastest form: a list costs it a little
    more); for segmentation the model's output is summed over the class channel first."""
    with torch.no_grad():
        out = model(x[:1])
    if out.dim() <= 2:
        return model, classes

    class Summed(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, z: torch.Tensor) -> torch.Tensor:
            y = self.inner(z)
            return y.reshape(y.shape[0], y.shape[1], -1).sum(dim=2)

    return Summed(model).eval(), classes


def _as_float64(model: nn.Module) -> nn.Module:
    return copy.deepcopy(model).double().eval()


def _time(fn: Callable[[], Any]) -> float:
    """CPU seconds this process spent in ``fn`` (one intra-op thread: the work itself, not
    the waits for a core that other processes on a shared machine cause)."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def speed(
    name: str,
    model: nn.Module,
    x: torch.Tensor,
    classes: torch.Tensor,
    rounds: int,
    *,
    quick: bool = False,
    exact: bool = True,
) -> dict[str, Any]:
    """Ours against Captum's default and its best ``internal_batch_size``, alternating.
    ``exact``: also compare both with the float64 model's attributions (skipped for the
    real-size models, where one float64 run costs more than the timing itself)."""
    from captum.attr import IntegratedGradients

    forward, target = _captum_target(model, x, classes)
    captum = IntegratedGradients(forward)

    def theirs(batch: int | None = None) -> torch.Tensor:
        return captum.attribute(x, target=target, n_steps=STEPS, internal_batch_size=batch)

    def ours() -> torch.Tensor:
        return integrated_gradients(
            model, x, target=classes, method="gausslegendre", steps=STEPS
        ).attributions

    layout = integrated_gradients(
        model, x, target=classes, method="gausslegendre", steps=STEPS
    ).model_info["memory_format"]
    reference, mine = theirs().double(), ours()
    rel = float((mine - reference).norm() / reference.norm())
    # The exact answer to the same quadrature: the model and inputs in float64. Where a
    # float32 model has ReLU kinks or max-pool ties within an ulp of some path point, a
    # one-ulp difference in the path point flips a unit, so two float32 implementations can
    # differ by more than rounding; this column says which one is nearer the truth.
    rel_ours_exact = rel_theirs_exact = float("nan")
    if exact:
        truth = integrated_gradients(
            _as_float64(model), x.double(), target=classes, method="gausslegendre", steps=STEPS
        ).attributions
        rel_ours_exact = float((mine - truth).norm() / truth.norm())
        rel_theirs_exact = float((reference - truth).norm() / truth.norm())
    times: dict[str, list[float]] = {"ours": [], "captum": []}
    for _ in range(rounds):  # alternate, so that load from other processes hits both alike
        times["captum"].append(_time(theirs))
        times["ours"].append(_time(ours))
    n = x.shape[0]
    sweep: dict[int, float] = {}
    # n x STEPS is one batch of every step, Captum's default: a candidate too
    for per_batch in (5, 25, STEPS) if quick else (1, 2, 5, 10, 25, STEPS):
        batch = n * per_batch
        sweep[batch] = statistics.median(
            _time(lambda b=batch: theirs(b)) for _ in range(max(2, rounds // 2))
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
        "layout": layout,
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


def evaluations_to_tolerance(
    model: nn.Module,
    x: torch.Tensor,
    classes: torch.Tensor,
    baseline: str,
    method: str,
    *,
    start: int = 8,
    cap: int = 1024,
    tolerance: float = TOLERANCE,
) -> dict[str, Any]:
    """Model evaluations per input that ``method`` spends to reach ``tolerance``.

    Runs ``integrated_gradients(..., method=method, tolerance=tolerance)`` from ``start``
    steps (trapezoid ``start + 1``: the same cells; adaptive from the ``ig_*`` checks' own
    start, ``CheckSettings().ig_steps``, so that its count is what a collect spends) with
    ``max_steps=cap`` and reads its
    error curve. Per input, ``spent`` is what the call spent under its own stopping rule
    (fixed rules: the global completeness error; adaptive: the sum of its local panel errors,
    a bound on the global one, so it can go on after the global error is already met), and
    ``first_within`` the cumulative evaluations at the first level/round whose global
    completeness error was within ``tolerance`` (None if none was).
    """
    first = start + 1 if method == "trapezoid" else start
    if method == ADAPTIVE:
        first = CheckSettings().ig_steps
    result = integrated_gradients(
        model,
        x,
        target=classes,
        baseline=baseline,
        method=method,
        steps=first,
        tolerance=tolerance,
        max_steps=cap,
        return_diagnostics=False,
    )
    first_within: list[int | None] = [None] * x.shape[0]
    for entry in result.error_curve:
        for i, spent, rel in zip(
            entry["inputs"], entry["evaluations"], entry["rel_error"], strict=True
        ):
            if first_within[i] is None and rel is not None and rel <= tolerance:
                first_within[i] = int(spent)
    return {
        "spent": [int(v) for v in result.evaluations],
        "first_within": first_within,
        "converged": [bool(v) for v in result.converged],
        "rel_error": [float(v) for v in result.completeness_rel_error],
    }


def evaluations(
    name: str,
    model: nn.Module,
    x: torch.Tensor,
    classes: torch.Tensor,
    baseline: str,
    start: int,
    cap: int,
    rules: tuple[str, ...] = RULES,
) -> list[dict[str, Any]]:
    """One row per rule (every fixed rule and ``adaptive`` unless ``rules`` says) for one
    example model."""
    rows = []
    for method in rules:
        began = time.perf_counter()
        counts = evaluations_to_tolerance(model, x, classes, baseline, method, start=start, cap=cap)
        reached = [v for v in counts["first_within"] if v is not None]
        rows.append(
            {
                "model": name,
                "method": method,
                "paths": len(counts["spent"]),
                "baseline": baseline,
                "mean_evaluations": float(np.mean(counts["spent"])),
                "median_evaluations": float(np.median(counts["spent"])),
                "max_evaluations": int(np.max(counts["spent"])),
                "converged": int(sum(counts["converged"])),
                # evaluations when the global error first met the tolerance (None: never)
                "mean_first_within": float(np.mean(reached))
                if len(reached) == len(counts["spent"])
                else None,
                "reached": len(reached),
                "first_within": counts["first_within"],
                "spent": counts["spent"],
                "seconds": time.perf_counter() - began,
            }
        )
    return rows


def hindsight(eval_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model and input: the evaluations the adaptive rule spent (None if its global
    completeness error never met the tolerance), against the best fixed rule chosen in hindsight for that
    input (the fixed rule and ladder level that met it with the fewest cumulative
    evaluations), and their ratio; with the model's totals over its inputs."""
    out = []
    for model in dict.fromkeys(r["model"] for r in eval_rows):
        rows = {r["method"]: r for r in eval_rows if r["model"] == model}
        if ADAPTIVE not in rows:
            continue
        # what the adaptive call spent (its stop also asks every panel to be within 2 % of
        # F's change, so it may go on after its global error first met the tolerance)
        adaptive = [
            None if first is None else spent
            for first, spent in zip(
                rows[ADAPTIVE]["first_within"], rows[ADAPTIVE]["spent"], strict=True
            )
        ]
        per_input = []
        for i, spent in enumerate(adaptive):
            fixed = [
                (r["first_within"][i], name)
                for name, r in rows.items()
                if name != ADAPTIVE and r["first_within"][i] is not None
            ]
            best, rule = min(fixed) if fixed else (None, None)
            ratio = None if spent is None or best is None else spent / best
            per_input.append({"adaptive": spent, "best": best, "rule": rule, "ratio": ratio})
        complete = all(p["adaptive"] is not None and p["best"] is not None for p in per_input)
        total_a = sum(p["adaptive"] for p in per_input) if complete else None
        total_b = sum(p["best"] for p in per_input) if complete else None
        out.append(
            {
                "model": model,
                "inputs": per_input,
                "adaptive_total": total_a,
                "best_total": total_b,
                "total_ratio": None if not complete else total_a / total_b,
                "max_ratio": max(
                    (p["ratio"] for p in per_input if p["ratio"] is not None), default=None
                ),
                "within_target": sum(
                    1 for p in per_input if p["ratio"] is not None and p["ratio"] <= SPEED_TARGET
                ),
            }
        )
    return out


def _fewest(eval_rows: list[dict[str, Any]], key: str) -> dict[str, str]:
    """Per model, the rule with the lowest ``key`` among rules that met the tolerance on every
    input (under their own stopping rule for ``mean_evaluations``, at any level for
    ``mean_first_within``)."""
    best: dict[str, str] = {}
    for model in dict.fromkeys(r["model"] for r in eval_rows):
        rows = [
            r
            for r in eval_rows
            if r["model"] == model
            and r[key] is not None
            and (r["reached"] if key == "mean_first_within" else r["converged"]) == r["paths"]
        ]
        if rows:
            best[model] = min(rows, key=lambda r: r[key])["method"]
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7, help="alternating timing rounds")
    parser.add_argument("--start", type=int, default=8, help="first step count of the ladder")
    parser.add_argument(
        "--cap", type=int, default=1025, help="max_steps (adaptive: path samples per input)"
    )
    parser.add_argument("--inputs", type=int, default=2, help="probe inputs of the 3-D/seg models")
    parser.add_argument(
        "--models",
        default=",".join(EXAMPLES),
        help="workloads: the examples and/or real-size models (resnet18, segresnet, vit)",
    )
    parser.add_argument(
        "--real-inputs", type=int, default=1, help="probe inputs of the real-size models"
    )
    parser.add_argument(
        "--real-cap", type=int, default=257, help="max_steps of the real-size models"
    )
    parser.add_argument(
        "--rules",
        default=",".join(RULES),
        help="rules of part 2 (the real-size models may not afford every ladder)",
    )
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-rules", action="store_true", help="speed only")
    parser.add_argument("--quick", action="store_true", help="smoke run: digits only, 2 rounds")
    parser.add_argument(
        "--markdown", type=Path, default=None, help="write the results section here"
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.inputs, args.cap = 2, 2, 257
    torch.set_num_threads(args.threads)
    names = ("digits",) if args.quick else tuple(args.models.split(","))
    examples = _examples(tuple(n for n in names if n in EXAMPLES))
    examples += _real_examples(tuple(n for n in names if n not in EXAMPLES), args.real_inputs)

    args.load_before = os.getloadavg()
    speed_rows = []
    for name, model, x, classes, _ in [] if args.skip_speed else examples:
        real = name not in EXAMPLES
        row = speed(name, model, x, classes, args.rounds, quick=args.quick or real, exact=not real)
        speed_rows.append(row)
        print(
            f"{row['workload']:12s} ({row['layout']}) ours {row['ours_s'] * 1e3:8.1f} ms  captum default "
            f"{row['captum_default_s'] * 1e3:8.1f} ms  x{row['speedup_vs_default']:.2f}  | captum "
            f"best (batch {row['captum_best_batch']}) {row['captum_best_s'] * 1e3:8.1f} ms vs ours "
            f"{row['ours_again_s'] * 1e3:8.1f} ms  x{row['speedup_vs_best']:.2f}  | rel L2 "
            f"{row['attribution_rel_l2']:.1e} (vs float64: ours {row['ours_vs_float64']:.1e}, "
            f"captum {row['captum_vs_float64']:.1e})",
            flush=True,
        )
    eval_rows = []
    for name, model, x, classes, baseline in [] if args.skip_rules else examples:
        k = x.shape[0] if name in ("digits",) or name not in EXAMPLES else args.inputs
        cap = args.cap if name in EXAMPLES else args.real_cap
        rules = tuple(args.rules.split(","))
        rows = evaluations(name, model, x[:k], classes[:k], baseline, args.start, cap, rules)
        eval_rows += rows
        for row in rows:
            within = row["mean_first_within"]
            print(
                f"{row['model']:12s} {row['method']:15s} paths {row['paths']:2d}  evaluations "
                f"mean {row['mean_evaluations']:7.1f}  median {row['median_evaluations']:6.0f}  "
                f"max {row['max_evaluations']:5d}  converged {row['converged']}/{row['paths']}  "
                f"first within tol: {'-' if within is None else f'{within:.1f}'}  "
                f"({row['seconds']:.1f} s)",
                flush=True,
            )
    for key, what in (("mean_evaluations", "spent"), ("mean_first_within", "first within")):
        print(f"fewest evaluations ({what}): {_fewest(eval_rows, key)}")
    compared = hindsight(eval_rows)
    for row in compared:
        per_input = "  ".join(f"{p['adaptive']}/{p['best']} ({p['rule']})" for p in row["inputs"])
        ratio = "-" if row["total_ratio"] is None else f"{row['total_ratio']:.2f}"
        print(
            f"{row['model']:12s} adaptive/best fixed in hindsight per input: {per_input}; "
            f"totals {row['adaptive_total']}/{row['best_total']} = {ratio}"
        )
    args.load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min): before {args.load_before}, after {args.load_after}")
    if args.markdown is not None:
        text = _markdown(args, speed_rows, eval_rows) + _hindsight_markdown(compared)
        args.markdown.write_text(text, encoding="utf-8")


def _markdown(
    args: argparse.Namespace, speed_rows: list[dict[str, Any]], eval_rows: list[dict[str, Any]]
) -> str:
    """The measured tables as Markdown (the prose around them is written by hand)."""
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} logical CPUs (shared), Python "
        f"{platform.python_version()}, torch {torch.__version__}, {args.threads} intra-op "
        f"thread(s); {date.today().isoformat()}; load average (1, 5, 15 min) "
        f"{', '.join(f'{v:.2f}' for v in args.load_before)} before, "
        f"{', '.join(f'{v:.2f}' for v in args.load_after)} after. Times are CPU time of the "
        "process (`time.process_time`).",
        "",
    ]
    if speed_rows:
        lines += [
            "| workload | inputs | our layout | ours | Captum default | speed-up | Captum best batch "
            "| Captum best | ours | speed-up | ours vs Captum, rel. L2 | ours vs float64 "
            "| Captum vs float64 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in speed_rows:
            lines.append(
                f"| {r['workload']} | {'x'.join(map(str, r['inputs']))} | {r['layout']} "
                f"| {r['ours_s'] * 1e3:.1f} ms "
                f"| {r['captum_default_s'] * 1e3:.1f} ms | {r['speedup_vs_default']:.2f} "
                f"| {r['captum_best_batch']} | {r['captum_best_s'] * 1e3:.1f} ms "
                f"| {r['ours_again_s'] * 1e3:.1f} ms | {r['speedup_vs_best']:.2f} "
                f"| {r['attribution_rel_l2']:.1e} | {r['ours_vs_float64']:.1e} "
                f"| {r['captum_vs_float64']:.1e} |"
            )
        lines.append("")
    if eval_rows:
        lines += [
            "| model | baseline | rule | paths | spent: mean | median | max | converged "
            "| first within 1e-3: mean |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in eval_rows:
            within = r["mean_first_within"]
            lines.append(
                f"| {r['model']} | {r['baseline']} | {r['method']} | {r['paths']} "
                f"| {r['mean_evaluations']:.1f} | {r['median_evaluations']:.0f} "
                f"| {r['max_evaluations']} | {r['converged']}/{r['paths']} "
                f"| {'-' if within is None else f'{within:.1f}'} |"
            )
        lines.append("")
    return "\n".join(lines)


def _hindsight_markdown(compared: list[dict[str, Any]]) -> str:
    """The per-input comparison of :func:`hindsight` as a Markdown table."""
    if not compared:
        return ""
    lines = [
        "| model | inputs | adaptive, per input | best fixed rule in hindsight, per input "
        "| adaptive total | best total | ratio of totals | largest ratio | inputs within 1.5x |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in compared:
        ratio, worst = row["total_ratio"], row["max_ratio"]
        best = ", ".join(f"{p['best']} ({p['rule']})" for p in row["inputs"])
        lines.append(
            f"| {row['model']} | {len(row['inputs'])} "
            f"| {', '.join(str(p['adaptive']) for p in row['inputs'])} | {best} "
            f"| {row['adaptive_total']} | {row['best_total']} "
            f"| {'-' if ratio is None else f'{ratio:.2f}'} "
            f"| {'-' if worst is None else f'{worst:.2f}'} "
            f"| {row['within_target']}/{len(row['inputs'])} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
