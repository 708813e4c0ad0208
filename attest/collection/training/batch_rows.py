"""Row by row (a row is one example) comparisons of the ``batch_invariance`` check: the
relative deviation of a batched result from the examples run alone, with non-finite values
that differ counted infinite, and the float64 error scale that sets its tolerance."""

from __future__ import annotations

import torch

__all__ = ["max_rel", "per_example", "row_deviation"]


def row_deviation(got: torch.Tensor, ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Per row of ``got`` and ``ref`` (same shape, rows = examples): the relative L2 deviation
    (inf where non-finite values differ) and whether the row is bit-exact."""
    if got.shape != ref.shape or not got.is_floating_point() or not ref.is_floating_point():
        return None
    a = got.detach().reshape(got.shape[0], -1).double()
    r = ref.detach().reshape(ref.shape[0], -1).double()
    exact = ((a == r) | (a.isnan() & r.isnan())).all(dim=1)
    diff = torch.nan_to_num(a - r, nan=0.0, posinf=0.0, neginf=0.0).norm(dim=1)
    scale = torch.nan_to_num(r, nan=0.0, posinf=0.0, neginf=0.0).norm(dim=1)
    dev = torch.where(
        scale > 0, diff / scale.clamp_min(1e-300), torch.where(diff > 0, torch.inf, 0.0)
    )
    unequal_nonfinite = (~torch.isfinite(a) | ~torch.isfinite(r)).any(dim=1) & ~exact
    dev = torch.where(unequal_nonfinite, torch.inf, dev)
    return torch.where(exact, 0.0, dev), exact


def per_example(
    t: torch.Tensor, alone: torch.Tensor, b: int
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``t`` (an operator's output at batch size b) and the stacked outputs of the examples
    alone (row j: the example in row j) as rows to compare, or the whole tensor when it has no
    batch dimension (a batch-level quantity is compared with the first example's); None when
    the shapes do not map (a transposed batch dimension)."""
    one = alone.shape[1:]  # the output of one example alone
    if t.dim() >= 1 and len(one) >= 1 and t.shape[0] == b * one[0] and t.shape[1:] == one[1:]:
        return t.reshape(b, -1), alone.reshape(b, -1)
    if tuple(t.shape) == tuple(one):
        return t.reshape(1, -1), alone[:1].reshape(1, -1)
    return None


def max_rel(a: torch.Tensor | None, b: torch.Tensor | None) -> float:
    """The largest row deviation of ``a`` from ``b`` over the rows where both are finite
    alike: a row that one precision alone makes NaN or infinite is no error scale (as a
    tolerance, infinity would pass any batch dependence); ``numerics`` reports it."""
    found = row_deviation(a, b) if a is not None and b is not None else None
    if found is None or not found[0].numel():
        return 0.0
    finite = found[0][torch.isfinite(found[0])]
    return float(finite.max()) if finite.numel() else 0.0
