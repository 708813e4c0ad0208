"""The lean repeats' comparisons alone, by fingerprint and by bytes (issue #38, "lean repeats").

Runs lean repeats of a real-size model and sums the time spent in the comparison's calls
(``RunComparison.compare_outputs`` per forward operator, ``grads`` per autograd node), as a
share of F timed just before, alternating the fingerprint comparison (the collect's) with run
0's bytes compared as before (``bits_equal``); also counts the bytes hashed per repeat. The
comparisons' share is far steadier on a busy machine than a whole repeat's wall time.

    .venv/bin/python benchmarks/repeat_comparisons.py [--model resnet18] [--rounds 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import bench_repeats  # beside this script
import torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    from attest.collection.capture.spill import Pager
    from attest.collection.profile import fingerprint
    from attest.collection.profile import repeat_capture as rc
    from attest.collection.profile.op_metrics import bits_equal
    from attest.collection.profile.profiler import capture_reference
    from attest.collection.profile.repeats import _compare_run

    torch.set_num_threads(args.threads)
    ctx = bench_repeats._context(args.model, args.threads)
    profile = capture_reference(ctx)
    spent = [0.0, 0.0]  # wall, this thread's CPU
    hashed = [0]

    def timed(method: Any) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            wall, cpu = time.perf_counter(), time.thread_time()
            result = method(*a, **k)
            spent[0] += time.perf_counter() - wall
            spent[1] += time.thread_time() - cpu
            return result

        return call

    for name in ("compare_outputs", "grads"):
        setattr(rc.RunComparison, name, timed(getattr(rc.RunComparison, name)))
    real_hash = fingerprint._HASH

    def counting_hash(buffer: Any) -> int:
        hashed[0] += len(buffer)
        return real_hash(buffer)

    fingerprint._HASH = counting_hash
    by_fingerprint = rc.same_bits

    def by_bytes(value: torch.Tensor, box: Any) -> bool:
        return bits_equal(value, box.value)

    model, x = ctx.fresh_model(), ctx.inputs()

    def repeat() -> None:
        observer = rc.RunComparison(profile.ops, Pager(ctx.release_spill_pages))
        _compare_run(ctx, profile, observer, detailed=False)

    repeat()  # the first repeat hashes run 0's kept copies once
    for _ in range(args.rounds):
        shown = []
        for name, compare in (("fingerprint", by_fingerprint), ("bytes", by_bytes)):
            rc.same_bits = compare  # type: ignore[assignment]
            spent[:] = [0.0, 0.0]
            hashed[0] = 0
            f = bench_repeats._timed(lambda: bench_repeats._bare_pass(model, x))
            repeat()
            shown.append(
                f"{name}: comparisons {spent[0] / f[0]:.3f} F wall, {spent[1] / f[1]:.3f} F CPU"
                + (f", {hashed[0] / 1e9:.2f} GB hashed" if hashed[0] else "")
            )
        print(f"{args.model} threads={args.threads} " + " | ".join(shown), flush=True)
    rc.same_bits = by_fingerprint
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
