"""Train the CT patch classifier and write weights.safetensors, probe.safetensors and metrics.json.

The data are synthetic 12x12 patches of contrast-enhanced liver CT in Hounsfield units:
enhancing parenchyma near +110 HU with a smooth gradient and 12 HU noise; half the patches hold
a hypodense lesion (a disk of radius 2-3.5 px, 25-45 HU darker). The task: lesion or not.
The model is trained in float32 and deployed in float16 (attest.yaml ``precision: float16``).

Deterministic: fixed seeds, one thread, ``torch.use_deterministic_algorithms(True)``.

    python examples/unstable/train.py                # overwrite the shipped files
    python examples/unstable/train.py --out /tmp/u   # write somewhere else
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model import PATCH, build, loss  # noqa: E402

SEED = 0
N_TRAIN = 1024
N_TEST = 256
EPOCHS = 20
BATCH = 64
LR = 3e-3
PROBE_SIZE = 8  # clinical-strict min_probe_examples


def patches(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` patches (n, 1, 12, 12) in HU (float32) and labels (n,) int64 (1 = lesion)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:PATCH, 0:PATCH].astype(np.float64)
    images = np.zeros((n, 1, PATCH, PATCH), dtype=np.float32)
    labels = np.zeros(n, dtype=np.int64)
    for i in range(n):
        base = rng.uniform(95, 125)
        slope = rng.normal(0.0, 0.8, size=2)
        patch = base + slope[0] * (yy - PATCH / 2) + slope[1] * (xx - PATCH / 2)
        if i % 2 == 1:
            cy, cx = rng.uniform(3, PATCH - 3, size=2)
            radius = rng.uniform(2.0, 3.5)
            spot = (yy - cy) ** 2 + (xx - cx) ** 2 <= radius**2
            patch = patch - rng.uniform(25, 45) * spot
            labels[i] = 1
        images[i, 0] = (patch + rng.normal(0.0, 12.0, size=patch.shape)).astype(np.float32)
    return torch.from_numpy(images), torch.from_numpy(labels)


def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, dtype: torch.dtype) -> float:
    """Accuracy with the model and inputs cast to ``dtype``."""
    model = model.to(dtype).eval()
    with torch.no_grad():
        return float((model(x.to(dtype)).argmax(dim=1) == y).float().mean())


def evaluate(folder: Path) -> dict[str, float]:
    """Test accuracy of the weights in ``folder``, in float16 (deployed) as in training."""
    from safetensors.torch import load_file

    model = build()
    model.load_state_dict(load_file(str(folder / "weights.safetensors")))
    x_test, y_test = patches(N_TEST, SEED + 1)
    return {"test_accuracy_float16": round(accuracy(model, x_test, y_test, torch.float16), 4)}


def train(out: Path) -> dict[str, float]:
    """Train from the fixed seed; write the weights, the probe batch and metrics.json to ``out``."""
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    x_train, y_train = patches(N_TRAIN, SEED)
    x_test, y_test = patches(N_TEST, SEED + 1)
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    generator = torch.Generator().manual_seed(SEED)
    for _ in range(EPOCHS):
        model.train()
        order = torch.randperm(N_TRAIN, generator=generator)
        for start in range(0, N_TRAIN, BATCH):
            idx = order[start : start + BATCH]
            optimizer.zero_grad()
            loss(model(x_train[idx]), y_train[idx]).backward()
            optimizer.step()
    metrics = {
        "train_accuracy_float32": round(accuracy(model, x_train, y_train, torch.float32), 4),
        "test_accuracy_float32": round(accuracy(model, x_test, y_test, torch.float32), 4),
        "test_accuracy_float16": round(accuracy(model, x_test, y_test, torch.float16), 4),
        "parameters": sum(p.numel() for p in model.parameters()),
        "test_patches": N_TEST,
    }
    model = model.float()
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / "weights.safetensors"))
    probe = {"x": x_test[:PROBE_SIZE].contiguous(), "target": y_test[:PROBE_SIZE].contiguous()}
    save_file(probe, str(out / "probe.safetensors"))
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the outputs")
    parser.add_argument(
        "--evaluate", type=Path, default=None, help="only score the weights in this folder"
    )
    args = parser.parse_args()
    if args.evaluate is not None:
        print(json.dumps(evaluate(args.evaluate), indent=2))
        return
    print(json.dumps(train(args.out), indent=2))


if __name__ == "__main__":
    main()
