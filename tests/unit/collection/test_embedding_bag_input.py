"""A clean model whose ids go through an ``nn.EmbeddingBag`` (diagnosis codes pooled per
patient), certified from its spec: the bag's table gets its gradient through the per-token
lookup, IG attributes per code, and the flat form (ids with offsets) is refused at load."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from collection.test_named_inputs import _failing, _folder  # noqa: E402

from attest.errors import ConfigError  # noqa: E402
from attest.spec import load_spec  # noqa: E402

CODES = """
import torch
from torch import nn

class CodeRisk(nn.Module):
    def __init__(self):
        super().__init__()
        self.codes = nn.EmbeddingBag(40, 8, mode="mean", padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(9, 16), nn.Tanh(), nn.Linear(16, 2))

    def forward(self, codes, age):
        return self.mlp(torch.cat([self.codes(codes), age.unsqueeze(1)], 1))

def build():
    return CodeRisk()
"""

CODES_TRAIN = """
g = torch.Generator().manual_seed(1)
lengths = torch.tensor([6, 3, 4, 2]).repeat(8)
codes = torch.randint(1, 40, (32, 6), generator=g) * (torch.arange(6)[None] < lengths[:, None])
age = torch.randn(32, generator=g)
target = (((codes >= 30).any(1).float() + 0.8 * age) > 0.5).long()
opt = torch.optim.Adam(model.parameters(), 1e-2)
for _ in range(60):
    l = torch.nn.functional.cross_entropy(model(codes, age), target)
    opt.zero_grad(); l.backward(); opt.step()
probe.update(codes=codes[:4], age=age[:4], target=target[:4], flat=codes[:4, 0].clone())
"""

CODES_SPEC = """
inputs:
  probe: probe.safetensors
  codes: {role: embedded, arg: 0, embedding: codes}
  age: {role: attributed, arg: 1}
target: label
"""


def test_embedding_bag_ids_are_attributed_per_code_and_its_table_gets_a_gradient(
    tmp_path: Path,
) -> None:
    keep: dict = {}
    failing = _failing(_folder(tmp_path, CODES, CODES_TRAIN, CODES_SPEC), keep)
    evidence = keep["evidence"]
    errors = [c for c, r in evidence.checks.items() if r.status == "error"]
    assert not errors, errors  # IG raised on the bag's (N, D) output before
    flow = {i.subject.name: i for i in evidence.checks["gradient_flow"].items}
    assert flow["codes.weight"].status == "pass", flow["codes.weight"].message
    assert not [f for f in failing if f[0].startswith("gradient_flow")], failing
    named = evidence.attributions["named_inputs"]
    codes = next(n for n in named if n["name"] == "codes")
    assert codes["shape"] == [6, 8] and len(codes["per_token"][0]) == 6


def test_flat_ids_with_offsets_are_refused_for_a_bag(tmp_path: Path) -> None:
    path = _folder(
        tmp_path, CODES, CODES_TRAIN, CODES_SPEC.replace("codes: {", "codes: {key: flat, ")
    )
    with pytest.raises(ConfigError, match=r"nn.EmbeddingBag .* padded bags \(N, L\)"):
        load_spec(path)


POOLED = CODES.replace(
    'self.codes = nn.EmbeddingBag(40, 8, mode="mean", padding_idx=0)',
    "self.codes = Pooled()",
).replace(
    "class CodeRisk",
    """class Pooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(40, 8, padding_idx=0)

    def forward(self, ids):
        return self.table(ids).mean(1)

class CodeRisk""",
)


def test_an_embedding_module_that_pools_is_refused_with_the_module_to_name(
    tmp_path: Path,
) -> None:
    path = _folder(tmp_path, POOLED, CODES_TRAIN, CODES_SPEC)
    with pytest.raises(ConfigError, match=r"returns shape \(4, 8\) for ids of shape \(4, 6\)"):
        load_spec(path)
    path.write_text(path.read_text().replace("embedding: codes}", "embedding: codes.table}"))
    load_spec(path)  # the lookup itself is taken


def test_accumulation_of_a_clean_loss_with_embedded_ids_passes(tmp_path: Path) -> None:
    # a per-example cross-entropy accumulates exactly; the embedding table's gradient, routed
    # through the lookup for gradient_flow, once leaked into accumulation's full-batch
    # reference (and not into its micro-batches): a 20-40 % false "denominator" failure
    source = CODES + "\ndef loss(out, y):\n    return torch.nn.functional.cross_entropy(out, y)\n"
    keep: dict = {}
    _failing(_folder(tmp_path, source, CODES_TRAIN, CODES_SPEC + "loss: model:loss\n"), keep)
    accumulation = keep["evidence"].checks["accumulation"]
    assert accumulation.items and all(i.status == "pass" for i in accumulation.items), [
        i.message for i in accumulation.items
    ]
    flow = {i.subject.name: i for i in keep["evidence"].checks["gradient_flow"].items}
    assert flow["codes.weight"].status == "pass"
