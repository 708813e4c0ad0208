"""An ``nn.EmbeddingBag`` as an embedded input's module: its per-token lookup and its pooling.

An ``nn.Embedding`` returns one vector per token, which is what an embedded input integrates
and differentiates. An ``nn.EmbeddingBag`` fuses the lookup with a reduction over each bag
(``sum``, ``mean`` or ``max``, ``padding_idx`` left out, optional ``per_sample_weights``) and
returns one vector per bag, so per-token embeddings never exist as a tensor. For a bag module
the part of ``x`` is the per-token lookup ``(N, L, D)`` (:func:`token_embeddings`) and the
forward hook (:func:`pool_hook`) replaces the bag's output with the same reduction applied to
those embeddings (:func:`pool`), so the gradient and the attributions are per token, as for
``nn.Embedding``. PyTorch has no public function that reduces given per-token embeddings as a
bag does (``F.embedding_bag`` takes the table and the ids), hence the reduction written here;
tests/unit/spec/test_embedding_bag.py holds it equal to the module's output.

Only the padded form is taken: ids ``(N, L)``, one bag per example. The flat form (1-D ids
with ``offsets``) has no per-example rows, so its ids cannot be a named probe input.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["pool", "pool_hook", "token_embeddings"]


def token_embeddings(module: nn.EmbeddingBag, ids: torch.Tensor) -> torch.Tensor:
    """The ``(N, L, D)`` lookup of 2-D ``ids`` in the bag's table (its ``max_norm`` applied as
    the bag applies it)."""
    return nn.functional.embedding(
        ids, module.weight, None, module.max_norm, module.norm_type, module.scale_grad_by_freq
    )


def pool(
    module: nn.EmbeddingBag,
    embeddings: torch.Tensor,
    ids: torch.Tensor,
    per_sample_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """``embeddings`` (N, L, D) reduced over each bag as ``module`` reduces its lookup: tokens
    at ``padding_idx`` left out, an empty bag all zeros (PyTorch's rule)."""
    keep = torch.ones_like(ids, dtype=torch.bool)
    if module.padding_idx is not None:
        keep = ids != module.padding_idx
    weights = keep.to(embeddings.dtype).unsqueeze(-1)
    if per_sample_weights is not None:  # sum mode only (PyTorch refuses it otherwise)
        weights = weights * per_sample_weights.to(embeddings.dtype).unsqueeze(-1)
    if module.mode == "sum":
        return (embeddings * weights).sum(dim=1)
    if module.mode == "mean":
        count = keep.sum(dim=1, keepdim=True).clamp(min=1).to(embeddings.dtype)
        return (embeddings * weights).sum(dim=1) / count
    masked = embeddings.masked_fill(~keep.unsqueeze(-1), float("-inf"))
    top = masked.max(dim=1).values
    return torch.where(keep.any(dim=1, keepdim=True), top, torch.zeros_like(top))


def pool_hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> Any:
    """Forward hook (``with_kwargs=True``) of an embedded input's bag module: its output
    replaced by the bag reduction of the per-token embeddings being differentiated (set for the
    duration of one call)."""
    replacement = module.__dict__.get("_attest_embeddings")
    if replacement is None:
        return output
    assert isinstance(module, nn.EmbeddingBag)
    ids = args[0] if args else kwargs["input"]
    weights = args[2] if len(args) > 2 else kwargs.get("per_sample_weights")
    return pool(module, replacement, ids, weights)
