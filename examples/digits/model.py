"""A small CNN for scikit-learn's bundled 8x8 handwritten digits (10 classes).

Conv-BatchNorm-ReLU-MaxPool twice, then a two-layer classifier head: the shape of most
small image classifiers, at about 3,000 parameters so every check runs in seconds.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class DigitsCNN(nn.Module):
    """Input (N, 1, 8, 8) pixel intensities scaled to [0, 1]; output (N, 10) logits."""

    def __init__(self, channels: tuple[int, int] = (8, 16), hidden: int = 32) -> None:
        super().__init__()
        c1, c2 = channels
        self.features = nn.Sequential(
            nn.Conv2d(1, c1, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(c1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
            nn.Conv2d(c1, c2, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(c2),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 4x4 -> 2x2
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(c2 * 2 * 2, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def build() -> nn.Module:
    """The factory named in attest.yaml (``model:build``)."""
    return DigitsCNN()


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the batch (the training loss)."""
    return F.cross_entropy(output, target.long())
