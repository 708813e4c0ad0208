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
with :meth:`~attest.collect.context.CollectContext.fresh_model`. The snapshot costs one copy of
the float64 weights while the checks run; :meth:`SharedModel.release` drops both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["SharedModel"]


@dataclass
class _Tracked:
    tensor: torch.Tensor
    version: int
    requires_grad: bool
    snapshot: torch.Tensor


def _hook_count(model: nn.Module) -> int:
    return sum(
        len(m._forward_hooks)
        + len(m._forward_pre_hooks)
        + len(m._backward_hooks)
        + len(m._backward_pre_hooks)
        for m in model.modules()
    )


class SharedModel:
    """The shared instance of one dtype (see the module docstring)."""

    def __init__(self, build: Callable[[], nn.Module]) -> None:
        self._build = build
        self._model: nn.Module | None = None
        self._tracked: dict[str, _Tracked] = {}
        self._hooks = 0
        self.builds = 0  # instances built (the tests read it)

    def get(self) -> nn.Module:
        """The shared instance, as built (restored, or rebuilt, if a check changed it)."""
        model = self._model
        if model is None or not self._restore(model):
            model = self._new()
        return model

    def release(self) -> None:
        """Drop the instance and its snapshot."""
        self._model = None
        self._tracked = {}

    def _new(self) -> nn.Module:
        model = self._build()
        self.builds += 1
        self._model = model
        self._hooks = _hook_count(model)
        self._tracked = {
            name: _Tracked(t, t._version, t.requires_grad, t.detach().clone())
            for name, t in self._named_tensors(model)
        }
        return model

    @staticmethod
    def _named_tensors(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
        named: list[tuple[str, torch.Tensor]] = [*model.named_parameters(remove_duplicate=False)]
        named += [(n, b) for n, b in model.named_buffers(remove_duplicate=False) if b is not None]
        return named

    def _restore(self, model: nn.Module) -> bool:
        """Put ``model`` back as built; False when it cannot be (a new one is needed)."""
        named = self._named_tensors(model)
        if len(named) != len(self._tracked) or _hook_count(model) != self._hooks:
            return False
        for name, t in named:
            kept = self._tracked.get(name)
            if kept is None or kept.tensor is not t or t.shape != kept.snapshot.shape:
                return False
            if t.dtype != kept.snapshot.dtype:
                return False
        for name, t in named:
            kept = self._tracked[name]
            if t._version != kept.version:
                with torch.no_grad():
                    t.copy_(kept.snapshot)
                kept.version = t._version
            if t.requires_grad != kept.requires_grad:
                t.requires_grad_(kept.requires_grad)
            if isinstance(t, nn.Parameter):
                t.grad = None
        if any(m.training for m in model.modules()):
            model.eval()
        return True
