"""What a capture produces and what it differentiates: :class:`OpRecord` (one ATen call of the
probe run) and :func:`target_scalar` (F(x) per example).

Data types and a pure function only, importing no collection module but the spec: the
capture, the profiler's measures and :mod:`attest.collection.context` (which re-exports both
names) import them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from attest.spec import LoadedSpec
from attest.spec.model_call import class_scalar

__all__ = ["OpRecord", "target_scalar"]


@dataclass
class OpRecord:
    """One ATen call seen in a forward pass of the probe batch (filled by the profiler's capture).

    ``args``/``kwargs`` hold the call's arguments with tensors detached and cloned, in the
    dtype they were called with, so a check can re-run the operator alone
    (``record.func(*args, **kwargs)``), e.g. in float64 for gradcheck.
    """

    id: int
    op: str  # ATen overload name, e.g. "aten.convolution.default"
    module: str  # module path that called it, "" for the root module
    func: Any  # torch._ops.OpOverload
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output_shapes: list[list[int]]
    output_dtypes: list[str]


def target_scalar(
    output: torch.Tensor, spec: LoadedSpec, labels: torch.Tensor | None = None
) -> torch.Tensor:
    """F(x) per example, the quantity IG and gradients differentiate: shape (N,).

    ``output[:, k]`` summed over any further dims (for segmentation, the class-k channel),
    where k is the spec's int target, the per-example argmax of the output, or the
    per-example label from the probe's "target".
    """
    if spec.target == "label" and labels is None:
        labels = spec.labels
    return class_scalar(output, spec.target, labels)
