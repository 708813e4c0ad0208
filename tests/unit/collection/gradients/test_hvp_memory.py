"""What second_order and accumulation hold, and in which order the gradient checks run them
(the memory work of issue #18): directions drawn on demand, products held in float32 only
where that is exact enough, the model put back bit for bit, accumulation before second_order
when no graph is handed over."""

from __future__ import annotations

import pytest
import torch
from _grad_models import TanhNet, class_labels, continuous, cross_entropy, make_context

from attest.collection.gradients import hessian_vector as hvp
from attest.collection.gradients import runner as gradchecks


def _point() -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(8, 6, dtype=torch.float64), torch.randn(3, dtype=torch.float64) * 5]


def test_a_direction_is_the_same_vector_each_time_and_whatever_was_drawn_before() -> None:
    point = _point()
    drawn = hvp.Directions(point, [True, True], seed=0)
    first = drawn(1)
    drawn(0)
    drawn(2)
    again = drawn(1)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    other = drawn(0)
    assert not torch.equal(first[0], other[0])
    assert all(t.dtype == torch.float64 for t in first)
    # each tensor's part is scaled by its RMS at the probe point, read when the directions
    # were set up: moving the point afterwards (the differences do, in place) changes nothing
    point[0].mul_(100.0)
    assert all(torch.equal(a, b) for a, b in zip(first, drawn(1), strict=True))
    scaled = hvp.Directions(_point(), [True, True], seed=0)(1, 1e-3)
    assert torch.allclose(scaled[0], first[0] * 1e-3)


def test_dead_tensors_get_zero_directions() -> None:
    directions = hvp.Directions(_point(), [True, False], seed=0)(0)
    assert bool(directions[0].abs().sum() > 0)
    assert not bool(directions[1].any())


def test_products_are_held_in_float32_only_within_its_normal_range() -> None:
    normal = torch.tensor([1.5, -2e-3, 0.0, 3e20], dtype=torch.float64)
    held = hvp._held(normal)
    assert held.dtype == torch.float32
    assert torch.allclose(held.double(), normal, rtol=1e-7, atol=0)
    for outside in ([1.0, 1e-200], [1.0, 1e200], [1.0, float("inf")], [float("nan")]):
        tensor = torch.tensor(outside, dtype=torch.float64)
        assert hvp._held(tensor).dtype == torch.float64
    assert hvp._held(torch.zeros(3, dtype=torch.float64)).dtype == torch.float32
    assert hvp._held(torch.ones(2, dtype=torch.float32)).dtype == torch.float32


def test_the_check_puts_the_model_back_bit_for_bit() -> None:
    ctx = make_context(TanhNet, continuous(6, 6), class_labels(6), cross_entropy)
    model = ctx.fresh_model(torch.float64)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = continuous(2, 6).double()
    labels = class_labels(2)
    outcomes = hvp.hessian_vector_check(
        model, ctx.spec, x, labels, directions=3, seed=0, rtol=1e-3, atol=1e-6
    )
    assert [o["direction"] for o in outcomes] == [0, 1, 2]
    assert all(o["passed"] for o in outcomes)
    # float32-held products leave the agreement far inside rtol (1e-3)
    assert max(o["max_rel_error"] for o in outcomes) < 1e-5
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in model.parameters())


def test_accumulation_runs_before_second_order_when_no_graph_is_handed_over() -> None:
    ctx = make_context(TanhNet, continuous(6, 6), class_labels(6), cross_entropy)
    order = [c for c, _ in gradchecks._in_order(ctx, gradchecks.EXECUTION)]
    assert order.index("accumulation") < order.index("second_order")
    assert sorted(order) == sorted(c for c, _ in gradchecks.EXECUTION)


def test_second_order_keeps_its_place_when_it_takes_over_a_graph() -> None:
    ctx = make_context(TanhNet, continuous(6, 6), class_labels(6), cross_entropy)
    ctx.gradients.graph = object()  # type: ignore[assignment]  # handed over by gradient_flow
    order = [c for c, _ in gradchecks._in_order(ctx, gradchecks.EXECUTION)]
    assert order == [c for c, _ in gradchecks.EXECUTION]


def test_the_reordered_run_gives_the_results_of_each_check_alone() -> None:
    ctx = make_context(TanhNet, continuous(6, 6), class_labels(6), cross_entropy)
    together = {r.check: r for r in gradchecks.run(ctx)}
    assert [r for r in together] == [c for c, _ in gradchecks.CHECKS]
    from attest.collection.gradients import accumulation, second_order

    alone = make_context(TanhNet, continuous(6, 6), class_labels(6), cross_entropy)
    for check, module in (("accumulation", accumulation), ("second_order", second_order)):
        mine = module.run(alone)
        theirs = together[check]
        assert [i.status for i in mine.items] == [i.status for i in theirs.items]
        for a, b in zip(mine.items, theirs.items, strict=True):
            assert a.metrics.get("max_rel_error") == pytest.approx(
                b.metrics.get("max_rel_error"), rel=1e-6, abs=1e-12
            )
