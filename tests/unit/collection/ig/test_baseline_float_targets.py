"""ig_baseline reads an output as class scores (its softmax) only when its targets are classes:
integer labels, or soft labels (a distribution over dim 1 per example). Multi-label indicators
(float targets all 0 or 1) make each column one label's logit, read by its sigmoid; any other
float target (a heteroscedastic regressor's mean and log-variance, heatmaps) is judged by
``|F(b)| / |F(x)|``: ``target: 0`` picks the mean, not a class. Read as a two-class softmax, a
clean regressor whose mean is 0 at the baseline failed at p = 0.99."""

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
    ("targets", "reading"),
    [
        (None, "softmax"),
        (torch.tensor([0, 2, 1]), "softmax"),  # integer labels
        (torch.tensor([[0.7, 0.2, 0.1], [0.0, 1.0, 0.0]]), "softmax"),  # soft labels
        (torch.full((2, 3, 4, 4), 1 / 3), "softmax"),  # a soft mask: a distribution per pixel
        (torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]), "sigmoid"),  # multi-label
        (torch.tensor([1.0, 0.0, 0.0]), "sigmoid"),  # one binary label under BCE
        (torch.tensor([0.3, -1.2]), "value"),  # regression values
        (torch.rand(2, 3, 8, 8) * 0.5 + 0.1, "value"),  # heatmaps
    ],
)
def test_how_targets_are_read(targets: torch.Tensor | None, reading: str) -> None:
    from attest.collection.ig.readings import target_reading

    assert target_reading(targets) == reading


MULTILABEL = """
import torch
from torch import nn
import torch.nn.functional as F

def build():
    net = nn.Linear(4, 3)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]]))
        net.bias.copy_(torch.tensor([BIAS, 0.0, 0.0]))
    return net

def loss(out, y):
    return F.binary_cross_entropy_with_logits(out, y)
"""


@pytest.mark.parametrize(("bias", "status"), [(-4.0, "warn"), (0.0, "pass"), (4.0, "fail")])
def test_a_multi_label_logit_is_read_by_its_sigmoid(
    tmp_path: Path, bias: float, status: str
) -> None:
    # label 0's logit at the zero baseline is the bias: sigmoid 0.018 reads "absent" (a
    # confident other class: a warning, as for a softmax), 0.5 is neutral, 0.982 reads the
    # target "present" (fails, p >= 0.75)
    source = MULTILABEL.replace("BIAS", str(bias))
    (tmp_path / "model.py").write_text(textwrap.dedent(source), encoding="utf-8")
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(source), namespace)
    save_file(namespace["build"]().state_dict(), str(tmp_path / "w.safetensors"))  # type: ignore[operator]
    y = (X[:, :3] > 0).to(torch.float32)
    save_file({"x": X, "target": y}, str(tmp_path / "p.safetensors"))
    (tmp_path / "attest.yaml").write_text(
        "model: {name: m, version: 1.0.0, factory: model:build, weights: w.safetensors}\n"
        "inputs: {probe: p.safetensors}\nloss: model:loss\ntarget: 0\nthreads: 1\nrepeats: 2\n",
        encoding="utf-8",
    )
    result = collect(tmp_path / "attest.yaml").checks["ig_baseline"]
    assert result.summary["classifier"] is True
    assert [i.status for i in result.items] == [status] * len(X), [i.message for i in result.items]
    p = 1 / (1 + torch.exp(torch.tensor(-bias)))
    for item in result.items:
        assert abs(float(item.metrics["baseline_target_probability"]) - float(p)) < 1e-6
        assert item.metrics["target_probability_limit"] == 0.75
