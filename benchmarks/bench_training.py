"""Cost of the four training checks (issue #19): each within 10 forward+backward passes.

For each model (``examples/amp-seg`` as shipped, and a MONAI ``resnet18`` on a 4x3x128x128
probe with a cross-entropy loss, Adam, float16 autocast with a GradScaler, two checkpointed
layers and batch sizes 1, 4, 8), this script loads the spec, measures F (the median of three
training-mode forward+backward passes of the probe batch with the loss, float32, in this
process), then runs each training check alone and prints:

- its wall time / F and / F_amp (the same pass under the declared autocast: on a CPU, float16
  convolutions are several times slower than float32, and the checks that train as declared
  pay that; target <= 10; ``batch_invariance``: in proportion to the sum of the batch
  sizes over the probe's, so its target is 10 * sum(batch sizes) / N);
- the forward calls of the model's root module it made (every model the check builds is
  counted through ``LoadedSpec.build_model``), a count that does not depend on the machine's
  load: a training step is one forward, a float64 reference one more.

Random weights are fine for timing (resnet18); amp-seg has its trained weights.

    .venv/bin/python benchmarks/bench_training.py [--models amp-seg,resnet18]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHECKS = ("mixed_precision", "recompute", "batch_invariance", "resume")

RESNET = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F
    from monai.networks import nets


    def build():
        return nets.resnet18(spatial_dims=2, n_input_channels=3, num_classes=2)


    def loss(output, target):
        return F.cross_entropy(output, target.long())


    def make_optimizer(params):
        return torch.optim.Adam(params, lr=1e-4)
    """
)


def resnet_spec(folder: Path) -> Path:
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(RESNET)
    sys.path.insert(0, str(folder))
    model = importlib.import_module("model")
    sys.path.remove(str(folder))
    torch.manual_seed(0)
    net = model.build()
    sys.modules.pop("model", None)
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, folder / "w.safetensors")
    gen = torch.Generator().manual_seed(1)
    probe = {"x": torch.randn(4, 3, 128, 128, generator=gen), "target": torch.tensor([0, 1, 1, 0])}
    save_file(probe, folder / "probe.safetensors")
    (folder / "attest.yaml").write_text(
        textwrap.dedent(
            """
            model: {name: bench-resnet18, version: "1", factory: model:build,
                    weights: w.safetensors}
            inputs: {probe: probe.safetensors}
            loss: model:loss
            training:
              optimizer: model:make_optimizer
              autocast: float16
              grad_scaler: true
              checkpoint: ["layer2", "layer3"]
              batch_sizes: [1, 4, 8]
              steps: 3
            """
        )
    )
    return folder / "attest.yaml"


def measure_f(loaded: Any, autocast: str | None = None) -> float:
    """One training-mode forward+backward with the loss (under the declared autocast)."""
    import contextlib

    import torch

    model = loaded.build_model()
    model.train()
    times = []
    for _ in range(4):
        model.zero_grad(set_to_none=True)
        amp: Any = (
            torch.autocast("cpu", dtype=getattr(torch, autocast))
            if autocast
            else contextlib.nullcontext()
        )
        start = time.perf_counter()
        with amp:
            loss = loaded.loss_fn(model(loaded.inputs), loaded.labels)
        loss.backward()
        times.append(time.perf_counter() - start)
    del model
    return statistics.median(times[1:])


def counting(loaded: Any, counter: list[int]) -> None:
    """Count the root module's forward calls of every model the checks build."""
    build = loaded.build_model

    def build_counted() -> Any:
        model = build()
        model.register_forward_pre_hook(lambda _m, _a: counter.append(1))
        return model

    loaded.build_model = build_counted


def bench(name: str, spec: Path) -> None:
    import torch

    from attest.collection.context import CollectContext
    from attest.spec import load_spec

    torch.set_num_threads(2)
    loaded = load_spec(spec)
    f_s = measure_f(loaded)
    autocast = loaded.training.autocast if loaded.training else None
    f_amp = measure_f(loaded, autocast) if autocast else f_s
    n = int(loaded.inputs.shape[0])
    sizes = loaded.training.batch_sizes if loaded.training else []
    print(
        f"## {name}: F = {f_s * 1000:.0f} ms float32, F_amp = {f_amp * 1000:.0f} ms under "
        f"autocast {autocast} (probe batch {n}; batch sizes {sizes})"
    )
    print("| check | status | failed items | wall / F | wall / F_amp | target | root forwards |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for check in CHECKS:
        counter: list[int] = []
        counting(loaded, counter)
        ctx = CollectContext(spec=loaded)
        module = importlib.import_module(f"attest.collection.training.{check}")
        start = time.perf_counter()
        result = module.run(ctx)
        wall = time.perf_counter() - start
        target = 10.0 * (sum(sizes) / n if check == "batch_invariance" and sizes else 1.0)
        failed = sum(1 for i in result.items if i.status == "fail")
        print(
            f"| {check} | {result.status} | {failed} | {wall / f_s:.1f} | {wall / f_amp:.1f} | "
            f"<= {target:.0f} | {len(counter)} |",
            flush=True,
        )
        loaded = load_spec(spec)  # a clean spec for the next check (no counting hooks)
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="amp-seg,resnet18")
    args = parser.parse_args()
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        if name == "amp-seg":
            bench(name, ROOT / "examples" / "amp-seg" / "attest.yaml")
        elif name == "resnet18":
            with tempfile.TemporaryDirectory() as tmp:
                bench(name, resnet_spec(Path(tmp) / "resnet18"))
        else:
            parser.error(f"unknown model {name!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
