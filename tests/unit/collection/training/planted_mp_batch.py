"""Small models for the mixed_precision and batch_invariance tests: clean ones and planted defects.

Planted: a loss so small that its float16 gradients underflow without a loss scaler
(:func:`tiny_loss`), a layer whose outputs depend on the rest of the batch (BatchNorm forced
into training mode, a batch-mean subtraction), and a value that becomes NaN only above a batch
size. Clean counterparts: an MLP, a BatchNorm CNN in eval mode.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from _grad_models import make_context
from torch import nn

from attest.collection.context import CollectContext
from attest.spec.model import TrainingConfig


class MLP(nn.Module):
    """Linear-ReLU-Linear-ReLU-Linear."""

    def __init__(self, d_in: int = 6, hidden: int = 16, classes: int = 3) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class BatchNormCNN(nn.Module):
    """Conv-BatchNorm-ReLU-MaxPool-Linear: clean in eval mode."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(4 * 3 * 3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(torch.relu(self.norm(self.conv(x))))
        return self.head(h.flatten(1))


class TrainModeBatchNormCNN(BatchNormCNN):
    """Planted: the forward puts its BatchNorm back in training mode, so in eval mode each
    example's output depends on the batch statistics."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.norm.train()
        return super().forward(x)


class BatchCentered(MLP):
    """Planted: subtracts the batch mean of the hidden features (a hand-rolled normalization)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = h - h.mean(dim=0, keepdim=True)
        return self.fc3(torch.relu(self.fc2(h)))


class NaNAboveSixteen(MLP):
    """Planted: a gate computed from the batch size is NaN above 16 examples (and 0 times it
    is NaN too), so the outputs are NaN from batch size 17 on and exact below."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sqrt(torch.full((), 16.0 - x.shape[0], device=x.device, dtype=x.dtype))
        return super().forward(x) + 0.0 * gate


def cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The clean loss."""
    return F.cross_entropy(output, target.long())


def tiny_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Planted: the loss scaled by 1e-6, so its gradients are ~1e-8 to 1e-7: subnormal or zero
    in float16 unless a loss scaler multiplies them back."""
    return 1e-6 * F.cross_entropy(output, target.long())


def inputs(n: int, *shape: int, seed: int = 1) -> torch.Tensor:
    """Probe inputs from a normal distribution."""
    return torch.randn(n, *shape, generator=torch.Generator().manual_seed(seed))


def labels(n: int, classes: int = 3, seed: int = 2) -> torch.Tensor:
    """Probe class labels."""
    return torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed))


def context(
    build: Callable[[], nn.Module],
    x: torch.Tensor,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = cross_entropy,
    **training: object,
) -> CollectContext:
    """A collect context around ``build`` with the probe ``x``, labels and ``training:``."""
    ctx = make_context(build, x, labels(x.shape[0]), loss, capture=False)
    ctx.spec.training = TrainingConfig(**training)  # type: ignore[arg-type]
    return ctx
