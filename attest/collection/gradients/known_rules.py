"""Operators whose backward follows a documented rule that finite differences cannot see.

``nn.Embedding(padding_idx=k)`` (``aten.embedding`` with ``padding_idx >= 0``): PyTorch
gives the padding row no gradient by design, so that the pad token's vector stays what it
was initialised to ("the entries at padding_idx do not contribute to the gradient", the
``torch.nn.Embedding`` documentation), although the forward reads it. A finite difference
that moves that row sees the output move (on a BERT-style model: analytic -1.568 against a
central difference of -2.987 on the pad row), and would fail a correct backward. So the
comparison follows the rule: the padding row is held out of the finite differences (the
function differenced reads it as a constant), gradcheck and second_order compare every
other row as usual, and the item names the rule. At the model level
(:mod:`~attest.collection.gradients.hessian_vector`) the directions leave padding rows
still, for the same reason (:func:`padding_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from attest.collection.capture.aten_args import BoundCall, bind_schema, op_short_name

__all__ = ["PADDING_RULE", "embedding_padding", "follow_known_rules", "padding_rows"]

PADDING_RULE = (
    "PyTorch's documented padding_idx rule (nn.Embedding): the padding row gets no gradient "
    "by design, so it is held out of the finite differences"
)

TensorFn = Callable[..., Sequence[torch.Tensor]]


def embedding_padding(call: BoundCall) -> int | None:
    """The padding index of an ``aten.embedding`` call that has one, else None."""
    if op_short_name(str(call.func)) != "embedding":
        return None
    pad = bind_schema(call.func, call.args, call.kwargs).get("padding_idx", -1)
    return int(pad) if isinstance(pad, int) and pad >= 0 else None


def follow_known_rules(
    call: BoundCall, use: Sequence[int], fn: TensorFn
) -> tuple[TensorFn, str | None]:
    """``fn`` (``call.function(use)``) with the padding row of an embedding's weight read as
    a constant, and the rule's sentence; ``fn`` and None when no rule applies."""
    pad = embedding_padding(call)
    if pad is None:
        return fn, None
    slot = next((k for k, i in enumerate(use) if call.names[i] == "weight"), None)
    if slot is None:
        return fn, None

    captured = call.tensors[use[slot]]
    if not 0 <= pad < captured.shape[0]:
        return fn, None
    # the row's value now, copied: finite differences may perturb the input in place
    row = captured[pad].detach().clone()

    def ruled(*xs: torch.Tensor) -> Sequence[torch.Tensor]:
        weight = xs[slot]
        mask = torch.zeros(weight.shape[0], *([1] * (weight.dim() - 1)), dtype=weight.dtype)
        mask[pad] = 1
        mask = mask.to(weight.device)
        held = weight * (1 - mask) + row.to(weight.dtype) * mask
        return fn(*[held if k == slot else x for k, x in enumerate(xs)])

    return ruled, f"padding_idx={pad}: {PADDING_RULE}"


def padding_rows(model: nn.Module) -> dict[int, int]:
    """``id`` of each embedding weight with a padding index -> that row: the rows a model
    -level direction must leave still (PyTorch gives them no gradient by design)."""
    return {
        id(m.weight): int(m.padding_idx)
        for m in model.modules()
        if isinstance(m, nn.Embedding) and m.padding_idx is not None
    }
