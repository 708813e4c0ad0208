"""The random-direction mode: batched directions and the one-by-one path agree, and both fail
a wrong backward (attest.collection.gradients.random_directions)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from attest.collection.capture.aten_args import BoundCall
from attest.collection.gradients import random_directions
from attest.collection.gradients.finite_differences import (
    FiniteDifferenceSettings,
    GaussianPool,
    check_backward,
)

SETTINGS = FiniteDifferenceSettings()
aten = torch.ops.aten


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _conv_case() -> tuple[BoundCall, list[torch.Tensor]]:
    x = torch.randn(2, 3, 6, 6, generator=_g(0), dtype=torch.float64)
    w = torch.randn(4, 3, 3, 3, generator=_g(1), dtype=torch.float64)
    b = torch.randn(4, generator=_g(2), dtype=torch.float64)
    call = BoundCall.of(
        aten.convolution.default, (x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {}
    )
    return call, call.tensors


class ScaledBackward(torch.autograd.Function):
    """x * w (broadcast) with the backward to x scaled by ``factor``."""

    @staticmethod
    def forward(ctx, x, w, factor):  # type: ignore[no-untyped-def,override]
        ctx.save_for_backward(x, w)
        ctx.factor = factor
        return x * w

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def,override]
        x, w = ctx.saved_tensors
        gw = (grad * x).sum(0)
        return grad * w * ctx.factor, gw, None


def _pair(factor: float) -> tuple[object, list[torch.Tensor]]:
    x = torch.randn(40, 30, generator=_g(3), dtype=torch.float64)
    w = torch.randn(30, generator=_g(4), dtype=torch.float64)

    def fn(a: torch.Tensor, b: torch.Tensor) -> Sequence[torch.Tensor]:
        return [ScaledBackward.apply(a, b, factor)]

    return fn, [x, w]


@pytest.fixture(params=["batched", "one_by_one"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "one_by_one":
        monkeypatch.setattr(random_directions, "BATCH_NUMEL", 0)
    return str(request.param)


def test_both_paths_give_the_same_figures() -> None:
    call, inputs = _conv_case()
    fn = call.function(range(len(inputs)))
    batched = check_backward(fn, inputs, SETTINGS, mode="random_directions", pool=GaussianPool(5))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(random_directions, "BATCH_NUMEL", 0)
        loop = check_backward(fn, inputs, SETTINGS, mode="random_directions", pool=GaussianPool(5))
    assert batched.passed and loop.passed
    assert batched.max_rel_error < 1e-6 and loop.max_rel_error < 1e-6
    assert (batched.cotangents, batched.input_numel, batched.output_numel) == (
        loop.cotangents,
        loop.input_numel,
        loop.output_numel,
    )


def test_a_two_percent_wrong_backward_fails_on_either_path(path: str) -> None:
    fn, inputs = _pair(1.02)
    check = check_backward(fn, inputs, SETTINGS, mode="random_directions")
    assert not check.passed, path
    assert check.max_rel_error > 5e-3
    fn, inputs = _pair(1.0)
    assert check_backward(fn, inputs, SETTINGS, mode="random_directions").passed, path


def test_perturbed_rows_keep_a_strided_input_layout() -> None:
    x = torch.randn(5, 7, dtype=torch.float64).t()  # (7, 5), not contiguous
    rows = random_directions._batch_like(x, 4)
    assert rows.shape == (4, 7, 5)
    assert all(row.stride() == x.stride() for row in rows.unbind(0))
    contiguous = random_directions._batch_like(torch.zeros(3, 2, dtype=torch.float64), 2)
    assert contiguous.is_contiguous()
