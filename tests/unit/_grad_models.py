"""Tiny models for the gradient-check tests: clean ones and one planted defect each.

Each planted defect is the textbook form of a bug the checks exist for; the zoo test asserts
that exactly the check built for it flags it, and that the clean models pass every check.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attest.collection.capture.run import capture_operators
from attest.collection.context import CheckSettings, CollectContext, LoadedSpec


class ScaledTanh(torch.autograd.Function):
    """tanh with a correct backward (built from differentiable ops, so twice differentiable)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return grad * (1 - y * y)


class TwoPercentOffTanh(torch.autograd.Function):
    """tanh whose hand-written backward is 2 % too large (the planted defect)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return 1.02 * grad * (1 - y * y)


class MLP(nn.Module):
    """Linear-ReLU-Linear: the clean ReLU network."""

    def __init__(self, d_in: int = 6, hidden: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class TanhNet(nn.Module):
    """Linear-tanh-Linear: smooth, so every second derivative exists."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x)))


class SmallCNN(nn.Module):
    """Conv-BatchNorm-ReLU-MaxPool-Linear: ReLU zeros tie inside max-pool windows."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = nn.BatchNorm2d(4)
        self.act = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(4 * 3 * 3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(self.act(self.norm(self.conv(x))))
        return self.head(h.flatten(1))


class CustomTanhNet(nn.Module):
    """Linear, a custom autograd Function, Linear."""

    def __init__(self, function: type[torch.autograd.Function]) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.function.apply(self.fc1(x)))  # type: ignore[no-untyped-call]


class DeadParameterNet(MLP):
    """An extra parameter that forward never reads."""

    def __init__(self) -> None:
        super().__init__()
        self.unused_scale = nn.Parameter(torch.ones(8))


class DetachedBranchNet(nn.Module):
    """A side branch whose output is detached before it joins the main path."""

    def __init__(self) -> None:
        super().__init__()
        self.main = MLP()
        self.side = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.main(x) + self.side(x).detach()


class Quantize(nn.Module):
    """Rounds its input through an integer dtype (an integer path)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 8).long().to(x.dtype) / 8


class IntegerPathNet(nn.Module):
    """fc1's output goes through an int64 tensor before fc2."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.quant = Quantize()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.quant(self.fc1(x)))


class DoubleInPlace(nn.Module):
    """Doubles its input in place (harmless alone; fatal after an op that saved its output)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul_(2)


class InplaceOnSavedNet(nn.Module):
    """sigmoid saves its output for backward; the next module writes into it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.gate = nn.Sigmoid()
        self.doubler = DoubleInPlace()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.doubler(self.gate(self.fc1(x))))


class InputReLUNet(nn.Module):
    """ReLU straight on the input: probe values at exactly 0 sit on its kink."""

    def __init__(self) -> None:
        super().__init__()
        self.act = nn.ReLU()
        self.fc = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.act(x))


def cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the batch (a correct loss for accumulation)."""
    return F.cross_entropy(output, target.long())


def valid_label_mean(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy averaged over the valid labels of *this* batch (-1 = ignore): the
    per-micro-batch denominator defect."""
    return F.cross_entropy(output, target.long(), ignore_index=-1)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def make_context(
    build: Callable[[], nn.Module],
    inputs: torch.Tensor,
    labels: torch.Tensor | None = None,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    *,
    seed: int = 0,
    capture: bool = True,
) -> CollectContext:
    """A collect context around a tiny model, with the operator capture already run."""
    torch.manual_seed(seed)
    state = build().state_dict()

    def build_model() -> nn.Module:
        model = build()
        model.load_state_dict(state)
        return model

    spec = LoadedSpec(
        path=Path("attest.yaml"),
        name="zoo",
        version="0",
        factory="zoo:build",
        factory_args={},
        build_model=build_model,
        inputs=inputs,
        labels=labels,
        loss_fn=loss,
        loss="zoo:loss" if loss is not None else None,
        threads=1,
    )
    ctx = CollectContext(spec=spec, settings=CheckSettings())
    if capture:
        x = ctx.inputs() if inputs.is_floating_point() else inputs
        records, _ = capture_operators(ctx.fresh_model(), x, spec, labels=labels, backward=False)
        ctx.operators = records
    return ctx


def continuous(n: int, *shape: int, seed: int = 1) -> torch.Tensor:
    """Probe inputs from a continuous distribution."""
    return torch.randn(n, *shape, generator=_gen(seed))


def class_labels(n: int, classes: int = 3, seed: int = 2) -> torch.Tensor:
    """Probe class labels."""
    return torch.randint(0, classes, (n,), generator=_gen(seed))


ZOO: dict[str, Callable[[], CollectContext]] = {
    "clean_mlp": lambda: make_context(MLP, continuous(8, 6), class_labels(8), cross_entropy),
    "clean_cnn": lambda: make_context(
        SmallCNN, continuous(4, 1, 6, 6), class_labels(4), cross_entropy
    ),
    "clean_custom_function": lambda: make_context(
        lambda: CustomTanhNet(ScaledTanh), continuous(8, 6), class_labels(8), cross_entropy
    ),
    "clean_no_loss": lambda: make_context(MLP, continuous(8, 6)),
    "wrong_custom_backward": lambda: make_context(
        lambda: CustomTanhNet(TwoPercentOffTanh), continuous(8, 6), class_labels(8), cross_entropy
    ),
    "dead_parameter": lambda: make_context(
        DeadParameterNet, continuous(8, 6), class_labels(8), cross_entropy
    ),
    "detached_branch": lambda: make_context(
        DetachedBranchNet, continuous(8, 6), class_labels(8), cross_entropy
    ),
    "integer_path": lambda: make_context(
        IntegerPathNet, continuous(8, 6), class_labels(8), cross_entropy
    ),
    "inplace_on_saved": lambda: make_context(
        InplaceOnSavedNet, continuous(8, 6), class_labels(8), cross_entropy
    ),
    "kinks_on_input": lambda: make_context(
        InputReLUNet,
        continuous(8, 6).masked_fill(continuous(8, 6, seed=9) > 0.5, 0.0),
        class_labels(8),
        cross_entropy,
    ),
    "per_microbatch_loss": lambda: make_context(
        MLP, continuous(8, 6), torch.tensor([0, 1, 2, 1, -1, -1, -1, 2]), valid_label_mean
    ),
}
