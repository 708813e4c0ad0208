"""Why a parameter of ``gradient_flow`` lacks a gradient, or has an identically zero one:
one instrumented run for them all (:mod:`attest.collection.gradients.diagnosis`), a gradient
zero by construction told apart (:mod:`attest.collection.gradients.structural`), the model's
all-zero weights named, and an auxiliary branch that runs, or reaches the output, in training
only found.
"""

from __future__ import annotations

import torch
from torch import nn

from attest.collection.context import CollectContext
from attest.collection.gradients.diagnosis import (
    SEVERING_KINDS,
    Trace,
    modules_run_in_training,
    owner_of,
    parameters_reaching_output_in_training,
    reason_for,
    trace_parameters,
)
from attest.evidence.model import CheckItem, ItemStatus, Subject

__all__ = ["Diagnosis"]


class Diagnosis:
    """Why parameters lack a gradient: one instrumented run for them all (when any does), and
    the model's all-zero weights and the modules a training-mode forward calls, on demand."""

    def __init__(
        self,
        ctx: CollectContext,
        model: nn.Module,
        x: torch.Tensor,
        problems: list[str],
        structural: dict[str, str],
    ) -> None:
        self.ctx, self.model, self.x = ctx, model, x
        self.structural = structural  # parameter -> why its gradient is zero by construction
        self.trace: Trace = Trace()
        self.bits: dict[str, int] = {}
        if problems:
            self.trace, self.bits = trace_parameters(ctx.fresh_model(torch.float64), x, problems)
        self.training_ran: set[str] | None = None  # modules a training-mode forward calls
        self.training_reached: set[str] | None = None  # parameters a training output reads
        self.zero_weights: list[str] | None = None  # the model's all-zero weights

    def item(
        self,
        subject: Subject,
        name: str,
        what: str,
        zero: bool,
        grad: torch.Tensor | None,
        severed: list[str],
    ) -> CheckItem:
        """The item of a parameter with no gradient, or an identically zero one."""
        kind, reason = reason_for(name, self.bits[name], self.trace, zero)
        if kind == "zero" and name in self.structural:  # connected, zero by construction
            kind, reason = "structural", self.structural[name]
        elif kind == "zero":
            if self.zero_weights is None:  # once per run, only when some gradient is zero
                self.zero_weights = _all_zero_weights(self.model)
            reason += _zero_weights_hint(self.zero_weights, name)
        if kind in SEVERING_KINDS or kind == "untracked":
            severed.append(name)
        status: ItemStatus = "warn" if kind == "structural" else "fail"
        if kind == "unused" and owner_of(name) not in self.trace.ran:
            if self.training_ran is None:
                self.training_ran = modules_run_in_training(
                    self.ctx.fresh_model(torch.float64), self.x
                )
            if owner_of(name) in self.training_ran:
                # an auxiliary branch (a VAE regularizer, an auxiliary classifier) that
                # forward calls in training only: trained there, just not by this probe
                status = "warn"
                reason += " in eval mode; it runs in training mode, where it gets gradients"
        if kind == "dead_branch":
            if self.training_reached is None:
                self.training_reached = parameters_reaching_output_in_training(
                    self.ctx.fresh_model(torch.float64), self.x
                )
            if name in self.training_reached:
                # a branch eval mode computes and discards (a deep-supervision head): its
                # output joins the model's in training mode, where it is trained
                status = "warn"
                reason = (
                    "used in forward, but in eval mode nothing computed from it reaches the "
                    "output; in training mode it does (a training-only branch, such as a "
                    "deep-supervision head), where it gets gradients"
                )
        return CheckItem(
            subject=subject,
            status=status,
            metrics={
                "has_grad": grad is not None,
                "grad_norm": 0.0 if grad is not None else None,
                "frozen": False,
                "reason_kind": kind,
            },
            message=f"{what}: {reason}",
            details={"reason": reason},
        )


def _all_zero_weights(model: nn.Module) -> list[str]:
    """The names of the model's all-zero weight matrices and kernels (biases left out: a zero
    bias blocks no gradient)."""
    return [
        n
        for n, p in model.named_parameters()
        if p.dim() >= 2 and p.numel() and not bool(p.detach().any())
    ]


def _zero_weights_hint(zero_weights: list[str], name: str) -> str:
    """A sentence naming the model's all-zero weights (:func:`_all_zero_weights`), if any
    besides ``name``: a zero-initialized layer (a spatial transformer's localization head, a
    ViT's classification head) passes no gradient to the layers before it until it is trained."""
    zero = [n for n in zero_weights if n != name]
    if not zero:
        return ""
    listed = ", ".join(repr(n) for n in zero[:3]) + (
        f" and {len(zero) - 3} more" if len(zero) > 3 else ""
    )
    return (
        f"; the model has all-zero weights ({listed}), and a zero-initialized layer passes no "
        "gradient to the layers before it until it is trained"
    )
