"""Finite-difference steps on activations far below unit scale (deep untrained networks).

Found on torchvision's EfficientNet-B0, MobileNetV3/LR-ASPP and GoogLeNet at random
initialization: squeeze-and-excitation gates (sigmoid, hardsigmoid) and ReLUs whose captured
inputs have an RMS of 1e-10 to 1e-15. Relative steps (random directions) moved a sigmoid's
output, 0.5 + x/4, by less than its float64 rounding at every step of the sweep; absolute steps
(full Jacobian) crossed a ReLU's kink at 0 at every step. Both backwards are right; the retry
with the other step scaling shows it, and a wrong backward still fails under both.

Swin V2's cosine attention (found on swin_v2_t) divides each token by its norm clamped to
1e-12: the zero tokens of its window padding put divisors of 1e-12 next to divisors of ~1,
and any step relative to the divisor's RMS crosses the pole at 0. Those values are nudged off
the pole first, as values on a kink are.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from _grad_models import make_context
from torch import nn
from torch.nn import functional as F

from attest.collection.gradients import gradcheck as gradcheck_ops
from attest.collection.gradients import second_order
from attest.collection.gradients.finite_differences import (
    FiniteDifferenceSettings,
    check_backward,
    describe,
)

SETTINGS = FiniteDifferenceSettings()


class ScaledBy(torch.autograd.Function):
    """``fn(x)`` whose backward is that of ``fn`` times ``factor`` (1.0 is correct)."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx,
        x: torch.Tensor,
        fn: Callable[[torch.Tensor], torch.Tensor],
        factor: float,
    ) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.fn = fn  # type: ignore[attr-defined]
        ctx.factor = factor  # type: ignore[attr-defined]
        return fn(x)

    @staticmethod
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor, None, None]:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        with torch.enable_grad():
            leaf = x.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(ctx.fn(leaf), leaf, grad)  # type: ignore[attr-defined]
        return g * ctx.factor, None, None  # type: ignore[attr-defined]


def _tiny(numel: int, rms: float, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(numel, generator=gen, dtype=torch.float64) * rms


# (function, input size, RMS, mode): each failed before the retry with the other scaling
CASES = [
    (torch.sigmoid, 2000, 1e-15, "random_directions"),
    (torch.nn.functional.hardsigmoid, 2000, 1e-12, "random_directions"),
    (torch.relu, 64, 1e-10, "full_jacobian"),
    (torch.relu, 2000, 1e-10, "random_directions"),
]


@pytest.mark.parametrize("fn, numel, rms, mode", CASES)
def test_right_backward_on_tiny_inputs_passes(
    fn: Callable[[torch.Tensor], torch.Tensor], numel: int, rms: float, mode: str
) -> None:
    check = check_backward(lambda x: [ScaledBy.apply(x, fn, 1.0)], [_tiny(numel, rms)], SETTINGS)
    assert check.mode == mode
    assert check.passed, describe(check)


@pytest.mark.parametrize("fn, numel, rms, mode", CASES)
def test_two_percent_wrong_backward_on_tiny_inputs_still_fails(
    fn: Callable[[torch.Tensor], torch.Tensor], numel: int, rms: float, mode: str
) -> None:
    check = check_backward(lambda x: [ScaledBy.apply(x, fn, 1.02)], [_tiny(numel, rms)], SETTINGS)
    assert check.mode == mode
    assert not check.passed
    assert check.max_rel_error == pytest.approx(0.02, rel=0.1), describe(check)


def test_retry_is_recorded_and_unit_scale_inputs_keep_their_mode_scaling() -> None:
    tiny = check_backward(lambda x: [torch.sigmoid(x)], [_tiny(2000, 1e-15)], SETTINGS)
    assert tiny.step_scale == "absolute" and tiny.metrics()["step_scale"] == "absolute"
    assert "absolute steps" in describe(tiny)
    kink = check_backward(lambda x: [torch.relu(x)], [_tiny(64, 1e-10)], SETTINGS)
    assert kink.step_scale == "relative" and "relative to each input" in describe(kink)
    unit = check_backward(lambda x: [torch.sigmoid(x)], [_tiny(2000, 1.0)], SETTINGS)
    assert unit.passed and unit.step_scale == "relative" and "steps" not in describe(unit)


class TinyGate(nn.Module):
    """Squeeze-and-excitation style gates on activations shrunk to ~1e-13 (as deep in an
    untrained network): a sigmoid of 96 pooled values (random directions) and a ReLU of 24
    (full Jacobian)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 32, 3, padding=1)
        self.excite = nn.Conv2d(32, 32, 1, bias=False)
        self.squeeze = nn.Conv2d(32, 8, 1, bias=False)
        self.head = nn.Linear(40, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x)) * 1e-13
        pooled = h.mean(dim=(2, 3), keepdim=True)
        gate = torch.sigmoid(self.excite(pooled))
        squeezed = torch.relu(self.squeeze(pooled)) * 1e13
        return self.head(torch.cat([(h * gate).mean(dim=(2, 3)) * 1e13, squeezed.flatten(1)], 1))


def test_tiny_activation_gates_pass_gradcheck() -> None:
    x = torch.randn(3, 2, 12, 12, generator=torch.Generator().manual_seed(1))
    ctx = make_context(TinyGate, x)
    result = gradcheck_ops.run(ctx)
    failed = [
        f"{i.subject.op} {i.subject.module}: {i.message}"
        for i in result.items
        if i.status == "fail"
    ]
    assert not failed, "\n".join(failed)
    scales = {
        (i.subject.module, i.metrics["mode"], i.metrics["step_scale"])
        for i in result.items
        if i.subject.op in ("aten.sigmoid.default", "aten.relu.default") and i.status == "pass"
    }
    # the two gates needed the retry; the unit-scale ReLU after the convolution did not
    assert {("", "random_directions", "absolute"), ("", "full_jacobian", "relative")} <= scales


class PaddedCosineAttention(nn.Module):
    """Cosine attention over tokens whose last four are zero padding (as Swin V2 pads)."""

    def __init__(self) -> None:
        super().__init__()
        self.qk = nn.Linear(8, 16, bias=False)
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(x, (0, 0, 0, 4))  # (N, 8, 8) -> (N, 12, 8)
        q, k = self.qk(x).chunk(2, dim=-1)
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        return self.head(attn.softmax(dim=-1).mean(dim=1))


def test_divisor_clamped_next_to_the_pole_passes_gradcheck() -> None:
    x = torch.randn(3, 8, 8, generator=torch.Generator().manual_seed(1))
    result = gradcheck_ops.run(make_context(PaddedCosineAttention, x))
    divs = [i for i in result.items if i.subject.op == "aten.div.Tensor"]
    assert len(divs) == 2
    for item in divs:
        assert item.status == "pass", item.message
        assert item.metrics["kink_values_nudged"] == 3 * 4 * 8  # the padded tokens' divisors
        assert "pole" in item.message


def test_nan_double_backward_is_named_in_the_second_order_message() -> None:
    # The padded tokens' q and k are W @ 0 = 0 for every W: autograd's double backward of
    # their norm (0/0) makes the Hessian-vector product with respect to W NaN, though the
    # function is smooth there. The product really is NaN; the message must say so.
    x = torch.randn(3, 8, 8, generator=torch.Generator().manual_seed(1))
    result = second_order.run(make_context(PaddedCosineAttention, x))
    model_items = [i for i in result.items if i.subject.kind == "model"]
    assert model_items and all(i.metrics["hv_norm"] is None for i in model_items)
    assert all("NaN or infinite" in i.message for i in model_items)
