"""Detectors of probe values that sit exactly on an operator's non-differentiable point.

A registry of small pure functions, one per family of ATen operators (relu/threshold at 0,
hardtanh/clamp at their bounds, abs/sign at 0, max/min/maximum/minimum ties, max-pool window
ties, sort/topk/median ties, floor/round at their jumps...), and :data:`SEAMS`, which only
the gradcheck check uses (grid_sample's pixel seams; derivative poles and domain edges are
:mod:`~attest.collection.gradients.domains`' table). Each takes the operator's
arguments by schema name as captured in the deployed precision, and optionally the same
operator's arguments from a run where the probe inputs and trainable parameters were nudged
by a tiny random perturbation (float64), and returns a :class:`KinkScan`.

Counting rule. A value on a kink only matters if a generic perturbation of the model's inputs
and parameters moves it off the kink: then the two one-sided derivatives differ and the
gradient returned is a convention of the program. A value that stays put is locally constant
(both one-sided derivatives agree) and is not counted but reported as
``locally_constant_hits``. This is what keeps ReLU networks on continuous inputs clean: ReLU
outputs that are exactly 0 tie inside a max-pool window, but they stay 0 when the inputs move
(the units are inactive), so the tie is not a kink of the model. Padding is not an input:
pooling padding is never a window element, and zeros that ``constant_pad_nd`` writes are
locally constant. Without a perturbation run every hit is counted.

``masks`` (every raw hit, per argument) is what the gradcheck check uses to nudge a captured
input off its kinks before taking finite differences.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from attest.collection.gradients.kink_pooling import pool_ties
from attest.collection.gradients.kink_scan import MAX_FIRST_INDICES, Bound, Detector, KinkScan
from attest.collection.gradients.kink_scan import floating_arg as _tensor
from attest.collection.gradients.kink_scan import matching as _matching
from attest.collection.gradients.kink_scan import scan_result as _scan

__all__ = ["DETECTORS", "MAX_FIRST_INDICES", "SEAMS", "KinkScan", "scan_kinks"]


def _point(kind: str, points: Sequence[float]) -> Detector:
    """Kinks at fixed values of ``self`` (relu at 0, hardsigmoid at +-3...)."""

    def detect(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
        x = _tensor(bound, "self")
        if x is None:
            return None
        hits = torch.zeros_like(x, dtype=torch.bool)
        for p in points:
            hits |= _near(x, p, tolerance)
        px = _matching(x, _tensor(perturbed, "self"))
        moved = None
        if px is not None:
            moved = torch.ones_like(hits)
            for p in points:
                moved &= px != p
        return _scan(kind, hits, moved, "input self", {"self": hits})

    return detect


def _scalar(bound: Bound, name: str, default: float) -> float:
    value = bound.get(name, default)
    if value is None:
        return default
    return float(value.item()) if isinstance(value, torch.Tensor) else float(value)


def _near(x: torch.Tensor, value: Any, tolerance: float) -> torch.Tensor:
    """Exactly on ``value`` (tolerance 0, the kinks check) or within ``tolerance`` of it."""
    if tolerance <= 0:
        hit: torch.Tensor = x == value
        return hit
    near: torch.Tensor = (x - value).abs() <= tolerance
    return near


def _threshold(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
    point = [_scalar(bound, "threshold", 0.0)]
    return _point("threshold at its threshold", point)(bound, perturbed, tolerance)


def _hardtanh(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
    lo, hi = _scalar(bound, "min_val", -1.0), _scalar(bound, "max_val", 1.0)
    return _point("hardtanh at its bounds", [lo, hi])(bound, perturbed, tolerance)


def _shrink(kind: str) -> Detector:
    def detect(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
        lam = _scalar(bound, "lambd", 0.5)
        return _point(kind, [-lam, lam])(bound, perturbed, tolerance)

    return detect


def _leaky_relu(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
    if _scalar(bound, "negative_slope", 0.01) == 1.0:
        return None
    return _point("leaky_relu at 0", [0.0])(bound, perturbed, tolerance)


def _elu(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
    # elu's one-sided derivatives at 0 are scale*alpha*input_scale and scale: a kink unless equal.
    if _scalar(bound, "alpha", 1.0) * _scalar(bound, "input_scale", 1.0) == 1.0:
        return None
    return _point("elu at 0", [0.0])(bound, perturbed, tolerance)


def _bound_ties(kind: str, names: Sequence[str]) -> Detector:
    """Kinks where ``self`` equals a bound given as a scalar or a tensor (clamp, maximum...)."""

    def detect(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
        x = _tensor(bound, "self")
        if x is None:
            return None
        hits: torch.Tensor | None = None
        moved: torch.Tensor | None = None
        have_perturbed = True
        px = _matching(x, _tensor(perturbed, "self"))
        for name in names:
            value = bound.get(name)
            if value is None:
                continue
            on = _near(x, value, tolerance)
            hits = on if hits is None else hits | on
            pv: Any = value
            if isinstance(value, torch.Tensor):
                pv = _tensor(perturbed, name)
                pv = None if pv is None or pv.shape != value.shape else pv.to(torch.float64)
            if px is None or pv is None:
                have_perturbed = False
                continue
            off = torch.broadcast_to(px != pv, on.shape)
            moved = off if moved is None else moved & off
        if hits is None:
            return None
        masks = {"self": _reduce_to(hits, x.shape)}
        for name in names:
            value = bound.get(name)
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                masks[name] = _reduce_to(hits, value.shape)
        return _scan(kind, hits, moved if have_perturbed else None, "output", masks)

    return detect


def _reduce_to(mask: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Any-reduce a broadcast mask back to an argument's own shape."""
    if mask.shape == shape:
        return mask
    lead = mask.dim() - len(shape)
    m = mask.any(dim=tuple(range(lead))) if lead > 0 else mask
    for d, size in enumerate(shape):
        if size == 1 and m.shape[d] != 1:
            m = m.any(dim=d, keepdim=True)
    return m.reshape(shape)


