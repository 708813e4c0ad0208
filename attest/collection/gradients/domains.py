"""Where an operator's domain ends or its derivative is unbounded: the one table the
finite-difference steps of ``gradcheck`` and ``second_order`` respect.

A captured value on or next to such a point has steps that leave the domain (``sqrt`` of a
zero variance plus 1e-10: every step of 1e-9 or more makes the argument negative and the
difference NaN) or cross the pole (a divisor clamped to 1e-12 next to divisors of 1), and
the finite difference measures the edge, not the backward. The function is smooth inside, so
this is neither a kink nor a defect: :func:`domain_nudges` finds the values within the
step's reach of a boundary and :func:`~attest.collection.gradients.gradcheck_cases.nudge_off_kinks`
moves them into the domain (at a pole, to a random side) by a nudge far beyond that reach,
as it moves values off a kink. The derivative formula is then checked at the moved point;
the item says how many values were moved and which boundary they were next to.

Each :class:`Boundary` names the argument (by schema name), the point, and the side the
domain lies on (``+1`` above, ``-1`` below, ``0`` both: a pole). ``pow`` has a boundary at
0 only for the exponents that make one: a fractional exponent (domain ``x >= 0``) or a
negative one (a pole).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["DOMAINS", "Boundary", "boundaries_of", "domain_nudges"]


@dataclass(frozen=True)
class Boundary:
    """The edge of an argument's domain at ``at``: the domain lies above it (``inward``
    +1), below it (-1), or on both sides of a pole (0)."""

    arg: str
    at: float
    inward: int
    what: str  # for a reader of the table: which edge this is

    def near(self, x: torch.Tensor, reach: float) -> torch.Tensor:
        """Values inside the domain (or on its edge) within ``reach`` of the boundary;
        values outside the domain (a NaN output already) are left alone."""
        offset = x - self.at
        if self.inward == 0:
            return offset.abs() <= reach
        inside = offset * self.inward
        return (inside >= 0) & (inside <= reach)


def _fixed(*boundaries: Boundary) -> Callable[[dict[str, Any]], tuple[Boundary, ...]]:
    return lambda _bound: boundaries


def _positive(op: str) -> Callable[[dict[str, Any]], tuple[Boundary, ...]]:
    return _fixed(Boundary("self", 0.0, 1, f"{op}'s domain x > 0"))


def _unit_interval(op: str) -> Callable[[dict[str, Any]], tuple[Boundary, ...]]:
    return _fixed(
        Boundary("self", -1.0, 1, f"{op}'s domain -1 <= x <= 1"),
        Boundary("self", 1.0, -1, f"{op}'s domain -1 <= x <= 1"),
    )


def _pow(bound: dict[str, Any]) -> tuple[Boundary, ...]:
    """``pow(self, exponent)`` with a scalar exponent: fractional, domain x >= 0; negative
    integer, a pole at 0; a non-negative integer (or a tensor exponent), none here."""
    exponent = bound.get("exponent")
    if isinstance(exponent, torch.Tensor):
        if exponent.numel() != 1:
            return ()
        exponent = exponent.item()
    if not isinstance(exponent, (int, float)) or isinstance(exponent, bool):
        return ()
    value = float(exponent)
    if not math.isfinite(value):
        return ()
    if value != math.floor(value):
        return (Boundary("self", 0.0, 1, f"pow's domain x >= 0 (exponent {value:g})"),)
    if value < 0:
        return (Boundary("self", 0.0, 0, f"the pole of x^{value:g} at 0"),)
    return ()


DOMAINS: dict[str, Callable[[dict[str, Any]], tuple[Boundary, ...]]] = {
    # poles: the derivative is unbounded at 0 (the divisor F.normalize clamps to 1e-12 for an
    # all-zero row: padded tokens in Swin V2's cosine attention)
    "div": _fixed(Boundary("other", 0.0, 0, "the divisor's pole at 0")),
    "reciprocal": _fixed(Boundary("self", 0.0, 0, "the pole of 1/x at 0")),
    # domains that end: sqrt(var + eps) at a zero variance, log of a probability near 0
    "sqrt": _positive("sqrt"),
    "rsqrt": _positive("rsqrt"),
    "log": _positive("log"),
    "log2": _positive("log2"),
    "log10": _positive("log10"),
    "log1p": _fixed(Boundary("self", -1.0, 1, "log1p's domain x > -1")),
    "pow": _pow,
    "acos": _unit_interval("acos"),
    "asin": _unit_interval("asin"),
    "atanh": _unit_interval("atanh"),
    "arccos": _unit_interval("arccos"),
    "arcsin": _unit_interval("arcsin"),
    "arctanh": _unit_interval("arctanh"),
    "acosh": _fixed(Boundary("self", 1.0, 1, "acosh's domain x >= 1")),
    "arccosh": _fixed(Boundary("self", 1.0, 1, "arccosh's domain x >= 1")),
}


def boundaries_of(short_name: str, bound: dict[str, Any]) -> tuple[Boundary, ...]:
    """The boundaries of operator ``short_name`` called with ``bound`` (schema name ->
    value); empty when it has none."""
    rule = DOMAINS.get(short_name)
    return () if rule is None else rule(bound)


def domain_nudges(
    short_name: str,
    bound: dict[str, Any],
    reach: float,
    sizes: dict[str, float],
    generator: torch.Generator,
) -> dict[str, torch.Tensor]:
    """The arguments with values within ``reach`` of a boundary, each such value moved into
    the domain, to ``sizes[arg]`` times a uniform factor in [0.5, 1) from the boundary (to a
    random side of a pole). Arguments not in ``sizes`` are not moved."""
    moved: dict[str, torch.Tensor] = {}
    for boundary in boundaries_of(short_name, bound):
        x = moved.get(boundary.arg, bound.get(boundary.arg))
        if (
            boundary.arg not in sizes
            or not isinstance(x, torch.Tensor)
            or not x.is_floating_point()
        ):
            continue
        near = boundary.near(x, reach)
        n = int(near.sum())
        if n == 0:
            continue
        where = near.nonzero(as_tuple=True)
        magnitude = 0.5 + 0.5 * torch.rand(n, generator=generator, dtype=torch.float64)
        if boundary.inward == 0:
            side = (torch.randint(0, 2, (n,), generator=generator) * 2 - 1).to(torch.float64)
        else:
            side = torch.full((n,), float(boundary.inward), dtype=torch.float64)
        value = boundary.at + sizes[boundary.arg] * side * magnitude
        nudged = x.clone()
        nudged[where] = value.to(device=x.device, dtype=x.dtype)
        moved[boundary.arg] = nudged
    return moved
