"""The accumulation check: micro-batch gradients add up to the full-batch gradient."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _grad_models import (
    MLP,
    class_labels,
    continuous,
    cross_entropy,
    make_context,
    valid_label_mean,
)

from attest.collection.context import CheckSettings
from attest.collection.gradients import accumulation
from attest.evidence.model import CheckResult


def _run(loss: object, labels: torch.Tensor | None = None, n: int = 8) -> CheckResult:
    labels = class_labels(n) if labels is None else labels
    ctx = make_context(MLP, continuous(n, 6), labels, loss, capture=False)  # type: ignore[arg-type]
    return accumulation.run(ctx)


def summed(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Sum-reduced cross-entropy: accumulates by plain summation."""
    return F.cross_entropy(output, target.long(), reduction="sum")


def test_mean_loss_passes_for_two_and_four_micro_batches() -> None:
    result = _run(cross_entropy)
    assert [i.metrics["microbatches"] for i in result.items] == [2, 4]
    assert all(i.status == "pass" and i.metrics["convention"] == "mean" for i in result.items)
    assert float(result.summary["max_rel_error"] or 1) < 1e-10


def test_uneven_micro_batches_are_weighted_by_their_size() -> None:
    result = _run(cross_entropy, n=7)
    assert all(i.status == "pass" for i in result.items), [i.message for i in result.items]
    assert result.items[1].details["microbatch_sizes"] == [2, 2, 2, 1]


def test_sum_loss_passes_under_the_sum_convention() -> None:
    result = _run(summed)
    assert all(i.status == "pass" and i.metrics["convention"] == "sum" for i in result.items)


def test_per_micro_batch_denominator_fails_with_the_fix() -> None:
    labels = torch.tensor([0, 1, 2, 1, -1, -1, -1, 2])
    result = _run(valid_label_mean, labels)
    assert all(i.status == "fail" for i in result.items)
    item = result.items[0]
    assert float(item.metrics["max_rel_error"] or 0) > 0.1
    assert "divide by the count over the whole batch" in item.message
    assert item.metrics["worst_parameter"] in {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}


def test_the_denominator_defect_is_latent_when_counts_are_even() -> None:
    # No ignored label: every micro-batch has the same count, so the loss is a plain mean.
    assert all(i.status == "pass" for i in _run(valid_label_mean).items)


def test_without_a_loss_it_is_not_applicable() -> None:
    ctx = make_context(MLP, continuous(8, 6), capture=False)
    result = accumulation.run(ctx)
    assert result.status == "not_applicable" and "loss" in (result.reason or "")
    ctx = make_context(MLP, continuous(8, 6), None, cross_entropy, capture=False)
    assert "target" in (accumulation.run(ctx).reason or "")


def test_more_micro_batches_than_examples_is_not_computed_for_that_count() -> None:
    ctx = make_context(MLP, continuous(3, 6), class_labels(3), cross_entropy, capture=False)
    ctx.settings = CheckSettings(accumulation_microbatches=(2, 4))
    result = accumulation.run(ctx)
    assert [i.status for i in result.items] == ["pass", "not_computed"]
