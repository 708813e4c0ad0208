"""The pytest plugin, run by pytest's own ``pytester`` on a passing and a failing model."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

pytest_plugins = ["pytester"]

PLUGIN = "attest.testing.pytest_plugin"

TESTS = '''
import pytest
import torch
import torch.nn.functional as F
from torch import nn


class DoubledTanh(torch.autograd.Function):
    """tanh whose hand-written backward is off by a factor of two."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return 2.0 * grad * (1 - y * y)


class Broken(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 6), nn.Linear(6, 3)

    def forward(self, x):
        return self.fc2(DoubledTanh.apply(self.fc1(x)))


def good():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))


X = torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
Y = torch.tensor([0, 2])


@pytest.mark.attest_checks("gradcheck", "custom_ops", "numerics")
def test_good(gradient_check):
    result = gradient_check(good(), X, target=Y, loss=F.cross_entropy)
    assert result.passed


@pytest.mark.attest_checks("custom_ops")
def test_broken(gradient_check):
    torch.manual_seed(0)
    gradient_check(Broken(), X, target=Y, loss=F.cross_entropy)


def test_unknown_check(gradient_check):
    gradient_check(good(), X, checks=("no_such_check",))


class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.proj, self.head = nn.Embedding(7, 4), nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, features, ids):
        assert ids.dtype == torch.long, ids.dtype
        return self.head(torch.tanh(self.proj(features) + self.embed(ids)).sum(dim=1))


IDS = torch.tensor([[1, 2, 3], [4, 5, 0]])


@pytest.mark.attest_checks("gradcheck", "numerics")
def test_tuple_with_token_ids(gradient_check):
    torch.manual_seed(0)
    gradient_check(Tokens(), (torch.randn(2, 3, 4), IDS))


def test_token_ids_alone(gradient_check):
    gradient_check(Tokens(), IDS)
'''


def _plugin_args() -> list[str]:
    installed = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", PLUGIN]  # once `pip install -e .` registered it


def test_a_passing_and_a_failing_model(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_models=TESTS)
    result = pytester.runpytest(*_plugin_args(), "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3)
    text = result.stdout.str()
    # the failure names the check, the operator (the custom Function) and the module it ran in
    assert "gradient checks custom_ops: 1 failure(s)" in text
    assert "custom_ops: custom_op" in text and "DoubledTanh" in text
    assert "unknown gradient check 'no_such_check'" in text
    # integer ids are neither cast to float nor a crash (an AttributeError traceback before)
    assert "gradient checks could not run: gradient_check got torch.int64 inputs" in text
    assert "Traceback" not in text


def test_the_plugin_imports_without_torch() -> None:
    code = f"import sys, {PLUGIN}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
