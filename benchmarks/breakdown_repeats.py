"""Where a lean determinism repeat's time over 1.0 F goes (issue #38, "lean repeats").

Each round times, in the same process, one after the other: F (bare forward+backward with the
loss), a lean repeat comparing with run 0 (``RunComparison``: by fingerprint), the same
comparing run 0's kept bytes instead (``bits_equal``, as before fingerprints), a lean repeat with the
comparison disabled (the same dispatch mode and node hooks, the comparison's calls doing
nothing), the same lean dispatch with no per-operator work at all (a ``TorchDispatchMode`` that
only calls the operator), and F with an empty post-hook on every autograd node (hooks alone).
Each is divided by the mean of the F timed before and after it in the same round; the median
and the spread over the rounds are printed; ``*_cpu`` is the same ratio of the CPU time of
the model's own thread (with ``--threads 1`` all of torch's work, far less distorted by a busy
machine than wall time).

    .venv/bin/python benchmarks/breakdown_repeats.py [--model resnet18] [--rounds 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import bench_repeats  # beside this script
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode


class _Bare(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def _loss(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = model(x)
    out = out[0] if isinstance(out, (tuple, list)) else out
    labels = torch.zeros(out.shape[0], dtype=torch.long)
    return F.cross_entropy(out.reshape(out.shape[0], out.shape[1], -1).mean(-1), labels)


def _hooks_only(model: torch.nn.Module, x: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    loss = _loss(model, x)
    seen: set[Any] = set()
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        node.register_hook(lambda gi, go: None)
        stack.extend(n for n, _ in node.next_functions)
    loss.backward()


def _mode_only(model: torch.nn.Module, x: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    with _Bare():
        loss = _loss(model, x)
    loss.backward()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    from attest.collection.capture.spill import Pager
    from attest.collection.profile import repeat_capture
    from attest.collection.profile.op_metrics import bits_equal
    from attest.collection.profile.profiler import capture_reference
    from attest.collection.profile.repeat_capture import RunComparison
    from attest.collection.profile.repeats import _compare_run

    class _NoCompare(RunComparison):
        def compare_outputs(self, *a: Any, **k: Any) -> None:
            return None

        def grads(self, *a: Any, **k: Any) -> None:
            return None

    torch.set_num_threads(args.threads)
    ctx = bench_repeats._context(args.model, args.threads)
    profile = capture_reference(ctx)
    model = ctx.fresh_model()
    x = ctx.inputs()

    def bare() -> None:
        model.zero_grad(set_to_none=True)
        _loss(model, x).backward()

    def lean(kind: type[RunComparison]) -> Any:
        return lambda: _compare_run(
            ctx, profile, kind(profile.ops, Pager(ctx.release_spill_pages)), detailed=False
        )

    def lean_bytes() -> Any:  # the comparison before fingerprints: run 0's bytes read each time
        fingerprinted = repeat_capture.same_bits
        repeat_capture.same_bits = lambda value, box: bits_equal(value, box.value)
        try:
            return lean(RunComparison)()
        finally:
            repeat_capture.same_bits = fingerprinted

    cases = {
        "lean_compare": lean(RunComparison),
        "lean_compare_bytes": lean_bytes,
        "lean_no_compare": lean(_NoCompare),
        "mode_only": lambda: _mode_only(model, x),
        "hooks_only": lambda: _hooks_only(model, x),
    }
    bare()
    rows: dict[str, list[float]] = {f"{k}{u}": [] for k in cases for u in ("", "_cpu")}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            f0 = bench_repeats._timed(bare)
            dt = bench_repeats._timed(fn)
            f1 = bench_repeats._timed(bare)
            rows[name].append(dt[0] / ((f0[0] + f1[0]) / 2))
            rows[f"{name}_cpu"].append(dt[1] / ((f0[1] + f1[1]) / 2))
        print("  " + "  ".join(f"{k} {v[-1]:.3f}" for k, v in rows.items()), flush=True)
    for name, values in rows.items():
        print(
            f"{args.model} threads={args.threads} {name}: median {statistics.median(values):.3f} F"
            f" (min {min(values):.3f}, max {max(values):.3f}) over {args.rounds} rounds"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
