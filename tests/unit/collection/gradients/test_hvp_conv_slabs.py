"""Large float64 3D convolutions in slabs for second_order's products (hvp_conv_slabs)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _grad_models import class_labels, continuous, cross_entropy, make_context
from torch import nn

from attest.collection.gradients import hvp_conv_slabs, second_order
from attest.collection.gradients.hvp_conv_slabs import ConvSlabs


@pytest.fixture
def small_slabs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slabs of 16 KiB, so that tiny convolutions are split as UNETR's are at 96^3."""
    monkeypatch.setattr(hvp_conv_slabs, "COLUMN_BYTES", 16 << 10)


@pytest.mark.parametrize(
    ("stride", "padding", "dilation"),
    [(1, 1, 1), ((2, 1, 1), (1, 0, 1), 1), (1, (2, 1, 0), (2, 1, 1)), (2, 0, 1)],
)
def test_slabs_give_the_convolution_bit_for_bit(
    small_slabs: None, stride: object, padding: object, dilation: object
) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 11, 6, 5, generator=gen, dtype=torch.float64)
    w = torch.randn(4, 3, 3, 3, 3, generator=gen, dtype=torch.float64)
    b = torch.randn(4, generator=gen, dtype=torch.float64)
    whole = F.conv3d(x, w, b, stride, padding, dilation)  # type: ignore[arg-type]
    with ConvSlabs() as mode:
        split = F.conv3d(x, w, b, stride, padding, dilation)  # type: ignore[arg-type]
    assert mode.split == 1
    assert torch.equal(whole, split)


def test_slabs_are_differentiated_twice_by_the_same_formulas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hvp_conv_slabs, "COLUMN_BYTES", 512)  # 4 slabs of this small call

    def conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with ConvSlabs() as mode:
            out = F.conv3d(x, w, b, padding=(1, 0, 1), dilation=(2, 1, 1))
        assert mode.split == 1
        return out

    gen = torch.Generator().manual_seed(1)
    inputs = tuple(
        torch.randn(shape, generator=gen, dtype=torch.float64).requires_grad_(True)
        for shape in ((1, 1, 7, 3, 3), (2, 1, 3, 3, 3), (2,))
    )
    assert torch.autograd.gradcheck(conv, inputs, fast_mode=True)
    assert torch.autograd.gradgradcheck(conv, inputs, fast_mode=True)


def test_small_float32_and_2d_convolutions_run_as_they_are(small_slabs: None) -> None:
    with ConvSlabs() as mode:
        F.conv3d(torch.randn(1, 2, 8, 8, 8), torch.randn(3, 2, 3, 3, 3))  # float32
        F.conv2d(torch.randn(1, 2, 8, 8, dtype=torch.float64), torch.randn(3, 2, 3, 3).double())
        F.conv3d(
            torch.randn(1, 2, 8, 8, 8, dtype=torch.float64),
            torch.randn(3, 2, 3, 3, 3, dtype=torch.float64),
            padding="same",
        )
    assert mode.split == 0


class _Softplus(torch.autograd.Function):
    """softplus whose backward runs under no_grad when ``broken``: double backward sees a
    constant (a planted second-order defect)."""

    broken = False

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return F.softplus(x)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        with torch.no_grad() if _Softplus.broken else torch.enable_grad():
            return grad * torch.sigmoid(x)


class Volume(nn.Module):
    """Two 3D convolutions around a custom Function, pooled to 2 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv3d(1, 3, 3, padding=1)
        self.conv2 = nn.Conv3d(3, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(_Softplus.apply(self.conv1(x))).mean(dim=(2, 3, 4))


@pytest.mark.parametrize("broken", [False, True])
def test_second_order_runs_its_products_with_the_slabs_and_still_catches_a_defect(
    small_slabs: None, broken: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_Softplus, "broken", broken)
    ctx = make_context(Volume, continuous(1, 1, 6, 6, 6), class_labels(1), cross_entropy)
    result = second_order.run(ctx)
    assert result.parameters["conv3d_in_slabs"] > 0, result.parameters
    model = [i for i in result.items if i.subject.kind == "model"]
    assert len(model) == 3
    if broken:
        assert any(i.status == "fail" for i in model)
    else:
        assert all(i.status == "pass" for i in model), [i.message for i in model]


def test_the_mode_is_entered_only_for_a_model_with_3d_convolutions(small_slabs: None) -> None:
    x = torch.randn(1, 2, 8, 8, 8, dtype=torch.float64)
    w = torch.randn(3, 2, 3, 3, 3, dtype=torch.float64)
    with ConvSlabs(nn.Sequential(nn.Linear(2, 2))) as mode:  # nothing to split: not entered
        F.conv3d(x, w)
    assert not mode.enabled and mode.split == 0
    with ConvSlabs(Volume()) as mode:
        F.conv3d(x, w)
    assert mode.enabled and mode.split == 1
