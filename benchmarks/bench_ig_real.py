"""What the ``ig_*`` checks cost on three real MONAI models, in units of one forward+backward.

Issue #18: on a 2-core CPU the IG checks of ``attest collect`` took hundreds of model passes
on real medical-imaging networks. This script builds, with random weights
(``torch.manual_seed(0)``) and a seeded ``randn`` probe:

- ``resnet18``: ``monai.networks.nets.resnet18(spatial_dims=2, n_input_channels=3,
  num_classes=2)`` on 4x3x224x224;
- ``segresnet``: ``SegResNet(spatial_dims=3, in_channels=1, out_channels=2,
  init_filters=16)`` on 1x1x64x64x64;
- ``vit``: ``ViT(in_channels=3, img_size=224, patch_size=16, hidden_size=384,
  mlp_dim=1536, num_layers=6, num_heads=6, classification=True, num_classes=2,
  spatial_dims=2)`` on
  2x3x224x224;

measures F, the median of 3 float32 forward+backward passes of the whole probe batch (the
input's gradient and every weight's), and runs :func:`attest.collection.ig.checks.run` at
the ``CheckSettings`` defaults (2 threads, CPU, ``baseline: mean``). It prints each check's
``duration_s`` over F (``ig_completeness`` and ``ig_convergence`` both carry the IG path
itself), its item statuses, and the whole run over F. The machine is shared, so only
ratios to the F measured in the same run mean anything.

    .venv/bin/python benchmarks/bench_ig_real.py resnet18 vit segresnet
    .venv/bin/python benchmarks/bench_ig_real.py detect --seeds 5   # docs/ig.md's table
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import real_models  # benchmarks/real_models.py: the script's own folder is on sys.path
import torch
from torch import nn

from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CheckSettings, CollectContext, LoadedSpec
from attest.collection.ig.checks import run

THREADS = 2


MODELS = real_models.PROBE_SHAPES


def builder(name: str) -> Callable[[], nn.Module]:
    """The model with the same random weights every time it is built (``manual_seed(0)``)."""
    torch.manual_seed(0)
    state = real_models.build(name).state_dict()

    def build() -> nn.Module:
        model = real_models.build(name)
        model.load_state_dict(state)
        return model.eval()

    return build


def probe(name: str) -> torch.Tensor:
    return torch.randn(MODELS[name], generator=torch.Generator().manual_seed(0))


def one_pass(model: nn.Module, x: torch.Tensor) -> float:
    """Seconds of one forward+backward of the whole probe batch (float32)."""
    leaf = x.detach().clone().requires_grad_(True)
    weights = [p for p in model.parameters() if p.requires_grad]
    started = time.perf_counter()
    torch.autograd.grad(model_output_tensor(model(leaf)).sum(), [leaf, *weights], allow_unused=True)
    return time.perf_counter() - started


def context(name: str, settings: CheckSettings) -> CollectContext:
    spec = LoadedSpec(
        path=Path("attest.yaml"),
        name=name,
        version="1",
        factory=f"monai:{name}",
        factory_args={},
        build_model=builder(name),
        inputs=probe(name),
        labels=None,
        baseline="mean",
        threads=THREADS,
    )
    return CollectContext(spec=spec, settings=settings)


def measure(name: str, settings: CheckSettings) -> dict[str, float]:
    """F, and every IG check's duration over F; prints a table row per check."""
    torch.set_num_threads(THREADS)
    model, x = builder(name)(), probe(name)
    one_pass(model, x)  # warm-up (oneDNN primitive creation)
    f = statistics.median(one_pass(model, x) for _ in range(3))
    del model
    started = time.perf_counter()
    results = run(context(name, settings))
    total = time.perf_counter() - started
    print(f"\n{name}: probe {tuple(x.shape)}, F = {f:.3f} s")
    row: dict[str, float] = {"F": f, "total_F": total / f}
    for result in results:
        ratio = (result.duration_s or 0.0) / f
        row[result.check] = ratio
        statuses = [item.status for item in result.items]
        note = result.reason or ""
        messages = {i.message for i in result.items if i.status in ("fail", "warn")}
        print(
            f"  {result.check:18s} {result.duration_s or 0.0:8.2f} s {ratio:7.1f} F  "
            f"{result.status} {statuses} {note}"
        )
        for message in sorted(m for m in messages if m)[:2]:
            print(f"      {message[:200]}")
    print(f"  {'total':18s} {total:8.2f} s {total / f:7.1f} F")
    return row


# ----------------------------------------------------------------------------- detection
# ``bench_ig_real.py detect [seeds]``: the planted defects of the detection table in docs/ig.md
# (one JSON line per case and seed; run it with PYTHONPATH pointing at another checkout of
# attest to compare versions). Small models, one thread, each version's CheckSettings defaults.

ROWS = {"n": 0}


def count(module, args, out):
    ROWS["n"] += int(args[0].shape[0])


def cnn(seed):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 10),
    )


def trained_cnn(seed):
    m = cnn(seed)
    g = torch.Generator().manual_seed(seed + 100)
    x = torch.rand(64, 1, 8, 8, generator=g)
    y = (x[:, 0, :4].mean((1, 2)) > x[:, 0, 4:].mean((1, 2))).long()
    opt = torch.optim.Adam(m.parameters(), lr=0.03)
    for _ in range(40):
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    return m.eval()


def mlp(seed):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 16), nn.GELU(), nn.Linear(16, 4)
    )


class EdgeDetector(nn.Module):
    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        k = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]])
        self.register_buffer("kernel", k.view(1, 1, 3, 3))
        self.offset = nn.Linear(1, 10)

    def forward(self, z):
        e = (nn.functional.conv2d(z, self.kernel, padding=1) ** 2).sum(dim=(1, 2, 3))
        return e[:, None] * self.offset.weight.abs().view(1, 10) + self.offset.bias


