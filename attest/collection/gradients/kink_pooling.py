"""Max-pool window ties: which input elements tie for a window's maximum.

The detector of :mod:`attest.collection.gradients.kink_detectors` for ``max_pool{1,2,3}d`` and
``adaptive_max_pool{1,2,3}d``: windows are gathered into one contiguous tensor (padding as
-inf, never a tie), ties found per window, and the tied elements mapped back to the input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from attest.collection.gradients.kink_scan import Bound, Detector, KinkScan
from attest.collection.gradients.kink_scan import floating_arg as _tensor
from attest.collection.gradients.kink_scan import matching as _matching
from attest.collection.gradients.kink_scan import scan_result as _scan

__all__ = ["pool_ties"]


def _window_positions(
    length: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    span = dilation * (kernel - 1) + 1
    numer = length + 2 * padding - span
    out = (-(-numer // stride) if ceil_mode else numer // stride) + 1
    if ceil_mode and (out - 1) * stride >= length + padding:
        out -= 1
    pos = (
        torch.arange(out).unsqueeze(1) * stride
        - padding
        + torch.arange(kernel).unsqueeze(0) * dilation
    )
    return pos, (pos >= 0) & (pos < length)


def _adaptive_positions(length: int, out: int) -> tuple[torch.Tensor, torch.Tensor]:
    i = torch.arange(out)
    start = (i * length) // out
    end = -((-(i + 1) * length) // out)
    kmax = int((end - start).max())
    pos = start.unsqueeze(1) + torch.arange(kmax).unsqueeze(0)
    return pos, pos < end.unsqueeze(1)


def _window_elements(
    tied: torch.Tensor, per_dim: Sequence[tuple[torch.Tensor, torch.Tensor]], shape: torch.Size
) -> torch.Tensor:
    """The input positions of the flagged window elements ``tied`` (*lead, O1..Od, k1..kd)."""
    mask = torch.zeros(shape, dtype=torch.bool, device=tied.device)
    if not bool(tied.any()):
        return mask
    d = len(per_dim)
    hits = tied.nonzero()  # (n, lead + 2d)
    n_lead = tied.dim() - 2 * d
    lead = hits[:, :n_lead]
    coords = [
        per_dim[i][0].to(tied.device)[hits[:, n_lead + i], hits[:, n_lead + d + i]]
        for i in range(d)
    ]
    mask[(*lead.unbind(1), *coords)] = True
    return mask


def _disjoint_window_elements(
    tied: torch.Tensor,
    per_dim: Sequence[tuple[torch.Tensor, torch.Tensor]],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    shape: torch.Size,
) -> torch.Tensor | None:
    """:func:`_window_elements` for windows that neither overlap nor reach outside the input
    (max-pool with stride >= kernel and no padding, the usual case): the flags are written
    through the same window view of the mask, with no index list. None for other layouts."""
    d = len(per_dim)
    base = len(shape) - d
    for i in range(d):
        out, k = per_dim[i][0].shape
        if dilation[i] != 1 or padding[i] != 0 or stride[i] < k:
            return None
        if (out - 1) * stride[i] + k > shape[base + i]:
            return None  # ceil_mode: the last window reaches past the input
    mask = torch.zeros(shape, dtype=torch.bool, device=tied.device)
    view = mask
    for i in range(d):
        out, k = per_dim[i][0].shape
        view = view.unfold(base + i, k, stride[i]).narrow(base + i, 0, out)
    view.copy_(tied)
    return mask


def _gather_windows(
    x: torch.Tensor, per_dim: Sequence[tuple[torch.Tensor, torch.Tensor]], fill: float
) -> torch.Tensor:
    """(*lead, O1..Od, k1..kd): every pooling window's elements, ``fill`` outside the input.

    Any window layout (adaptive pooling): one ``index_select`` per spatial dim."""
    d = len(per_dim)
    base = x.dim() - d
    t = x
    for i, (pos, valid) in enumerate(per_dim):
        dim = base + i
        out, k = pos.shape
        length = t.shape[dim]
        g = t.index_select(dim, pos.clamp(0, length - 1).reshape(-1).to(t.device))
        g = g.reshape(*g.shape[:dim], out, k, *g.shape[dim + 1 :])
        vshape = [1] * g.dim()
        vshape[dim], vshape[dim + 1] = out, k
        g = torch.where(
            valid.reshape(vshape).to(t.device),
            g,
            torch.full((), fill, dtype=g.dtype, device=g.device),
        )
        t = g.movedim(dim + 1, -1)
    return t


def _unfold_windows(
    x: torch.Tensor,
    per_dim: Sequence[tuple[torch.Tensor, torch.Tensor]],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    fill: float,
) -> torch.Tensor:
    """The same layout as :func:`_gather_windows` for regular windows, as views of a padded
    copy (``Tensor.unfold``): far cheaper than gathering on large activations."""
    d = len(per_dim)
    base = x.dim() - d
    pads: list[int] = []
    for i in range(d - 1, -1, -1):  # F.pad takes the last dim first
        out, k = per_dim[i][0].shape
        span = dilation[i] * (k - 1) + 1
        needed = (out - 1) * stride[i] + span
        extra = max(0, needed - (x.shape[base + i] + 2 * padding[i]))
        pads += [padding[i], padding[i] + extra]
    t = torch.nn.functional.pad(x, pads, value=fill) if any(pads) else x
    for i in range(d):
        out, k = per_dim[i][0].shape
        span = dilation[i] * (k - 1) + 1
        t = t.unfold(base + i, span, stride[i]).narrow(base + i, 0, out)
        if dilation[i] > 1:
            t = t[..., :: dilation[i]]
    return t


def _ints(value: Any, d: int, default: int) -> list[int]:
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        return [default] * d
    if isinstance(value, int):
        return [value] * d
    vals = [int(v) for v in value]
    return vals * d if len(vals) == 1 else vals


def pool_ties(d: int, adaptive: bool) -> Detector:
    def detect(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
        x = _tensor(bound, "self")
        if x is None or x.dim() < d or x.numel() == 0:
            return None
        sizes = x.shape[-d:]
        windows: Callable[[torch.Tensor], torch.Tensor]
        layout: tuple[list[int], list[int], list[int]] | None = None  # stride, padding, dilation
        if adaptive:
            outs = _ints(bound.get("output_size"), d, 1)
            per_dim = [_adaptive_positions(sizes[i], outs[i]) for i in range(d)]

            def windows(t: torch.Tensor) -> torch.Tensor:
                return _gather_windows(t, per_dim, -math.inf)
        else:
            kernel = _ints(bound.get("kernel_size"), d, 1)
            stride = _ints(bound.get("stride"), d, 0)
            stride = [s if s > 0 else k for s, k in zip(stride, kernel, strict=True)]
            padding = _ints(bound.get("padding"), d, 0)
            dilation = _ints(bound.get("dilation"), d, 1)
            ceil_mode = bool(bound.get("ceil_mode", False))
            per_dim = [
                _window_positions(
                    sizes[i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode
                )
                for i in range(d)
            ]

            def windows(t: torch.Tensor) -> torch.Tensor:
                return _unfold_windows(t, per_dim, stride, padding, dilation, -math.inf)

            layout = (stride, padding, dilation)

        inner = tuple(range(-d, 0))
        # (*lead, O1..Od, k1..kd); padding is -inf, never a tie. Gathered into one contiguous
        # tensor first: each reduction over the strided window view cost as much as the copy.
        w = windows(x.double()).contiguous()
        top = w.amax(dim=inner, keepdim=True)
        eq = (w >= top - tolerance) & torch.isfinite(top)
        tie = eq.sum(dim=inner) >= 2
        tied = eq & tie.reshape(*tie.shape, *([1] * d))
        mask = (
            None if layout is None else _disjoint_window_elements(tied, per_dim, *layout, x.shape)
        )
        if mask is None:
            mask = _window_elements(tied, per_dim, x.shape)
        masks = {"self": mask}

        def judge(perturbed: Bound | None) -> KinkScan:
            px = _matching(x, _tensor(perturbed, "self"))
            moved = None
            if px is not None:
                pw = windows(px).contiguous()
                hi = torch.where(tied, pw, -math.inf).amax(dim=inner)
                lo = torch.where(tied, pw, math.inf).amin(dim=inner)
                moved = hi != lo
            return _scan("max-pool window tie", tie, moved, "output window", masks)

        scan = judge(perturbed)
        scan.judge = judge  # (judge does not refer to scan: no reference cycle to hold memory)
        return scan

    return detect