def _round(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
    x = _tensor(bound, "self")
    if x is None:
        return None
    scale = 10.0 ** int(bound.get("decimals", 0) or 0)
    xs = x.double() * scale
    hits = torch.isfinite(xs) & _near(xs - xs.floor(), 0.5, tolerance * scale)
    px = _matching(x, _tensor(perturbed, "self"))
    moved = None if px is None else (px * scale - (px * scale).floor()) != 0.5
    return _scan("round at half-integers", hits, moved, "input self", {"self": hits})


def _integer_jump(kind: str) -> Detector:
    def detect(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
        x = _tensor(bound, "self")
        if x is None:
            return None
        period = bound.get("other", 1.0)
        if isinstance(period, torch.Tensor):
            return None  # a tensor period: not a fixed jump set
        xs = x.double() / float(period)
        hits = torch.isfinite(xs) & _near(xs, xs.round(), tolerance / abs(float(period)))
        px = _matching(x, _tensor(perturbed, "self"))
        moved = None
        if px is not None:
            ps = px / float(period)
            moved = ps != ps.round()
        return _scan(kind, hits, moved, "input self", {"self": hits})

    return detect


def _reduce_dims(bound: Bound, x: torch.Tensor) -> tuple[int, ...]:
    dim = bound.get("dim")
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(x.dim()))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return tuple(d % max(x.dim(), 1) for d in dims)


def _selection_ties(
    kind: str, select: Callable[[torch.Tensor, tuple[int, ...], Bound], torch.Tensor]
) -> Detector:
    """Ties with the value selected along some dims (max/min/median/kthvalue...)."""

    def detect(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
        x = _tensor(bound, "self")
        if x is None or x.numel() == 0:
            return None
        dims = _reduce_dims(bound, x)
        if x.dim() == 0:
            return None
        chosen = select(x, dims, bound)  # keepdim shape
        eq = _near(x, chosen, tolerance)
        tie = eq.sum(dim=dims, keepdim=True) >= 2
        tied = eq & tie
        px = _matching(x, _tensor(perturbed, "self"))
        moved = None
        if px is not None:
            hi = torch.where(tied, px, -math.inf).amax(dim=dims, keepdim=True)
            lo = torch.where(tied, px, math.inf).amin(dim=dims, keepdim=True)
            moved = hi != lo
        return _scan(kind, tie, moved, "output (reduced, keepdim)", {"self": tied})

    return detect


def _select_max(x: torch.Tensor, dims: tuple[int, ...], bound: Bound) -> torch.Tensor:
    return x.amax(dim=dims, keepdim=True)


def _select_min(x: torch.Tensor, dims: tuple[int, ...], bound: Bound) -> torch.Tensor:
    return x.amin(dim=dims, keepdim=True)


def _select_kth(median: bool) -> Callable[[torch.Tensor, tuple[int, ...], Bound], torch.Tensor]:
    def select(x: torch.Tensor, dims: tuple[int, ...], bound: Bound) -> torch.Tensor:
        flat = x.movedim(dims, tuple(range(-len(dims), 0))).flatten(-len(dims))
        n = flat.shape[-1]
        k = (n - 1) // 2 if median else int(bound.get("k", 1)) - 1
        value = flat.sort(dim=-1).values[..., k : k + 1]
        shape = [1 if d in dims else s for d, s in enumerate(x.shape)]
        return value.reshape(shape)

    return select


def _sort_ties(kind: str, topk: bool) -> Detector:
    """Adjacent equal values after sorting (within the top k for topk)."""

    def detect(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
        x = _tensor(bound, "self")
        if x is None or x.dim() == 0 or x.numel() == 0:
            return None
        dim = int(bound.get("dim", -1)) % x.dim()
        descending = (
            bool(bound.get("largest", True)) if topk else bool(bound.get("descending", False))
        )
        values, order = x.sort(dim=dim, descending=descending, stable=True)
        n = values.shape[dim]
        pairs = _near(values.narrow(dim, 1, n - 1), values.narrow(dim, 0, n - 1), tolerance)
        if topk:
            k = int(bound.get("k", n))
            keep = torch.arange(n - 1, device=x.device) < k
            shape = [1] * x.dim()
            shape[dim] = n - 1
            pairs = pairs & keep.reshape(shape)
        px = _matching(x, _tensor(perturbed, "self"))
        moved = None
        if px is not None:
            ps = px.gather(dim, order)
            moved = ps.narrow(dim, 1, n - 1) != ps.narrow(dim, 0, n - 1)
        tied = torch.zeros_like(x, dtype=torch.bool)
        first = order.narrow(dim, 0, n - 1)
        second = order.narrow(dim, 1, n - 1)
        tied = tied.scatter(dim, first, pairs) | tied.scatter(dim, second, pairs)
        return _scan(kind, pairs, moved, "sorted position pairs", {"self": tied})

    return detect


def _zero_norm(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
    x = _tensor(bound, "self")
    order = bound.get("ord", 2)
    if (
        x is None
        or x.dim() == 0
        or (isinstance(order, (int, float)) and (math.isinf(order) or order <= 0))
    ):
        return None
    dims = _reduce_dims(bound, x)
    zero = (x == 0).all(dim=dims, keepdim=True)
    px = _matching(x, _tensor(perturbed, "self"))
    moved = None if px is None else (px != 0).any(dim=dims, keepdim=True)
    return _scan(
        "vector norm of an all-zero slice",
        zero,
        moved,
        "output (reduced, keepdim)",
        {"self": zero.expand_as(x)},
    )


def _grid_sample(bound: Bound, perturbed: Bound | None, tolerance: float) -> KinkScan | None:
    """grid_sample's sampling positions on the interpolation's seams, in the ``grid`` argument.

    Bilinear (trilinear) interpolation is piecewise linear in the sampling position, with a
    kink wherever a coordinate is a whole pixel index; every padding mode's clipping and
    reflection also fold at whole indices. Nearest interpolation jumps at half indices.
    Bicubic (Keys' kernel) has a continuous derivative and no first-order kink. The input
    image enters linearly and has no kink."""
    x, grid = _tensor(bound, "input"), _tensor(bound, "grid")
    mode = int(bound.get("interpolation_mode", 0) or 0)
    if x is None or grid is None or grid.dim() < 2 or mode not in (0, 1):
        return None
    dims = grid.shape[-1]
    if dims < 1 or x.dim() < dims:
        return None
    align = bool(bound.get("align_corners", False))
    # grid's last dimension is (x, y[, z]): it indexes W, H[, D]
    size = torch.tensor([float(n) for n in reversed(x.shape[-dims:])], dtype=torch.float64)
    scale = ((size - 1) / 2 if align else size / 2).to(grid.device)  # pixels per grid unit
    g = grid.detach().double()
    pixel = (g + 1) * scale if align else (g + 1) * scale - 0.5
    seam = pixel.round() if mode == 0 else pixel.floor() + 0.5
    hits = torch.isfinite(pixel) & ((pixel - seam).abs() <= tolerance * scale)
    kind = "grid_sample at whole pixel positions" if mode == 0 else "grid_sample at half pixels"
    return _scan(kind, hits, None, "input grid", {"grid": hits})


DETECTORS: dict[str, Detector] = {
    "relu": _point("relu at 0", [0.0]),
    "_prelu_kernel": _point("prelu at 0", [0.0]),
    "prelu": _point("prelu at 0", [0.0]),
    "rrelu_with_noise": _point("rrelu at 0", [0.0]),
    "leaky_relu": _leaky_relu,
    "elu": _elu,
    "threshold": _threshold,
    "hardtanh": _hardtanh,
    "hardsigmoid": _point("hardsigmoid at -3 and 3", [-3.0, 3.0]),
    "hardswish": _point("hardswish at -3 and 3", [-3.0, 3.0]),
    "softshrink": _shrink("softshrink at +-lambda"),
    "hardshrink": _shrink("hardshrink at +-lambda"),
    "abs": _point("abs at 0", [0.0]),
    "sign": _point("sign at 0", [0.0]),
    "sgn": _point("sign at 0", [0.0]),
    "clamp": _bound_ties("clamp at its bounds", ["min", "max"]),
    "clip": _bound_ties("clamp at its bounds", ["min", "max"]),
    "clamp_min": _bound_ties("clamp at its bound", ["min"]),
    "clamp_max": _bound_ties("clamp at its bound", ["max"]),
    "maximum": _bound_ties("maximum tie", ["other"]),
    "minimum": _bound_ties("minimum tie", ["other"]),
    "fmax": _bound_ties("fmax tie", ["other"]),
    "fmin": _bound_ties("fmin tie", ["other"]),
    "max": _selection_ties("max tie", _select_max),
    "min": _selection_ties("min tie", _select_min),
    "amax": _selection_ties("amax tie", _select_max),
    "amin": _selection_ties("amin tie", _select_min),
    "median": _selection_ties("median tie", _select_kth(median=True)),
    "nanmedian": _selection_ties("median tie", _select_kth(median=True)),
    "kthvalue": _selection_ties("kthvalue tie", _select_kth(median=False)),
    "sort": _sort_ties("sort tie", topk=False),
    "topk": _sort_ties("topk tie", topk=True),
    "max_pool1d": pool_ties(1, adaptive=False),
    "max_pool1d_with_indices": pool_ties(1, adaptive=False),
    "max_pool2d": pool_ties(2, adaptive=False),
    "max_pool2d_with_indices": pool_ties(2, adaptive=False),
    "max_pool3d": pool_ties(3, adaptive=False),
    "max_pool3d_with_indices": pool_ties(3, adaptive=False),
    "adaptive_max_pool1d": pool_ties(1, adaptive=True),
    "adaptive_max_pool2d": pool_ties(2, adaptive=True),
    "adaptive_max_pool3d": pool_ties(3, adaptive=True),
    "floor": _integer_jump("floor at integers"),
    "ceil": _integer_jump("ceil at integers"),
    "trunc": _integer_jump("trunc at integers"),
    "fix": _integer_jump("trunc at integers"),
    "frac": _integer_jump("frac at integers"),
    "round": _round,
    "remainder": _integer_jump("remainder at multiples of the divisor"),
    "fmod": _integer_jump("fmod at multiples of the divisor"),
    "linalg_vector_norm": _zero_norm,
}


# The gradcheck check steps its captured values off SEAMS too (``step_only`` of scan_kinks),
# but the kinks check does not count them. (Values next to a derivative's pole or the edge of
# an operator's domain are moved into it by the table of
# :mod:`~attest.collection.gradients.domains`.)
#
# Seams: a sampling position is computed in the deployed precision from continuous values, and is a
# whole pixel index by rounding alone with probability about its ulp (2e-6 at index 16 in
# float32): a registration network's 3D deformation field has millions of positions, so
# continuous inputs would put some on a seam, which the kinks check must never report. The
# finite differences still must not straddle one.
SEAMS: dict[str, Detector] = {
    "grid_sampler": _grid_sample,
    "grid_sampler_2d": _grid_sample,
    "grid_sampler_3d": _grid_sample,
    "_grid_sampler_2d_cpu_fallback": _grid_sample,
}


def scan_kinks(
    short_name: str,
    bound: Bound,
    perturbed: Bound | None = None,
    *,
    tolerance: float = 0.0,
    step_only: bool = False,
) -> KinkScan | None:
    """The kink scan of one call, or None when the operator has no non-differentiable points
    (or none this detector understands for these arguments).

    ``tolerance`` > 0 also reports values within that distance of a kink (the gradcheck
    check uses it to keep finite-difference steps from crossing one); the kinks check uses
    exact hits only. ``step_only`` adds the detectors of :data:`SEAMS` (for the gradcheck
    check)."""
    detector = DETECTORS.get(short_name)
    if detector is None and step_only:
        detector = SEAMS.get(short_name)
    if detector is None:
        return None
    if short_name in ("max", "min") and isinstance(bound.get("other"), torch.Tensor):
        detector = _bound_ties(f"{short_name}imum tie", ["other"])
    return detector(bound, perturbed, tolerance)
