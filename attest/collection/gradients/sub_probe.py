"""A smaller probe for ``second_order``: the first examples and, for images and volumes, their
central crop.

A float64 double backward is ``second_order``'s whole cost, in time and memory (its graph holds
several times the float64 activations), and on a 64^3 volume it also meets many ReLU
pre-activations, so a finite-difference step crosses kinks there and the step sweep pays a
float64 gradient per step tried. What the check verifies, that every operator's
double-backward formula agrees with differences of its gradient, does not depend on the
input's extent as long as the same operators run: a fully convolutional network runs the same
convolutions, normalizations and activations on half of each spatial side, at 1/2^k of the
cost for k spatial dimensions.

So when the probe is spatial (``N x C x S1 x ... x Sk`` with every side at least
:data:`MIN_SIDE`) and ``second_order_crop`` is on, the products run on the central half of
each side, or, when that crop cannot stand for the probe, on the central half of fewer sides
(:func:`crop_shapes`, smallest volume first: the half of all but one side, then of one side).
A network that needs each side divisible by its total downsampling (SwinUNETR: 32) refuses
the half of a 64^3 probe's every side, but runs 64x32x32 with the same operators: a quarter
of the volume, where the double backward's graph was 6.35 times the bare process's peak memory
on the whole probe (issue 38). The crop stands for the probe only when the model runs on it and calls the same
ATen operators as on the probe (compared by a forward of each, without autograd, under a
dispatch mode that records operator names): a model that pads, interpolates or branches on the
input size calls other operators and keeps the whole extent, as does one that refuses the size
(a ViT's fixed position embedding). Labels that are maps of the input (segmentation) are
cropped with it; per-example labels stay as they are.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from attest.collection.capture.run import model_output_tensor

__all__ = [
    "MIN_SIDE",
    "crop_input",
    "crop_labels",
    "crop_shape",
    "crop_shapes",
    "operator_names",
    "same_operators",
]

# Sides shorter than this are not cropped: the examples' small images gain nothing and a
# network's downsampling leaves too little of a short side.
MIN_SIDE = 32


def crop_shape(x: torch.Tensor, enabled: bool) -> tuple[int, ...] | None:
    """The central crop's spatial sides for probe ``x``, or None when it is not cropped."""
    if not enabled or not x.is_floating_point() or x.dim() < 3:
        return None
    sides = tuple(int(s) for s in x.shape[2:])
    if min(sides) < MIN_SIDE:
        return None
    return tuple(s // 2 for s in sides)


def crop_shapes(x: torch.Tensor, enabled: bool) -> list[tuple[int, ...]]:
    """The crops to try for probe ``x``, smallest volume first: every spatial side halved
    (:func:`crop_shape`), then all but one halved, and so on down to one side halved; within
    a count, the earlier sides halved first. Empty when :func:`crop_shape` is None."""
    full = crop_shape(x, enabled)
    if full is None:
        return []
    sides = tuple(int(s) for s in x.shape[2:])
    shapes: list[tuple[int, ...]] = []
    for count in range(len(sides), 0, -1):
        for halved in itertools.combinations(range(len(sides)), count):
            shape = tuple(
                h if i in halved else s for i, (s, h) in enumerate(zip(sides, full, strict=True))
            )
            if shape not in shapes:
                shapes.append(shape)
    return shapes


def _central(t: torch.Tensor, sides: tuple[int, ...]) -> torch.Tensor:
    k = len(sides)
    out = t
    for axis, side in enumerate(sides, start=t.dim() - k):
        start = (t.shape[axis] - side) // 2
        out = out.narrow(axis, start, side)
    return out.contiguous()


def crop_input(x: torch.Tensor, sides: tuple[int, ...]) -> torch.Tensor:
    """The central ``sides`` of ``x``'s spatial dimensions (every dimension after the second)."""
    return _central(x, sides)


def crop_labels(
    labels: torch.Tensor | None, x: torch.Tensor, sides: tuple[int, ...]
) -> tuple[bool, torch.Tensor | None]:
    """(croppable, labels for the crop): label maps with the input's trailing spatial shape are
    cropped with it, per-example labels (at most one dimension) are kept, any other shape
    cannot follow the crop."""
    if labels is None or labels.dim() <= 1:
        return True, labels
    k = len(sides)
    if labels.dim() >= 1 + k and tuple(labels.shape[-k:]) == tuple(x.shape[-k:]):
        return True, _central(labels, sides)
    return False, labels


class _OperatorNames(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records the ATen overloads a forward calls (names only, nothing kept)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.names: set[str] = set()

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        self.names.add(str(func))
        return func(*args, **(kwargs or {}))


def operator_names(model: nn.Module, x: torch.Tensor) -> set[str]:
    """The ATen operators one forward of ``x`` calls (no autograd graph is built)."""
    recorder = _OperatorNames()
    with torch.no_grad(), recorder:
        model_output_tensor(model(x))
    return recorder.names


def same_operators(
    model: nn.Module, x: torch.Tensor, crop: torch.Tensor, on_probe: set[str] | None = None
) -> str | None:
    """None when ``crop`` runs the operators ``x`` runs; else why it cannot stand for it.
    ``on_probe``: :func:`operator_names` of ``x``, when the caller has it (several crops of
    one probe are tried)."""
    try:
        on_crop = operator_names(model, crop)
    except Exception as exc:  # a model that refuses the size: keep the whole extent
        return f"the model does not run on the crop ({type(exc).__name__}: {exc})"
    if on_probe is None:
        on_probe = operator_names(model, x)
    if on_crop == on_probe:
        return None
    extra, missing = sorted(on_crop - on_probe), sorted(on_probe - on_crop)
    return (
        "the crop runs other operators than the probe"
        + (f" (also {', '.join(extra[:3])})" if extra else "")
        + (f" (not {', '.join(missing[:3])})" if missing else "")
    )
