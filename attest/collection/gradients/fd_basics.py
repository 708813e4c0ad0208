"""The pieces both finite-difference modes share (the settings, the result of one case, the
step choice, evaluation and vector-Jacobian products), apart from the dispatch in
:mod:`attest.collection.gradients.finite_differences`, so that the two modes
(:mod:`~attest.collection.gradients.full_jacobian`,
:mod:`~attest.collection.gradients.random_directions`) import them without importing the
dispatcher that imports them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

from attest.collection.nonfinite import NonFinite

DEFAULT_EPS = 1e-6
EPS_SWEEP: tuple[float, ...] = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9)

TensorFn = Callable[..., Sequence[torch.Tensor]]


class NotDifferentiable(Exception):
    """The function has no differentiable output for these inputs (integer/bool outputs,
    or outputs that do not depend on the inputs through autograd)."""


@dataclass(frozen=True)
class FiniteDifferenceSettings:
    """Tolerances and budgets of :func:`check_backward` (float64 throughout)."""

    directions: int = 4
    seed: int = 0
    eps: float = DEFAULT_EPS
    atol: float = 1e-6  # random directions: relative to ||J^T u||; full Jacobian: to max|J|
    rtol: float = 1e-3
    eps_sweep: tuple[float, ...] = EPS_SWEEP
    full_jacobian_max_numel: int = 64
    full_jacobian_max_out_numel: int = 1024
    # Output cotangents of the random-direction mode (one backward each), shared round-robin
    # by the ``directions`` input directions; ``directions`` gives one pair each. Outputs of at
    # most ``full_jacobian_max_out_numel`` elements always get one cotangent per direction:
    # with few outputs one cotangent's draw decides too much, and their backwards are cheap.
    cotangents: int = 1
    # Random directions: forward differences at the default step first, central ones and the
    # step sweep only where they fail (gradcheck's operators; see random_directions.py).
    one_sided: bool = False


@dataclass
class BackwardCheck:
    """The outcome of one backward check on one case (one set of inputs)."""

    mode: Literal["full_jacobian", "random_directions"]
    passed: bool
    max_rel_error: float
    eps: float
    default_eps_error: float
    directions: int
    seed: int
    atol: float
    rtol: float
    input_numel: int
    output_numel: int
    error_curve: dict[str, float | None] = field(default_factory=dict)
    torch_gradcheck: bool | None = None
    held_fixed: list[int] = field(default_factory=list)  # inputs autograd does not differentiate
    cotangents: int = 1  # output cotangents differentiated (backwards run); full Jacobian: n_out
    nonfinite_left_out: int = 0  # output elements NaN/inf at the inputs, held at 0 (no derivative)
    # "relative": steps scaled by each input's RMS; "absolute": steps of eps itself
    step_scale: Literal["relative", "absolute"] = "relative"
    # "forward": the verdict came from forward differences at the default step; "central":
    # from central ones (after forward ones failed, with ``forward_eps_error`` their error)
    difference: Literal["forward", "central"] = "central"
    forward_eps_error: float | None = None
    # the sides that were NaN or infinite (attest.collection.nonfinite): a failure whatever the
    # error says; None when both sides were finite
    nonfinite: NonFinite | None = None

    def metrics(self) -> dict[str, float | int | bool | str | None]:
        """The figures a policy can threshold, with names that say what they are."""
        out: dict[str, float | int | bool | str | None] = {
            "mode": self.mode,
            "max_rel_error": finite_or_none(self.max_rel_error),
            "eps": self.eps,
            "default_eps_error": finite_or_none(self.default_eps_error),
            "eps_swept": bool(self.error_curve),
            "step_scale": self.step_scale,
            "difference": self.difference,
            "directions": self.directions,
            "cotangents": self.cotangents,
            "seed": self.seed,
            "atol": self.atol,
            "rtol": self.rtol,
            "input_numel": self.input_numel,
            "output_numel": self.output_numel,
        }
        if self.forward_eps_error is not None:
            out["forward_eps_error"] = finite_or_none(self.forward_eps_error)
        if self.nonfinite is not None:
            out["nonfinite_side"] = self.nonfinite.label
        return out


def finite_or_none(value: float) -> float | None:
    """``value`` if finite, else None (evidence is strict JSON: no NaN or Infinity)."""
    return value if math.isfinite(value) else None


def _differentiable_outputs(
    fn: TensorFn, inputs: Sequence[torch.Tensor]
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[int]]:
    """Run ``fn`` with grad-requiring copies of ``inputs``; keep the outputs autograd tracks."""
    leaves = [x.detach().requires_grad_(True) for x in inputs]  # new leaves, shared storage
    with torch.enable_grad():
        outputs = fn(*leaves)
    keep = [
        i
        for i, out in enumerate(outputs)
        if isinstance(out, torch.Tensor)
        and (out.is_floating_point() or out.is_complex())
        and out.requires_grad
    ]
    if not keep:
        raise NotDifferentiable("no output depends differentiably on the inputs")
    return leaves, [outputs[i] for i in keep], keep


def _evaluate(fn: TensorFn, inputs: Sequence[torch.Tensor], keep: list[int]) -> list[torch.Tensor]:
    with torch.no_grad():
        outputs = fn(*inputs)
    return [outputs[i].detach() for i in keep]


def _vjp(
    outputs: list[torch.Tensor], leaves: list[torch.Tensor], cotangents: list[torch.Tensor]
) -> list[torch.Tensor]:
    grads = torch.autograd.grad(
        outputs, leaves, grad_outputs=cotangents, retain_graph=True, allow_unused=True
    )
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves, strict=True)]


class GaussianPool:
    """Seeded Gaussian directions, cut from one shared buffer.

    A fresh float64 Gaussian tensor per direction costs more than most operators themselves
    (the CPU generator is single-threaded), so one buffer is drawn with our own seeded
    generator (reproducible; the global RNG is left alone), grown when a larger tensor needs
    it, and each direction is a view cut at a seeded random offset. Entries within a
    direction are i.i.d. N(0, 1); the buffer is at least twice the largest request, so the
    directions of one case start at different offsets (shifted i.i.d. sequences are
    uncorrelated).
    """

    def __init__(self, seed: int, size: int = 1 << 10) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        self.offsets = random.Random(seed)  # where each direction is cut (no tensor call)
        self.buffer = self._draw(size)
        self._by_device: dict[torch.device, torch.Tensor] = {}

    def _draw(self, n: int) -> torch.Tensor:
        # Drawn in float32 (four times faster on CPU than float64) and widened exactly: a
        # direction only has to be Gaussian, not carry 53 random bits per entry.
        return torch.randn(n, generator=self.generator, dtype=torch.float32).double()

    def like(self, t: torch.Tensor) -> torch.Tensor:
        """A Gaussian tensor shaped like ``t`` (float64, on ``t``'s device)."""
        return self._cut(t.numel(), t.device).view(t.shape)

    def stacked(self, t: torch.Tensor, k: int) -> torch.Tensor:
        """``k`` Gaussian tensors shaped like ``t``, as one (k, *t.shape) tensor."""
        return self._cut(k * t.numel(), t.device).view(k, *t.shape)

    def _cut(self, n: int, device: torch.device) -> torch.Tensor:
        if 2 * n + 1024 > self.buffer.numel():
            extra = 2 * n + 1024 - self.buffer.numel()
            self.buffer = torch.cat([self.buffer, self._draw(extra)])
            self._by_device.clear()
        offset = self.offsets.randrange(self.buffer.numel() - n + 1)
        buffer = self._by_device.get(device)
        if buffer is None:
            buffer = self._by_device[device] = self.buffer.to(device)
        return buffer[offset : offset + n]


def rms_or_one(x: torch.Tensor) -> float:
    """The root mean square of ``x``, or 1 for an all-zero (or empty, or non-finite) tensor."""
    if x.numel() == 0:
        return 1.0
    rms = float(torch.linalg.vector_norm(x.detach(), dtype=torch.float64)) / math.sqrt(x.numel())
    return rms if rms > 0 and math.isfinite(rms) else 1.0


def _gaussian_like(t: torch.Tensor, pool: GaussianPool) -> torch.Tensor:
    return pool.like(t)


def _pick_eps(
    error_at: Callable[[float], float], settings: FiniteDifferenceSettings
) -> tuple[float, float, float, dict[str, float | None]]:
    """Error at the default step; if that fails, sweep the steps and keep the best one.

    Returns (chosen eps, its error, the default step's error, the error curve or {})."""
    default_error = error_at(settings.eps)
    if default_error <= settings.rtol:
        return settings.eps, default_error, default_error, {}
    curve: dict[str, float | None] = {f"{settings.eps:.0e}": finite_or_none(default_error)}
    best_eps, best_error = settings.eps, default_error
    for eps in settings.eps_sweep:
        if eps == settings.eps:
            continue
        error = error_at(eps)
        curve[f"{eps:.0e}"] = finite_or_none(error)
        if error < best_error or not math.isfinite(best_error):
            best_eps, best_error = eps, error
    return best_eps, best_error, default_error, curve
