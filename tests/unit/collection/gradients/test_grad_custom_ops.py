"""The custom_ops check: discovery through the autograd graph, registration, verdicts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from _grad_models import CustomTanhNet, ScaledTanh, TwoPercentOffTanh, continuous, make_context
from torch import nn
from torch.autograd.function import once_differentiable

import attest
from attest.collection.gradients import custom_ops
from attest.errors import InputError


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    custom_ops._unregister_all()
    yield
    custom_ops._unregister_all()


class ClampedExp(torch.autograd.Function):
    """New-style Function (setup_context) with an extra non-tensor argument."""

    @staticmethod
    def forward(x: torch.Tensor, limit: float) -> torch.Tensor:
        return torch.exp(x.clamp(max=limit))

    @staticmethod
    def setup_context(
        ctx: torch.autograd.function.FunctionCtx,
        inputs: tuple[torch.Tensor, float],
        output: torch.Tensor,
    ) -> None:
        ctx.save_for_backward(inputs[0], output)
        ctx.limit = inputs[1]  # type: ignore[attr-defined]

    @staticmethod
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        x, y = ctx.saved_tensors  # type: ignore[attr-defined]
        return grad * y * (x < ctx.limit), None  # type: ignore[attr-defined]


class DropsGradient(torch.autograd.Function):
    """x * w whose backward silently returns None for w."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, w: torch.Tensor
    ) -> torch.Tensor:
        ctx.save_for_backward(w)
        return x * w

    @staticmethod
    @once_differentiable
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        (w,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return grad * w, None


class TwoFunctions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.scale = nn.Parameter(torch.full((6,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ClampedExp.apply(ScaledTanh.apply(self.fc(x)), 3.0) * self.scale  # type: ignore[no-untyped-call]


def test_discovery_walks_the_autograd_graph() -> None:
    model = TwoFunctions()
    out = model(continuous(2, 6))
    assert custom_ops.discover_custom_functions([out]) == [ClampedExp, ScaledTanh]


def test_capture_records_calls_and_restores_forward() -> None:
    before = {cls: cls.__dict__.get("forward") for cls in (ClampedExp, ScaledTanh)}
    calls = custom_ops.captured_custom_calls(
        TwoFunctions(), continuous(2, 6), [ClampedExp, ScaledTanh], 3
    )
    assert {c.cls for c in calls} == {ClampedExp, ScaledTanh}
    clamped = next(c for c in calls if c.cls is ClampedExp)
    assert clamped.args[1] == 3.0 and clamped.differentiate == [True]
    assert {cls: cls.__dict__.get("forward") for cls in (ClampedExp, ScaledTanh)} == before


def test_probe_run_checks_every_function_and_names_its_module() -> None:
    result = custom_ops.run(make_context(TwoFunctions, continuous(4, 6)))
    names = {i.subject.name for i in result.items}
    assert names == {f"{__name__}.ClampedExp", "_grad_models.ScaledTanh"}
    assert all(i.status == "pass" and i.subject.module == "" for i in result.items), [
        i.message for i in result.items
    ]
    assert result.summary["custom_functions_found"] == 2


def test_wrong_backward_fails_with_the_error_size() -> None:
    result = custom_ops.run(
        make_context(lambda: CustomTanhNet(TwoPercentOffTanh), continuous(8, 6))
    )
    (item,) = result.items
    assert item.status == "fail"
    assert item.metrics["max_rel_error"] == pytest.approx(0.02, rel=0.05)
    assert item.metrics["source"] == "probe run"


def test_a_dropped_gradient_fails() -> None:
    x = continuous(4, 5)
    w = torch.randn(5, requires_grad=True)
    custom_ops.register_custom_op(DropsGradient, sample_inputs=[(x.requires_grad_(), w)])
    result = custom_ops.run(make_context(lambda: nn.Linear(5, 2), x.detach()))
    (item,) = result.items
    assert item.status == "fail" and item.metrics["source"] == "registered sample"


def test_register_with_samples_class_function_and_decorator() -> None:
    attest.register_custom_op(
        ScaledTanh, sample_inputs=lambda: [(torch.randn(3, requires_grad=True),)]
    )

    def fused(x: torch.Tensor) -> torch.Tensor:
        return ScaledTanh.apply(x) * 2  # type: ignore[no-any-return, no-untyped-call]

    attest.register_custom_op(fused, sample_inputs=(torch.randn(100),), name="fused")

    @attest.register_custom_op(sample_inputs=[(torch.randn(4),)])
    class Decorated(ScaledTanh):
        pass

    assert Decorated.__name__ == "Decorated"
    result = custom_ops.run(make_context(lambda: nn.Linear(3, 2), continuous(2, 3)))
    by_name = {i.subject.name: i for i in result.items}
    assert set(by_name) == {
        "_grad_models.ScaledTanh",
        "fused",
        f"{__name__}.{Decorated.__qualname__}",
    }
    assert all(i.status == "pass" for i in result.items)
    assert by_name["fused"].metrics["mode"] == "random_directions"  # 100 elements: directions


def test_plain_function_without_samples_is_an_input_error() -> None:
    with pytest.raises(InputError, match="needs sample_inputs"):
        custom_ops.register_custom_op(lambda x: x)
    with pytest.raises(InputError):
        custom_ops.register_custom_op(42)  # type: ignore[arg-type]


def test_no_custom_function_is_a_computed_empty_result() -> None:
    result = custom_ops.run(make_context(lambda: nn.Linear(3, 2), continuous(2, 3)))
    assert result.status == "computed" and result.items == []
    assert result.summary["custom_functions_found"] == 0


def test_under_gradchecks_run_discovery_reuses_gradient_flows_forward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from attest.collection.gradients import runner as gradchecks

    forwards: list[str] = []  # one entry per forward of the model, inside custom_ops.run
    inside = False

    def hook(module: nn.Module, *_: object) -> None:
        if inside and isinstance(module, CustomTanhNet):
            forwards.append("forward")

    def counted(ctx: object) -> object:
        nonlocal inside
        inside = True
        try:
            return custom_ops.run(ctx)  # type: ignore[arg-type]
        finally:
            inside = False

    execution = [(c, counted if c == "custom_ops" else f) for c, f in gradchecks.EXECUTION]
    monkeypatch.setattr(gradchecks, "EXECUTION", execution)
    handle = nn.modules.module.register_module_forward_hook(hook)
    try:
        ctx = make_context(lambda: CustomTanhNet(TwoPercentOffTanh), continuous(8, 6))
        results = {r.check: r for r in gradchecks.run(ctx)}
        together = len(forwards)
        forwards.clear()
        counted(make_context(lambda: CustomTanhNet(TwoPercentOffTanh), continuous(8, 6)))
        alone = len(forwards)
    finally:
        handle.remove()
    (item,) = results["custom_ops"].items
    assert item.status == "fail" and item.subject.name == "_grad_models.TwoPercentOffTanh"
    assert ctx.gradients.output is None
    # alone: a discovery forward and the capture run; under gradchecks.run the discovery
    # walks gradient_flow's forward instead
    assert (together, alone) == (1, 2)
