"""Gradients that are zero by construction, told from dead parameters by evidence.

A parameter the autograd graph uses can still get an exactly zero gradient because the
output does not depend on it anywhere: a bias added before a softmax or log-softmax along
the axis it shifts (softmax is shift-invariant), a bias shared by both branches of a
siamese distance (``enc(a) - enc(b)`` cancels it), an embedding row at ``padding_idx``
(PyTorch gives it no gradient by design). That is true of the architecture and worth a
warning with the reason, not a failed release; a dead ReLU unit or a layer behind an
all-zero one is zero only at these values, and a detached or unused parameter has no path
at all: those stay failures.

The evidence (:func:`structural_reasons`): at :data:`TRIALS` points where every parameter
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
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from attest.collection.capture.run import model_output_tensor

__all__ = ["TRIALS", "ZERO_RTOL", "structural_reasons"]

TRIALS = 3
# float64 rounding of a sum that cancels exactly is ~1e-16 of its terms: far below this
ZERO_RTOL = 1e-10
_SHIFT_INVARIANT = ("SoftmaxBackward", "LogSoftmaxBackward")
_NORMALIZING = ("NativeLayerNormBackward", "NativeGroupNormBackward", "NativeBatchNormBackward")


def _moved(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    rms = float(t.detach().abs().double().pow(2).mean().sqrt()) if t.numel() else 0.0
    scale = 2.0 * max(rms if math.isfinite(rms) else 0.0, 1.0)
    dtype = torch.complex128 if t.is_complex() else torch.float64
    noise = torch.randn(t.shape, generator=generator, dtype=dtype)
    return t.detach() + (noise * scale).to(t.device, t.dtype)


def _paths(output: torch.Tensor, parameter: torch.Tensor) -> tuple[int, set[str]]:
    """How many graph edges lead to ``parameter``, and the names of the nodes on the paths
    from the output down to it (only those: a softmax elsewhere in the graph says nothing)."""
    uses = 0
    reaches: dict[Any, bool] = {}
    names: set[str] = set()
    root = output.grad_fn
    if root is None:
        return 0, names
    # iterative post-order: a node reaches the parameter when a child is it or reaches it
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            hit = False
            for child, _ in node.next_functions:
                if child is None:
                    continue
                if getattr(child, "variable", None) is parameter:
                    uses += 1
                    hit = True
                elif reaches.get(child):
                    hit = True
            reaches[node] = hit
            if hit:
                names.add(type(node).__name__)
            continue
        if node in reaches:
            continue
        reaches[node] = False  # visiting
        stack.append((node, True))
        for child, _ in node.next_functions:
            if child is not None and child not in reaches and not hasattr(child, "variable"):
                stack.append((child, False))
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


def structural_reasons(
    build: Callable[[], nn.Module], x: torch.Tensor, candidates: list[str], seed: int
) -> dict[str, str]:
    """For each parameter of ``candidates`` whose gradient is zero by construction, why
    (see the module docstring); the others are left out. ``build`` returns a fresh float64
    model, ``x`` is the probe input (float64 when floating). One model and :data:`TRIALS`
    passes serve every candidate."""
    if not candidates:
        return {}
    generator = torch.Generator().manual_seed(seed + 7121)
    model = build()
    params = dict(model.named_parameters())
    alive = {n: params[n] for n in candidates if n in params and params[n].requires_grad}
    graph: dict[str, tuple[int, set[str]]] = {}
    move_input = True
    for trial in range(TRIALS):
        if not alive:
            return {}
        with torch.no_grad():
            for p in params.values():
                if p.is_floating_point() or p.is_complex():
                    p.copy_(_moved(p, generator))
        trainable = [(n, p) for n, p in params.items() if p.requires_grad]
        with torch.enable_grad():
            ran = _output(model, x, generator, move_input)
            if ran is None:
                return {}
            output, move_input = ran
            if not output.requires_grad:
                return {}
            cotangent = torch.randn(output.shape, generator=generator, dtype=torch.float64)
            grads = torch.autograd.grad(
                output,
                [p for _, p in trainable],
                cotangent.to(output.device, output.dtype),
                allow_unused=True,
                retain_graph=trial == 0,
            )
            if trial == 0:
                graph = {n: _paths(output, p) for n, p in alive.items()}
        by_name = dict(zip([n for n, _ in trainable], grads, strict=True))
        others = [g for n, g in by_name.items() if n not in candidates and g is not None]
        scale = math.sqrt(sum(float(g.abs().double().pow(2).sum()) for g in others))
        if not math.isfinite(scale) or scale == 0.0:
            return {}
        for name in list(alive):
            g = by_name.get(name)
            # no path at all is dead, not structural; a gradient above rounding is not zero
            if g is None or not float(g.abs().double().norm()) <= ZERO_RTOL * scale:
                del alive[name]
    return {n: _reason(model, n, x, *graph[n]) for n in alive}


def _output(
    model: nn.Module, x: torch.Tensor, generator: torch.Generator, move_input: bool
) -> tuple[torch.Tensor, bool] | None:
    """The model's output at a moved input (at ``x`` itself when the model cannot take a
    moved one: a floating input read as indices), and whether the input was moved."""
    if x.is_floating_point() and move_input:
        try:
            return model_output_tensor(model(_moved(x, generator))), True
        except Exception:
            pass  # ids cast inside the model: kept as they are
    try:
        return model_output_tensor(model(x)), False
    except Exception:
        return None


def _reason(model: nn.Module, name: str, x: torch.Tensor, uses: int, names: set[str]) -> str:
    evidence = (
        f"its gradient is zero at {TRIALS} random points (every parameter and the input moved, "
        "random output cotangents) while the others' is not"
    )
    padding = _padding_reason(model, name, x)
    if padding is not None:
        mechanism = padding
    elif uses >= 2:
        mechanism = (
            f"it is used {uses} times and the contributions cancel (a parameter shared by "
            "both branches of a difference, as in a siamese distance)"
        )
    elif any(n.startswith(_SHIFT_INVARIANT) for n in names):
        mechanism = (
            "it shifts every input of a softmax/log-softmax alike, and softmax is "
            "shift-invariant (a bias before a softmax)"
        )
    elif any(n.startswith(_NORMALIZING) for n in names):
        mechanism = "it shifts every input of a normalization alike, which subtracts their mean"
    else:
        mechanism = "the output is invariant to it"
    return f"zero by construction: {mechanism}; {evidence}"
