"""Benchmark of the operator profiler (issue 3): overhead, per-operator scaling, peak memory.

Prints three figures, each a ratio measured in the same run (these machines are noisy):

* overhead, on the example models (examples/digits, examples/phantom-seg, examples/volume3d,
  with their own ``repeats``) and a residual CNN: the profiler's phases (reference capture,
  float64 fidelity with the local re-runs, R-1 repeats) against the bare PyTorch work they
  must do: R forward+backward passes in the deployed precision, one float64
  forward+backward, and one more deployed-precision forward+backward standing for the local
  re-runs. Each side builds a fresh model per pass, as the profiler does. Bare and profiler
  alternate ``--trials`` times; the figure is the median of the per-trial ratios. Time is
  the process's CPU time at 1 intra-op thread (the machine is shared: CPU time is what
  other processes' load disturbs least); wall-clock ratios are printed beside it.
  Target: <= 1.5x. Beside it, the floor of any per-operator measurement made through
  PyTorch's dispatch modes: the same bare work with its R deployed-precision passes run under
  a dispatch mode that does nothing but call the operator (``DoNothingMode``), timed in the
  same trials. Comparing every operator of every repeat needs at least that.
* scaling: profiler CPU time per operator for a residual network of 8, 16, 32 and 64 blocks.
  Target: flat within 25 % (max/min of the per-operator cost).
* peak memory: bytes of tensor storage alive at once, tracked by a dispatch mode that sees
  every ATen call's outputs (each storage counted when created, uncounted when freed), for
  ``collect`` (topology + profiler) against one bare forward+backward of the same model.
  Both sides count everything they allocate, parameters included. Target: <= 3x.

Usage: .venv/bin/python benchmarks/bench_collect.py [--trials 3] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
import tempfile
import textwrap
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attest.collection.capture.spill import in_spill_file  # noqa: E402

EXAMPLES = ("digits", "phantom-seg", "volume3d")

MODEL = textwrap.dedent(
    """
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1)
            self.norm = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x):
            return torch.relu(x + self.conv2(torch.relu(self.norm(self.conv1(x)))))

    def build(blocks=8, channels=16, classes=10):
        return nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1),
            *[Block(channels) for _ in range(blocks)],
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(channels, classes),
        )
    """
)


def write_spec(folder: Path, blocks: int, batch: int, size: int, repeats: int) -> Path:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(MODEL)
    namespace: dict[str, object] = {}
    exec(MODEL, namespace)
    torch.manual_seed(0)
    model = namespace["build"](blocks=blocks)  # type: ignore[operator]
    model.eval()
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "w.safetensors")
    )
    save_file({"x": torch.randn(batch, 3, size, size)}, str(folder / "p.safetensors"))
    (folder / "attest.yaml").write_text(
        "model:\n  name: bench\n  version: '1'\n  factory: model:build\n"
        f"  factory_args: {{blocks: {blocks}}}\n  weights: w.safetensors\n"
        f"inputs:\n  probe: p.safetensors\nrepeats: {repeats}\nthreads: 1\n"
    )
    return folder / "attest.yaml"


def load(spec_path: Path) -> Any:
    from attest.spec import load_spec

    spec = load_spec(spec_path)
    spec.threads = 1  # measurement: CPU time at one intra-op thread
    return spec


def bare_pass(spec: Any, dtype: torch.dtype) -> None:
    """One forward+backward of a fresh model, as a user would write it."""
    from attest.collection.context import target_scalar

    model = spec.build_model().to(dtype).eval()
    x = spec.inputs.to(dtype).requires_grad_(True)
    out = model(x)
    objective = target_scalar(out, spec, spec.labels).sum()
    torch.autograd.grad(objective, [x, *model.parameters()])


def bare_work(spec: Any) -> None:
    """R deployed fwd+bwd + 1 float64 fwd+bwd + 1 deployed fwd+bwd (the local re-runs)."""
    from attest.collection.context import precision_dtype

    low = precision_dtype(spec.precision)
    for _ in range(spec.repeats + 1):
        bare_pass(spec, low)
    bare_pass(spec, torch.float64)


class DoNothingMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """A dispatch mode that only calls the operator: the cost of seeing every ATen call."""

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        return func(*args, **(kwargs or {}))


def floor_work(spec: Any) -> None:
    """``bare_work`` with its R deployed passes seen by a do-nothing dispatch mode: what the
    repeats cost at the least if every operator of every run is to be seen at all."""
    from attest.collection.context import precision_dtype

    low = precision_dtype(spec.precision)
    bare_pass(spec, low)
    for _ in range(spec.repeats):
        with DoNothingMode():
            bare_pass(spec, low)
    bare_pass(spec, torch.float64)


def profiler_work(spec: Any) -> int:
    """The profiler's phases the target covers; returns the operator count."""
    from attest.collection.context import CheckSettings, CollectContext
    from attest.collection.profile.profiler import (
        capture_reference,
        measure_fidelity,
        measure_repeats,
    )

    ctx = CollectContext(spec=spec, settings=CheckSettings())
    profile = capture_reference(ctx)
    measure_fidelity(ctx, profile)
    measure_repeats(ctx, profile)
    return len(profile.ops)


