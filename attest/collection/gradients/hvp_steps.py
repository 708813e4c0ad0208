"""The step sweep of ``second_order``'s Hessian-vector products, with a rounding floor.

A finite difference of the gradient has two errors: truncation, which grows with the step,
and rounding, which grows as ``1/eps``. In float64 the rounding part is usually far below
``rtol``, but not always: where the gradient is a small difference of large terms (a
confidently classified example, whose loss gradient ``p - y`` is a difference of numbers
near 1, in a BatchNorm CNN in eval mode whose affine norms amplify it), every step of the
sweep can leave a mismatch above ``rtol`` that is the difference's rounding, not the double
backward (on such a model ``torch.autograd.gradgradcheck`` passes, and the error falls as
the step grows). So each step's mismatch is compared with an estimate of its own error:

    floor(eps) = 2 u ||g|| / eps  +  min over the neighbouring steps of ||D(eps) - D(eps')||

(relative to the step's scale, ``u`` the float64 unit roundoff, ``||g||`` the larger norm of
the gradients differenced, ``D`` the difference quotient). The first term is the rounding of
the gradients themselves; the second, the spread between the difference quotients at the
neighbouring steps of the sweep, measures what the first misses (rounding amplified inside
the gradient, and truncation): at a step whose quotient is right to ``delta``, neighbours
agree with it to about ``delta``. A wrong double backward is wrong at every step by the same
vector, which the spread does not contain, so it fails as before. A direction passes at a
step whose mismatch is within ``rtol + floor`` when that floor is at most
:data:`FLOOR_CAP` times ``rtol`` (a floor above that could hide a defect of its size: such a
step decides nothing). When no step passes and the best step's mismatch is within its floor
but that floor is above the cap, the differences cannot resolve the product in float64 (a
saturated softmax: the loss gradient of a confidently classified example is a difference
of numbers within 1e-16 of 1, and steps move it by whole roundoff units): the direction is
``unresolved``, which ``second_order`` reports as a warning with the floor, not a failure.

The floor is only needed when no step passes plainly (the sweep runs to its end then, so
every neighbour exists); the steps tried and the order are unchanged, so a plain pass costs
exactly what it did. At most three difference quotients are held at once (one per step
whose neighbours are not all done), in float32 where their elements allow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from attest.collection.gradients.finite_differences import finite_or_none

__all__ = ["FLOOR_CAP", "UNIT_ROUNDOFF", "StepError", "SweepOutcome", "sweep"]

# float64's unit roundoff, 2^-53
UNIT_ROUNDOFF = torch.finfo(torch.float64).eps / 2
# The floor may widen the tolerance to at most this many times rtol (5e-2 at the default).
# A defect D common to every step hides behind noise n only if |D + n| <= rtol + |n|, about
# D <= sqrt(2 n rtol): 1 % of the product at the cap. The model-level products are not where
# small second-order defects are caught anyway (a 2 % error of one operator's second
# derivative is below rtol there: the Gauss-Newton part dominates); the planted ones (a
# backward under no_grad, @once_differentiable) are wrong by the whole term.
FLOOR_CAP = 50.0


@dataclass
class StepError:
    """One step's comparison: the relative mismatch, the scale it is relative to, the
    larger norm of the gradients differenced, and the mismatch vector ``D(eps) - Hv`` (kept
    only while a neighbouring step may still need it)."""

    eps: float
    error: float
    scale: float
    grad_norm: float
    residual: list[torch.Tensor] | None = None

    def rounding(self) -> float:
        """``2 u ||g|| / eps`` relative to the step's scale."""
        if self.scale <= 0:
            return 0.0
        return 2 * UNIT_ROUNDOFF * self.grad_norm / self.eps / self.scale


@dataclass
class SweepOutcome:
    """The step chosen and how: ``floor`` (relative) and ``spread`` at that step, and
    whether it passed only within its floor."""

    eps: float
    error: float
    passed: bool
    within_floor: bool
    rounding: float
    spread: float | None
    curve: dict[str, float | None] = field(default_factory=dict)
    unresolved: bool = False

    def floor(self) -> float:
        return self.rounding + (self.spread or 0.0)


