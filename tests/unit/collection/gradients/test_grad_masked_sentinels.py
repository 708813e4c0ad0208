"""Finite differences at an attention mask's ``finfo.min`` fill (DeBERTa-v2: scores
``masked_fill``ed with float32's min, then a softmax whose padded query rows are all fill):
the outputs are differenced before the dot products, so the fill cancels exactly, and
coordinates no step can move are left out of the directions; a wrong backward at the same
inputs still fails."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attest.collection.gradients import random_directions
from attest.collection.gradients.finite_differences import (
    FiniteDifferenceSettings,
    check_backward,
    describe,
)

FILL = torch.finfo(torch.float32).min


def _scores() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(4, 2, 10, 10, generator=g, dtype=torch.float64)
    lengths = torch.tensor([7, 10, 9, 5])
    keep = torch.arange(10)[None] < lengths[:, None]
    mask = (keep[:, None, :, None] & keep[:, None, None, :]).expand(4, 2, 10, 10)
    return scores, mask


class ScaledSoftmax(torch.autograd.Function):
    """softmax over the last dim with a backward scaled by ``factor`` (1.0 is correct)."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, factor: float
    ) -> torch.Tensor:
        y = torch.softmax(x, -1)
        ctx.save_for_backward(y)
        ctx.factor = factor  # type: ignore[attr-defined]
        return y

    @staticmethod
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        (y,) = ctx.saved_tensors  # type: ignore[attr-defined]
        dx = y * (grad - (grad * y).sum(-1, keepdim=True))
        return dx * ctx.factor, None  # type: ignore[attr-defined]


SETTINGS = [
    pytest.param(FiniteDifferenceSettings(), id="central"),
    pytest.param(dataclasses.replace(FiniteDifferenceSettings(), one_sided=True), id="forward"),
]


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("batched", [True, False])
def test_masked_fill_and_softmax_at_the_fill_pass_and_a_wrong_backward_fails(
    settings: FiniteDifferenceSettings, batched: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not batched:
        monkeypatch.setattr(random_directions, "BATCH_NUMEL", 0)
    scores, mask = _scores()
    fill = check_backward(
        lambda s: [s.masked_fill(~mask, FILL)], [scores], settings, mode="random_directions"
    )
    assert fill.passed, describe(fill)
    filled = scores.masked_fill(~mask, FILL)
    soft = check_backward(
        lambda s: [ScaledSoftmax.apply(s, 1.0)], [filled], settings, mode="random_directions"
    )
    assert soft.passed, describe(soft)
    wrong = check_backward(
        lambda s: [ScaledSoftmax.apply(s, 1.03)], [filled], settings, mode="random_directions"
    )
    assert not wrong.passed and wrong.max_rel_error == pytest.approx(0.03, rel=0.2)


def test_a_sliced_masked_fill_cuts_its_bool_mask_with_its_scores() -> None:
    from attest.collection.capture.aten_args import BoundCall
    from attest.collection.gradients.gradcheck_cases import slice_pointwise

    scores, mask = _scores()
    call = BoundCall.of(torch.ops.aten.masked_fill.Scalar, (scores, ~mask[:, :1], FILL), {})
    small = slice_pointwise(call, [0], 64)
    assert small is not None
    (out,) = small.function([0])(small.tensors[0])  # raised a broadcast error before
    assert out.numel() <= 64
    check = check_backward(small.function([0]), small.tensors, FiniteDifferenceSettings())
    assert check.passed, describe(check)
