"""One float64 model instance shared by the gradient checks of a run, kept as built.

Building a model is the user's factory (with its weight initialisation, which the trained
weights then overwrite), ``load_state_dict`` and a cast: on a small model it costs more than
a forward and backward pass (digits: 1.7 ms against 0.8 ms). ``gradient_flow``,
``second_order`` and ``accumulation`` each used to build their own float64 instance; they now
take :meth:`SharedModel.get`'s, which hands out the same instance as long as it is as built.

"As built" is checked, not assumed, each time the instance is handed out:

- every parameter and buffer is the very tensor it was (same object, shape and dtype) with
  its ``requires_grad`` flag; one that was written in place since (its ``_version`` counter
  moved: ``second_order`` loads shifted parameters and puts them back) is restored from a
  snapshot taken at build time, so its values are the trained ones bit for bit;
- gradients left in ``.grad`` are dropped and every module is back in eval mode;
- a module with a hook that was not there at build time, or a parameter or buffer replaced
  or reshaped, means a check changed the model in a way a restore cannot undo: a new instance
  is built instead.

Python attributes that are not parameters or buffers are not tracked; a check that must
change the model otherwise (training mode, perturbed weights, tracing hooks) builds its own
with :meth:`~attest.collection.context.CollectContext.fresh_model`. The snapshot costs one copy of
the float64 weights while the checks run (half of one when they hold float32 values, as
weights trained in float32 do); :meth:`SharedModel.release` drops both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["SharedModel", "exact_copy"]


@dataclass
class _Tracked:
    tensor: torch.Tensor
    version: int
    requires_grad: bool
    snapshot: torch.Tensor  # in a narrower dtype when that holds the values exactly
    dtype: torch.dtype  # the tensor's own


_NARROWER = {torch.float64: torch.float32, torch.complex128: torch.complex64}


def exact_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` to restore it from. A float64 model built from float32 weights holds
    float32 values in float64 tensors, which a float32 copy keeps bit for bit at half the
    memory (on the MONAI ViT the snapshot is 84 MiB; restoring casts back exactly); kept in
    float32 only when casting it back gives every bit of ``t`` (NaN, or one value with more
    precision, keeps the float64 copy)."""
    narrower = _NARROWER.get(t.dtype)
    if narrower is not None:
        small = t.detach().to(narrower)
        if torch.equal(small.to(t.dtype), t.detach()):
            return small
    return t.detach().clone()


def _layout(module: nn.Module) -> tuple[int, ...]:
    """What a module holds, by count: parameters, buffers, submodules and hooks of every kind
    (a tensor replaced under the same name is caught by identity instead)."""
    return (
        len(module._parameters),
        len(module._buffers),
        len(module._modules),
        len(module._forward_hooks),
        len(module._forward_pre_hooks),
        len(module._backward_hooks),
        len(module._backward_pre_hooks),
    )


class SharedModel:
    """The shared instance of one dtype (see the module docstring)."""

    def __init__(self, build: Callable[[], nn.Module]) -> None:
        self._build = build
        self._model: nn.Module | None = None
        self._modules: list[tuple[nn.Module, tuple[int, ...]]] = []
        # every (module's _parameters or _buffers, name, tensor), shared tensors once per owner
        self._slots: list[tuple[dict[str, Any], str, torch.Tensor]] = []
        self._tracked: list[_Tracked] = []  # each tensor once, with its snapshot
        self.builds = 0  # instances built (the tests read it)

    def get(self) -> nn.Module:
        """The shared instance, as built (restored, or rebuilt, if a check changed it)."""
        model = self._model
        if model is None or not self._restore():
            model = self._new()
        return model

    def release(self) -> None:
        """Drop the instance and its snapshot."""
        self._model = None
        self._modules = []
        self._slots = []
        self._tracked = []

    def _new(self) -> nn.Module:
        model = self._build()
        self.builds += 1
        self._model = model
        modules = list(model.modules())
        self._modules = [(m, _layout(m)) for m in modules]
        self._slots = [
            (slots, key, t)
            for m in modules
            for slots in (m._parameters, m._buffers)
            for key, t in slots.items()
            if t is not None
        ]
        unique = {id(t): t for _, _, t in self._slots}.values()  # tied weights once
        self._tracked = [
            _Tracked(t, t._version, t.requires_grad, exact_copy(t), t.dtype) for t in unique
        ]
        return model

    def _restore(self) -> bool:
        """Put the instance back as built; False when it cannot be (a new one is needed).

        Walks the modules and tensors recorded at build time (their dictionaries and version
        counters), not ``named_parameters``: this runs each time the instance is handed out."""
        for module, layout in self._modules:
            if _layout(module) != layout:
                return False
        for slots, key, tensor in self._slots:
            if slots.get(key) is not tensor:
                return False
        for kept in self._tracked:
            t = kept.tensor
            if t.shape != kept.snapshot.shape or t.dtype != kept.dtype:
                return False
        for kept in self._tracked:
            t = kept.tensor
            if t._version != kept.version:
                with torch.no_grad():
                    t.copy_(kept.snapshot)
                kept.version = t._version
            if t.requires_grad != kept.requires_grad:
                t.requires_grad_(kept.requires_grad)
            if isinstance(t, nn.Parameter):
                t.grad = None
        if any(module.training for module, _ in self._modules):
            assert self._model is not None
            self._model.eval()
        return True
