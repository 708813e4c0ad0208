"""Train the digits CNN and write weights.safetensors, probe.safetensors and metrics.json.

Deterministic: fixed seeds, one thread, ``torch.use_deterministic_algorithms(True)``; the same
torch build on the same CPU reproduces the shipped weights bit for bit (other CPUs may differ
in the last bits, with the same accuracy).

    python examples/digits/train.py                # overwrite the shipped files
    python examples/digits/train.py --out /tmp/d   # write somewhere else
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from sklearn.datasets import load_digits

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model import build, loss  # noqa: E402

SEED = 0
EPOCHS = 25
BATCH = 64
LR = 5e-3
PROBE_SIZE = 10  # probe batch: the first held-out example of each class 0..9 (every class)


def load_split() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The 1,797 bundled digits, scaled to [0, 1], split 80/20 with a fixed permutation."""
    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.from_numpy(np.random.default_rng(SEED).permutation(len(y)))
    x, y = x[order], y[order]
    n_train = int(0.8 * len(y))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean())


def probe_batch(x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """One held-out example of each class 0..PROBE_SIZE-1."""
    picks = [int((y == k).nonzero()[0]) for k in range(PROBE_SIZE)]
    return {"x": x[picks].contiguous(), "target": y[picks].contiguous()}


def evaluate(folder: Path) -> dict[str, float]:
    """Test accuracy of the weights in ``folder`` on the held-out split."""
    from safetensors.torch import load_file

    model = build()
    model.load_state_dict(load_file(str(folder / "weights.safetensors")))
    _, _, x_test, y_test = load_split()
    return {"test_accuracy": round(accuracy(model, x_test, y_test), 4)}


def train(out: Path) -> dict[str, float]:
    """Train from the fixed seed; write the weights, the probe batch and metrics.json to ``out``."""
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    x_train, y_train, x_test, y_test = load_split()
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    generator = torch.Generator().manual_seed(SEED)
    for _ in range(EPOCHS):
        model.train()
        order = torch.randperm(len(y_train), generator=generator)
        for start in range(0, len(order), BATCH):
            idx = order[start : start + BATCH]
            optimizer.zero_grad()
            loss(model(x_train[idx]), y_train[idx]).backward()
            optimizer.step()
    metrics = {
        "train_accuracy": round(accuracy(model, x_train, y_train), 4),
        "test_accuracy": round(accuracy(model, x_test, y_test), 4),
        "parameters": sum(p.numel() for p in model.parameters()),
        "test_examples": len(y_test),
    }
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / "weights.safetensors"))
    save_file(probe_batch(x_test, y_test), str(out / "probe.safetensors"))
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
