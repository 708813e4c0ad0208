"""The one rule every comparison of two computed sides follows: a NaN or an infinity on
either side (analytic/numeric, reference/candidate, float64/deployed precision, one repeat
against another) is a failure that names the side.

Why one place: an error computed first and asked about finiteness afterwards passes NaN in
many ways: Python's ``max(0.0, nan)`` is ``0.0``, ``nan > tol`` is False, ``abs(a - n) /
max(|a|, ...)`` with a NaN ``a`` divides by a NaN scale that ``scale > 0`` then rejects,
torch's ``max`` propagates NaN while numpy's ``nanmax`` skips it, and a ``min``-based verdict
picks whichever side is not NaN. Every comparison helper of the collection asks
:func:`nonfinite` about its sides before it trusts an error, and reports
:meth:`NonFinite.describe` in its message (docs/gradient-checks.md, "Non-finite values").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["KINDS", "NonFinite", "kinds_of", "nonfinite", "one_sided_nonfinite"]

# The kinds of non-finite value, in the order a message lists them.
KINDS = ("NaN", "+inf", "-inf")


@dataclass(frozen=True)
class NonFinite:
    """Which sides of a comparison hold non-finite values, and which kinds (``KINDS``)."""

    sides: dict[str, tuple[str, ...]]

    @property
    def label(self) -> str:
        """The sides, for a metric: ``"analytic"``, ``"analytic and numeric"``."""
        return " and ".join(self.sides)

    def describe(self) -> str:
        """A clause for an item's message, naming each side and what it holds."""
        parts = [f"{side} side is {' and '.join(kinds)}" for side, kinds in self.sides.items()]
        return "non-finite value: the " + "; the ".join(parts)


def kinds_of(value: Any) -> tuple[str, ...]:
    """The kinds of non-finite value in ``value`` (a number, a tensor, a numpy array, None,
    or a list, tuple or dict of them), in ``KINDS`` order; () when all is finite."""
    found: set[str] = set()
    _collect(value, found)
    return tuple(k for k in KINDS if k in found)


def nonfinite(sides: Mapping[str, Any]) -> NonFinite | None:
    """The sides of ``sides`` (name -> value, as :func:`kinds_of` takes) that hold a NaN or an
    infinity, or None when every side is finite."""
    bad = {name: kinds for name, value in sides.items() if (kinds := kinds_of(value))}
    return NonFinite(bad) if bad else None


def one_sided_nonfinite(sides: Mapping[str, Any]) -> NonFinite | None:
    """For two sides of matching shapes (tensors or arrays, or equal-length sequences of
    them, paired in order): the sides holding a NaN or infinity where the other side is
    finite, or None when both are finite at the same positions.

    For comparisons that hold two runs of the same computation against each other (repeats,
    resume, recompute, batch slices): a NaN that both sides have at the same place is one the
    computation repeats, and what reports NaN reports it (``numerics``); a NaN on one side
    only is the difference, whatever a NaN-skipping maximum says. Tensors of different
    shapes are judged whole, as :func:`nonfinite` does."""
    (name_a, a), (name_b, b) = sides.items()
    pairs = list(zip(a, b, strict=True)) if isinstance(a, (list, tuple)) else [(a, b)]
    found: dict[str, set[str]] = {name_a: set(), name_b: set()}
    for x, y in pairs:
        tx, ty = _as_tensor(x), _as_tensor(y)
        if tx is None or ty is None or tx.shape != ty.shape:
            found[name_a].update(kinds_of(x))
            found[name_b].update(kinds_of(y))
            continue
        differ = torch.isfinite(tx) != torch.isfinite(ty.to(tx.device))
        if bool(differ.any()):
            found[name_a].update(kinds_of(tx[differ]))
            found[name_b].update(kinds_of(ty.to(tx.device)[differ]))
    bad = {name: tuple(k for k in KINDS if k in kinds) for name, kinds in found.items() if kinds}
    return NonFinite(bad) if bad else None


def _as_tensor(value: Any) -> torch.Tensor | None:
    """``value`` as a real floating tensor (complex as its pairs), or None if it is none."""
    if isinstance(value, (np.ndarray, np.generic, float, int)):
        value = torch.as_tensor(np.asarray(value))
    if not isinstance(value, torch.Tensor):
        return None
    t = value.detach()
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    return t if t.is_floating_point() else None


def _collect(value: Any, found: set[str]) -> None:
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, torch.Tensor):
        _tensor_kinds(value, found)
    elif isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.kind in "fc":
            _tensor_kinds(torch.from_numpy(np.ascontiguousarray(array)), found)
    elif isinstance(value, (int, float, complex)):
        for part in (value.real, value.imag) if isinstance(value, complex) else (value,):
            if math.isnan(part):
                found.add("NaN")
            elif math.isinf(part):
                found.add("+inf" if part > 0 else "-inf")
    elif isinstance(value, Mapping):
        for item in value.values():
            _collect(item, found)
    elif isinstance(value, Iterable):
        for item in value:
            _collect(item, found)


def _tensor_kinds(t: torch.Tensor, found: set[str]) -> None:
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    if not t.is_floating_point() or t.numel() == 0:
        return
    # one reduction for the common all-finite case; the kinds only when something is not
    if bool(torch.isfinite(t).all()):
        return
    if bool(torch.isnan(t).any()):
        found.add("NaN")
    if bool(torch.isposinf(t).any()):
        found.add("+inf")
    if bool(torch.isneginf(t).any()):
        found.add("-inf")
