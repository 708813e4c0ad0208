"""ig_baseline reads an output as class scores (its softmax) only when its targets are classes:
integer labels, or soft labels (a distribution over dim 1 per example). An output trained on
other float targets (a heteroscedastic regressor's mean and log-variance, heatmaps, multi-label
indicators) is judged by ``|F(b)| / |F(x)|``: ``target: 0`` picks the mean, not a class. Read as
a two-class softmax, a clean regressor whose mean is 0 at the baseline failed at p = 0.99."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from attest.collection import collect

MODEL = """
import torch
from torch import nn
import torch.nn.functional as F

class MeanLogVar(nn.Module):
    def __init__(self, mean_bias=0.0):
        super().__init__()
        self.mean = nn.Linear(4, 1)
        self.log_var = nn.Linear(4, 1)
        with torch.no_grad():
            self.mean.weight.copy_(torch.tensor([[1.0, -0.5, 0.25, 0.5]]))
            self.mean.bias.fill_(mean_bias)
            self.log_var.weight.zero_()
            self.log_var.bias.fill_(-5.0)  # a confident regressor: log variance -5 everywhere

    def forward(self, x):
        return torch.cat([self.mean(x), self.log_var(x)], dim=-1)  # (N, 2)

def build():
    return MeanLogVar()

def build_offset():
    return MeanLogVar(mean_bias=6.0)  # the mean is 6 at the zero input: not neutral

def loss(out, y):
    return F.gaussian_nll_loss(out[:, 0], y, out[:, 1].exp())
"""

X = torch.tensor(
    [[1.0, -2.0, 0.5, 1.5], [-1.0, 0.5, 2.0, -0.5], [2.0, 1.0, -1.0, 0.0], [0.5, 1.5, 1.0, 2.0]]
)


def _baseline_items(tmp_path: Path, factory: str) -> list[tuple[str, str]]:
    (tmp_path / "model.py").write_text(textwrap.dedent(MODEL), encoding="utf-8")
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(MODEL), namespace)
    model = namespace[factory]()  # type: ignore[operator]
    save_file(model.state_dict(), str(tmp_path / "w.safetensors"))
    y = X[:, 0] - 0.5 * X[:, 1]
    save_file({"x": X, "target": y}, str(tmp_path / "p.safetensors"))
    (tmp_path / "attest.yaml").write_text(
        f"model: {{name: m, version: 1.0.0, factory: model:{factory}, weights: w.safetensors}}\n"
        "inputs: {probe: p.safetensors}\nloss: model:loss\ntarget: 0\nthreads: 1\nrepeats: 2\n",
        encoding="utf-8",
    )
    evidence = collect(tmp_path / "attest.yaml")
    result = evidence.checks["ig_baseline"]
    assert result.summary["classifier"] is False
    return [(item.status, item.message) for item in result.items]


def test_a_regression_output_with_two_columns_is_judged_by_its_ratio(tmp_path: Path) -> None:
    items = _baseline_items(tmp_path, "build")
    # the mean is 0 at the zero baseline: neutral (as a softmax of [0, -5] it read p = 0.993)
    assert items and all(status == "pass" for status, _ in items), items
    assert all("|F(baseline)|" in message for _, message in items)


def test_a_regression_output_not_neutral_at_the_baseline_still_fails(tmp_path: Path) -> None:
    items = _baseline_items(tmp_path, "build_offset")
    assert all(status == "fail" for status, _ in items), items
    assert all("F(baseline) = 6" in message for _, message in items)


@pytest.mark.parametrize(
    ("targets", "classes"),
    [
        (None, True),
        (torch.tensor([0, 2, 1]), True),  # integer labels
        (torch.tensor([[0.7, 0.2, 0.1], [0.0, 1.0, 0.0]]), True),  # soft labels
        (torch.full((2, 3, 4, 4), 1 / 3), True),  # a soft mask: a distribution per pixel
        (torch.tensor([0.3, -1.2]), False),  # regression values
        (torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]), False),  # multi-label indicators
        (torch.rand(2, 3, 8, 8) * 0.5, False),  # heatmaps
    ],
)
def test_which_targets_are_classes(targets: torch.Tensor | None, classes: bool) -> None:
    from attest.collection.ig.neutrality import reads_classes

    assert reads_classes(targets) is classes
