"""second_order's copy of the probe point: float32 where that keeps every bit (hessian_vector)."""

from __future__ import annotations

import torch
from _grad_models import MLP, class_labels, continuous, cross_entropy, make_context

from attest.collection.gradients.hessian_vector import _Objective


def test_the_saved_point_is_narrow_only_where_exact_and_restores_every_bit() -> None:
    ctx = make_context(MLP, continuous(2, 4), class_labels(2), cross_entropy)
    model = ctx.shared_model(torch.float64)
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.no_grad():  # one parameter with more than float32's precision
        params[0][0, 0] += 1e-12
    before = [p.detach().clone() for p in params]
    objective = _Objective(model, ctx.spec, continuous(2, 4).double(), None)
    saved = objective.saved_point()
    assert saved[0].dtype == torch.float64  # not exact in float32: kept wide
    assert all(t.dtype == torch.float32 for t in saved[1 : len(params)])
    with torch.no_grad():
        for p in params:
            p.add_(0.5)
    objective.restore()
    assert all(
        torch.equal(p, b) and p.dtype == torch.float64 for p, b in zip(params, before, strict=True)
    )
