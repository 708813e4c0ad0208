"""A tiny 2D U-Net trained in float16 mixed precision with activation checkpointing.

The example for the four training checks (docs/training.md): it is trained with
``torch.autocast(dtype=torch.float16)`` and a ``torch.amp.GradScaler`` (``mixed_precision``,
``resume``), two of its blocks run under ``torch.utils.checkpoint`` in training
(``recompute``), and its certificate covers the batch sizes it is trained with
(``batch_invariance``).

Two resolution levels, Conv-GroupNorm-SiLU blocks, max-pool down, bilinear up-sampling, one
skip connection; 3,728 parameters. GroupNorm rather than BatchNorm: a training-mode BatchNorm
inside a checkpointed block updates its running statistics again when the block is recomputed
(the ``recompute`` check fails that), and it makes the examples of a batch interact; GroupNorm
normalises each example alone and keeps no running state. Output: (N, 2, H, W) logits,
channel 1 = lesion.

Checkpointing: ``enc2`` and ``dec1`` are checkpointed from outside by
:func:`checkpoint_modules` (what a training framework's activation-checkpointing option does),
non-reentrant with the RNG state preserved (the defaults the PyTorch documentation recommends);
``attest.yaml`` declares the same modules under ``training.checkpoint``, and the ``recompute``
check wraps them the same way. A model built by :func:`build` runs plainly (inference, export).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

WIDTH = 6
GROUPS = 2
LR = 1e-2


def conv_block(c_in: int, c_out: int) -> nn.Sequential:
    """Two 3x3 Conv-GroupNorm-SiLU layers."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False),
        nn.GroupNorm(GROUPS, c_out),
        nn.SiLU(),
        nn.Conv2d(c_out, c_out, kernel_size=3, padding=1, bias=False),
        nn.GroupNorm(GROUPS, c_out),
        nn.SiLU(),
    )


class TinyUNet(nn.Module):
    """Input (N, 1, H, W) with H, W even; output (N, 2, H, W) logits."""

    def __init__(self, width: int = WIDTH, classes: int = 2) -> None:
        super().__init__()
        self.enc1 = conv_block(1, width)
        self.pool = nn.MaxPool2d(2)
        self.enc2 = conv_block(width, 2 * width)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec1 = conv_block(3 * width, width)
        self.head = nn.Conv2d(width, classes, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s1 = self.enc1(x)  # (N, w, H, W)
        s2 = self.enc2(self.pool(s1))  # (N, 2w, H/2, W/2)
        d1 = self.dec1(torch.cat([self.up(s2), s1], dim=1))  # (N, w, H, W)
        return self.head(d1)


def build() -> nn.Module:
    """The factory named in attest.yaml (``model:build``)."""
    return TinyUNet()


def make_optimizer(params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    """The optimizer named in attest.yaml (``training.optimizer``): Adam as in train.py."""
    return torch.optim.Adam(params, lr=LR)


def checkpoint_modules(model: nn.Module, names: Iterable[str]) -> None:
    """Run each named submodule's forward under non-reentrant ``torch.utils.checkpoint``.

    What ``training.checkpoint: [enc2, dec1]`` in attest.yaml declares (the check wraps the same
    modules the same way). The wrapper is an instance attribute, so it is not part of the
    ``state_dict`` and a model built anew by :func:`build` runs plainly.
    """
    for name in names:
        module = model.get_submodule(name)
        original = module.forward

        def forward(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if not torch.is_grad_enabled():
                return _original(*args, **kwargs)
            return checkpoint(_original, *args, use_reentrant=False, **kwargs)

        module.forward = forward  # type: ignore[method-assign]


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-image cross-entropy plus soft Dice on the lesion channel, averaged over the batch.

    Computed in float32 whatever the autocast dtype of ``output`` (a float16 softmax and sums
    over 1,024 pixels lose digits), and in float64 for a float64 ``output``. Every term is per
    image before the batch mean, so gradient accumulation over micro-batches gives the
    full-batch gradient.
    """
    if output.dtype != torch.float64:
        output = output.float()
    target = target.long()
    ce = F.cross_entropy(output, target, reduction="none").flatten(1).mean(dim=1)  # (N,)
    prob = output.softmax(dim=1)[:, 1].flatten(1)  # (N, H*W)
    truth = (target == 1).to(output.dtype).flatten(1)
    dice = (2 * (prob * truth).sum(1) + 1) / (prob.sum(1) + truth.sum(1) + 1)  # (N,)
    return (ce + (1 - dice)).mean()
