"""An ``nn.EmbeddingBag`` named by ``embedding:``: its per-token lookup and its pooling, equal to
the module's own output (attest/spec/embedding_bag.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from attest.spec.embedding_bag import pool, token_embeddings  # noqa: E402

IDS = torch.tensor([[3, 5, 0, 0], [7, 7, 2, 9], [0, 0, 0, 0]])  # padded bags; the last is empty


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [0, None])
def test_pooling_the_lookup_gives_the_bag_output(mode: str, padding_idx: int | None) -> None:
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(10, 4, mode=mode, padding_idx=padding_idx).double()
    expected = bag(IDS)
    got = pool(bag, token_embeddings(bag, IDS), IDS)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_per_sample_weights_are_applied_in_sum_mode() -> None:
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0).double()
    weights = torch.rand(IDS.shape, dtype=torch.float64)
    expected = bag(IDS, per_sample_weights=weights)
    got = pool(bag, token_embeddings(bag, IDS), IDS, weights)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_the_gradient_of_the_pooled_lookup_is_the_bag_gradient() -> None:
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(10, 4, mode="mean", padding_idx=0).double()
    (expected,) = torch.autograd.grad(bag(IDS).square().sum(), bag.weight)
    emb = token_embeddings(bag, IDS).requires_grad_(True)
    (g,) = torch.autograd.grad(pool(bag, emb, IDS).square().sum(), emb)
    got = torch.zeros_like(bag.weight).index_add_(0, IDS.reshape(-1), g.reshape(IDS.numel(), -1))
    got[0] = 0
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
