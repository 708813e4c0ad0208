"""kinks on an embedded input: the perturbation moves the embeddings as the table's rows can
(one noise vector per distinct id), so a tie between positions that hold the same id, which no
input can break, is locally constant, not a kink; a value on a kink that a row's movement moves
off still counts. A text CNN's max-over-time pooling over padded ids failed before."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch
from safetensors.torch import save_file

from attest.collection.capture.run import capture_operators
from attest.collection.context import CollectContext
from attest.collection.gradients import kinks
from attest.spec import load_spec

TEXT_CNN = """
import torch
from torch import nn

class TextCNN(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(12, 6, padding_idx=0)
        with torch.no_grad():
            self.emb.weight[0] = 0.5  # a pad vector the convolution reads as positive
        self.conv = nn.Conv1d(6, 4, 2)
        with torch.no_grad():
            self.conv.bias.fill_(1.0)
        self.fc = nn.Linear(4, 2)

    def forward(self, ids):
        h = torch.relu(self.conv(self.emb(ids).transpose(1, 2)))
        return self.fc(h.max(dim=2).values)

def build():
    return TextCNN()
"""

ON_A_KINK = """
import torch
from torch import nn

class OnAKink(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(12, 6)
        self.proj = nn.Linear(6, 1)
        with torch.no_grad():
            self.emb.weight[5] = 0.0  # id 5's vector times any weight is exactly 0 ...
            self.proj.bias.zero_()  # ... so relu sits exactly on its kink there
        self.fc = nn.Linear(1, 2)

    def forward(self, ids):
        return self.fc(torch.relu(self.proj(self.emb(ids))).sum(1))

def build():
    return OnAKink()
"""

# padded ids: the last windows of examples 0 and 1 see only padding, and every class reads them
IDS = torch.tensor([[3, 4, 7, 0, 0, 0, 0], [9, 2, 0, 0, 0, 0, 0], [5, 6, 8, 1, 10, 11, 2]])


def _kinks(tmp_path: Path, source: str, ids: torch.Tensor) -> list[tuple[str, int, int]]:
    (tmp_path / "model.py").write_text(textwrap.dedent(source), encoding="utf-8")
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(source), namespace)
    save_file(namespace["build"]().state_dict(), str(tmp_path / "w.safetensors"))  # type: ignore[operator]
    save_file({"ids": ids}, str(tmp_path / "p.safetensors"))
    (tmp_path / "attest.yaml").write_text(
        "model: {name: m, version: 1.0.0, factory: model:build, weights: w.safetensors}\n"
        "inputs:\n  probe: p.safetensors\n  ids: {role: embedded, arg: 0, embedding: emb}\n"
        "target: 0\n",
        encoding="utf-8",
    )
    ctx = CollectContext(spec=load_spec(tmp_path / "attest.yaml"))
    ctx.operators, _ = capture_operators(ctx.fresh_model(), ctx.inputs(), ctx.spec, backward=False)
    result = kinks.run(ctx)
    return [
        (
            item.status,
            int(item.metrics.get("count") or 0),
            int(item.metrics.get("locally_constant_hits") or 0),
        )
        for item in result.items
        if (item.subject.op is not None and "max" in item.subject.op) or item.status == "fail"
    ]


def test_ties_between_padding_windows_are_not_kinks(tmp_path: Path) -> None:
    items = _kinks(tmp_path, TEXT_CNN, IDS)
    assert items, "the max over time was not scanned"
    assert all(status != "fail" for status, _, _ in items), items
    # the padding windows' ties were found, and judged locally constant
    assert sum(constant for _, _, constant in items) > 0, items


def test_a_value_on_a_kink_that_a_row_moves_off_still_counts(tmp_path: Path) -> None:
    items = _kinks(tmp_path, ON_A_KINK, IDS)
    assert any(status == "fail" and count > 0 for status, count, _ in items), items
