"""topology on a model with fixed inputs: a path the fixed inputs alone set (transformers drops
the attention mask of an example without padding) passes, with both swaps recorded; a path
the differentiated input sets still fails."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from collection.test_named_inputs import _folder  # noqa: E402

from attest.collection import collect  # noqa: E402
from attest.evidence.consistency import inconsistencies  # noqa: E402

MASKED = """
import torch
from torch import nn

class Pool(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x, mask):
        h = torch.tanh(self.proj(x))
        if BRANCH:
            return self.head(h.mean(1))  # as transformers: no mask where nothing is padded
        keep = mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * keep).sum(1) / keep.sum(1))

def build():
    return Pool()
"""

TRAIN = """
g = torch.Generator().manual_seed(1)
x = torch.randn(4, 5, 3, generator=g)
mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
probe.update(x=x, mask=mask, target=torch.tensor([0, 1, 0, 1]))
"""

SPEC = """
inputs:
  probe: probe.safetensors
  x: {role: attributed, arg: 0}
  mask: {role: fixed, arg: 1}
target: label
"""


def _topology(tmp_path: Path, branch: str) -> tuple[object, object]:
    evidence = collect(_folder(tmp_path, MASKED.replace("BRANCH", branch), TRAIN, SPEC))
    return evidence, evidence.checks["topology"]


def test_a_path_set_by_a_fixed_mask_passes_with_both_swaps(tmp_path: Path) -> None:
    evidence, topology = _topology(tmp_path, "bool(mask.all())")
    assert topology.summary["diverging_inputs"] == 0
    assert topology.summary["paths_set_by_fixed_inputs"] == 2  # examples 1 and 3
    swapped = [i for i in topology.items if i.metrics["first_divergence"] is not None]
    assert [i.subject.input_index for i in swapped] == [1, 3]
    for item in swapped:
        assert item.status == "pass" and "set by the fixed inputs alone" in item.message
        assert item.metrics["swap_to_reference"] is None
        assert item.metrics["swap_from_reference"] is None
    # the per-operator checks ran, and the evidence's claims follow from its figures
    assert any(i.status == "pass" for i in evidence.checks["determinism"].items)
    assert not inconsistencies(evidence)


def test_a_path_set_by_the_differentiated_input_still_fails(tmp_path: Path) -> None:
    # x[0, 0, 0] > 0 for probe examples 1 and 3 only: the attributed input branches
    evidence, topology = _topology(tmp_path, "bool(x[0, 0, 0] > 0)")
    failed = [i for i in topology.items if i.status == "fail"]
    assert failed and topology.summary["diverging_inputs"] == len(failed)
    assert all(i.metrics["swap_to_reference"] is not None for i in failed)
    assert "data-dependent control flow" in failed[0].message
    assert not inconsistencies(evidence)
