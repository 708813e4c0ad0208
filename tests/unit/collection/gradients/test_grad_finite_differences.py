"""The finite-difference engine behind gradcheck and custom_ops."""

from __future__ import annotations

import pytest
import torch

from attest.collection.gradients.finite_differences import (
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


class CountedExp(torch.autograd.Function):
    """exp whose backward counts its calls and is scaled by ``factor``, output by output."""

    calls = 0

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, factor: torch.Tensor
    ) -> torch.Tensor:
        y = torch.exp(x)
        ctx.save_for_backward(y, factor)
        return y

    @staticmethod
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        CountedExp.calls += 1
        y, factor = ctx.saved_tensors  # type: ignore[attr-defined]
        return grad * factor * y, None


@pytest.mark.parametrize("numel, cotangents", [(2000, 1), (300, 4)])
def test_one_backward_per_cotangent_and_few_outputs_get_one_per_direction(
    numel: int, cotangents: int
) -> None:
    factor = torch.ones(numel, dtype=torch.float64)
    CountedExp.calls = 0
    check = check_backward(lambda x: [CountedExp.apply(x, factor)], [_x(numel)], SETTINGS)
    assert check.passed and check.mode == "random_directions"
    assert check.metrics()["cotangents"] == cotangents and check.directions == 4
    assert CountedExp.calls == cotangents  # not one backward per direction


@pytest.mark.parametrize("numel", [2000, 300])
def test_shared_cotangent_still_fails_a_two_percent_wrong_backward(numel: int) -> None:
    for which in ("all", "first half"):
        factor = torch.ones(numel, dtype=torch.float64)
        if which == "all":
            factor *= 1.02
        else:
            factor[: numel // 2] = 1.02
        check = check_backward(lambda x, f=factor: [CountedExp.apply(x, f)], [_x(numel)], SETTINGS)
        assert not check.passed, which


def test_batched_numeric_jacobian_equals_the_element_loop() -> None:
    from attest.collection.gradients import fd_basics
    from attest.collection.gradients import full_jacobian as fj

    w = _x(20, seed=3).reshape(4, 5)
    b = _x(4, seed=4)
    cases = [
        (lambda x: [torch.ops.aten.addmm.default(b, x, w.T)], _x(10, seed=5).reshape(2, 5)),
        (lambda x: [torch.ops.aten.view.default(x, [4, 4])], _x(16, seed=6)),
        (lambda x: list(torch.ops.aten.max_pool2d_with_indices.default(x, [2, 2])), _x(32)),
    ]
    for fn, x in cases:
        x = x.reshape(1, 2, 4, 4) if x.numel() == 32 else x
        leaves, outputs, keep = fd_basics._differentiable_outputs(fn, [x])
        batched = fj._numeric_jacobian_batched(fn, [x], keep, 1e-6)
        assert batched is not None
        _, numeric = fj._jacobians(fn, [x], leaves, outputs, keep)
        loop = torch.zeros_like(batched)
        for e in range(x.numel()):
            step = torch.zeros_like(x)
            step.view(-1)[e] = 1e-6
            plus = fd_basics._evaluate(fn, [x + step], keep)
            minus = fd_basics._evaluate(fn, [x - step], keep)
            loop[:, e] = torch.cat(
                [((p - m) / 2e-6).reshape(-1) for p, m in zip(plus, minus, strict=True)]
            )
        assert torch.allclose(batched, loop, rtol=0, atol=1e-8)
        assert torch.equal(numeric(1e-6), batched)


FORWARD = FiniteDifferenceSettings(one_sided=True)


@pytest.mark.parametrize("numel", [500, 200_000])  # all directions batched; one by one
def test_forward_differences_take_k_plus_one_evaluations(numel: int) -> None:
    calls: list[int] = []

    def fn(x: torch.Tensor) -> list[torch.Tensor]:
        if not torch.is_grad_enabled():
            calls.append(x.numel())
        return [torch.sin(x)]

    check = check_backward(fn, [_x(numel)], FORWARD)
    assert check.passed and check.mode == "random_directions", describe(check)
    assert check.difference == "forward" and check.metrics()["difference"] == "forward"
    assert "forward_eps_error" not in check.metrics()
    assert len(calls) == FORWARD.directions  # K perturbed points (F(x) is the autograd output)
    assert check.max_rel_error < 1e-5
    calls.clear()
    central = check_backward(fn, [_x(numel)], SETTINGS)
    assert central.passed and central.difference == "central"
    assert len(calls) == 2 * SETTINGS.directions


@pytest.mark.parametrize("numel", [500, 200_000])
def test_forward_differences_still_fail_a_two_percent_wrong_backward(numel: int) -> None:
    check = check_backward(lambda x: [OffBy.apply(x, 1.02)], [_x(numel)], FORWARD)
    assert not check.passed and check.difference == "central"
    assert check.forward_eps_error == pytest.approx(0.02, rel=0.1)
    assert check.max_rel_error == pytest.approx(0.02, rel=0.1)
    assert check.error_curve, "a failing case is swept with central differences"


def test_a_case_forward_differences_miss_by_truncation_is_decided_by_central_ones() -> None:
    # 1 / x with one element at 1e-4 of the RMS: a forward step's truncation error is about
    # step / x = 1e-2 of the derivative there, the central one's (step / x)^2 = 1e-4.
    x = _x(2000)
    x[0] = 1e-4
    check = check_backward(lambda t: [torch.reciprocal(t)], [x], FORWARD)
    assert check.passed and check.difference == "central", describe(check)
    assert check.forward_eps_error is not None and check.forward_eps_error > FORWARD.rtol
    assert check.metrics()["forward_eps_error"] == check.forward_eps_error
    assert check.eps == FORWARD.eps and not check.error_curve


@pytest.mark.parametrize("numel", [500, 200_000])
def test_forward_differences_leave_an_in_place_operators_inputs_alone(numel: int) -> None:
    def fn(t: torch.Tensor) -> list[torch.Tensor]:
        # the evaluations outside autograd write their result into their argument
        return [torch.sin(t) if torch.is_grad_enabled() else torch.sin_(t)]

    x = _x(numel)
    before = x.clone()
    check = check_backward(fn, [x], FORWARD)
    assert check.passed and check.difference == "forward"
    assert torch.equal(x, before)
