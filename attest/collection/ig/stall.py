"""When the adaptive IG search cannot converge, and where on the path it got stuck.

The adaptive rule (:mod:`attest.collection.ig.adaptive`) bisects the composite Simpson
panels with the largest local errors. Where the integrand is smooth a halving cuts a panel's
error about 32 fold and the change of F across it 2 fold; at a ReLU kink F's change halves
too (F is linear on either side) while the error falls erratically. Where F jumps, or changes
over a stretch far narrower than the panel, the child holding it keeps nearly all of its
parent's change of F, halving after halving, and a good share of its error (all of it for a
jump; about half next to a steep start, where the end node's slope dominates the panel's
estimate): a normalization layer's epsilon transition next to a flat baseline spans
t = 1e-6 .. 1e-2 on a random-weight SegResNet, and doubling on to the step cap there cost
853 model passes and still failed (issue #18).

So a panel's *stall* counts the halvings in a row, down its lineage, whose child kept at
least ``STALL_RATIO`` (0.7) of its parent's change of F and ``STALL_ERROR_RATIO`` (0.1) of
its error. When a panel the search would split next has stalled ``ig_stall_halvings`` times
(3: each costs 2 path samples), the input stops there, unless F changes by less than
``ZOOM_SHARE`` of ``|F(x) - F(b)|`` across that panel: no jump or steep stretch worth
reporting is there (``ig_monotonicity`` reports jumps from 5 %), only kinks, and the lineage
is refined on. Kinks rarely trip the count where F is monotone across the panel (F's change
halves); where the integrand changes sign at a kink a halving can keep F's change (on
seeded ReLU MLPs the count reached 3 on about one input in twelve, the former
Gauss-Legendre panels' on more; tests/unit/collection/ig/test_ig_adaptive.py).

It then says where: F alone (forward passes, no backward, about a third of a path sample
each) is followed into the stalled panel by bisection, keeping the half across which F
changes more, until F changes by less than ``ZOOM_SHARE`` of ``|F(x) - F(b)|`` there (a
steep but smooth stretch: its interval is reported) or the interval is as narrow as a panel
may get, ``MIN_PANEL_WIDTH`` (a jump: F changes by the same amount across any interval
around it, which ``ig_monotonicity`` reports as one). A midpoint that rounds to the same
model-precision point as an end has that end's F, so localizing a jump below the model's
resolution of t costs no pass.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
import torch

__all__ = [
    "MIN_PANEL_WIDTH",
    "STALL_ERROR_RATIO",
    "STALL_RATIO",
    "ZOOM_SHARE",
    "json_safe",
    "stall_text",
    "stop_reading",
    "zoom",
]

# Panels narrower than this are not split (t resolves far below float32's input resolution);
# the zoom stops there too. (Defined here, re-exported by attest.collection.ig.adaptive.)
MIN_PANEL_WIDTH = 2.0**-40
# A child that keeps at least this share of its parent's change of F, and STALL_ERROR_RATIO
# of its error, has stalled (see above).
STALL_RATIO = 0.7
STALL_ERROR_RATIO = 0.1
# The zoom stops when F changes by less than this share of |F(x) - F(b)| across its interval
# (well under ig_monotonicity's 5 % jump threshold, so no jump it would report is missed).
ZOOM_SHARE = 0.02


class _Values(Protocol):
    dtype: torch.dtype

    def values(self, points: torch.Tensor, idx: torch.Tensor) -> np.ndarray:
        """F (float64) at a batch of points, forward only."""


def zoom(
    evaluator: _Values,
    start: torch.Tensor,
    direction: torch.Tensor,
    i: int,
    interval: tuple[float, float, float, float],
    floor: float,
    min_width: float,
) -> dict[str, Any]:
    """Follow F into ``interval = (a, b, F(a), F(b))`` of input ``i``'s path
    ``start + t * direction`` (float64) by bisection (see the module docstring); the
    narrowest interval reached, F at its ends, the forward passes spent, and whether F
    still changed by ``floor`` or more across it at the narrowest width (a jump)."""
    lo, hi, f_lo, f_hi = interval
    idx = torch.tensor([i], dtype=torch.long)
    passes = 0

    def rounded(t: float) -> torch.Tensor:
        return (start + t * direction).to(evaluator.dtype)

    p_lo, p_hi = rounded(lo), rounded(hi)
    while hi - lo > 2.0 * min_width and abs(f_hi - f_lo) >= floor:
        mid = 0.5 * (lo + hi)
        p_mid = rounded(mid)
        if torch.equal(p_mid, p_lo):
            f_mid = f_lo
        elif torch.equal(p_mid, p_hi):
            f_mid = f_hi
        else:
            point = (start + mid * direction).unsqueeze(0)
            f_mid = float(evaluator.values(point, idx)[0])
            passes += 1
        if not math.isfinite(f_mid):
            lo, hi, f_hi, p_hi = lo, mid, f_mid, p_mid
            break
        if abs(f_mid - f_lo) >= abs(f_hi - f_mid):
            hi, f_hi, p_hi = mid, f_mid, p_mid
        else:
            lo, f_lo, p_lo = mid, f_mid, p_mid
    change = f_hi - f_lo
    return {
        "located": [lo, hi],
        "f": [f_lo, f_hi],
        "f_change": change if math.isfinite(change) else None,
        "forward_passes": passes,
        "jump": bool(hi - lo <= 2.0 * min_width and not abs(change) < floor),
    }


def stop_reading(
    evaluator: _Values,
    path: tuple[torch.Tensor, torch.Tensor, int],
    interval: tuple[float, float, float, float],
    scale: float,
) -> dict[str, Any]:
    """Where an input stopped: its stalled panel ``interval = (a, b, F(a), F(b))`` and what
    the zoom found in it. ``path``: (baseline, x - b, input index); ``scale``:
    ``|F(x) - F(b)|``, whose ``ZOOM_SHARE`` ends the zoom."""
    start, direction, i = path
    found = zoom(evaluator, start, direction, i, interval, ZOOM_SHARE * scale, MIN_PANEL_WIDTH)
    return {"interval": [interval[0], interval[1]], **found}


def stall_text(stall: dict[str, Any] | None, cap: int) -> str | None:
    """Why and where the adaptive search stopped an input early (its ``stall`` reading from
    :func:`stop_reading`), or None when it did not: the rate its error fell at, the interval
    along the path (alpha, the path parameter t) of its worst panel, what F does there."""
    if stall is None:
        return None
    a, b = stall["interval"]
    low, high = stall["located"]
    pace = (
        f"the panel at alpha in [{a:.6g}, {b:.6g}] kept {stall['error'] / stall['parent_error']:.2f} "
        f"of its error at its last halving, and at least {STALL_RATIO} of the change of F "
        f"across it at each of the {stall['halvings']} before (it holds {stall['panel_error_share']:.0%} of the local "
        f"error; cap {cap} evaluations)"
        if stall["parent_error"]
        else f"the panel at alpha in [{a:.6g}, {b:.6g}] kept its error (cap {cap} evaluations)"
    )
    change = stall["f_change"]
    if stall["jump"]:
        where = (
            f"F jumps by {change:.4g} between alpha = {low:.9g} and {high:.9g}, which no "
            "quadrature integrates (see ig_monotonicity)"
        )
    elif change is None:
        where = f"F is not finite near alpha = {high:.6g}"
    else:
        where = (
            f"F changes steeply within alpha in [{low:.3g}, {high:.3g}] (a stretch far narrower "
            "than the panels, e.g. a normalization layer's epsilon transition next to a flat "
            "baseline; a smoother baseline such as blur avoids it)"
        )
    return (
        f"stopped early at {stall['evaluations']} evaluations, the error no longer shrinking "
        f"as panels split: {pace}; there {where}"
    )


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as None (evidence is strict JSON)."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value
