"""IG baselines: the reference point the path starts from (zero, mean, blur, uniform noise; for
an embedded input also its reference-token sequence's embeddings, :mod:`attest.spec.reference_tokens`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from attest.errors import InputError
from attest.spec.reference_tokens import REFERENCE_KINDS

if TYPE_CHECKING:
    from attest.spec.model_call import InputPart, ModelCall

__all__ = ["BASELINES", "REFERENCE_TOKEN", "call_baseline", "compared_baselines", "make_baseline"]

BASELINES: tuple[str, ...] = ("zero", "mean", "blur", "uniform")
# ig_baseline's comparison kind for embedded inputs: each one's reference-token sequence
REFERENCE_TOKEN = "reference_token"
_IMAGE = ("mean", "blur", "uniform")  # an attributed input's only


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


def _part_kind(part: InputPart, kind: str | None) -> str:
    """The baseline ``part`` takes when ``kind`` is asked for all inputs: ``kind`` where it
    applies to the part's role (the image kinds to attributed inputs, the reference-token
    sequence to embedded ones that have one, zero to both), else its own."""
    if kind is None:
        return part.baseline
    if part.role == "embedded":
        if kind == REFERENCE_TOKEN:
            return "token" if part.reference is not None else part.baseline
        return part.baseline if kind in _IMAGE else kind
    return part.baseline if kind == REFERENCE_TOKEN else kind


def _reference(part: InputPart, values: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """An embedded input's reference-token embeddings at the probe ``rows`` (float64)."""
    assert part.reference is not None and rows is not None, "resolved at load (load_call)"
    return part.reference[rows].to(device=values.device, dtype=torch.float64)


def compared_baselines(call: ModelCall | None) -> tuple[str, ...]:
    """The kinds ``ig_baseline`` compares: the four of :data:`BASELINES` when some input is
    attributed (or the single-input form), zero alone for embedded inputs only, and the
    reference-token sequence when an embedded input has one."""
    if call is None or not call.flat:
        return BASELINES
    parts = call.differentiated
    kinds = BASELINES if any(p.role == "attributed" for p in parts) else ("zero",)
    if any(p.role == "embedded" and p.reference is not None for p in parts):
        kinds = (*kinds, REFERENCE_TOKEN)
    return kinds


def call_baseline(
    call: ModelCall | None, kind: str | None, inputs: torch.Tensor, *, seed: int = 0
) -> torch.Tensor:
    """The baseline of the probe inputs as the checks see them (float64): with named inputs,
    each differentiated input's own (its ``baseline:``, or ``kind`` for all where it applies,
    :func:`_part_kind`) and the probe-row column unchanged (attest.spec.model_call), so that
    the fixed inputs along the path stay those of the example; an embedded input's reference
    tokens are its sequence's embeddings from load; else :func:`make_baseline` of ``kind``."""
    if call is None or not call.flat:
        assert kind is not None or call is not None
        default = kind or (call.differentiated[0].baseline if call is not None else "zero")
        return make_baseline(default, inputs, seed=seed)
    values, rows = call.unpack(inputs)
    parts = {}
    for p in call.differentiated:
        chosen = _part_kind(p, kind)
        parts[p.name] = (
            _reference(p, values[p.name], rows)
            if chosen in REFERENCE_KINDS
            else make_baseline(chosen, values[p.name], seed=seed)
        )
    return call.pack(parts, rows).to(torch.float64)
