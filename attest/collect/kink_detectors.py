"""Detectors of probe values that sit exactly on an operator's non-differentiable point.

A registry of small pure functions, one per family of ATen operators (relu/threshold at 0,
hardtanh/clamp at their bounds, abs/sign at 0, max/min/maximum/minimum ties, max-pool window
ties, sort/topk/median ties, floor/round at their jumps...). Each takes the operator's
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
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["DETECTORS", "KinkScan", "scan_kinks"]

MAX_FIRST_INDICES = 5


@dataclass
class KinkScan:
    """Hits of one operator call on its non-differentiable points."""

    kind: str  # e.g. "relu at 0", "max-pool window tie"
    count: int  # hits a perturbation moves off the kink (the ones that matter)
    constant_hits: int  # hits that stay put under the perturbation (locally constant)
    first_indices: list[list[int]]  # of the counted hits, in ``index_space``
    index_space: str  # "input self", "output"...
    masks: dict[str, torch.Tensor] = field(default_factory=dict)  # raw hits per argument
    # The same scan against a perturbed run, from this scan's hits (no second window scan):
    # set by detectors whose scan costs far more than the judging (max-pool windows).
    judge: Callable[[Bound | None], KinkScan] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def raw_hits(self) -> int:
        """All hits, counted or not."""
        return self.count + self.constant_hits


Bound = dict[str, Any]
Detector = Callable[[Bound, "Bound | None", float], "KinkScan | None"]


def _first(mask: torch.Tensor) -> list[list[int]]:
    idx = mask.nonzero()[:MAX_FIRST_INDICES]
    return [[int(v) for v in row] for row in idx.tolist()]


def _tensor(bound: Bound | None, name: str) -> torch.Tensor | None:
    if bound is None:
        return None
    value = bound.get(name)
    return value if isinstance(value, torch.Tensor) and value.is_floating_point() else None


def _matching(base: torch.Tensor, other: torch.Tensor | None) -> torch.Tensor | None:
    if other is None or other.shape != base.shape:
        return None
    return other.detach().to(device=base.device, dtype=torch.float64)


def _scan(
    kind: str,
    hits: torch.Tensor,
    moved_off: torch.Tensor | None,
    index_space: str,
    masks: dict[str, torch.Tensor],
) -> KinkScan:
    """Counted = hits moved off by the perturbation (all hits when there is no perturbation)."""
    counted = hits if moved_off is None else hits & moved_off
    n_hits = int(hits.sum())
    n_counted = int(counted.sum())
    return KinkScan(kind, n_counted, n_hits - n_counted, _first(counted), index_space, masks)


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


def _pool_ties(d: int, adaptive: bool) -> Detector:
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
    "max_pool1d": _pool_ties(1, adaptive=False),
    "max_pool1d_with_indices": _pool_ties(1, adaptive=False),
    "max_pool2d": _pool_ties(2, adaptive=False),
    "max_pool2d_with_indices": _pool_ties(2, adaptive=False),
    "max_pool3d": _pool_ties(3, adaptive=False),
    "max_pool3d_with_indices": _pool_ties(3, adaptive=False),
    "adaptive_max_pool1d": _pool_ties(1, adaptive=True),
    "adaptive_max_pool2d": _pool_ties(2, adaptive=True),
    "adaptive_max_pool3d": _pool_ties(3, adaptive=True),
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


def scan_kinks(
    short_name: str, bound: Bound, perturbed: Bound | None = None, *, tolerance: float = 0.0
) -> KinkScan | None:
    """The kink scan of one call, or None when the operator has no non-differentiable points
    (or none this detector understands for these arguments).

    ``tolerance`` > 0 also reports values within that distance of a kink (the gradcheck
    check uses it to keep finite-difference steps from crossing one); the kinks check uses
    exact hits only."""
    detector = DETECTORS.get(short_name)
    if detector is None:
        return None
    if short_name in ("max", "min") and isinstance(bound.get("other"), torch.Tensor):
        detector = _bound_ties(f"{short_name}imum tie", ["other"])
    return detector(bound, perturbed, tolerance)
