"""Fresh model instances as copies of one build (attest.collection.model_template) and the
frozen heap of a collect (attest.collection.context.frozen_heap)."""

from __future__ import annotations

import gc
import random
import threading

import numpy as np
import pytest
import torch
from torch import nn

from attest.collection.context import frozen_heap
from attest.collection.model_template import ModelTemplate, same_instances


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)
        self.register_buffer("scale", torch.ones(2), persistent=False)
        self.grid = torch.linspace(0, 1, 5)  # a plain tensor attribute


def trained_build() -> nn.Module:
    """A factory as attest's: random initialisation, then the trained weights loaded."""
    net = Net()
    with torch.no_grad():
        net.linear.weight.copy_(torch.arange(6.0).view(2, 3))
        net.linear.bias.copy_(torch.tensor([0.5, -0.5]))
    return net.eval()


def test_reproducible_builds_are_handed_out_as_copies() -> None:
    builds = []

    def build() -> nn.Module:
        builds.append(1)
        return trained_build()

    template = ModelTemplate(build)
    first, second = template.new(), template.new()
    assert len(builds) == 2  # the template and the one it was compared with, no more
    assert template.copies == 2
    assert first is not second
    assert first.linear.weight is not second.linear.weight
    assert first.linear.weight.data_ptr() != second.linear.weight.data_ptr()
    assert same_instances(first, trained_build())
    with torch.no_grad():
        first.linear.weight.add_(1.0)  # a copy changed by a check: the next is as built
    assert same_instances(template.new(), trained_build())


@pytest.mark.parametrize(
    "draw",
    [
        lambda: torch.rand(2),
        lambda: torch.tensor(np.random.rand(2)),
        lambda: torch.tensor([random.random(), random.random()]),
        lambda: torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()))),
    ],
    ids=["torch", "numpy", "python", "generator"],
)
def test_a_factory_whose_builds_differ_is_built_each_time(draw: object) -> None:
    def build() -> nn.Module:
        net = trained_build()
        value = draw()  # type: ignore[operator]
        if isinstance(value, torch.Generator):
            net.generator = value  # a generator of its own, seeded from the global one
        else:
            net.scale = value  # a random buffer the weights do not set
        return net

    template = ModelTemplate(build)
    template.new()
    template.new()
    assert template.copies == 0


def test_a_model_deepcopy_refuses_is_built_each_time() -> None:
    def build() -> nn.Module:
        net = trained_build()
        net.lock = threading.Lock()  # type: ignore[assignment]  # deepcopy cannot copy a lock
        return net

    template = ModelTemplate(build)
    assert isinstance(template.new(), Net)
    assert template.copies == 0


def test_the_template_draws_nothing_from_the_global_generators() -> None:
    torch.manual_seed(3)
    expected = torch.rand(1)
    torch.manual_seed(3)
    ModelTemplate(trained_build).new()
    assert torch.equal(torch.rand(1), expected)
    random.seed(3)
    expected_python = random.random()
    random.seed(3)
    ModelTemplate(trained_build).new()
    assert random.random() == expected_python


def test_nan_weights_compare_equal_and_other_values_do_not() -> None:
    a, b = trained_build(), trained_build()
    with torch.no_grad():
        a.linear.bias[0] = float("nan")
        b.linear.bias[0] = float("nan")
    assert same_instances(a, b)
    with torch.no_grad():
        b.linear.bias[1] = 7.0
    assert not same_instances(a, b)
    c = trained_build()
    c.grid = torch.linspace(0, 2, 5)
    assert not same_instances(trained_build(), c)


def test_frozen_heap_gives_the_objects_back_to_the_collector() -> None:
    before = gc.get_freeze_count()
    with frozen_heap():
        assert gc.get_freeze_count() > before
    assert gc.get_freeze_count() == 0
