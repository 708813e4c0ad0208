"""IG baselines: the reference point the path starts from (zero, mean, blur, uniform noise)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from attest.errors import InputError

if TYPE_CHECKING:
    from attest.spec.model_call import ModelCall

__all__ = ["BASELINES", "call_baseline", "make_baseline"]

BASELINES: tuple[str, ...] = ("zero", "mean", "blur", "uniform")


def _gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur over the spatial dims (dims >= 2, or dim 1 of a (N, D) batch).

    Hand-written because torchvision is not a dependency; replicate padding keeps the
    image's mean intensity at its borders.
    """
    y = x.to(torch.float64)
    squeeze = y.dim() == 2
    if squeeze:
        y = y.unsqueeze(1)
    radius = max(1, math.ceil(3 * sigma))
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float64, device=y.device)
    kernel = torch.exp(-0.5 * (offsets / sigma) ** 2)
    kernel = kernel / kernel.sum()
    for dim in range(2, y.dim()):
        moved = y.movedim(dim, -1)
        shape = moved.shape
        flat = moved.reshape(-1, 1, shape[-1])
        padded = torch.nn.functional.pad(flat, (radius, radius), mode="replicate")
        blurred = torch.nn.functional.conv1d(padded, kernel.view(1, 1, -1))
        y = blurred.reshape(shape).movedim(-1, dim)
    return y.squeeze(1) if squeeze else y


def make_baseline(
    kind: str,
    inputs: torch.Tensor,
    *,
    seed: int = 0,
    blur_sigma: float | None = None,
) -> torch.Tensor:
    """The IG baseline of each input, float64, shape of ``inputs``.

    ``zero``: all zeros. ``mean``: each input's per-channel mean (a flat image of its mean
    colour; for a (N, D) batch, each row's mean). ``blur``: a Gaussian blur of each input
    (sigma default: a tenth of the largest spatial size, at least 1). ``uniform``: noise drawn
    uniformly in [min, max] of the probe inputs from a generator seeded with ``seed``.
    """
    x = inputs.detach().to(torch.float64)
    if kind == "zero":
        return torch.zeros_like(x)
    if kind == "mean":
        if x.dim() <= 2:
            return (
                x.reshape(x.shape[0], -1)
                .mean(dim=1)
                .view(-1, *([1] * (x.dim() - 1)))
                .expand_as(x)
                .clone()
            )
        return x.mean(dim=tuple(range(2, x.dim())), keepdim=True).expand_as(x).clone()
    if kind == "blur":
        spatial = x.shape[1:] if x.dim() == 2 else x.shape[2:]
        sigma = blur_sigma if blur_sigma is not None else max(1.0, max(spatial, default=1) / 10.0)
        return _gaussian_blur(x, sigma)
    if kind == "uniform":
        generator = torch.Generator(device="cpu").manual_seed(seed)
        noise = torch.rand(x.shape, generator=generator, dtype=torch.float64)
        low, high = float(x.min()), float(x.max())
        return (low + (high - low) * noise).to(x.device)
    raise InputError(f"unknown IG baseline {kind!r}", hint=f"use one of {', '.join(BASELINES)}")


def call_baseline(
    call: ModelCall | None, kind: str | None, inputs: torch.Tensor, *, seed: int = 0
) -> torch.Tensor:
    """The baseline of the probe inputs as the checks see them (float64): with named inputs,
    each differentiated input's own (its ``baseline:``, or ``kind`` for all when given) and the
    probe-row column unchanged (attest.spec.model_call), so that the fixed inputs along the
    path stay those of the example; else :func:`make_baseline` of ``kind``."""
    if call is None or not call.flat:
        assert kind is not None or call is not None
        default = kind or (call.differentiated[0].baseline if call is not None else "zero")
        return make_baseline(default, inputs, seed=seed)
    values, rows = call.unpack(inputs)
    parts = {
        p.name: make_baseline(kind or p.baseline, values[p.name], seed=seed)
        for p in call.differentiated
    }
    return call.pack(parts, rows).to(torch.float64)
