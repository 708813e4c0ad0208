"""second_order on a central crop of spatial probes (attest.collection.gradients.sub_probe)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _grad_models import class_labels, continuous, cross_entropy, make_context
from torch import nn

from attest.collection.gradients import flow as gradient_flow
from attest.collection.gradients import second_order
from attest.collection.gradients.sub_probe import (
    crop_labels,
    crop_shape,
    crop_shapes,
    same_operators,
)


class _Softplus(torch.autograd.Function):
    """softplus; ``mode`` plants a second-order defect in its backward."""

    mode = "clean"

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return F.softplus(x)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        if _Softplus.mode == "no_grad":  # double backward sees a constant
            with torch.no_grad():
                return grad * torch.sigmoid(x)
        return grad * torch.sigmoid(x)


class ConvNet(nn.Module):
    """Fully convolutional: runs the same operators on any side of at least 4."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 3, 3, padding=1, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = _Softplus.apply(self.conv1(x))
        return torch.tanh(self.conv2(h)).mean(dim=(2, 3))


class SegNet(nn.Module):
    """Per-pixel logits of 3 classes: its labels are maps of the input."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(torch.tanh(self.conv1(x)))


class FixedHead(nn.Module):
    """A linear head over the flattened 32x32 map: refuses any other size."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.head = nn.Linear(2 * 32 * 32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.conv(x)).flatten(1))


class PadsSmallInputs(nn.Module):
    """Pads inputs under 32 pixels on either side: every crop would run an operator the probe
    does not."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if min(x.shape[-2:]) < 32:
            x = F.pad(x, (0, 32 - x.shape[-1], 0, 32 - x.shape[-2]), mode="replicate")
        return torch.tanh(self.conv(x)).mean(dim=(2, 3))


class FixedWidth(nn.Module):
    """A linear head over the last side (32 wide), averaged over the rows: refuses any other
    width, runs the same operators on fewer rows (as SwinUNETR refuses 32^3 but runs
    64x32x32)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.head = nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = _Softplus.apply(self.conv(x)).mean(dim=(1, 2))
        return self.head(h)


@pytest.fixture(autouse=True)
def _clean_softplus() -> None:
    _Softplus.mode = "clean"


def _model_items(result: object) -> list:  # type: ignore[type-arg]
    return [i for i in result.items if i.subject.kind == "model"]  # type: ignore[attr-defined]


def test_crop_shape_halves_every_side_of_large_spatial_probes_only() -> None:
    assert crop_shape(torch.zeros(2, 1, 64, 48), True) == (32, 24)
    assert crop_shape(torch.zeros(1, 1, 64, 64, 64), True) == (32, 32, 32)
    assert crop_shape(torch.zeros(2, 1, 64, 16), True) is None  # a side under 32
    assert crop_shape(torch.zeros(2, 64), True) is None  # no spatial dimension
    assert crop_shape(torch.zeros(2, 1, 64, 64), False) is None  # switched off
    assert crop_shape(torch.zeros(2, 1, 64, 64, dtype=torch.long), True) is None


def test_crop_shapes_halve_every_side_then_fewer_smallest_volume_first() -> None:
    assert crop_shapes(torch.zeros(1, 1, 64, 64, 64), True) == [
        (32, 32, 32),
        (32, 32, 64),
        (32, 64, 32),
        (64, 32, 32),
        (32, 64, 64),
        (64, 32, 64),
        (64, 64, 32),
    ]
    assert crop_shapes(torch.zeros(2, 1, 64, 48), True) == [(32, 24), (32, 48), (64, 24)]
    assert crop_shapes(torch.zeros(2, 1, 64, 16), True) == []  # as crop_shape: no crop
    assert crop_shapes(torch.zeros(2, 1, 64, 64), False) == []


def test_labels_follow_the_crop_when_they_are_maps_of_the_input() -> None:
    x = torch.arange(64.0).reshape(1, 1, 8, 8)
    maps = torch.arange(64).reshape(1, 8, 8)
    ok, cropped = crop_labels(maps, x, (4, 4))
    assert ok and cropped is not None and cropped.shape == (1, 4, 4)
    assert torch.equal(cropped, maps[:, 2:6, 2:6])  # the central half of each side
    assert crop_labels(torch.tensor([1]), x, (4, 4)) == (True, torch.tensor([1]))
    assert crop_labels(torch.zeros(1, 5), x, (4, 4))[0] is False  # neither: no crop


