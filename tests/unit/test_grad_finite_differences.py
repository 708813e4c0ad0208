"""The finite-difference engine behind gradcheck and custom_ops."""

from __future__ import annotations

import pytest
import torch

from attest.collect.finite_differences import (
    FiniteDifferenceSettings,
    NotDifferentiable,
    check_backward,
    describe,
)

SETTINGS = FiniteDifferenceSettings()


class OffBy(torch.autograd.Function):
    """exp with a backward scaled by ``factor`` (1.0 is correct)."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, factor: float
    ) -> torch.Tensor:
        y = torch.exp(x)
        ctx.save_for_backward(y)
        ctx.factor = factor  # type: ignore[attr-defined]
        return y

    @staticmethod
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        (y,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return grad * y * ctx.factor, None  # type: ignore[attr-defined]


def _x(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("numel, mode", [(10, "full_jacobian"), (500, "random_directions")])
def test_two_percent_wrong_backward_fails_in_both_modes(numel: int, mode: str) -> None:
    check = check_backward(lambda x: [OffBy.apply(x, 1.02)], [_x(numel)], SETTINGS)
    assert check.mode == mode
    assert not check.passed
    assert check.max_rel_error == pytest.approx(0.02, rel=0.1)
    assert check.error_curve, "a failing default step must be swept"
    assert all(e is None or e > SETTINGS.rtol for e in check.error_curve.values())
    if mode == "full_jacobian":
        assert check.torch_gradcheck is False


@pytest.mark.parametrize("numel", [10, 500])
def test_correct_backward_passes_at_the_default_step(numel: int) -> None:
    check = check_backward(lambda x: [OffBy.apply(x, 1.0)], [_x(numel)], SETTINGS)
    assert check.passed, describe(check)
    assert check.eps == SETTINGS.eps and not check.error_curve
    assert check.max_rel_error < 1e-6


def test_small_errors_below_one_in_a_thousand_pass_and_above_fail() -> None:
    assert check_backward(lambda x: [OffBy.apply(x, 1.0002)], [_x(300)], SETTINGS).passed
    assert not check_backward(lambda x: [OffBy.apply(x, 1.005)], [_x(300)], SETTINGS).passed


def test_random_directions_are_seeded_and_recorded() -> None:
    settings = FiniteDifferenceSettings(directions=3, seed=11)
    first = check_backward(lambda x: [torch.sin(x)], [_x(200)], settings)
    second = check_backward(lambda x: [torch.sin(x)], [_x(200)], settings)
    assert first.max_rel_error == second.max_rel_error
    metrics = first.metrics()
    assert metrics["directions"] == 3 and metrics["seed"] == 11
    assert {"eps", "atol", "rtol", "max_rel_error", "mode"} <= set(metrics)


def test_step_sweep_rescues_a_function_with_a_large_offset() -> None:
    # 1e9 + x: the default step is lost in rounding; a larger step is exact.
    check = check_backward(lambda x: [x + 1e9], [_x(2000)], SETTINGS)
    assert check.passed
    assert check.error_curve and check.eps > SETTINGS.eps
    assert check.default_eps_error > SETTINGS.rtol


def test_no_differentiable_output_is_not_differentiable() -> None:
    with pytest.raises(NotDifferentiable):
        check_backward(lambda x: [x.argmax().unsqueeze(0)], [_x(5)], SETTINGS)
    with pytest.raises(NotDifferentiable):
        check_backward(lambda x: [x.detach() * 2], [_x(5)], SETTINGS)


def test_unused_inputs_are_held_fixed_only_when_asked() -> None:
    x, stat = _x(100), _x(100, seed=1)

    def fn(x: torch.Tensor, stat: torch.Tensor) -> list[torch.Tensor]:
        return [torch.tanh(x) + stat.detach()]  # autograd ignores ``stat``

    held = check_backward(fn, [x, stat], SETTINGS, hold_unused=True)
    assert held.passed and held.held_fixed == [1]
    assert not check_backward(fn, [x, stat], SETTINGS).passed  # a silent missing gradient
