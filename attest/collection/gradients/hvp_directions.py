"""The seeded random directions of the Hessian-vector check
(:mod:`attest.collection.gradients.hessian_vector`): a Gaussian per differentiated tensor,
scaled by that tensor's RMS, drawn again from its own generator each time it is needed.
"""

from __future__ import annotations

import math

import torch

from attest.collection.pieces import piece_seed

__all__ = ["Directions"]


def _rms_scaled_gaussians(
    tensors: list[torch.Tensor],
    live: list[bool],
    generator: torch.Generator,
    scale: float = 1.0,
    norms: list[float] | None = None,
) -> list[torch.Tensor]:
    """A Gaussian direction for each live tensor, scaled by its RMS modulus (at least 1e-3)
    times ``scale``; zeros for the others. A complex tensor (an FNO's spectral weights) gets
    a complex direction (randn's complex draw has E|z|^2 = 1). The real ones share one draw
    and every RMS comes from one foreach norm (a few kernels per tensor dominated small
    models). The draw is in single precision, cast: torch's float64 ``randn`` on the CPU
    takes 3.5 times as long (0.68 against 0.19 s for 22 million values), and a direction
    needs a generic Gaussian vector, not 53 bits of one."""
    if norms is None:
        norms = _norms_of(tensors)
    real = [i for i, t in enumerate(tensors) if live[i] and not t.is_complex()]
    draw = torch.randn(
        sum(tensors[i].numel() for i in real), generator=generator, dtype=torch.float32
    )
    pieces = iter(torch.split(draw, [tensors[i].numel() for i in real]))
    out: list[torch.Tensor] = []
    for i, t in enumerate(tensors):
        if not live[i]:
            out.append(torch.zeros_like(t))
            continue
        if t.is_complex():
            noise = torch.randn(t.shape, generator=generator, dtype=torch.complex64)
        else:
            noise = next(pieces).view(t.shape)
        rms = norms[i] / math.sqrt(t.numel()) if t.numel() else 0.0
        out.append(noise.to(t.device, t.dtype) * (max(rms, 1e-3) * scale))
    return out


def _norms_of(tensors: list[torch.Tensor]) -> list[float]:
    return torch.stack(torch._foreach_norm(tensors)).tolist() if tensors else []


class Directions:
    """The check's seeded directions, drawn again each time one is needed instead of held.

    Each direction spans every parameter and the input: one copy of the float64 weights. Held
    together, the directions were three of the 13.6 weight-sized tensors of this check's peak
    (1.1 GiB over the model on the MONAI ViT); drawn on demand, one is alive at a time, for
    two or three draws per direction (0.14 s each on the ViT). Direction ``k`` has its own
    generator, seeded from ``seed`` and ``k``, so it is the same vector every time it is
    drawn and does not depend on which were drawn before it."""

    def __init__(
        self,
        point: list[torch.Tensor],
        live: list[bool],
        seed: int,
        still_rows: dict[int, int] | None = None,
    ) -> None:
        # the RMS of each tensor at the probe point, read now: ``point`` may be the
        # parameters themselves, which the finite differences later move in place (only
        # their shapes, dtypes and devices are read after this)
        self._norms = _norms_of(point)
        self._point = point
        self._live = live
        self._seed = seed
        # tensor index -> a row the directions leave still (an embedding's padding row:
        # PyTorch gives it no gradient by design; see known_rules)
        self.still_rows = still_rows or {}

    def __call__(self, k: int, scale: float = 1.0) -> list[torch.Tensor]:
        generator = torch.Generator().manual_seed(piece_seed(self._seed, f"hvp-direction-{k}"))
        drawn = _rms_scaled_gaussians(self._point, self._live, generator, scale, self._norms)
        for i, row in self.still_rows.items():
            if 0 <= row < drawn[i].shape[0]:
                drawn[i][row] = 0
        return drawn
