"""Quadrature rules on [0, 1] for integrated gradients: nodes and weights in float64.

``steps`` always counts nodes, i.e. integrand evaluations (model forward+backward passes)
per input, for every rule:

- ``gausslegendre``: ``numpy.polynomial.legendre.leggauss(n)`` mapped from [-1, 1] to [0, 1];
- ``riemann_left`` / ``riemann_right`` / ``riemann_middle``: n equal cells, weights ``1/n``;
- ``trapezoid``: n nodes ``j/(n-1)`` (both ends), weights ``1/(n-1)`` halved at the ends,
  summing to 1. Captum's ``riemann_trapezoid`` puts weights ``1/n`` on the same nodes, which
  sum to ``(n-1)/n``: its attributions are short by a factor ``(n-1)/n``.

Refinement doubles the cells. Left, right and trapezoid are nested under it, so a refined
rule re-uses every earlier evaluation: ``new = old/2 + h_new * sum(g at the new nodes)``.
"""

from __future__ import annotations

import functools
from typing import Literal

import numpy as np

from attest.errors import InputError

__all__ = [
    "METHODS",
    "NESTED_METHODS",
    "Method",
    "canonical_method",
    "gauss_legendre",
    "next_steps",
    "quadrature",
    "refinement",
]

Method = Literal["gausslegendre", "riemann_left", "riemann_right", "riemann_middle", "trapezoid"]
METHODS: tuple[str, ...] = Method.__args__  # type: ignore[attr-defined]
_ALIASES = {"riemann_trapezoid": "trapezoid", "gauss_legendre": "gausslegendre"}
# Rules whose node set at the next step count contains the current one.
NESTED_METHODS = frozenset({"riemann_left", "riemann_right", "trapezoid"})


def canonical_method(method: str) -> str:
    """The rule's name, accepting Captum's ``riemann_trapezoid`` and ``adaptive`` (the
    composite Gauss-Legendre rule refined by local errors, :mod:`attest.collection.ig.adaptive`);
    an unknown one is an error."""
    name = _ALIASES.get(method, method)
    if name not in METHODS and name != "adaptive":
        raise InputError(
            f"unknown integrated-gradients method {method!r}",
            hint=f"use adaptive or one of {', '.join(METHODS)}",
        )
    return name


def quadrature(method: str, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes in [0, 1] and weights (float64, summing to 1) of ``method`` with ``steps`` nodes."""
    name = canonical_method(method)
    minimum = 2 if name == "trapezoid" else 1
    if isinstance(steps, bool) or int(steps) != steps or steps < minimum:
        raise InputError(f"steps must be an integer >= {minimum} for {name}, got {steps!r}")
    nodes, weights = _rule(name, int(steps))
    return nodes.copy(), weights.copy()


@functools.lru_cache(maxsize=64)
def _rule(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    # Cached: leggauss solves an eigenproblem, milliseconds at n = 50, on every call otherwise.
    j = np.arange(n, dtype=np.float64)
    if name == "gausslegendre":
        x, w = np.polynomial.legendre.leggauss(n)
        return 0.5 * (x + 1.0), 0.5 * w
    if name == "trapezoid":
        weights = np.full(n, 1.0 / (n - 1))
        weights[0] = weights[-1] = 0.5 / (n - 1)
        return j / (n - 1), weights
    offset = {"riemann_left": 0.0, "riemann_right": 1.0, "riemann_middle": 0.5}[name]
    return (j + offset) / n, np.full(n, 1.0 / n)


def next_steps(method: str, steps: int) -> int:
    """The node count after doubling the cells."""
    # Trapezoid refines by halving its cells: n nodes (n-1 cells) -> 2n-1 nodes.
    return 2 * steps - 1 if method == "trapezoid" else 2 * steps


def refinement(method: str, old_steps: int, new_steps: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Nodes to evaluate, their weights and the factor on the previous weighted sum.

    For the nested rules the new sum is ``old/2 + h_new * sum(g at the new odd nodes)``;
    for the others (Gauss-Legendre, midpoint) everything is evaluated afresh (factor 0).
    """
    if method not in NESTED_METHODS:
        nodes, weights = quadrature(method, new_steps)
        return nodes, weights, 0.0
    cells_new = new_steps - 1 if method == "trapezoid" else new_steps
    odd = (
        np.arange(1, cells_new, 2, dtype=np.float64)
        if method == "trapezoid"
        else (np.arange(0, cells_new // 2, dtype=np.float64) * 2 + 1)
    )
    nodes = odd / cells_new
    return nodes, np.full(nodes.shape, 1.0 / cells_new), 0.5


@functools.lru_cache(maxsize=16)
def gauss_legendre(m: int) -> tuple[np.ndarray, np.ndarray]:
    """m-point Gauss-Legendre nodes and weights on [0, 1] (float64), for ig_determinism's
    points."""
    x, w = np.polynomial.legendre.leggauss(m)
    return 0.5 * (x + 1.0), 0.5 * w
