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

``F.ctc_loss`` (``aten._ctc_loss``) on normalized log-probabilities: PyTorch's backward returns
the gradient with respect to the logits that a ``log_softmax`` turned into ``log_probs`` (each
frame's ``exp(log_probs) - posterior``), not the partial derivative with respect to
``log_probs`` itself (``-posterior``): the two differ along each frame's normalization
direction, which ``log_softmax``'s backward removes, so a model's gradient through
``log_softmax`` and ``ctc_loss`` is right (pytorch/pytorch#52241 and #181534; PyTorch's own
OpInfo gradcheck of ``ctc_loss`` differentiates ``ctc_loss(log_softmax(x))`` for this reason,
pytorch/pytorch#154590). A finite difference in a random direction moves the frames off the
normalized set and fails a correct model (relative error 1.0 on a CTC speech model). So when
the captured ``log_probs`` are normalized (each frame's ``logsumexp`` is 0), the function
differenced reads them through ``log_softmax``, which leaves their value unchanged and
compares the backward in the directions that keep frames normalized; log-probabilities that
are not normalized (raw logits handed to ``ctc_loss``, whose gradient PyTorch then gets wrong)
are compared as they are, and fail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from attest.collection.capture.aten_args import BoundCall, bind_schema, op_short_name

__all__ = [
    "CTC_RULE",
    "PADDING_RULE",
    "embedding_padding",
    "follow_known_rules",
    "known_rule",
    "padding_rows",
]

PADDING_RULE = (
    "PyTorch's documented padding_idx rule (nn.Embedding): the padding row gets no gradient "
    "by design, so it is held out of the finite differences"
)

CTC_RULE = (
    "PyTorch's ctc_loss backward is the gradient through log_softmax (pytorch/pytorch#52241): "
    "its normalized log_probs are differenced through log_softmax, in the directions that keep "
    "each frame normalized"
)
# a frame of float32 log_softmax output has logsumexp within a few ulps of 0
_NORMALIZED_ATOL = 1e-5

TensorFn = Callable[..., Sequence[torch.Tensor]]


def embedding_padding(call: BoundCall) -> int | None:
    """The padding index of an ``aten.embedding`` call that has one, else None."""
    if op_short_name(str(call.func)) != "embedding":
        return None
    pad = bind_schema(call.func, call.args, call.kwargs).get("padding_idx", -1)
    return int(pad) if isinstance(pad, int) and pad >= 0 else None


def _ctc_log_probs_slot(call: BoundCall, use: Sequence[int]) -> int | None:
    """The position in ``use`` of an ``aten._ctc_loss`` call's ``log_probs`` when each of its
    frames is normalized (logsumexp 0 over the classes), else None."""
    if op_short_name(str(call.func)) != "_ctc_loss":
        return None
    slot = next((k for k, i in enumerate(use) if call.names[i] == "log_probs"), None)
    if slot is None:
        return None
    log_probs = call.tensors[use[slot]].detach()
    if log_probs.numel() == 0 or not log_probs.is_floating_point():
        return None
    total = torch.logsumexp(log_probs.to(torch.float64), dim=-1)
    return slot if bool((total.abs() <= _NORMALIZED_ATOL).all()) else None


def known_rule(call: BoundCall, use: Sequence[int]) -> tuple[str, str] | None:
    """The documented rule an operator call's comparison follows: its key for the item's
    ``known_rule`` metric and the sentence its message adds; None when none applies."""
    pad = embedding_padding(call)
    if pad is not None and any(call.names[i] == "weight" for i in use):
        return "padding_idx", f"padding_idx={pad}: {PADDING_RULE}"
    if _ctc_log_probs_slot(call, use) is not None:
        return "ctc_log_softmax", CTC_RULE
    return None


def follow_known_rules(
    call: BoundCall, use: Sequence[int], fn: TensorFn
) -> tuple[TensorFn, str | None]:
    """``fn`` (``call.function(use)``) as the documented rules read it (the padding row of an
    embedding's weight as a constant; normalized CTC log-probabilities through
    ``log_softmax``), and the rule's sentence; ``fn`` and None when no rule applies."""
    ctc = _ctc_log_probs_slot(call, use)
    if ctc is not None:

        def through_log_softmax(*xs: torch.Tensor) -> Sequence[torch.Tensor]:
            return fn(*[x.log_softmax(-1) if k == ctc else x for k, x in enumerate(xs)])

        return through_log_softmax, CTC_RULE
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