class InputTimesConstant(nn.Module):
    """F = sum(x * c) * s + body(x).detach(): attributions x * c * s whatever the weights."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.register_buffer("c", torch.rand(1, 1, 8, 8) + 0.5)
        self.scale = nn.Linear(1, 10)
        self.body = cnn(seed)

    def forward(self, z):
        lin = (z * self.c).sum(dim=(1, 2, 3))[:, None]
        return lin * self.scale.weight.abs().view(1, 10) + 0.0 * self.body(z)


class Noisy(nn.Module):
    def __init__(self, seed, p=1.0):
        super().__init__()
        self.body = mlp(seed)
        self.p = p

    def forward(self, z):
        if torch.rand(()) < self.p:
            z = z * (1.0 + 1e-3 * torch.rand_like(z))
        return self.body(z)


class StuckDropout(nn.Module):
    def __init__(self, seed):
        super().__init__()
        self.body = mlp(seed)
        self.drop = nn.Dropout(0.1)

    def train(self, mode=True):
        super().train(mode)
        self.drop.training = True
        return self

    def forward(self, z):
        return self.body(self.drop(z))


class IndexAddShuffled(nn.Module):
    """index_add_ with a randomly permuted index order (what atomics do on a GPU): float sums in
    another order each call."""

    def __init__(self, seed):
        super().__init__()
        self.body = mlp(seed)

    def forward(self, z):
        h = self.body[0](z)
        perm = torch.randperm(h.shape[1])
        idx = torch.zeros(h.shape[1], dtype=torch.long)
        s = torch.zeros(h.shape[0], 1).index_add_(1, idx[perm], h[:, perm])
        return self.body[1:](h) + 1e-3 * s


class Step(nn.Module):
    def __init__(self, seed):
        super().__init__()
        self.body = cnn(seed)

    def forward(self, z):
        out = self.body(z)
        jump = 4.0 * (z.mean(dim=(1, 2, 3)) > 0.25).to(z.dtype)
        return (
            out
            + nn.functional.one_hot(torch.zeros_like(jump, dtype=torch.long), 10) * jump[:, None]
        )


def IMG(s):
    return torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(s))


def BRIGHT(s):
    return IMG(s) * 0.5 + 0.5


def VEC(s):
    return torch.randn(3, 64, generator=torch.Generator().manual_seed(s))


CASES = {
    # name: (builder, inputs, target, check, expected)
    "edge_detector": (EdgeDetector, IMG, 0, "ig_randomization", "fail"),
    "input_times_constant": (InputTimesConstant, IMG, 0, "ig_randomization", "fail"),
    "clean_cnn": (cnn, IMG, "argmax", "ig_randomization", "pass"),
    "trained_cnn": (trained_cnn, IMG, "argmax", "ig_randomization", "pass"),
    "clean_mlp": (mlp, VEC, "argmax", "ig_randomization", "pass"),
    "rand_noise": (Noisy, VEC, "argmax", "ig_determinism", "fail"),
    "rand_noise_half_the_calls": (lambda s: Noisy(s, 0.5), VEC, "argmax", "ig_determinism", "fail"),
    "dropout_left_on": (StuckDropout, VEC, "argmax", "ig_determinism", "fail"),
    "index_add_shuffled": (IndexAddShuffled, VEC, "argmax", "ig_determinism", "fail"),
    "clean_mlp_det": (mlp, VEC, "argmax", "ig_determinism", "pass"),
    "jump_along_path": (Step, BRIGHT, 0, "ig_convergence", "fail"),
    "jump_monotonicity": (Step, BRIGHT, 0, "ig_monotonicity", "fail"),
    "clean_cnn_conv": (cnn, IMG, "argmax", "ig_convergence", "pass"),
}


def one(name, seed):
    build, inputs, target, check, expected = CASES[name]
    x = inputs(seed)

    def factory():
        m = build(seed)
        m.register_forward_hook(count)
        return m

    spec = LoadedSpec(
        path=Path("a.yaml"),
        name=name,
        version="1",
        factory="x:y",
        factory_args={},
        build_model=factory,
        inputs=x,
        labels=None,
        target=target,
        baseline="zero",
        threads=1,
    )
    marks = []
    ctx = CollectContext(spec=spec, settings=CheckSettings())
    ctx.progress = lambda text: marks.append((text, ROWS["n"]))
    ROWS["n"] = 0
    results = {r.check: r for r in run(ctx)}
    marks.append(("end", ROWS["n"]))
    cost = {}
    for (label, start), (_, stop) in itertools.pairwise(marks):
        key = label.split(": ")[-1]
        cost["path" if "steps" in key else key] = (stop - start) / x.shape[0]
    r = results[check]
    statuses = [i.status for i in r.items]
    caught = ("fail" in statuses) if expected == "fail" else ("fail" not in statuses)
    return {
        "case": name,
        "seed": seed,
        "check": check,
        "statuses": statuses,
        "ok": caught,
        "cost_F": cost.get(check if check not in ("ig_convergence",) else "path"),
        "costs": cost,
    }


def detect(seeds: int) -> None:
    torch.set_num_threads(1)
    for name in CASES:
        for seed in range(seeds):
            print(json.dumps(one(name, seed)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "models", nargs="*", default=["resnet18", "segresnet", "vit"], choices=[*MODELS, "detect"]
    )
    parser.add_argument("--seeds", type=int, default=5, help="seeds per planted case (detect)")
    args = parser.parse_args()
    if args.models == ["detect"]:
        detect(args.seeds)
        return
    for name in args.models:
        measure(name, CheckSettings())


if __name__ == "__main__":
    main()
