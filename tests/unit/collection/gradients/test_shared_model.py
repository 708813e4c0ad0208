"""The float64 model instance the gradient checks share (attest.collection.gradients.shared_model)."""

from __future__ import annotations

import torch
from _grad_models import MLP, SmallCNN, class_labels, continuous, cross_entropy, make_context
from torch import nn

from attest.collection.context import CollectContext
from attest.collection.gradients import runner as gradchecks


def _ctx() -> CollectContext:
    return make_context(SmallCNN, continuous(4, 1, 6, 6), class_labels(4), cross_entropy)


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_the_same_instance_is_handed_out_while_it_is_as_built() -> None:
    ctx = _ctx()
    first = ctx.shared_model(torch.float64)
    assert all(p.dtype == torch.float64 for p in first.parameters())
    assert not first.training
    first(continuous(2, 1, 6, 6).double())  # an eval-mode forward changes nothing
    assert ctx.shared_model(torch.float64) is first
    assert ctx._shared[torch.float64].builds == 1
    # another dtype is another instance
    assert ctx.shared_model(torch.float32) is not first


def test_in_place_writes_are_restored_bit_for_bit() -> None:
    ctx = _ctx()
    model = ctx.shared_model(torch.float64)
    built = _state(model)
    fresh = _state(ctx.fresh_model(torch.float64))
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
        for buffer in model.buffers():
            if buffer.is_floating_point():
                buffer.mul_(3.0)
    model.train()
    next(model.parameters()).requires_grad_(False)
    next(model.parameters()).grad = torch.ones_like(next(model.parameters()))
    again = ctx.shared_model(torch.float64)
    assert again is model and ctx._shared[torch.float64].builds == 1
    assert not any(m.training for m in again.modules())
    assert all(p.requires_grad and p.grad is None for p in again.parameters())
    for name, value in _state(again).items():
        assert torch.equal(value, built[name]) and torch.equal(value, fresh[name]), name


def test_changes_a_restore_cannot_undo_get_a_new_instance() -> None:
    ctx = _ctx()
    model = ctx.shared_model(torch.float64)
    handle = model.register_forward_hook(lambda *_: None)
    second = ctx.shared_model(torch.float64)
    assert second is not model and ctx._shared[torch.float64].builds == 2
    handle.remove()
    layer = next(m for m in second.modules() if isinstance(m, nn.Conv2d))
    layer.weight = nn.Parameter(torch.zeros_like(layer.weight))  # replaced, not written
    third = ctx.shared_model(torch.float64)
    assert third is not second and ctx._shared[torch.float64].builds == 3
    assert not torch.equal(
        next(m for m in third.modules() if isinstance(m, nn.Conv2d)).weight,
        torch.zeros_like(layer.weight),
    )


def test_the_gradient_checks_share_one_build_and_release_it() -> None:
    ctx = make_context(MLP, continuous(8, 6), class_labels(8), cross_entropy)
    builds = 0
    original = ctx.spec.build_model

    def counting() -> nn.Module:
        nonlocal builds
        builds += 1
        return original()

    ctx.spec.build_model = counting
    results = gradchecks.run(ctx)
    assert {r.check: r.status for r in results}["accumulation"] == "computed"
    assert not any(r.failed_items for r in results)
    # gradient_flow, second_order, accumulation and custom_ops' discovery: one float64 build
    assert builds == 1
    assert ctx._shared == {}


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)
        self.b.weight = self.a.weight  # tied

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.tanh(self.a(x)))


def test_tied_weights_are_restored_once_and_a_new_submodule_means_a_new_build() -> None:
    ctx = make_context(_Tied, continuous(2, 3), capture=False)
    model = ctx.shared_model(torch.float64)
    built = _state(model)
    with torch.no_grad():
        model.a.weight.mul_(-2.0)  # type: ignore[operator]
    assert ctx.shared_model(torch.float64) is model
    assert model.a.weight is model.b.weight
    assert torch.equal(model.b.weight, built["b.weight"])  # type: ignore[arg-type]
    shared = ctx._shared[torch.float64]
    assert len(shared._tracked) == len({id(t) for _, _, t in shared._slots})
    model.extra = nn.Linear(1, 1)  # type: ignore[assignment]
    assert ctx.shared_model(torch.float64) is not model and shared.builds == 2
