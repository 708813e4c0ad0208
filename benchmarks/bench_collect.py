"""Benchmark of the operator profiler (issue 3): overhead, per-operator scaling, peak memory.

Prints three figures, each a ratio measured in the same run (these machines are noisy):

* overhead: the profiler's phases (reference capture, float64 fidelity with local re-runs,
  R-1 repeats) against the bare PyTorch work they must do: R forward+backward passes in the
  deployed precision, one float64 forward+backward, and one more deployed-precision
  forward+backward standing for the local re-runs. Target: <= 1.5x. The full ``collect``
  (adding topology's per-input forwards and the thread-count run) is shown beside it.
* scaling: profiler time per operator for a residual network of 8, 16, 32 and 64 blocks.
  Target: flat within 25 % (max/min of the per-operator cost).
* peak memory: resident-set growth of ``collect`` against one bare forward+backward, each in
  a fresh process. Target: <= 3x.

Usage: .venv/bin/python benchmarks/bench_collect.py [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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


def bare_seconds(spec_path: Path, repeats: int) -> float:
    """R deployed fwd+bwd + 1 float64 fwd+bwd + 1 deployed fwd+bwd (the local re-runs)."""
    from attest.collect.context import target_scalar
    from attest.spec import load_spec

    spec = load_spec(spec_path)

    def step(dtype: torch.dtype) -> None:
        model = spec.build_model().to(dtype)
        x = spec.inputs.to(dtype).requires_grad_(True)
        out = model(x)
        objective = target_scalar(out, spec).sum()
        torch.autograd.grad(objective, [x, *model.parameters()])

    start = time.perf_counter()
    for _ in range(repeats + 1):
        step(torch.float32)
    step(torch.float64)
    return time.perf_counter() - start


def profiler_seconds(spec_path: Path) -> tuple[float, int]:
    from attest.collect import environment
    from attest.collect.context import CheckSettings, CollectContext
    from attest.collect.profiler import capture_reference, measure_fidelity, measure_repeats
    from attest.spec import load_spec

    spec = load_spec(spec_path)
    with environment.runtime(spec, CheckSettings()):
        ctx = CollectContext(spec=spec)
        start = time.perf_counter()
        profile = capture_reference(ctx)
        measure_fidelity(ctx, profile)
        measure_repeats(ctx, profile)
        return time.perf_counter() - start, len(profile.ops)


def collect_seconds(spec_path: Path) -> float:
    from attest.collect import collect

    start = time.perf_counter()
    collect(spec_path, runners=["attest.collect.topology:run", "attest.collect.profiler:run"])
    return time.perf_counter() - start


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def memory_child(spec_path: str, mode: str) -> None:
    """Run in a fresh process: print the resident-set growth of one mode."""
    from attest.collect.context import target_scalar
    from attest.spec import load_spec

    spec = load_spec(spec_path)
    model = spec.build_model()
    x = spec.inputs.clone().requires_grad_(True)
    import attest.collect  # noqa: F401 - import cost outside the measurement

    base = _rss_bytes()
    if mode == "bare":
        out = model(x)
        torch.autograd.grad(target_scalar(out, spec).sum(), [x, *model.parameters()])
    else:
        from attest.collect import collect

        collect(spec, runners=["attest.collect.topology:run", "attest.collect.profiler:run"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"growth": max(peak - base, 1)}))


def memory_ratio(spec_path: Path) -> tuple[int, int]:
    def run(mode: str) -> int:
        proc = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(spec_path), mode],
            check=True,
            capture_output=True,
            text=True,
        )
        return int(json.loads(proc.stdout.strip().splitlines()[-1])["growth"])

    return run("bare"), run("collect")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--memory-child", nargs=2)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(*args.memory_child)
        return
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        spec = write_spec(Path(tmp) / "overhead", blocks=8, batch=16, size=32, repeats=args.repeats)
        bare_seconds(spec, 1)  # warm up kernels and the allocator
        bare = bare_seconds(spec, args.repeats)
        prof, n_ops = profiler_seconds(spec)
        full = collect_seconds(spec)
        print(
            f"overhead: {n_ops} operators, R={args.repeats}: bare {bare:.2f}s, profiler {prof:.2f}s "
            f"-> {prof / bare:.2f}x (target <= 1.5x); full collect {full:.2f}s -> {full / bare:.2f}x"
        )

        per_op: dict[int, float] = {}
        for blocks in (8, 16, 32) if args.quick else (8, 16, 32, 64):
            s = write_spec(Path(tmp) / f"scale{blocks}", blocks=blocks, batch=4, size=16, repeats=3)
            seconds, ops = profiler_seconds(s)
            per_op[blocks] = seconds / ops * 1e6
            print(
                f"scaling: {blocks:>2} blocks, {ops:>4} operators: {per_op[blocks]:.0f} us per operator"
            )
        spread = max(per_op.values()) / min(per_op.values())
        print(f"scaling: per-operator cost max/min = {spread:.2f} (target <= 1.25)")

        bare_mem, collect_mem = memory_ratio(spec)
        print(
            f"peak memory: bare fwd+bwd +{bare_mem / 2**20:.1f} MiB, collect +{collect_mem / 2**20:.1f} MiB "
            f"-> {collect_mem / bare_mem:.2f}x (target <= 3x)"
        )


if __name__ == "__main__":
    main()
