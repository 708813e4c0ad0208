"""A small 2D U-Net that segments lesions in noisy synthetic phantom images.

Two resolution levels with skip connections, Conv-BatchNorm-ReLU blocks, max-pool down,
bilinear up-sampling: the layout of the U-Nets used for MRI lesion segmentation, shrunk to
about 15,000 parameters. Output: (N, 2, H, W) logits, channel 1 = lesion.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def conv_block(c_in: int, c_out: int) -> nn.Sequential:
    """Two 3x3 Conv-BatchNorm-ReLU layers."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(),
        nn.Conv2d(c_out, c_out, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(),
    )


class UNet2D(nn.Module):
    """Input (N, 1, H, W) with H, W divisible by 4; output (N, 2, H, W) logits."""

    def __init__(self, width: int = 8, classes: int = 2) -> None:
        super().__init__()
        self.enc1 = conv_block(1, width)
        self.enc2 = conv_block(width, 2 * width)
        self.pool = nn.MaxPool2d(2)
        self.bottleneck = conv_block(2 * width, 2 * width)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec2 = conv_block(4 * width, 2 * width)
        self.dec1 = conv_block(3 * width, width)
        self.head = nn.Conv2d(width, classes, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s1 = self.enc1(x)  # (N, w, H, W)
        s2 = self.enc2(self.pool(s1))  # (N, 2w, H/2, W/2)
        b = self.bottleneck(self.pool(s2))  # (N, 2w, H/4, W/4)
        d2 = self.dec2(torch.cat([self.up(b), s2], dim=1))  # (N, 2w, H/2, W/2)
        d1 = self.dec1(torch.cat([self.up(d2), s1], dim=1))  # (N, w, H, W)
        return self.head(d1)


def build() -> nn.Module:
    """The factory named in attest.yaml (``model:build``)."""
    return UNet2D()


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-image cross-entropy plus soft Dice on the lesion channel, averaged over the batch.

    Every term is per image before the batch mean, so gradient accumulation over
    micro-batches gives the full-batch gradient.
    """
    target = target.long()
    ce = F.cross_entropy(output, target, reduction="none").flatten(1).mean(dim=1)  # (N,)
    prob = output.softmax(dim=1)[:, 1].flatten(1)  # (N, H*W)
    truth = (target == 1).to(output.dtype).flatten(1)
    dice = (2 * (prob * truth).sum(1) + 1) / (prob.sum(1) + truth.sum(1) + 1)  # (N,)
    return (ce + (1 - dice)).mean()
