"""Train the phantom U-Net and write weights.safetensors, probe.safetensors and metrics.json.

The data are synthetic phantoms (a stand-in for MRI slices): a smooth elliptical organ on a
dark background with one to three small lesions of varying contrast, blurred, with a smooth
intensity bias field and Gaussian noise. Ground truth is the lesion mask. Everything is
generated from fixed seeds, so the data need no download.

Deterministic: fixed seeds, one thread, ``torch.use_deterministic_algorithms(True)``.

    python examples/phantom-seg/train.py                # overwrite the shipped files
    python examples/phantom-seg/train.py --out /tmp/p   # write somewhere else
    python examples/phantom-seg/train.py --out /tmp/p --monitor run.jsonl
        # also watch gradient assurance during training (attest.TrainingMonitor; the
        # training itself is bit-identical with or without it)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model import build, loss  # noqa: E402

SEED = 0
SIZE = 32
N_TRAIN = 384
N_TEST = 128
EPOCHS = 12
BATCH = 16
LR = 1e-2
PROBE_SIZE = 8  # clinical-strict min_probe_examples


def phantoms(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` phantom images (n, 1, SIZE, SIZE) float32 and lesion masks (n, SIZE, SIZE) int64."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64)
    images = np.zeros((n, 1, SIZE, SIZE), dtype=np.float32)
    masks = np.zeros((n, SIZE, SIZE), dtype=np.int64)
    kernel = torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64)
    for i in range(n):
        cy, cx = rng.uniform(12, 20, size=2)
        ry, rx = rng.uniform(8, 13, size=2)
        organ = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
        image = 0.15 + 0.45 * organ
        lesion = np.zeros_like(organ)
        for _ in range(rng.integers(1, 4)):
            # a lesion centre inside the organ, radius 1.5-3.5 px, brighter or darker
            angle, frac = rng.uniform(0, 2 * np.pi), rng.uniform(0, 0.6)
            ly, lx = cy + frac * ry * np.sin(angle), cx + frac * rx * np.cos(angle)
            radius = rng.uniform(1.5, 3.5)
            spot = (yy - ly) ** 2 + (xx - lx) ** 2 <= radius**2
            image = np.where(spot, image + rng.choice([-1.0, 1.0]) * rng.uniform(0.25, 0.4), image)
            lesion |= spot & organ
        bias = 1.0 + 0.2 * np.sin(xx / SIZE * np.pi * rng.uniform(0.5, 1.5) + rng.uniform(0, 6))
        blurred = torch.from_numpy(image * bias)[None, None]
        blurred = F.conv2d(F.pad(blurred, (1, 1, 1, 1), mode="replicate"), kernel.view(1, 1, 1, 3))
        blurred = F.conv2d(blurred, kernel.view(1, 1, 3, 1))
        noisy = blurred[0, 0].numpy() + rng.normal(0.0, 0.08, size=(SIZE, SIZE))
        images[i, 0] = noisy.astype(np.float32)
        masks[i] = lesion.astype(np.int64)
    return torch.from_numpy(images), torch.from_numpy(masks)


def dice(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Mean per-image Dice of the predicted lesion mask (argmax) against the truth."""
    model.eval()
    with torch.no_grad():
        pred = model(x).argmax(dim=1) == 1
    truth = y == 1
    inter = (pred & truth).flatten(1).sum(1).double()
    sizes = pred.flatten(1).sum(1).double() + truth.flatten(1).sum(1).double()
    per_image = torch.where(sizes > 0, 2 * inter / sizes.clamp(min=1), torch.ones_like(sizes))
    return float(per_image.mean())


def evaluate(folder: Path) -> dict[str, float]:
    """Dice of the weights in ``folder`` on the held-out phantoms."""
    from safetensors.torch import load_file

    model = build()
    model.load_state_dict(load_file(str(folder / "weights.safetensors")))
    x_test, y_test = phantoms(N_TEST, SEED + 1)
    return {"test_dice": round(dice(model, x_test, y_test), 4)}


def train(
    out: Path, monitor_log: Path | None = None, epochs: int = EPOCHS, every: int | None = None
) -> dict[str, float]:
    """Train from the fixed seed; write the weights, the probe batch and metrics.json to ``out``.

    ``monitor_log``: also sample attest.TrainingMonitor into this JSONL log (on the probe
    batch, every ``every`` steps, default the monitor's).
    """
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    x_train, y_train = phantoms(N_TRAIN, SEED)
    x_test, y_test = phantoms(N_TEST, SEED + 1)
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)
    generator = torch.Generator().manual_seed(SEED)
    monitor = None
    if monitor_log is not None:
        from attest import TrainingMonitor

        probe = (x_test[:PROBE_SIZE], y_test[:PROBE_SIZE])
        options = {"every": every} if every is not None else {}
        monitor = TrainingMonitor(model, loss, probe, log=monitor_log, **options)
    step = 0
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(N_TRAIN, generator=generator)
        for start in range(0, N_TRAIN, BATCH):
            idx = order[start : start + BATCH]
            optimizer.zero_grad()
            loss(model(x_train[idx]), y_train[idx]).backward()
            optimizer.step()
            if monitor is not None:
                monitor.step(epoch=epoch, step=step)
            step += 1
        schedule.step()
    if monitor is not None:
        monitor.close()
    metrics = {
        "train_dice": round(dice(model, x_train, y_train), 4),
        "test_dice": round(dice(model, x_test, y_test), 4),
        "parameters": sum(p.numel() for p in model.parameters()),
        "test_images": N_TEST,
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
    parser.add_argument(
        "--monitor", type=Path, default=None, help="also write an attest.TrainingMonitor log here"
    )
    parser.add_argument("--every", type=int, default=None, help="monitor sample interval (steps)")
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="epochs (shipped: 12)")
    args = parser.parse_args()
    if args.evaluate is not None:
        print(json.dumps(evaluate(args.evaluate), indent=2))
        return
    print(json.dumps(train(args.out, args.monitor, args.epochs, args.every), indent=2))


if __name__ == "__main__":
    main()
