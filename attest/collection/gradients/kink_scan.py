"""What a kink detector returns (:class:`KinkScan`), and the helpers every detector in
:mod:`attest.collection.gradients.kink_detectors` and :mod:`attest.collection.gradients.kink_pooling` shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "MAX_FIRST_INDICES",
    "Bound",
    "Detector",
    "KinkScan",
    "first_indices",
    "floating_arg",
    "matching",
    "scan_result",
]

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


def first_indices(mask: torch.Tensor) -> list[list[int]]:
    """The indices of the first ``MAX_FIRST_INDICES`` true elements of ``mask``."""
    idx = mask.nonzero()[:MAX_FIRST_INDICES]
    return [[int(v) for v in row] for row in idx.tolist()]


def floating_arg(bound: Bound | None, name: str) -> torch.Tensor | None:
    """Argument ``name`` of a bound call when it is a floating-point tensor, else None."""
    if bound is None:
        return None
    value = bound.get(name)
    return value if isinstance(value, torch.Tensor) and value.is_floating_point() else None


def matching(base: torch.Tensor, other: torch.Tensor | None) -> torch.Tensor | None:
    """``other`` (the perturbed run's counterpart of ``base``) in float64 on ``base``'s
    device, or None when it is missing or shaped differently."""
    if other is None or other.shape != base.shape:
        return None
    return other.detach().to(device=base.device, dtype=torch.float64)


def scan_result(
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
    return KinkScan(kind, n_counted, n_hits - n_counted, first_indices(counted), index_space, masks)
