"""A tiny 3D encoder-decoder that segments a lesion in synthetic volumes.

The 3D analogue of the phantom U-Net (as in prostate MRI segmentation): Conv3d-BatchNorm-ReLU,
a max-pool level, trilinear up-sampling with a skip connection and a 1x1x1 head, at about
2,000 parameters. Output: (N, 2, D, H, W) logits, channel 1 = lesion.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class TinyUNet3D(nn.Module):
    """Input (N, 1, D, H, W) with even D, H, W; output (N, 2, D, H, W) logits."""

    def __init__(self, width: int = 4, classes: int = 2) -> None:
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv3d(1, width, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm3d(width),
            nn.ReLU(),
        )
        self.pool = nn.MaxPool3d(2)
        self.mid = nn.Sequential(
            nn.Conv3d(width, 2 * width, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm3d(2 * width),
            nn.ReLU(),
        )
        self.up = nn.Upsample(scale_factor=2, mode="trilinear", align_corners=False)
        self.dec = nn.Sequential(
            nn.Conv3d(3 * width, width, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm3d(width),
            nn.ReLU(),
        )
        self.head = nn.Conv3d(width, classes, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.enc(x)  # (N, w, D, H, W)
        deep = self.mid(self.pool(skip))  # (N, 2w, D/2, H/2, W/2)
        return self.head(self.dec(torch.cat([self.up(deep), skip], dim=1)))


def build() -> nn.Module:
    """The factory named in attest.yaml (``model:build``)."""
    return TinyUNet3D()


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-volume cross-entropy plus soft Dice on the lesion channel, averaged over the batch."""
    target = target.long()
    ce = F.cross_entropy(output, target, reduction="none").flatten(1).mean(dim=1)  # (N,)
    prob = output.softmax(dim=1)[:, 1].flatten(1)
    truth = (target == 1).to(output.dtype).flatten(1)
    dice = (2 * (prob * truth).sum(1) + 1) / (prob.sum(1) + truth.sum(1) + 1)  # (N,)
    return (ce + (1 - dice)).mean()
