"""Kernels with no float64 implementation are gradchecked as captured, in a float64 shell."""

from __future__ import annotations

from typing import Any

import torch

from attest.collection.context import OpRecord
from attest.collection.gradients.finite_differences import FiniteDifferenceSettings
from attest.collection.gradients.gradcheck import check_operator


@torch.library.custom_op("attest_test::float32_only_scale", mutates_args=())
def float32_only_scale(x: torch.Tensor, skew: float) -> torch.Tensor:
    if x.dtype != torch.float32:
        raise RuntimeError("unsupported data type: this kernel is float32 only")
    return x * 3.0


@float32_only_scale.register_fake
def _(x: torch.Tensor, skew: float) -> torch.Tensor:
    return torch.empty_like(x)


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
    return grad * 3.0 * ctx.skew, None


def _setup(ctx: Any, inputs: tuple[torch.Tensor, float], output: torch.Tensor) -> None:
    ctx.skew = inputs[1]


float32_only_scale.register_autograd(_backward, setup_context=_setup)


def _record(skew: float) -> OpRecord:
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    func = torch.ops.attest_test.float32_only_scale.default
    return OpRecord(
        id=0,
        op="attest_test.float32_only_scale.default",
        module="",
        func=func,
        args=(x, skew),
        kwargs={},
        output_shapes=[[3, 4]],
        output_dtypes=["float32"],
    )


def test_float32_only_kernel_with_a_correct_backward_passes_in_its_precision() -> None:
    item = check_operator(_record(1.0), FiniteDifferenceSettings())
    assert item.status == "pass", item.message
    assert item.metrics["checked_dtype"] == "float32"
    assert "no float64 kernel" in item.message


def test_float32_only_kernel_with_a_backward_two_percent_off_fails() -> None:
    item = check_operator(_record(1.02), FiniteDifferenceSettings())
    assert item.status == "fail", item.message
