"""Several inputs for ``check_gradients``: a tuple (positional arguments) or a mapping (keyword
arguments) of tensors, as models with token ids, masks or auxiliary inputs take them.

The checks of ``attest collect`` differentiate one probe tensor. Until a spec's named inputs
(``inputs:`` with roles) reach the in-memory checks, the plugin maps a tuple or mapping onto
that one tensor, without casting anything the model must receive unchanged:

- every floating-point tensor is **attributed**: flattened per example and packed side by side
  into the probe tensor (so every check perturbs, integrates and differentiates all of them
  together, in the precision each check runs in);
- every other tensor (integer token ids, lengths, boolean masks) is **fixed**: bound to the
  model unchanged (never cast to float, never perturbed), and passed to every call.

:class:`BoundInputs` is the module the checks then see: it unpacks the probe tensor into the
float inputs and calls the model with them and the fixed ones, in their places (its
submodules are the model's, under ``model.``). A fixed tensor holds one row per probe
example, so the checks run on the whole probe batch (no sub-batch, no crop), and the checks
that call the model on other batches (integrated gradients' path points, accumulation's
micro-batches, the training checks, the ONNX export of the glue) are refused with a clear
error when fixed inputs are present.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attest.errors import InputError
from attest.evidence.model import IG_CHECKS, TRAINING_CHECKS

__all__ = ["BATCH_CHECKS", "BoundInputs", "bind_inputs"]

# checks that call the model on batches other than the probe's, where a fixed input's rows
# would no longer match (the named inputs of the spec will slice them with the batch)
BATCH_CHECKS: tuple[str, ...] = (*IG_CHECKS, "accumulation", "export", *TRAINING_CHECKS)


@dataclass(frozen=True)
class _Slot:
    key: int | str  # position, or keyword
    shape: tuple[int, ...] | None  # per-example shape of an attributed input; None: fixed


class BoundInputs(nn.Module):
    """``model`` called with the packed attributed inputs unpacked and the fixed ones bound."""

    def __init__(self, model: nn.Module, slots: list[_Slot], fixed: dict[str, torch.Tensor]):
        super().__init__()
        self.model = model
        self.slots = slots
        for name, tensor in fixed.items():  # buffers: moved with the model, never cast
            self.register_buffer(name, tensor, persistent=False)

    def forward(self, packed: torch.Tensor) -> Any:
        n = packed.shape[0]
        sizes = [_numel(s.shape) for s in self.slots if s.shape is not None]
        parts = iter(torch.split(packed.reshape(n, -1), sizes, dim=1))
        values: dict[int | str, torch.Tensor] = {}
        for slot in self.slots:
            if slot.shape is not None:
                values[slot.key] = next(parts).reshape(n, *slot.shape)
            else:
                values[slot.key] = getattr(self, _buffer_name(slot.key))
        args = [values[k] for k in sorted(k for k in values if isinstance(k, int))]
        kwargs = {k: v for k, v in values.items() if isinstance(k, str)}
        return self.model(*args, **kwargs)


def bind_inputs(
    model: nn.Module, inputs: Sequence[torch.Tensor] | Mapping[str, torch.Tensor]
) -> tuple[BoundInputs, torch.Tensor, list[str]]:
    """The module the checks run, the packed probe tensor, and the fixed inputs' names
    (``input 1``, ``attention_mask``)."""
    items: list[tuple[int | str, Any]] = (
        [(str(k), v) for k, v in inputs.items()]
        if isinstance(inputs, Mapping)
        else list(enumerate(inputs))
    )
    if not items:
        raise InputError("gradient_check got no inputs", hint="pass the model's input tensors")
    for key, value in items:
        if not isinstance(value, torch.Tensor):
            raise InputError(
                f"gradient_check input {_label(key)} is a {type(value).__name__}, not a tensor",
                hint="pass a tensor, a tuple of tensors or a dict of tensors",
            )
    attributed = [(k, v) for k, v in items if v.is_floating_point()]
    if not attributed:
        raise InputError(
            "gradient_check got no floating-point input to differentiate: integer inputs "
            f"({', '.join(_label(k) for k, _ in items)}) such as token ids have no gradient",
            hint="pass the float input the gradients are taken with respect to (the "
            "embeddings of the ids, e.g. model.embeddings(ids), into a model that takes them), "
            "with the ids' masks as further inputs",
        )
    batch = attributed[0][1].shape[0] if attributed[0][1].dim() else None
    for key, value in items:
        if value.dim() == 0 or value.shape[0] != batch:
            raise InputError(
                f"gradient_check inputs must share the batch dimension: {_label(key)} has shape "
                f"{tuple(value.shape)}, {_label(attributed[0][0])} has "
                f"{tuple(attributed[0][1].shape)}",
                hint="give every input one row per example (dim 0)",
            )
    slots = [_Slot(k, tuple(v.shape[1:]) if v.is_floating_point() else None) for k, v in items]
    fixed = {_buffer_name(k): v.detach().clone() for k, v in items if not v.is_floating_point()}
    dtype = functools.reduce(torch.promote_types, (v.dtype for _, v in attributed))
    packed = torch.cat([v.detach().reshape(batch, -1).to(dtype) for _, v in attributed], dim=1)
    fixed_names = [_label(k) for k, v in items if not v.is_floating_point()]
    return BoundInputs(model, slots, fixed), packed, fixed_names


def _numel(shape: tuple[int, ...] | None) -> int:
    count = 1
    for d in shape or ():
        count *= d
    return count


def _buffer_name(key: int | str) -> str:
    return f"fixed_input_{key}"


def _label(key: int | str) -> str:
    return f"input {key}" if isinstance(key, int) else repr(key)