def _spread(a: StepError, b: StepError) -> float:
    """``||D(a) - D(b)|| = ||residual_a - residual_b||`` (both against the same ``Hv``)."""
    assert a.residual is not None and b.residual is not None
    total = 0.0
    for x, y in zip(a.residual, b.residual, strict=True):
        total += float(torch.linalg.vector_norm(_wide(x) - _wide(y)) ** 2)
    return math.sqrt(total)


def _wide(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float64 (complex128 when complex: an FNO's spectral weights)."""
    return t.to(torch.complex128) if t.is_complex() else t.double()


def sweep(
    error_at: Callable[[float], StepError], default: float, steps: tuple[float, ...], rtol: float
) -> SweepOutcome:
    """The default step, then ``steps`` in order until one passes plainly; when none does,
    the step that passes within its rounding floor (see the module docstring), else the
    step with the smallest error, failing."""
    first = error_at(default)
    if first.error <= rtol:
        return SweepOutcome(default, first.error, True, False, first.rounding(), None)
    order = sorted({default, *steps})
    done: dict[float, StepError] = {default: first}
    spreads: dict[float, list[float]] = {default: []}
    curve: dict[str, float | None] = {f"{default:.0e}": finite_or_none(first.error)}
    best = first
    for eps in steps:
        if eps in done:
            continue
        step = error_at(eps)
        curve[f"{eps:.0e}"] = finite_or_none(step.error)
        done[eps], spreads[eps] = step, []
        _link_neighbours(order, done, spreads, eps)
        if step.error < best.error:
            best = step
        if step.error <= rtol:
            return SweepOutcome(eps, step.error, True, False, step.rounding(), _min(spreads[eps]))
    for step in done.values():
        step.residual = None
    return _floored(done, spreads, best, rtol, curve)


def _link_neighbours(
    order: list[float], done: dict[float, StepError], spreads: dict[float, list[float]], eps: float
) -> None:
    """The spreads between step ``eps`` and its computed neighbours, each relative to each
    step's own scale; a step's residual is dropped once both its neighbours are done."""
    i = order.index(eps)
    here = done[eps]
    for j in (i - 1, i + 1):
        if 0 <= j < len(order) and order[j] in done:
            other = done[order[j]]
            if here.residual is None or other.residual is None:
                continue
            distance = _spread(here, other)
            spreads[eps].append(distance / here.scale if here.scale > 0 else math.inf)
            spreads[order[j]].append(distance / other.scale if other.scale > 0 else math.inf)
    for k in (i - 1, i, i + 1):
        if 0 <= k < len(order) and order[k] in done:
            neighbours = [order[m] for m in (k - 1, k + 1) if 0 <= m < len(order)]
            if all(n in done for n in neighbours):
                done[order[k]].residual = None


def _min(values: list[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return min(finite) if finite else None


def _floored(
    done: dict[float, StepError],
    spreads: dict[float, list[float]],
    best: StepError,
    rtol: float,
    curve: dict[str, float | None],
) -> SweepOutcome:
    """No step passed plainly: the step with the smallest error among those within their
    floor (at most FLOOR_CAP * rtol), else the best step, failing (``unresolved`` when its
    mismatch is within a floor above the cap)."""
    admitted = []
    for eps, step in done.items():
        spread = _min(spreads[eps])
        if spread is None or not math.isfinite(step.error):
            continue  # a floor needs a neighbour to compare with
        floor = step.rounding() + spread
        if floor <= FLOOR_CAP * rtol and step.error <= rtol + floor:
            admitted.append((step.error, eps, spread))
    if admitted:
        error, eps, spread = min(admitted)
        return SweepOutcome(eps, error, True, True, done[eps].rounding(), spread, curve)
    outcome = SweepOutcome(
        best.eps, best.error, False, False, best.rounding(), _min(spreads[best.eps]), curve
    )
    floor = outcome.floor()
    outcome.unresolved = (
        outcome.spread is not None and floor > FLOOR_CAP * rtol and best.error <= rtol + floor
    )
    return outcome
