"""ig_baseline with a target function: the baseline is judged on the F the function reads,
not on the whole output it reads F from (a causal LM's logits at every position, summed, were
judged instead, and a neutral baseline failed)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch
from safetensors.torch import save_file

from attest.collection.context import CheckSettings
from attest.collection.ig.neutrality import head_judgements
from attest.spec import load_spec

MODEL = """
import torch
from torch import nn

def build():
    torch.manual_seed(0)
    net = nn.Linear(4, 2)
    with torch.no_grad():
        net.bias.fill_(5.0)  # both outputs far from 0 at the zero input; their difference 0
    return net

def margin(out, batch):
    return out[:, 1] - out[:, 0]
"""


def test_a_target_function_is_judged_on_its_value(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(textwrap.dedent(MODEL), encoding="utf-8")
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(MODEL), namespace)
    model = namespace["build"]()  # type: ignore[operator]
    save_file(model.state_dict(), str(tmp_path / "w.safetensors"))
    x = torch.tensor([[1.0, -2.0, 0.5, 1.5], [-1.0, 0.5, 2.0, -0.5], [2.0, 1.0, -1.0, 0.0]])
    save_file({"x": x}, str(tmp_path / "p.safetensors"))
    (tmp_path / "attest.yaml").write_text(
        "model: {name: m, version: 1.0.0, factory: model:build, weights: w.safetensors}\n"
        "inputs: {probe: p.safetensors}\ntarget: model:margin\n",
        encoding="utf-8",
    )
    spec = load_spec(tmp_path / "attest.yaml")
    assert spec.call is not None and spec.call.computes_f
    built = spec.build_model()
    baseline = spec.inputs.clone()
    baseline[:, :4] = 0  # the zero baseline, each example's probe row kept
    rows = spec.call.unpack(spec.inputs)[1]
    assert rows is not None
    with torch.no_grad():
        out_b, out_x = built(baseline), built(spec.inputs)
    # the raw outputs at the baseline are as large as at the input (their sum: a ratio near 1)
    raw_b, raw_x = spec.call.split(out_b)[0], spec.call.split(out_x)[0]
    assert float((raw_b.sum(1) / raw_x.sum(1)).abs().min()) > 0.5
    judged = head_judgements(spec.call, CheckSettings(), out_b, out_x, rows)
    margin_x = raw_x[:, 1] - raw_x[:, 0]
    for (status, message, metrics), f_x in zip(judged, margin_x, strict=True):
        # F(b) = 5 - 5 = 0: neutral, whatever the raw outputs are
        assert status == "pass", message
        assert metrics["output.baseline_output_ratio"] < 1e-6 * max(1.0, 1 / abs(float(f_x)))
        assert metrics["output.f_baseline"] == 0.0 and "F(baseline) = 0" in message


def test_a_failing_ratio_names_both_values_and_the_neutral_value_it_assumes(
    tmp_path: Path,
) -> None:
    # a log-probability target function: 0 at certainty, log(1/C) where the model has no
    # preference, so a neutral baseline reads as |F(b)| >> |F(x)|: the message says why
    source = """
import torch
from torch import nn

def build():
    net = nn.Linear(4, 2)
    with torch.no_grad():
        net.weight.zero_()
        net.weight[1, 0] = 1.0  # class 1 certain where x[:, 0] is large
        net.bias.zero_()
    return net

def margin(out, batch):
    return torch.log_softmax(out, 1)[:, 1]
"""
    (tmp_path / "model.py").write_text(textwrap.dedent(source), encoding="utf-8")
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(source), namespace)
    save_file(namespace["build"]().state_dict(), str(tmp_path / "w.safetensors"))  # type: ignore[operator]
    save_file(
        {"x": torch.tensor([[20.0, 1, 0, 0], [25.0, 0, 1, 0]])}, str(tmp_path / "p.safetensors")
    )
    (tmp_path / "attest.yaml").write_text(
        "model: {name: m, version: 1.0.0, factory: model:build, weights: w.safetensors}\n"
        "inputs: {probe: p.safetensors}\ntarget: model:margin\n",
        encoding="utf-8",
    )
    spec = load_spec(tmp_path / "attest.yaml")
    assert spec.call is not None
    built = spec.build_model()
    baseline = spec.inputs.clone()
    baseline[:, :4] = 0
    rows = spec.call.unpack(spec.inputs)[1]
    assert rows is not None
    with torch.no_grad():
        judged = head_judgements(
            spec.call, CheckSettings(), built(baseline), built(spec.inputs), rows
        )
    failing = [(m, metrics) for status, m, metrics in judged if status == "fail"]
    assert failing
    for message, metrics in failing:
        assert f"F(baseline) = {metrics['output.f_baseline']:.3g}" in message
        assert "add log C" in message
