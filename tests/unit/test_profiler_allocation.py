"""Uninitialized allocations (empty_like and views of it) are not compared between runs."""

from __future__ import annotations

from pathlib import Path

from _collect_models import make_spec

from attest.collect import collect

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
