"""Uninitialized allocations (empty_like and views of it) are not compared between runs."""

from __future__ import annotations

from pathlib import Path

import torch
from _collect_models import make_spec

from attest.collection import collect

FILLS_AN_EMPTY_BUFFER = """
import torch
from torch import nn

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        buf = torch.empty_like(x)
        buf.copy_(x * 2)
        return self.fc(buf)

def build():
    return M()
"""


def test_allocation_then_fill_is_not_a_determinism_or_fidelity_failure(tmp_path: Path) -> None:
    evidence = collect(make_spec(tmp_path / "m", FILLS_AN_EMPTY_BUFFER))
    rows = {row.op: row for row in evidence.operators}
    empty = rows["aten.empty_like.default"]
    assert empty.bit_exact_rate is None and empty.fidelity_pct is None
    assert "uninitialized" in (empty.not_computed or {}).get("determinism", "")
    copy = rows["aten.copy_.default"]
    assert copy.bit_exact_rate == 1.0 and copy.fidelity_pct is not None
    determinism = evidence.checks["determinism"]
    assert not [i for i in determinism.items if i.status == "fail"]
    assert determinism.summary["nondeterministic_operators"] == 0


LSTM = """
import torch
from torch import nn

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])

def build():
    return M()
"""


def test_fused_rnn_workspace_is_not_compared_but_its_results_are(tmp_path: Path) -> None:
    x = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(3))
    evidence = collect(make_spec(tmp_path / "lstm", LSTM, x=x))
    determinism = evidence.checks["determinism"]
    assert not [i.message for i in determinism.items if i.status == "fail"]
    fused = [row for row in evidence.operators if "rnn" in row.op]
    assert fused, "expected a fused RNN kernel on this build"
    for row in fused:  # its real outputs (output, h, c) were compared, bit-exact
        assert row.bit_exact_rate == 1.0 and len(row.output_shapes) == 3
        # float64 runs the unfused LSTM: no counterpart, and the row says so
        assert row.fidelity_pct is not None or "float64" in (row.not_computed or {})["fidelity"]
