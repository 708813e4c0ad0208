"""``aten._ctc_loss`` (``F.ctc_loss``): PyTorch's backward is the gradient through the
``log_softmax`` that made ``log_probs`` (pytorch/pytorch#52241), so on normalized
log-probabilities gradcheck differences the operator through ``log_softmax`` (the directions
that keep each frame normalized) and a clean CTC model passes; handed raw logits, whose
gradient PyTorch gets wrong, it still fails. Before the rule a CTC speech model failed
gradcheck on ``_ctc_loss`` with relative error 1.0."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from attest.collection.context import OpRecord
from attest.collection.gradients import gradcheck as gradcheck_ops
from attest.collection.gradients.finite_differences import FiniteDifferenceSettings

T, N, C = 10, 2, 5
TARGETS = torch.tensor([[1, 2, 3], [4, 2, 0]])
INPUT_LENGTHS = torch.full((N,), T, dtype=torch.long)
TARGET_LENGTHS = torch.tensor([3, 2])


def _ctc_record(log_probs: torch.Tensor) -> OpRecord:
    func = torch.ops.aten._ctc_loss.Tensor
    args = (log_probs, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS, 0, True)
    out = func(*args)
    return OpRecord(
        id=0,
        op=str(func),
        module="",
        func=func,
        args=args,
        kwargs={},
        output_shapes=[list(o.shape) for o in out],
        output_dtypes=[str(o.dtype) for o in out],
    )


def _logits() -> torch.Tensor:
    return torch.randn(T, N, C, generator=torch.Generator().manual_seed(0))


def test_the_model_level_gradient_through_log_softmax_is_right() -> None:
    # the premise, by hand: through log_softmax, PyTorch's gradient matches differences
    logits = _logits().double().requires_grad_()

    def nll(z: torch.Tensor) -> torch.Tensor:
        return F.ctc_loss(z.log_softmax(-1), TARGETS, INPUT_LENGTHS, TARGET_LENGTHS)

    assert torch.autograd.gradcheck(nll, (logits,))


def test_normalized_log_probs_pass_under_the_documented_rule() -> None:
    item = gradcheck_ops.check_operator(
        _ctc_record(_logits().log_softmax(-1)), FiniteDifferenceSettings()
    )
    assert item.status == "pass", item.message
    assert item.metrics["known_rule"] == "ctc_log_softmax"
    assert "pytorch/pytorch#52241" in item.message


@pytest.mark.parametrize("offset", [0.5, -2.0])
def test_raw_logits_handed_to_ctc_loss_still_fail(offset: Any) -> None:
    # not normalized: the rule does not apply, and PyTorch's gradient is wrong for them
    item = gradcheck_ops.check_operator(_ctc_record(_logits() + offset), FiniteDifferenceSettings())
    assert item.status == "fail", item.message
    assert "known_rule" not in item.metrics
