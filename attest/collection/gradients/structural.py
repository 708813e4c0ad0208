"""Gradients that are zero by construction, told from dead parameters by evidence.

A parameter the autograd graph uses can still get an exactly zero gradient because the
output does not depend on it anywhere: a bias added before a softmax or log-softmax along
the axis it shifts (softmax is shift-invariant), a bias shared by both branches of a
siamese distance (``enc(a) - enc(b)`` cancels it), an embedding row at ``padding_idx``
(PyTorch gives it no gradient by design). That is true of the architecture and worth a
warning with the reason, not a failed release; a dead ReLU unit or a layer behind an
all-zero one is zero only at these values, and a detached or unused parameter has no path
at all: those stay failures.

The evidence (:func:`structural_reason`): at :data:`TRIALS` points where every parameter
and the floating input are moved at random (Gaussian, twice each tensor's RMS and at least 2:
far enough to revive a dead unit or to lift an all-zero layer, which invariance by
construction survives), the
gradient of ``<output, u>`` for a random cotangent ``u`` is zero for the parameter
(at most :data:`ZERO_RTOL` of the other parameters' gradient: rounding) while the other
parameters' is not. The mechanism is then named from the autograd graph: the number of
uses of the parameter (several: their contributions cancel), a softmax or log-softmax
downstream (shift invariance), or an embedding with ``padding_idx`` whose probe ids are all
padding. Nothing is decided by the parameter's name.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from attest.collection.capture.run import model_output_tensor

__all__ = ["TRIALS", "ZERO_RTOL", "structural_reason"]

TRIALS = 3
# float64 rounding of a sum that cancels exactly is ~1e-16 of its terms: far below this
ZERO_RTOL = 1e-10
_SHIFT_INVARIANT = ("SoftmaxBackward", "LogSoftmaxBackward")


def _moved(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    rms = float(t.detach().double().pow(2).mean().sqrt()) if t.numel() else 0.0
    scale = 2.0 * max(rms if math.isfinite(rms) else 0.0, 1.0)
    noise = torch.randn(t.shape, generator=generator, dtype=torch.float64)
    return t.detach() + (noise * scale).to(t.device, t.dtype)


def _uses(output: torch.Tensor, parameter: torch.Tensor) -> tuple[int, set[str]]:
    """How many graph edges lead to ``parameter``, and the names of the nodes on the paths
    from the output down to it."""
    uses = 0
    seen: set[Any] = set()
    stack = [output.grad_fn] if output.grad_fn is not None else []
    names: set[str] = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        for child, _ in node.next_functions:
            if child is None:
                continue
            if getattr(child, "variable", None) is parameter:
                uses += 1
            else:
                stack.append(child)
    return uses, names


def _padding_reason(model: nn.Module, name: str, x: torch.Tensor) -> str | None:
    owner, _, leaf = name.rpartition(".")
    module = model.get_submodule(owner) if owner else model
    if not isinstance(module, nn.Embedding) or leaf != "weight" or module.padding_idx is None:
        return None
    if not bool((x == module.padding_idx).all()):
        return None
    return (
        f"nn.Embedding(padding_idx={module.padding_idx}): PyTorch gives the padding row no "
        "gradient by design, and every probe id is the padding index"
    )


def structural_reason(build: Any, x: torch.Tensor, name: str, seed: int) -> str | None:
    """Why parameter ``name`` of the float64 model ``build()`` returns has a gradient that
    is zero by construction, or None when the evidence does not show it (see the module
    docstring). ``x`` is the probe input (float64 when floating)."""
    generator = torch.Generator().manual_seed(seed + 7121)
    model = build()
    params = dict(model.named_parameters())
    target = params.get(name)
    if target is None:
        return None
    padding = _padding_reason(model, name, x)
    uses, names = 0, set[str]()
    move_input = True
    for trial in range(TRIALS):
        with torch.no_grad():
            for p in params.values():
                if p.is_floating_point():
                    p.copy_(_moved(p, generator))
        xt = _moved(x, generator) if x.is_floating_point() and move_input else x
        trainable = [p for p in params.values() if p.requires_grad]
        with torch.enable_grad():
            try:
                output = model_output_tensor(model(xt))
            except Exception:
                if xt is x:
                    return None
                # a floating input the model reads as indices (ids cast inside): kept as is
                move_input = False
                output = model_output_tensor(model(x))
            if not output.requires_grad:
                return None
            cotangent = torch.randn(output.shape, generator=generator, dtype=torch.float64)
            grads = torch.autograd.grad(
                output,
                trainable,
                cotangent.to(output.device, output.dtype),
                allow_unused=True,
                retain_graph=trial == 0,
            )
            if trial == 0:
                uses, names = _uses(output, target)
        mine = [g for p, g in zip(trainable, grads, strict=True) if p is target]
        others = [g for p, g in zip(trainable, grads, strict=True) if p is not target]
        if not mine or mine[0] is None:
            return None  # no path at all: dead, not structural
        scale = math.sqrt(sum(float(g.double().pow(2).sum()) for g in others if g is not None))
        mine_norm = float(mine[0].double().norm())
        if not math.isfinite(scale) or scale == 0.0 or mine_norm > ZERO_RTOL * scale:
            return None
    evidence = (
        f"its gradient is zero at {TRIALS} random points (every parameter and the input moved, "
        "random output cotangents) while the others' is not"
    )
    if padding is not None:
        mechanism = padding
    elif uses >= 2:
        mechanism = (
            f"it is used {uses} times and the contributions cancel (a parameter shared by "
            "both branches of a difference, as in a siamese distance)"
        )
    elif names & {n + str(k) for n in _SHIFT_INVARIANT for k in range(2)}:
        mechanism = (
            "it shifts every input of a softmax/log-softmax alike, and softmax is "
            "shift-invariant (a bias before a softmax)"
        )
    else:
        mechanism = "the output is invariant to it"
    return f"zero by construction: {mechanism}; {evidence}"
