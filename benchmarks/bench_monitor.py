"""Overhead of attest.TrainingMonitor at its default sampling (issue #20: at most 5 %).

Trains examples/phantom-seg (train.py's own ``train()``: 12 epochs of 24 steps, one thread,
deterministic) with and without the monitor, alternating, ``--rounds`` times each in this one
process, and prints the median wall times and their ratio, and the same for the process's CPU
time (training runs on one thread, so CPU time is the work done, far less sensitive to other
processes on a shared machine than wall time). Two cross-checks are printed too:
the monitor's own time summed from its log (``monitor_wall_s``, the part of the difference
that is the monitor's and not the machine's noise), and whether the trained weights are
bit-identical with and without it (they must be).

    .venv/bin/python benchmarks/bench_monitor.py [--rounds 2] [--every N]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attest.collection.monitor import DEFAULT_EVERY  # noqa: E402
from attest.evidence.training_log import read_training_log  # noqa: E402


def _train_module() -> object:
    folder = ROOT / "examples" / "phantom-seg"
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("phantom_train", folder / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--every", type=int, default=DEFAULT_EVERY)
    args = parser.parse_args()
    train = _train_module().train  # type: ignore[attr-defined]
    plain_s: list[float] = []
    watched_s: list[float] = []
    plain_cpu: list[float] = []
    watched_cpu: list[float] = []
    monitor_s: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for watched in (False, True) if r % 2 == 0 else (True, False):
                out = Path(tmp) / f"{'watched' if watched else 'plain'}-{r}"
                log = out / "run.jsonl" if watched else None
                start, start_cpu = time.perf_counter(), time.process_time()
                train(out, log, every=args.every)
                (watched_s if watched else plain_s).append(time.perf_counter() - start)
                (watched_cpu if watched else plain_cpu).append(time.process_time() - start_cpu)
                if log is not None:
                    samples = read_training_log(log).samples
                    monitor_s.append(sum(s.monitor_wall_s for s in samples))
        weights = [
            (Path(tmp) / f"{kind}-0" / "weights.safetensors").read_bytes()
            for kind in ("plain", "watched")
        ]
    plain, watched = statistics.median(plain_s), statistics.median(watched_s)
    own = statistics.median(monitor_s)
    print(
        f"phantom-seg train.py, 288 steps, monitor every {args.every} steps ({args.rounds} rounds)"
    )
    print(
        f"  wall: without monitor {plain:.2f} s, with {watched:.2f} s, ratio {watched / plain:.4f}"
    )
    cpu_plain, cpu_watched = statistics.median(plain_cpu), statistics.median(watched_cpu)
    print(
        f"  CPU:  without monitor {cpu_plain:.2f} s, with {cpu_watched:.2f} s, "
        f"ratio {cpu_watched / cpu_plain:.4f}"
    )
    print(
        f"  monitor's own time (from the log): {own:.2f} s = {100 * own / plain:.2f} % of training"
    )
    print(f"  weights bit-identical with and without: {weights[0] == weights[1]}")


if __name__ == "__main__":
    main()
