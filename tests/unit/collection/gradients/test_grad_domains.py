"""Finite-difference steps stay inside the domain of sqrt, log, pow, acos...: a value on the
edge of an operator's domain (sqrt of a zero variance plus 1e-10) is moved into it before
gradcheck and second_order difference it, instead of failing a correct backward."""

from __future__ import annotations

import pytest
import torch
from _grad_models import class_labels, continuous, cross_entropy, make_context
from torch import nn

from attest.collection.gradients import gradcheck, second_order
from attest.collection.gradients import runner as gradchecks
from attest.collection.gradients.domains import boundaries_of, domain_nudges


class ZeroVarianceNorm(nn.Module):
    """A hand-written normalisation, ``(x - mean) / sqrt(var + eps)``."""

    def __init__(self, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.fc = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.var(dim=1, keepdim=True, unbiased=False)
        return self.fc((x - x.mean(1, keepdim=True)) / torch.sqrt(var + self.eps))


def _constant_row_probe() -> torch.Tensor:
    x = continuous(4, 6)
    x[1] = 0.7  # a constant row: zero variance, so sqrt's argument is eps itself
    return x


def test_sqrt_of_zero_variance_plus_epsilon_passes_gradcheck_and_second_order() -> None:
    ctx = make_context(
        lambda: ZeroVarianceNorm(1e-10), _constant_row_probe(), class_labels(4), cross_entropy
    )
    result = gradcheck.run(ctx)
    assert not result.failed_items, [i.message for i in result.failed_items]
    (sqrt,) = [i for i in result.items if i.subject.op == "aten.sqrt.default"]
    assert sqrt.status == "pass" and sqrt.metrics["kink_values_nudged"] == 1
    assert "edge of sqrt's domain" in sqrt.message
    ctx.settings.extra["second_order_operator_probe"] = True
    probed = second_order.run(ctx)
    assert not probed.failed_items, [i.message for i in probed.failed_items]
    assert any(i.subject.op == "aten.sqrt.default" for i in probed.items)


def test_sqrt_without_epsilon_at_zero_variance_is_still_caught() -> None:
    """The defect the epsilon exists for: sqrt(0) has an infinite derivative, the gradient
    is NaN; the gradient checks still flag it."""
    ctx = make_context(
        lambda: ZeroVarianceNorm(0.0), _constant_row_probe(), class_labels(4), cross_entropy
    )
    results = {r.check: r for r in gradchecks.run(ctx)}
    flow = results["gradient_flow"].failed_items
    assert flow and all("non-finite" in i.message for i in flow), [i.message for i in flow]


def _bound(x: torch.Tensor, **extra: object) -> dict[str, object]:
    return {"self": x, **extra}


@pytest.mark.parametrize(
    "op, extra, values, expected",
    [
        ("sqrt", {}, [0.0, 1e-10, -1.0, 2.0], [True, True, False, False]),
        ("log", {}, [0.0, 3e-9, 0.5], [True, True, False]),
        ("log1p", {}, [-1.0, -1.0 + 1e-9, 0.0], [True, True, False]),
        ("acos", {}, [1.0, -1.0, 1.0 - 1e-9, 0.3, 1.5], [True, True, True, False, False]),
        ("atanh", {}, [0.9999999999, 0.0], [True, False]),
        ("pow", {"exponent": 0.5}, [0.0, 1e-12, 1.0], [True, True, False]),
        ("pow", {"exponent": -2}, [-1e-12, 1e-12, 1.0], [True, True, False]),
        ("pow", {"exponent": 2}, [0.0, 1.0], [False, False]),
        ("div", {}, [0.0], [False]),  # div's pole is in ``other``, not ``self``
    ],
)
def test_domain_table_finds_values_at_the_edge(
    op: str, extra: dict[str, object], values: list[float], expected: list[bool]
) -> None:
    x = torch.tensor(values, dtype=torch.float64)
    bound = _bound(x, **extra)
    moved = domain_nudges(op, bound, 1e-5, {"self": 1e-2}, torch.Generator().manual_seed(0))
    after = moved.get("self", x)
    assert ((after != x).tolist()) == expected
    for boundary in boundaries_of(op, bound):
        # moved values lie inside the domain, far beyond the step's reach
        assert not bool(boundary.near(after[after != x], 1e-5).any())
        if boundary.inward:
            assert bool(((after[after != x] - boundary.at) * boundary.inward > -1e-3).all())
