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
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from attest.collection.capture.run import model_output_tensor
from attest.collection.context import CheckSettings, CollectContext, LoadedSpec
from attest.collection.ig.checks import run

THREADS = 2


def _resnet18() -> nn.Module:
    from monai.networks.nets.resnet import resnet18

    return resnet18(spatial_dims=2, n_input_channels=3, num_classes=2)


def _segresnet() -> nn.Module:
    from monai.networks.nets.segresnet import SegResNet

    return SegResNet(spatial_dims=3, in_channels=1, out_channels=2, init_filters=16)


def _vit() -> nn.Module:
    from monai.networks.nets.vit import ViT

    return ViT(
        in_channels=3,
        img_size=224,
        patch_size=16,
        hidden_size=384,
        mlp_dim=1536,
        num_layers=6,
        num_heads=6,
        classification=True,
        num_classes=2,
        spatial_dims=2,
    )


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "resnet18": (_resnet18, (4, 3, 224, 224)),
    "segresnet": (_segresnet, (1, 1, 64, 64, 64)),
    "vit": (_vit, (2, 3, 224, 224)),
}


def builder(name: str) -> Callable[[], nn.Module]:
    """The model with the same random weights every time it is built (``manual_seed(0)``)."""
    factory = MODELS[name][0]
    torch.manual_seed(0)
    state = factory().state_dict()

    def build() -> nn.Module:
        model = factory()
        model.load_state_dict(state)
        return model.eval()

    return build


def probe(name: str) -> torch.Tensor:
    return torch.randn(MODELS[name][1], generator=torch.Generator().manual_seed(0))


def one_pass(model: nn.Module, x: torch.Tensor) -> float:
    """Seconds of one forward+backward of the whole probe batch (float32)."""
    leaf = x.detach().clone().requires_grad_(True)
    weights = [p for p in model.parameters() if p.requires_grad]
    started = time.perf_counter()
    torch.autograd.grad(model_output_tensor(model(leaf)).sum(), [leaf, *weights])
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args()
    for name in args.models:
        measure(name, CheckSettings())


if __name__ == "__main__":
    main()