def test_a_fully_convolutional_model_runs_its_products_on_the_crop() -> None:
    ctx = make_context(ConvNet, continuous(2, 1, 32, 32), class_labels(2), cross_entropy)
    ctx.gradients.keep_graph = True
    gradient_flow.run(ctx)
    assert ctx.gradients.graph is None  # the whole probe's double-backward graph is not built
    result = second_order.run(ctx)
    assert result.parameters["batch"] == 1 and result.parameters["crop"] == [16, 16]
    model = _model_items(result)
    assert len(model) == 3 and all(i.status == "pass" for i in model), [i.message for i in model]


def test_segmentation_labels_are_cropped_with_the_input() -> None:
    def pixel_ce(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target.long())

    labels = torch.randint(0, 3, (2, 32, 32), generator=torch.Generator().manual_seed(3))
    ctx = make_context(SegNet, continuous(2, 1, 32, 32), labels, pixel_ce)
    result = second_order.run(ctx)
    assert result.parameters["crop"] == [16, 16], result.parameters
    assert all(i.status == "pass" for i in _model_items(result))


@pytest.mark.parametrize(
    ("model", "why"),
    [(FixedHead, "does not run on the crop"), (PadsSmallInputs, "other operators")],
)
def test_a_model_the_crop_cannot_stand_for_keeps_the_whole_extent(
    model: type[nn.Module], why: str
) -> None:
    ctx = make_context(model, continuous(2, 1, 32, 32), class_labels(2), cross_entropy)
    result = second_order.run(ctx)
    assert result.parameters["crop"] is None and result.parameters["batch"] == 1
    assert why in result.parameters["batch_note"], result.parameters["batch_note"]
    assert all(i.status == "pass" for i in _model_items(result))


def test_same_operators_names_the_difference() -> None:
    model = PadsSmallInputs().double()
    x = torch.randn(1, 1, 32, 32, dtype=torch.float64)
    why = same_operators(model, x, x[..., 8:24, 8:24])
    assert why is not None and "pad" in why
    assert same_operators(model, x, x.clone()) is None


def test_a_second_order_defect_is_still_caught_on_the_crop() -> None:
    _Softplus.mode = "no_grad"
    ctx = make_context(ConvNet, continuous(2, 1, 32, 32), class_labels(2), cross_entropy)
    result = second_order.run(ctx)
    assert result.parameters["crop"] == [16, 16]
    assert any(i.status == "fail" for i in _model_items(result))
    ctx.settings.second_order_crop = False  # as on the whole extent
    whole = second_order.run(ctx)
    assert whole.parameters["crop"] is None
    assert any(i.status == "fail" for i in _model_items(whole))


def test_a_model_that_refuses_half_of_one_side_runs_on_half_of_the_others() -> None:
    ctx = make_context(FixedWidth, continuous(2, 1, 32, 32), class_labels(2), cross_entropy)
    ctx.gradients.keep_graph = True
    gradient_flow.run(ctx)
    assert ctx.gradients.graph is None  # a crop may stand for the probe: no full graph
    result = second_order.run(ctx)
    assert result.parameters["crop"] == [16, 32], result.parameters
    assert "(16, 16) could not stand" in result.parameters["batch_note"]
    assert "does not run on the crop" in result.parameters["batch_note"]
    model = _model_items(result)
    assert len(model) == 3 and all(i.status == "pass" for i in model), [i.message for i in model]


def test_a_second_order_defect_is_still_caught_on_a_partial_crop() -> None:
    _Softplus.mode = "no_grad"
    ctx = make_context(FixedWidth, continuous(2, 1, 32, 32), class_labels(2), cross_entropy)
    result = second_order.run(ctx)
    assert result.parameters["crop"] == [16, 32]
    assert any(i.status == "fail" for i in _model_items(result))
