"""Float64 3D convolutions in slabs of output depth, for ``second_order``'s products.

On the CPU, PyTorch runs a float64 3D convolution with its slow kernel (oneDNN has no float64),
which unfolds the whole input into one column buffer of ``C_in * kD * kH * kW`` rows by the
output's voxels: 5.8 GiB for UNETR's 32-channel 3x3x3 convolution at 96^3 (0.17 GiB for the
same convolution in float32, which oneDNN runs without one). Its backward and double backward
unfold again. Those buffers, one at a time on top of the double-backward graph, were a large
part of ``second_order``'s peak on the 3D models (issue 38: SwinUNETR's double backward at
64^3, ``feature_size=12``, rose 4.6 GiB over its 5.2 GiB graph).

:class:`ConvSlabs` (a ``TorchFunctionMode``, so that autograd records the slabs) computes such a
convolution as convolutions of slabs of the output's depth, each on the input rows it reads
(zero padding in depth added per slab), concatenated: each slab's column buffer is at most
:data:`COLUMN_BYTES` (512 MiB). Every output element is the same sum over the same input values and
weights as in one call (measured bit-identical in float64: the slow kernel sums each output
element over its column in the same order whatever the number of columns), and autograd
differentiates it through the same ``convolution`` derivative formulas (on slabs), plus
``narrow``, ``constant_pad_nd`` and ``cat``, which are linear: the products still exercise the
model's convolutions' double backward. What differs is only the order in which the weight's
gradient sums the slabs' parts (rounding, far below the check's tolerance). PyTorch has no
setting that bounds the slow kernel's buffer, hence this module.

Only float64 ``conv3d`` calls on the CPU with numeric padding whose buffer would exceed
:data:`COLUMN_BYTES` are split; every other call runs as it is.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

__all__ = ["COLUMN_BYTES", "ConvSlabs", "column_bytes", "conv3d_in_slabs"]

# The column buffer one slab may unfold. Slabs cost time: measured on two 24-channel 3x3x3
# convolutions at 64x32x32 (2 slabs each at 128 MiB, shared 2-core machine), the float64
# forward+backward took 1.2-1.3x and the double-backward graph's build 1.5-2x as long. So only
# buffers above 512 MiB are split (UNETR at 96^3: 5.8 GiB in 12 slabs; SwinUNETR's 32x32x64
# crop, at most 0.34 GiB, runs as it is).
COLUMN_BYTES = 512 << 20


def _triple(value: int | Sequence[int]) -> tuple[int, int, int]:
    if isinstance(value, int):
        return (value, value, value)
    out = tuple(int(v) for v in value)
    return (out[0], out[0], out[0]) if len(out) == 1 else (out[0], out[1], out[2])


def _out_side(side: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (side + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def column_bytes(
    x: torch.Tensor,
    weight: torch.Tensor,
    stride: tuple[int, int, int],
    padding: tuple[int, int, int],
    dilation: tuple[int, int, int],
) -> tuple[int, int]:
    """(bytes of the slow kernel's column buffer, output depth) for one ``conv3d`` call."""
    kernel = weight.shape[2:]
    sides = [
        _out_side(int(x.shape[2 + i]), int(kernel[i]), stride[i], padding[i], dilation[i])
        for i in range(3)
    ]
    rows = int(weight.shape[1]) * math.prod(int(k) for k in kernel)
    return rows * math.prod(sides) * int(x.shape[0]) * x.element_size(), sides[0]


def conv3d_in_slabs(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: tuple[int, int, int],
    padding: tuple[int, int, int],
    dilation: tuple[int, int, int],
    groups: int,
    slabs: int,
) -> torch.Tensor:
    """``F.conv3d`` computed as ``slabs`` convolutions of consecutive output depths."""
    depth, kernel = int(x.shape[2]), int(weight.shape[2])
    out_depth = _out_side(depth, kernel, stride[0], padding[0], dilation[0])
    bounds = [round(i * out_depth / slabs) for i in range(slabs + 1)]
    parts = []
    for first, end in itertools.pairwise(bounds):
        if end <= first:
            continue
        # the input rows, in padded coordinates, that output depths [first, end) read
        start = first * stride[0] - padding[0]
        stop = (end - 1) * stride[0] - padding[0] + dilation[0] * (kernel - 1) + 1
        lo, hi = max(start, 0), min(stop, depth)
        slab = x.narrow(2, lo, hi - lo)
        if lo > start or stop > hi:
            slab = F.pad(slab, (0, 0, 0, 0, lo - start, stop - hi))
        parts.append(
            F.conv3d(slab, weight, bias, stride, (0, padding[1], padding[2]), dilation, groups)
        )
    return torch.cat(parts, dim=2)


def _split(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """The call in slabs, or None when it runs as it is (see the module docstring)."""
    names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
    bound = dict(zip(names, args, strict=False)) | kwargs
    x, weight = bound.get("input"), bound.get("weight")
    padding = bound.get("padding", 0)
    if (
        not isinstance(x, torch.Tensor)
        or not isinstance(weight, torch.Tensor)
        or x.dtype != torch.float64
        or x.device.type != "cpu"
        or x.dim() != 5
        or weight.dim() != 5
        or isinstance(padding, str)
    ):
        return None
    stride, pad = _triple(bound.get("stride", 1)), _triple(padding)
    dilation = _triple(bound.get("dilation", 1))
    size, out_depth = column_bytes(x, weight, stride, pad, dilation)
    slabs = min(out_depth, -(-size // COLUMN_BYTES))
    if slabs <= 1:
        return None
    groups = int(bound.get("groups", 1))
    return conv3d_in_slabs(x, weight, bound.get("bias"), stride, pad, dilation, groups, slabs)


class ConvSlabs(TorchFunctionMode):
    """While active, large float64 ``conv3d`` calls run in slabs (see the module docstring);
    ``split`` counts the calls split (the tests read it).

    With ``model``, the mode is entered only when the model has an ``nn.Conv3d``: a torch
    function mode sees every call of the forward in Python, which costs time on small models
    that have nothing to split (a functional ``conv3d`` outside such a module then runs as it
    is, costing memory, never a verdict)."""

    def __init__(self, model: nn.Module | None = None) -> None:
        super().__init__()
        self.split = 0
        self.enabled = model is None or any(isinstance(m, nn.Conv3d) for m in model.modules())

    def __enter__(self) -> ConvSlabs:
        if self.enabled:
            super().__enter__()  # type: ignore[no-untyped-call]
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            super().__exit__(*exc)  # type: ignore[no-untyped-call]

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) == "conv3d":
            out = _split(args, kwargs)
            if out is not None:
                self.split += 1
                return out
        return func(*args, **kwargs)
