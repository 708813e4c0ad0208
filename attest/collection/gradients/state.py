"""What the gradient checks hand each other within one collect run: :class:`GradientState`,
held by the context as ``ctx.gradients``, and the types it carries.

The checks run in :data:`attest.collection.gradients.runner.EXECUTION` order and share:

- ``gradcheck`` -> ``second_order``: which call of each distinct operator its float64 case
  came from and the inputs it differentiates (``gradcheck_cases``: rebuilt on demand, not held) and the run's Gaussian directions (``pool``);
- ``gradient_flow`` -> the later checks: whether backward raised (``flow_error``), the
  parameters whose gradient path is severed (``severed``), the float64 full-batch loss
  gradient (``full_batch_loss_gradients``, the accumulation check's reference) and, when
  the runner sets ``keep_graph``, the gradient's double-backward graph (``graph``, popped by
  ``second_order``) and the forward's output (``output``, popped by ``custom_ops``: the custom
  Functions it uses are nodes of its graph). Without ``keep_graph`` (a check run alone)
  neither is kept; the runner drops both when the checks are done;
- ``custom_ops`` -> ``second_order``: the custom Functions forward uses
  (``custom_functions``), their captured calls (``custom_calls``) and the names of those whose
  backward failed (``custom_ops_failed``).

Data types only: importing no check module (and not the context), so the context can hold
them without an import circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from attest.collection.capture.records import OpRecord
from attest.collection.gradients.fd_basics import GaussianPool

__all__ = ["CustomCall", "GradientGraph", "GradientState"]


@dataclass
class GradientGraph:
    """The probe objective's gradient with its graph, handed from ``gradient_flow`` to
    ``second_order`` (which would otherwise rebuild the very same graph on the very same
    float64 model and probe batch). ``wrt``/``grads`` as
    :attr:`attest.collection.gradients.flow.ParameterGradients.graph`."""

    model: nn.Module
    x: torch.Tensor
    wrt: list[torch.Tensor]
    grads: list[torch.Tensor | None]


@dataclass
class CustomCall:
    """One call of a custom Function: its arguments (detached copies) and where it happened."""

    cls: Any  # a torch.autograd.Function subclass
    module: str | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    differentiate: list[bool]  # per floating tensor leaf of (args, kwargs): required grad


@dataclass
class GradientState:
    """The gradient checks' hand-offs (see the module docstring for who writes what)."""

    # gradcheck: the float64, kink-nudged case of each distinct operator, and the directions
    gradcheck_cases: dict[str, tuple[OpRecord, list[int]]] = field(default_factory=dict)
    pool: GaussianPool | None = None
    # gradient_flow
    keep_graph: bool = False  # set by the runner: keep ``graph`` and ``output`` for the next
    graph: GradientGraph | None = None
    output: torch.Tensor | None = None
    flow_error: BaseException | None = None
    severed: list[str] = field(default_factory=list)
    full_batch_loss_gradients: dict[str, torch.Tensor | None] | None = None
    # custom_ops
    custom_functions: list[type] = field(default_factory=list)
    custom_calls: list[CustomCall] = field(default_factory=list)
    custom_ops_failed: list[str] = field(default_factory=list)
    # second_order: the attention fallback's note (the fused kernel has no double backward)
    second_order_note: str | None = None

    def drop_hand_offs(self) -> None:
        """Forget the graph and the forward output (and stop keeping them), and every other
        hand-off that holds tensors."""
        self.keep_graph = False
        self.graph = None
        self.output = None
        self.gradcheck_cases = {}
        self.pool = None
        self.full_batch_loss_gradients = None

    def release_after(self, check_id: str) -> None:
        """Drop what ``check_id`` was the last consumer of (in the runner's EXECUTION order),
        so that it is not held while the later checks allocate: the forward output after
        ``custom_ops``; the operator cases, the directions' buffer and any graph after
        ``second_order``; the full-batch gradient (one float64 copy of the parameters) after
        ``accumulation``."""
        if check_id == "custom_ops":
            self.output = None
        elif check_id == "second_order":
            self.graph = None
            self.gradcheck_cases = {}
            self.pool = None
        elif check_id == "accumulation":
            self.full_batch_loss_gradients = None
