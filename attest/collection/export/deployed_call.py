"""The model as a server calls it, for the ``export`` check: its own arguments, not the checks'
packed tensor.

With named inputs (attest.spec.model_call) the checks call ``model(x)`` with the inputs packed
into one tensor and a probe-row column; a deployed graph must instead take what a server sends
(the image and the tabular vector, the token ids and the attention mask) and return what the
model returns. :func:`eager_call` gives a copy of the model whose ``forward`` takes the named
inputs in their spec order (positional and keyword arguments placed as the spec says, ids
through the embedding lookup itself) and returns the selected output (a tuple of the heads'
outputs with ``heads:``), with the probe's tensors as its arguments: integer and bool tensors
as stored, floating ones in the precision asked for.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from attest.collection.context import CollectContext
from attest.spec.model_call import ModelCall

__all__ = ["eager_call", "input_names"]


def _deployed_forward(self: nn.Module, *values: torch.Tensor) -> Any:
    call: ModelCall = self.__dict__["_attest_call"]
    args: dict[int, torch.Tensor] = {}
    kwargs: dict[str, torch.Tensor] = {}
    for part, value in zip(call.parts, values, strict=True):
        if part.arg is not None:
            args[part.arg] = value
        else:
            assert part.kwarg is not None
            kwargs[part.kwarg] = value
    raw = self.__dict__["_attest_forward"](self, *[args[i] for i in sorted(args)], **kwargs)
    outputs = call.selected(raw)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def input_names(ctx: CollectContext) -> list[str]:
    """The names of the deployed graph's inputs, in order (the spec's input names)."""
    call = ctx.spec.call
    return ["x"] if call is None else [p.name for p in call.parts]


def eager_call(
    ctx: CollectContext, dtype: torch.dtype | None = None
) -> tuple[nn.Module, tuple[Any, ...]]:
    """A fresh model in ``dtype`` (default: the deployed precision) as a server calls it, and
    the probe's inputs for it."""
    model = ctx.fresh_model(dtype)
    call = ctx.spec.call
    if call is None or not call.flat:
        return model, (ctx.inputs(dtype),)
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), dtype)
    model.forward = _deployed_forward.__get__(model)
    args = []
    for part in call.parts:
        value = call.probe[part.key].to(ctx.spec.device)
        if value.is_floating_point() and dtype is not None:
            value = value.to(dtype)
        args.append(value)
    return model, tuple(args)
