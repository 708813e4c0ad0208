"""The gradient_flow check: every trainable parameter gets a gradient, or we say why not."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _grad_models import (
    MLP,
    InplaceOnSavedNet,
    class_labels,
    continuous,
    cross_entropy,
    make_context,
)
from torch import nn

from attest.collection.gradients import flow as gradient_flow
from attest.evidence.model import CheckResult


def _run(build: type[nn.Module] | object, loss: bool = False) -> CheckResult:
    labels = class_labels(4) if loss else None
    ctx = make_context(
        build, continuous(4, 6), labels, cross_entropy if loss else None, capture=False
    )  # type: ignore[arg-type]
    return gradient_flow.run(ctx)


def _by_name(result: CheckResult) -> dict[str, tuple[str, str]]:
    return {
        i.subject.name or "": (i.status, i.message)
        for i in result.items
        if i.subject.kind == "parameter"
    }


class Base(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Linear(6, 3)
        self.side = nn.Linear(6, 3)


class DataSevered(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x) + x[:, :3] * self.side.weight.data.sum()


class NumpyRoundTrip(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        side = torch.from_numpy(np.tanh(self.side(x).detach().numpy()))
        return self.main(x) + side


class NumpyNoDetach(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            pass
        return self.main(x) + torch.tensor(self.side(x).tolist(), dtype=x.dtype)


class NoGradBranch(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            side = self.side(x)
        return self.main(x) + side


class NeverCalled(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x)


class DeadBranch(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _unused = self.side(x) * 2
        return self.main(x)


class RoundedGate(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x) * torch.round(torch.sigmoid(self.side(x)) * 0 + 1)


class Frozen(Base):
    def __init__(self) -> None:
        super().__init__()
        self.side.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x) + self.side(x)


class NonFinite(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x) + torch.sqrt(self.side(x) * 0.0)


@pytest.mark.parametrize(
    "model, expected",
    [
        (DataSevered, "path severed by .data in the root module's forward"),
        (NumpyRoundTrip, "path severed by detach()"),
        (NumpyNoDetach, "path leaves torch through .tolist()"),
        (NoGradBranch, "gradients disabled"),
        (NeverCalled, "unused in forward: its module 'side' is never called"),
        (DeadBranch, "a dead branch"),
        (RoundedGate, "zero-derivative operations (round"),
    ],
)
def test_missing_gradient_reasons(model: type[nn.Module], expected: str) -> None:
    result = _run(model)
    params = _by_name(result)
    assert params["main.weight"][0] == "pass" and params["main.bias"][0] == "pass"
    status, message = params["side.weight"]
    assert status == "fail" and expected in message, message
    assert result.summary["without_gradient"] == 2


class ZeroInitHead(nn.Module):
    """A spatial transformer's localization net: its last layer starts at zero weights."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(6, 4)
        self.head = nn.Linear(4, 3)
        nn.init.zeros_(self.head.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.body(x)))


def test_zero_gradient_behind_a_zero_initialized_layer_names_that_layer() -> None:
    params = _by_name(_run(ZeroInitHead))
    assert params["head.weight"][0] == "pass" and params["head.bias"][0] == "pass"
    for name in ("body.weight", "body.bias"):
        status, message = params[name]
        assert status == "fail" and "identically zero" in message
        assert "all-zero weights ('head.weight')" in message, message
    # a zero gradient with no all-zero weight in the model gets no such sentence
    params = _by_name(_run(RoundedGate))
    assert "all-zero weights" not in params["side.weight"][1]


def test_frozen_parameters_are_listed_not_failed() -> None:
    result = _run(Frozen)
    params = {i.subject.name: i for i in result.items if i.subject.kind == "parameter"}
    assert (
        params["side.weight"].status == "pass" and params["side.weight"].metrics["frozen"] is True
    )
    assert "frozen" in params["side.weight"].message
    assert result.summary == {
        "parameters": 4,
        "frozen": 2,
        "without_gradient": 0,
        "inplace_writes": 0,
        "raised_in": None,
    }


def test_non_finite_gradients_fail_with_counts() -> None:
    result = _run(NonFinite)
    item = next(i for i in result.items if i.subject.name == "side.weight")
    assert (
        item.status == "fail"
        and int(item.metrics["nan_count"] or 0) + int(item.metrics["inf_count"] or 0) > 0
    )


def test_inplace_write_on_a_saved_tensor_is_reported_with_both_modules() -> None:
    result = _run(InplaceOnSavedNet, loss=True)
    (inplace,) = [i for i in result.items if i.metrics.get("inplace_on_saved_tensor")]
    assert inplace.status == "fail" and inplace.subject.module == "doubler"
    assert inplace.details == {"writer": "doubler", "saved_by": "gate"}
    params = [i for i in result.items if i.subject.kind == "parameter"]
    assert params and all(i.status == "not_computed" for i in params)
    assert result.status == "computed" and result.summary["raised_in"] == "backward"


def test_forward_error_is_reported_not_raised() -> None:
    class Broken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise ValueError("shape trouble")

    ctx = make_context(Broken, continuous(2, 6), capture=False)
    result = gradient_flow.run(ctx)
    errors = [i for i in result.items if i.status == "error"]
    assert errors and "shape trouble" in errors[0].message and "forward" in errors[0].message


def test_clean_model_passes_with_gradient_norms() -> None:
    result = _run(MLP, loss=True)
    assert result.parameters["objective"] == "loss"
    assert all(i.status == "pass" for i in result.items)
    assert all(
        float(i.metrics["grad_norm"] or 0) > 0
        for i in result.items
        if i.subject.kind == "parameter"
    )
    assert any(i.subject.kind == "input" for i in result.items)
