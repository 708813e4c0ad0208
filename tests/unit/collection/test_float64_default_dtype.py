"""A float64 run of a model runs its forward with float64 as the default dtype, so tensors the
forward makes without a dtype (an RNN's initial state, ``torch.zeros(layers, n, hidden)`` as
the tutorials write it) are float64 too. Before, such a clean model could not run in float64
and collect refused it ("mat1 and mat2 must have the same dtype")."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from attest.collection import collect

TUTORIAL_LSTM = """
import torch
from torch import nn

class VitalsLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lstm = nn.LSTM(3, 8, 2, batch_first=True)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        h0 = torch.zeros(2, x.size(0), 8).to(x.device)
        c0 = torch.zeros(2, x.size(0), 8).to(x.device)
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :])

def build():
    return VitalsLSTM()
"""


def test_a_model_making_its_rnn_state_without_a_dtype_is_collected(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(textwrap.dedent(TUTORIAL_LSTM), encoding="utf-8")
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(TUTORIAL_LSTM), namespace)
    save_file(namespace["build"]().state_dict(), str(tmp_path / "w.safetensors"))  # type: ignore[operator]
    x = torch.randn(3, 5, 3, generator=torch.Generator().manual_seed(1))
    save_file({"x": x}, str(tmp_path / "p.safetensors"))
    (tmp_path / "attest.yaml").write_text(
        "model: {name: m, version: 1.0.0, factory: model:build, weights: w.safetensors}\n"
        "inputs: {probe: p.safetensors}\ntarget: 1\nthreads: 1\nrepeats: 2\n",
        encoding="utf-8",
    )
    evidence = collect(tmp_path / "attest.yaml")
    assert evidence.checks["fidelity"].status == "computed"
    assert evidence.checks["gradcheck"].status == "computed"
    assert torch.get_default_dtype() == torch.float32


class _Raises(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert torch.get_default_dtype() == torch.float64
        raise ValueError("planted")


class _Zeros(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.zeros(x.shape)


def test_the_default_dtype_is_float64_only_inside_the_forward() -> None:
    from attest.collection.context import run_in_float64

    model = _Zeros().double()
    run_in_float64(model)
    assert model(torch.ones(2, dtype=torch.float64)).dtype == torch.float64
    assert torch.get_default_dtype() == torch.float32
    raising = _Raises()
    run_in_float64(raising)
    with pytest.raises(ValueError, match="planted"):
        raising(torch.ones(2))
    assert torch.get_default_dtype() == torch.float32  # restored when the forward raises
