"""Small training loops for the monitor tests (CPU, seconds)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attest.collection.monitor import TrainingMonitor


def margin_loss(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """A margin objective with no floor: the logits grow for ever (weights driven large)."""
    return -(z.gather(1, y[:, None]).squeeze(1) - z.mean(1)).mean()


def decaying_run(log: Path, *, epochs: int = 20, lr: float = 5.0) -> None:
    """A linear classifier pushed to ever larger weights by a large learning rate and no
    normalisation: its probe's cross-entropy saturates, ``softmax - onehot`` cancels, and the
    float32 gradient's fidelity against float64 decays geometrically."""
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    y = (x @ torch.randn(8, 3)).argmax(1)
    direction = x.T @ (F.one_hot(y, 3).float() - 1 / 3)  # where the margin loss drives W
    correct = (x @ direction).argmax(1) == y
    probe = (x[correct][:16], y[correct][:16])
    model = nn.Linear(8, 3, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    with TrainingMonitor(model, F.cross_entropy, probe, every=1, log=log) as monitor:
        step = 0
        for epoch in range(epochs):
            for _ in range(4):
                opt.zero_grad()
                margin_loss(model(x), y).backward()
                opt.step()
                monitor.step(epoch=epoch, step=step)
                step += 1


def mlp() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 3))


def stable_run(
    log: Path | None,
    *,
    epochs: int = 6,
    every: int = 2,
    start_epoch: int = 0,
    model: nn.Module | None = None,
) -> nn.Module:
    """An ordinary small classifier (Adam, modest rate, dropout): its fidelity stays put.
    ``log=None`` trains without a monitor (the bit-identity reference)."""
    model = model if model is not None else mlp()
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(48, 6, generator=gen)
    y = torch.randint(0, 3, (48,), generator=gen)
    torch.manual_seed(3)  # dropout masks come from the global generator
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    monitor = (
        TrainingMonitor(model, F.cross_entropy, {"x": x[:8], "target": y[:8]}, every=every, log=log)
        if log is not None
        else None
    )
    step = start_epoch * 6
    for epoch in range(start_epoch, epochs):
        model.train()
        for i in range(0, 48, 8):
            opt.zero_grad()
            F.cross_entropy(model(x[i : i + 8]), y[i : i + 8]).backward()
            opt.step()
            if monitor is not None:
                monitor.step(epoch=epoch, step=step)
            step += 1
    if monitor is not None:
        monitor.close()
    return model
