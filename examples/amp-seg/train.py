"""Train the amp-seg U-Net in float16 mixed precision; write weights.safetensors, probe.safetensors
and metrics.json.

The data are the synthetic phantoms of examples/phantom-seg (the same generator, copied so the
example stands alone): a smooth elliptical organ on a dark background with one to three small
lesions of varying contrast, blurred, with a smooth intensity bias field and Gaussian noise.
Ground truth is the lesion mask. Everything is generated from fixed seeds; no download.

Training is what attest.yaml's ``training:`` mapping declares: Adam (``model:make_optimizer``),
the forward pass under ``torch.autocast("cpu", dtype=torch.float16)``, the loss scaled by a
``torch.amp.GradScaler``, and the blocks ``enc2`` and ``dec1`` recomputed in the backward pass
under non-reentrant ``torch.utils.checkpoint`` (``model.checkpoint_modules``).

Deterministic: fixed seeds, one thread, ``torch.use_deterministic_algorithms(True)``; the same
torch build on the same CPU writes the same bytes.

    python examples/amp-seg/train.py                # overwrite the shipped files
    python examples/amp-seg/train.py --out /tmp/a   # write somewhere else
    python examples/amp-seg/train.py --evaluate examples/amp-seg
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
from model import build, checkpoint_modules, loss, make_optimizer  # noqa: E402

SEED = 0
SIZE = 32
N_TRAIN = 384
N_TEST = 128
EPOCHS = 12
BATCH = 8
PROBE_SIZE = 8  # clinical-strict min_probe_examples
CHECKPOINTED = ["enc2", "dec1"]  # attest.yaml: training.checkpoint


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
    """Mean per-image Dice of the predicted lesion mask (argmax, float32) against the truth."""
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


def train(out: Path) -> dict[str, float]:
    """Train from the fixed seed; write the weights, the probe batch and metrics.json to ``out``."""
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    x_train, y_train = phantoms(N_TRAIN, SEED)
    x_test, y_test = phantoms(N_TEST, SEED + 1)
    model = build()
    checkpoint_modules(model, CHECKPOINTED)
    optimizer = make_optimizer(model.parameters())
    scaler = torch.amp.GradScaler("cpu")
    generator = torch.Generator().manual_seed(SEED)
    skipped = 0
    for _ in range(EPOCHS):
        model.train()
        order = torch.randperm(N_TRAIN, generator=generator)
        for start in range(0, N_TRAIN, BATCH):
            idx = order[start : start + BATCH]
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.float16):
                value = loss(model(x_train[idx]), y_train[idx])
            scaler.scale(value).backward()
            scale = scaler.get_scale()
            scaler.step(optimizer)  # skipped when the scaled gradients overflowed
            scaler.update()
            skipped += int(scaler.get_scale() < scale)
    metrics = {
        "train_dice": round(dice(model, x_train, y_train), 4),
        "test_dice": round(dice(model, x_test, y_test), 4),
        "parameters": sum(p.numel() for p in model.parameters()),
        "test_images": N_TEST,
        "loss_scale": scaler.get_scale(),
        "skipped_steps": skipped,
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
