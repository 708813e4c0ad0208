"""The adaptive IG rule's panels as results and the pieces of its search that are not the
search itself: each input's final :class:`PanelLayout`, what a completeness error is relative
to (:func:`completeness_scale`), F's rounding allowance per panel, Dörfler marking, and the
path samples sorted for the diagnostics (:mod:`attest.collection.ig.analysis`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attest.collection.ig.stall import MIN_PANEL_WIDTH

__all__ = [
    "MIN_PANEL_WIDTH",
    "PanelLayout",
    "completeness_scale",
    "finite_or_none",
    "mark",
    "rounding_noise",
    "sorted_samples",
]

# Rounding allowance of F per panel end, in units of the model dtype's epsilon times |F|.
ROUNDING_ULPS = 8.0


@dataclass
class PanelLayout:
    """One input's final panels (sorted by ``a``) and how their errors evolved.

    ``error`` is each panel's local error ``|integral estimate - (F(b) - F(a))|``;
    ``parent_error`` the error of the panel it was split from (NaN for an initial panel);
    ``depth`` how many halvings made it; ``f_a``/``f_b`` F at its ends; ``noise`` the
    rounding allowance of F at its ends.
    """

    a: np.ndarray
    b: np.ndarray
    error: np.ndarray
    parent_error: np.ndarray
    depth: np.ndarray
    f_a: np.ndarray
    f_b: np.ndarray
    noise: np.ndarray
    min_width: float = MIN_PANEL_WIDTH
    # Where the search stopped early (see ``stall``): the narrowest interval the F-only zoom
    # reached inside the stalled panel, and how much F changes across it.
    located: tuple[float, float, float] | None = None

    def summary(self) -> dict[str, Any]:
        """Panel count, narrowest and widest panel, deepest refinement, the largest error."""
        width = self.b - self.a
        k = int(np.argmax(self.error)) if self.error.size else 0
        return {
            "panels": int(self.a.size),
            "min_width": float(width.min()) if width.size else None,
            "max_width": float(width.max()) if width.size else None,
            "max_depth": int(self.depth.max()) if self.depth.size else 0,
            "max_local_error": float(self.error[k]) if self.error.size else None,
            "max_local_error_panel": [float(self.a[k]), float(self.b[k])]
            if self.error.size
            else None,
        }


def rounding_noise(f_a: float, f_b: float, eps: float) -> float:
    """F's rounding allowance across a panel whose ends have F ``f_a`` and ``f_b``."""
    return ROUNDING_ULPS * eps * (abs(f_a) + abs(f_b))


def completeness_scale(f_x: np.ndarray, f_b: np.ndarray, eps: float) -> np.ndarray:
    """What a completeness error is relative to: ``|F(x) - F(b)|``, or F's own rounding in the
    model's precision when that is larger. F(x) and F(b) are computed in the deployed
    precision, so a difference smaller than their rounding (a float16 model whose output
    barely moves along the path) cannot be checked to a finer relative error than that."""
    floor: np.ndarray = ROUNDING_ULPS * eps * (np.abs(f_x) + np.abs(f_b))
    scale: np.ndarray = np.maximum(np.abs(f_x - f_b), floor)
    return scale


def mark(
    widths: np.ndarray, starts: np.ndarray, excess: np.ndarray, allowed: float, share: float
) -> list[int]:
    """Dörfler marking: the largest-error panels whose excess errors make up ``share`` of the
    total, when the total is over ``allowed`` (ties by position); panels at the minimum
    width are never marked."""
    total = float(excess.sum())
    if not total > allowed:
        return []
    splittable = np.flatnonzero((widths > 2 * MIN_PANEL_WIDTH) & (excess > 0))
    order = sorted(splittable.tolist(), key=lambda k: (-excess[k], starts[k]))
    chosen, covered = [], 0.0
    for k in order:
        chosen.append(k)
        covered += float(excess[k])
        if covered >= share * total:
            break
    return chosen


def sorted_samples(
    rows: list[tuple[float, float, float]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One input's path samples as (t, f, slope) arrays sorted by t, the first of equal t kept."""
    table = np.array(rows, dtype=np.float64).reshape(-1, 3)
    order = np.argsort(table[:, 0], kind="stable")
    t_sorted, first = np.unique(table[order, 0], return_index=True)
    return t_sorted, table[order, 1][first], table[order, 2][first]


def finite_or_none(value: float) -> float | None:
    """The value, or None when it is NaN or infinite (evidence is strict JSON)."""
    return float(value) if np.isfinite(value) else None
