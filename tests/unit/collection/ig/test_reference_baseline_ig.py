"""Integrated gradients of token ids from their reference-token baseline (``baseline: {token:
ID, keep: [...]}``, docs/spec.md): completeness holds from it, and F at its start is the
model's own F at the reference sequence, computed without attest."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from attest.collection.ig.attribution import integrated_gradients  # noqa: E402
from attest.collection.ig.baselines import call_baseline  # noqa: E402
from attest.testing.named_inputs import named_call  # noqa: E402


class TextClassifier(nn.Module):
    """Ids through an embedding without padding_idx (a trained reference row), a position term
    added after the module, one attention-like mixing step, mean-pooled."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.pos = nn.Parameter(torch.randn(6, 8) * 0.5)
        self.mix = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids) + self.pos[: ids.shape[1]]
        weights = torch.softmax(h @ self.mix(h).transpose(1, 2) / 8**0.5, dim=-1)
        return self.head(torch.tanh(weights @ h).mean(1))


def test_completeness_holds_from_the_reference_tokens() -> None:
    torch.manual_seed(0)
    model = TextClassifier().eval()
    ids = torch.tensor([[1, 5, 9, 4, 2, 0], [1, 7, 3, 2, 0, 0], [1, 12, 13, 14, 15, 2]])
    role = {
        "role": "embedded",
        "arg": 0,
        "embedding": "emb",
        "baseline": {"token": 0, "keep": [1, 2]},
    }
    loaded = named_call(
        model, (ids,), roles={"arg0": role}, output=None, target=None, loss=None, name="t"
    )
    installed = loaded.call.install(model)
    baseline = call_baseline(loaded.call, None, loaded.inputs)
    result = integrated_gradients(
        installed, loaded.inputs, target=0, baseline=baseline, tolerance=1e-4, max_steps=256
    )
    assert float(result.completeness_rel_error.max()) < 1e-3
    # F(b) is the model's F at the reference sequence itself: [CLS] and [SEP] kept, every other
    # token (padding included) the reference 0, the position term added by the model
    reference = torch.where((ids == 1) | (ids == 2), ids, torch.zeros_like(ids))
    with torch.no_grad():
        expected = TextClassifier.forward(model, reference)[:, 0].double()
    torch.testing.assert_close(torch.from_numpy(result.f_baseline), expected, rtol=0, atol=1e-5)
    # and the attributions sum to F(x) - F(b), every token's a sum over its embedding
    attributions = loaded.call.parts_of(result.attributions)["arg0"].sum(dim=(1, 2))
    torch.testing.assert_close(
        attributions,
        torch.from_numpy(result.f_input - result.f_baseline),
        rtol=1e-3,
        atol=1e-6,
    )
