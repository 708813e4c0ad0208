"""A small CNN for scikit-learn's bundled 8x8 handwritten digits (10 classes).

Three Conv-BatchNorm-ReLU blocks, the last two down-sampling with stride 2 (as in ResNets and
all-convolutional nets), then a two-layer classifier head; about 6,000 parameters so every
check runs in seconds.

Why strided convolutions and not max-pooling: digit images have an exactly uniform (zero)
background, so neighbouring background patches give identical activations and every max-pool
window over them is a tie. At a tie the gradient max-pool returns is a convention of the
program (the first index wins), not the derivative of the function, and the ``kinks`` check
rightly reports it; clinical-strict fails the max-pool version of this model on that. A strided
convolution has no such point.
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
            nn.Conv2d(c1, c2, kernel_size=3, stride=2, padding=1, bias=False),  # 8x8 -> 4x4
            nn.BatchNorm2d(c2),
            nn.ReLU(),
            nn.Conv2d(c2, c2, kernel_size=3, stride=2, padding=1, bias=False),  # 4x4 -> 2x2
            nn.BatchNorm2d(c2),
            nn.ReLU(),
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
