"""Train the tiny 3D U-Net and write weights.safetensors, probe.safetensors and metrics.json.

The data are synthetic 16x16x16 volumes (a stand-in for a prostate MRI patch): a smooth
ellipsoidal gland with one ellipsoidal lesion of lower intensity, a linear bias field and
Gaussian noise. Ground truth is the lesion mask. Generated from fixed seeds, no download.

Deterministic: fixed seeds, one thread, ``torch.use_deterministic_algorithms(True)``.

    python examples/volume3d/train.py                # overwrite the shipped files
    python examples/volume3d/train.py --out /tmp/v   # write somewhere else
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
from model import build, loss  # noqa: E402

SEED = 0
SIZE = 16
N_TRAIN = 192
N_TEST = 64
EPOCHS = 15
BATCH = 8
LR = 1e-2
PROBE_SIZE = 8  # clinical-strict min_probe_examples


def volumes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` volumes (n, 1, S, S, S) float32 and lesion masks (n, S, S, S) int64."""
    rng = np.random.default_rng(seed)
    zz, yy, xx = np.mgrid[0:SIZE, 0:SIZE, 0:SIZE].astype(np.float64)
    images = np.zeros((n, 1, SIZE, SIZE, SIZE), dtype=np.float32)
    masks = np.zeros((n, SIZE, SIZE, SIZE), dtype=np.int64)
    for i in range(n):
        centre = rng.uniform(6.5, 9.5, size=3)
        radii = rng.uniform(4.5, 6.5, size=3)
        gland = (
            sum(((g - c) / r) ** 2 for g, c, r in zip((zz, yy, xx), centre, radii, strict=True))
            <= 1.0
        )
        lesion_centre = centre + rng.uniform(-2.0, 2.0, size=3)
        lesion_radii = rng.uniform(1.5, 2.8, size=3)
        lesion = (
            sum(
                ((g - c) / r) ** 2
                for g, c, r in zip((zz, yy, xx), lesion_centre, lesion_radii, strict=True)
            )
            <= 1.0
        )
        lesion &= gland
        volume = 0.1 + 0.5 * gland - rng.uniform(0.25, 0.4) * lesion
        bias = 1.0 + 0.15 * (xx - SIZE / 2) / SIZE * rng.uniform(-1, 1)
        noisy = volume * bias + rng.normal(0.0, 0.07, size=volume.shape)
        images[i, 0] = noisy.astype(np.float32)
        masks[i] = lesion.astype(np.int64)
    return torch.from_numpy(images), torch.from_numpy(masks)


def dice(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Mean per-volume Dice of the predicted lesion mask (argmax) against the truth."""
    model.eval()
    with torch.no_grad():
        pred = model(x).argmax(dim=1) == 1
    truth = y == 1
    inter = (pred & truth).flatten(1).sum(1).double()
    sizes = pred.flatten(1).sum(1).double() + truth.flatten(1).sum(1).double()
    per_volume = torch.where(sizes > 0, 2 * inter / sizes.clamp(min=1), torch.ones_like(sizes))
    return float(per_volume.mean())


def evaluate(folder: Path) -> dict[str, float]:
    """Dice of the weights in ``folder`` on the held-out volumes."""
    from safetensors.torch import load_file

    model = build()
    model.load_state_dict(load_file(str(folder / "weights.safetensors")))
    x_test, y_test = volumes(N_TEST, SEED + 1)
    return {"test_dice": round(dice(model, x_test, y_test), 4)}


def train(out: Path) -> dict[str, float]:
    """Train from the fixed seed; write the weights, the probe batch and metrics.json to ``out``."""
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    x_train, y_train = volumes(N_TRAIN, SEED)
    x_test, y_test = volumes(N_TEST, SEED + 1)
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)
    generator = torch.Generator().manual_seed(SEED)
    for _ in range(EPOCHS):
        model.train()
        order = torch.randperm(N_TRAIN, generator=generator)
        for start in range(0, N_TRAIN, BATCH):
            idx = order[start : start + BATCH]
            optimizer.zero_grad()
            loss(model(x_train[idx]), y_train[idx]).backward()
            optimizer.step()
        schedule.step()
    metrics = {
        "train_dice": round(dice(model, x_train, y_train), 4),
        "test_dice": round(dice(model, x_test, y_test), 4),
        "parameters": sum(p.numel() for p in model.parameters()),
        "test_volumes": N_TEST,
    }
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
