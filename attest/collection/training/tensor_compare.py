"""Two runs' name -> tensor mappings (parameters, gradients) compared, for ``resume`` and
``recompute``: how many are bit for bit equal, the largest relative deviation as
``determinism`` records it, and the item that passes or fails on them, naming the side that
is NaN or infinite where the other is not (attest.collection.nonfinite)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from attest.collection.nonfinite import one_sided_nonfinite
from attest.collection.profile.op_metrics import bits_equal, relative_deviation
from attest.evidence.model import CheckItem, Metric, Subject

__all__ = ["compare_tensors", "comparison_item"]


def compare_tensors(
    a: Mapping[str, torch.Tensor | None], b: Mapping[str, torch.Tensor | None]
) -> tuple[int, float, str]:
    """Two name -> tensor mappings (parameters, gradients): (how many are bit for bit equal,
    the max relative deviation as ``determinism`` records it, the name where it is largest).
    A tensor present on one side only (None on the other) deviates infinitely."""
    exact, worst, worst_name = 0, 0.0, ""
    for name, ta in a.items():
        tb = b.get(name)
        if ta is None or tb is None:
            same = ta is None and tb is None
            deviation = 0.0 if same else math.inf
        else:
            same = ta.shape == tb.shape and ta.dtype == tb.dtype and bits_equal(ta, tb)
            deviation = 0.0 if same else relative_deviation(tb, ta.to(tb.device))
        exact += same
        if deviation > worst or (not same and not worst_name):
            worst, worst_name = deviation, name
    return exact, worst, worst_name


def comparison_item(
    name: str,
    reference: Mapping[str, torch.Tensor | None],
    other: Mapping[str, torch.Tensor | None],
    rtol: float,
    *,
    same: str,
    differ: str,
    sides: tuple[str, str] = ("reference", "candidate"),
) -> CheckItem:
    """An item comparing two name -> tensor mappings: pass when bit for bit equal (``rtol``
    0, a deterministic backend) or within ``rtol`` of the reference's float64 scale. The
    message reads "{same}, bit for bit" or "k of n {differ} (...)", naming the side (``sides``:
    the reference's and the other's names) that is NaN or infinite where the other is not."""
    exact, deviation, worst = compare_tensors(reference, other)
    count = len(reference)
    bit_exact = exact == count
    # an infinite deviation never passes, whatever the tolerance (inf <= inf is True)
    passed = bit_exact if rtol == 0.0 else deviation <= rtol and math.isfinite(deviation)
    bad = None
    if not bit_exact and worst and not math.isfinite(deviation):
        ta, tb = reference.get(worst), other.get(worst)
        if ta is not None and tb is not None:
            bad = one_sided_nonfinite({sides[0]: ta, sides[1]: tb.to(ta.device)})
    how = "bit for bit" if bit_exact else f"within {rtol:.1e} (deviation {deviation:.2e})"
    metrics: dict[str, Metric] = {
        "bit_exact": bit_exact,
        "bit_exact_fraction": exact / count if count else None,
        "max_relative_deviation": deviation if math.isfinite(deviation) else None,
        "rtol": rtol,
        "worst": worst or None,
    }
    return CheckItem(
        subject=Subject(kind="model", name=name),
        status="pass" if passed else "fail",
        metrics=metrics,
        message=f"{same}, {how}"
        if passed
        else f"{count - exact} of {count} {differ} (max "
        f"relative deviation {deviation:.3e}, at {worst}; tolerance {rtol:.1e})"
        + (f"; at {worst}, {bad.describe()}" if bad is not None else ""),
    )