def collect_work(spec: Any) -> int:
    """``collect`` with the profiler's checks; returns the bytes written to spill files."""
    from attest.collection import collect

    seen: dict[str, Any] = {}

    def keep_profile(ctx: Any) -> list[Any]:
        seen["profile"] = ctx.profiler.profile
        return []

    collect(
        spec,
        runners=[
            "attest.collection.profile.topology:run",
            "attest.collection.profile.profiler:run",
            keep_profile,
        ],
    )
    return int(seen["profile"].spill_bytes)


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one call, including collecting the cyclic garbage it
    left (the profiler pauses Python's collector during its runs, so its cycles would
    otherwise be collected, and timed, in whatever runs next). Untimed, first: the garbage
    of what ran before is collected and everything alive is frozen (``gc.freeze``), so the
    timed collection walks only what the call itself made, not the whole process."""
    gc.collect()
    gc.freeze()
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    gc.collect()
    return time.process_time() - cpu, time.perf_counter() - wall


def overhead(name: str, spec: Any, trials: int) -> float:
    from attest.collection import runtime_info as environment
    from attest.collection.context import CheckSettings

    with environment.runtime(spec, CheckSettings()):
        n_ops = profiler_work(spec)  # warm-up: kernels, allocator, lazy imports
        bare_work(spec)
        floor_work(spec)
        cpu_ratios, wall_ratios, bare_cpu, prof_cpu, floor_ratios = [], [], [], [], []
        for _ in range(trials):
            b_cpu, b_wall = timed(lambda: bare_work(spec))
            p_cpu, p_wall = timed(lambda: profiler_work(spec))
            f_cpu, _ = timed(lambda: floor_work(spec))
            cpu_ratios.append(p_cpu / b_cpu)
            wall_ratios.append(p_wall / b_wall)
            floor_ratios.append(f_cpu / b_cpu)
            bare_cpu.append(b_cpu)
            prof_cpu.append(p_cpu)
        full_cpu, _ = timed(lambda: collect_work(spec))
    # Each trial's bare and profiler runs are adjacent in time: the median of the per-trial
    # ratios is the figure; the least of each side (load from other processes only ever
    # adds time) is shown beside it.
    ratio = statistics.median(cpu_ratios)
    print(
        f"overhead {name:<12} {n_ops:>4} ops, R={spec.repeats:>2}: bare "
        f"{min(bare_cpu):6.3f}s, profiler {min(prof_cpu):6.3f}s (least of each) -> "
        f"{ratio:.2f}x CPU, median of trials {', '.join(f'{r:.2f}' for r in cpu_ratios)} "
        f"(least/least {min(prof_cpu) / min(bare_cpu):.2f}x; wall median "
        f"{statistics.median(wall_ratios):.2f}x); full collect {full_cpu / min(bare_cpu):.2f}x; "
        f"floor (do-nothing dispatch mode on the R passes) {statistics.median(floor_ratios):.2f}x"
    )
    return ratio


class StoragePeak(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Bytes of tensor storage alive at once: every storage an ATen call returns is counted
    when first seen and uncounted when Python frees it. Storages that are views of the
    profiler's spill files (memory-mapped temporary files: page cache, which the kernel writes
    out and evicts under pressure) are counted apart, in ``mapped_peak``."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.live: dict[int, int] = {}
        self.mapped: set[int] = set()
        self.current = 0
        self.peak = 0
        self.mapped_current = 0
        self.mapped_peak = 0

    def _free(self, ptr: int) -> None:
        nbytes = self.live.pop(ptr, 0)
        if ptr in self.mapped:
            self.mapped.discard(ptr)
            self.mapped_current -= nbytes
        else:
            self.current -= nbytes

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            try:
                storage = t.untyped_storage()
            except (RuntimeError, NotImplementedError):
                continue
            ptr = int(storage.data_ptr())
            if ptr and ptr not in self.live:
                self.live[ptr] = int(storage.nbytes())
                if in_spill_file(ptr):
                    self.mapped.add(ptr)
                    self.mapped_current += self.live[ptr]
                    self.mapped_peak = max(self.mapped_peak, self.mapped_current)
                else:
                    self.current += self.live[ptr]
                    self.peak = max(self.peak, self.current)
                weakref.finalize(storage, self._free, ptr)
        return out


def peak_bytes(fn: Callable[[], object]) -> StoragePeak:
    import gc

    gc.collect()
    tracker = StoragePeak()
    with tracker:
        fn()
    return tracker


def memory(name: str, spec: Any) -> float:
    from attest.collection.context import precision_dtype

    bare = peak_bytes(lambda: bare_pass(spec, precision_dtype(spec.precision))).peak
    spilled: list[int] = []
    full = peak_bytes(lambda: spilled.append(collect_work(spec)))
    ratio = full.peak / bare
    print(
        f"peak memory {name:<12} bare fwd+bwd {bare / 2**20:7.2f} MiB, collect "
        f"{full.peak / 2**20:7.2f} MiB -> {ratio:.2f}x (target <= 3x); spill files "
        f"{spilled[0] / 2**20:.2f} MiB written, {full.mapped_peak / 2**20:.2f} MiB of them "
        "mapped at once"
    )
    return ratio


def steady_allocator() -> bool:
    """Keep glibc's malloc from returning freed memory to the kernel (trim threshold and mmap
    threshold fixed high), for both sides alike.

    Without it, whether a pass finds its activation buffers already mapped depends on what
    the process freed before: glibc trims the heap top and unmaps large blocks, and the next
    pass page-faults them back in (measured: 34,000 minor faults and 15-20 % system time per
    bare volume3d workload, about 1,000 for the profiler's, whose kept tensors change the
    heap's shape), which made the profiler look cheaper than the bare work (0.67-0.87x on
    the two larger models). The ratio is meant to compare work, not heap histories.
    Returns False where ``mallopt`` is not available (not glibc).
    """
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(mallopt(m_trim_threshold, 1 << 30)) and bool(mallopt(m_mmap_threshold, 1 << 25))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="skip the 64-block scaling run")
    parser.add_argument("--only", choices=["overhead", "scaling", "memory"])
    parser.add_argument(
        "--system-allocator",
        action="store_true",
        help="leave glibc's malloc as it is (see steady_allocator)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    steady = False if args.system_allocator else steady_allocator()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s), "
        f"allocator {'steady (no trim, fixed mmap threshold)' if steady else 'as is'}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        cnn = write_spec(Path(tmp) / "cnn", blocks=8, batch=16, size=32, repeats=5)
        models = {name: ROOT / "examples" / name / "attest.yaml" for name in EXAMPLES}
        models["residual-cnn"] = cnn
        if args.only in (None, "overhead"):
            for name, path in models.items():
                overhead(name, load(path), args.trials)
        if args.only in (None, "scaling"):
            from attest.collection import runtime_info as environment
            from attest.collection.context import CheckSettings

            # The sizes take turns within each trial, so a slow spell of this shared machine
            # lands on all of them rather than on whichever size was being timed.
            sizes = (8, 16, 32) if args.quick else (8, 16, 32, 64)
            specs = {
                blocks: load(
                    write_spec(Path(tmp) / f"s{blocks}", blocks=blocks, batch=4, size=16, repeats=3)
                )
                for blocks in sizes
            }
            samples: dict[int, list[float]] = {blocks: [] for blocks in sizes}
            ops: dict[int, int] = {}
            with environment.runtime(specs[sizes[0]], CheckSettings()):
                for blocks in sizes:
                    ops[blocks] = profiler_work(specs[blocks])  # warm-up
                for _ in range(args.trials):
                    for blocks in sizes:
                        cpu, _ = timed(functools.partial(profiler_work, specs[blocks]))
                        samples[blocks].append(cpu)
            per_op: dict[int, float] = {}
            for blocks in sizes:
                per_op[blocks] = statistics.median(samples[blocks]) / ops[blocks] * 1e6
                print(
                    f"scaling: {blocks:>2} blocks, {ops[blocks]:>4} operators: "
                    f"{per_op[blocks]:.0f} us per operator"
                )
            spread = max(per_op.values()) / min(per_op.values())
            print(f"scaling: per-operator cost max/min = {spread:.2f} (target <= 1.25)")
        if args.only in (None, "memory"):
            for name, path in models.items():
                memory(name, load(path))


if __name__ == "__main__":
    main()
