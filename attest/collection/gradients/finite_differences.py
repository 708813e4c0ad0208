"""Checking a backward against central finite differences in float64.

One engine serves the ``gradcheck`` (every ATen operator of the forward pass) and
``custom_ops`` (every ``torch.autograd.Function``) checks. Given a function of a few float64
tensors, :func:`check_backward` compares its backward with finite differences in one of two
modes:

``full_jacobian``
    when the inputs are small (at most ``full_jacobian_max_numel`` elements in all, and the
    outputs at most ``full_jacobian_max_out_numel``): ``torch.autograd.gradcheck`` in slow
    mode gives the verdict, element by element with its ``atol``/``rtol`` semantics; the
    Jacobians are also built here once, to report the error magnitude
    (``max_rel_error = max|J_analytic - J_numeric| / max|J_numeric|``) which gradcheck does
    not return.

``random_directions``
    otherwise: ``K`` seeded Gaussian input directions ``v_k`` (each input's part scaled by
    that input's RMS, so steps are relative to its magnitude) and ``C`` seeded Gaussian output
    cotangents ``u`` (``cotangents``, default 1; direction ``k`` uses ``u_(k mod C)``). One
    backward per cotangent gives ``J^T u``, hence ``a = <J^T u, v_k>`` for every direction
    (torch's fast gradcheck likewise checks ``u^T J v`` with one vjp per cotangent); central
    differences give ``n = <u, f(x + eps v_k) - f(x - eps v_k)> / (2 eps)``. Per direction
    ``rel_error = |a - n| / max(|a|, |n|, (atol / rtol) * sigma)`` where ``sigma`` is the
    standard deviation of ``a`` over the draw of ``v`` (the RMS-weighted norm of ``J^T u``);
    the floor guards against the rare direction where ``a`` is near zero by cancellation.
    The case passes when every direction's ``rel_error <= rtol``. With
    ``settings.one_sided`` (gradcheck's default) forward differences are tried first at the
    default step and decide the case when they pass (``difference`` says which did).

    This is hand-written rather than ``gradcheck(fast_mode=True)`` because fast mode draws
    exactly one (u, v) pair per input/output from an internal generator with a fixed seed:
    it takes no direction count and no seed, and returns only a boolean, while the evidence
    must record K, the seed and the error magnitude.

When the default step fails, the step is swept over several orders of magnitude (too large a
step fails by truncation, too small by rounding, a step across a kink by the jump): the step
with the smallest error is chosen and the whole error curve is recorded. A backward that is
wrong (by 2 %, say) fails at every step.

Steps are relative to each input's RMS in the random-direction mode and absolute (torch's
convention) in the full-Jacobian mode. Neither suits every input: a sigmoid of activations of
RMS 1e-15 (a squeeze-and-excitation gate deep in an untrained network) needs absolute steps,
since relative ones move its output (0.5 + x/4) by less than the output's rounding; a ReLU of
such activations needs relative ones, since every absolute step crosses its kink. A case that
fails at every step of its mode's scaling is swept again with the other scaling
(``step_scale`` records which one the verdict used); a wrong backward fails under both.

Complex inputs and outputs (FFTs, complex weights) are checked as their (real, imaginary)
pairs, and output elements that are NaN or infinite at the checked inputs (the ``-inf`` of an
attention mask) are held at 0, since they have no derivative to compare.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import torch

from attest.collection.gradients.fd_basics import (
    DEFAULT_EPS,
    EPS_SWEEP,
    BackwardCheck,
    FiniteDifferenceSettings,
    GaussianPool,
    NotDifferentiable,
    TensorFn,
    _differentiable_outputs,
    _gaussian_like,
    finite_or_none,
    rms_or_one,
)
from attest.collection.gradients.full_jacobian import full_jacobian_check
from attest.collection.gradients.random_directions import random_direction_check

__all__ = [
    "DEFAULT_EPS",
    "EPS_SWEEP",
    "BackwardCheck",
    "FiniteDifferenceSettings",
    "GaussianPool",
    "NotDifferentiable",
    "check_backward",
    "describe",
    "finite_or_none",
    "rms_or_one",
]


def check_backward(
    fn: TensorFn,
    inputs: Sequence[torch.Tensor],
    settings: FiniteDifferenceSettings,
    *,
    mode: Literal["auto", "full_jacobian", "random_directions"] = "auto",
    hold_unused: bool = False,
    pool: GaussianPool | None = None,
) -> BackwardCheck:
    """Check ``fn``'s backward against finite differences at ``inputs`` (float64 tensors):
    central ones, or forward ones first with ``settings.one_sided`` (random directions only).

    ``fn`` takes the tensors of ``inputs`` positionally and returns a sequence of tensors;
    only its floating outputs that autograd tracks are compared. Raises
    :class:`NotDifferentiable` when there are none.

    With ``hold_unused``, inputs that autograd does not connect to any output (batch-norm
    running statistics, say) are held fixed rather than perturbed, and listed in
    ``held_fixed``; without it, a missing gradient counts as zero (and fails if the output
    depends on that input). ``pool`` shares one seeded Gaussian buffer across the calls of
    a check run (see :class:`GaussianPool`); by default each call seeds its own.
    """
    if not inputs:
        raise NotDifferentiable("no floating-point input to differentiate")
    inputs = [x.detach() for x in inputs]
    if any(x.is_complex() for x in inputs):
        fn, inputs = _as_real(fn, inputs)
    leaves, outputs, keep = _differentiable_outputs(fn, inputs)
    if any(o.is_complex() for o in outputs):  # of real inputs (an rfft)
        fn, inputs = _as_real(fn, inputs)
        leaves, outputs, keep = _differentiable_outputs(fn, inputs)
    left_out = 0
    with torch.no_grad():  # one sum per output: the exact mask only when one is not finite
        finite = math.isfinite(sum(float(o.sum()) for o in outputs))
    if not finite:
        base: list[torch.Tensor | None] = [None] * (max(keep) + 1)
        for i, out in zip(keep, outputs, strict=True):
            base[i] = out.detach()
        fn, left_out = _finite_part(fn, base)
        if left_out:
            leaves, outputs, keep = _differentiable_outputs(fn, inputs)
    generator = pool if pool is not None else GaussianPool(settings.seed)  # grows on demand
    first_u = [_gaussian_like(o, generator) for o in outputs]
    raw = torch.autograd.grad(outputs, leaves, first_u, retain_graph=True, allow_unused=True)
    held: list[int] = []
    if hold_unused:
        held = [i for i, g in enumerate(raw) if g is None]
        if len(held) == len(inputs):
            raise NotDifferentiable("autograd connects no input to the outputs")
        if held:
            fn, inputs, leaves = _hold_fixed(fn, inputs, leaves, held)
            raw = tuple(g for i, g in enumerate(raw) if i not in held)
    first_g = [torch.zeros_like(x) if g is None else g for g, x in zip(raw, leaves, strict=True)]
    n_in = sum(x.numel() for x in inputs)
    n_out = sum(o.numel() for o in outputs)
    if mode == "auto":
        small = (
            n_in <= settings.full_jacobian_max_numel
            and n_out <= settings.full_jacobian_max_out_numel
        )
        mode = "full_jacobian" if small else "random_directions"
    if mode == "full_jacobian":
        check = full_jacobian_check(fn, inputs, leaves, outputs, keep, settings)
        if not check.passed:
            check = _better(check, _relative_full_jacobian(fn, inputs, keep, settings))
    else:
        check = random_direction_check(
            fn, inputs, leaves, outputs, keep, settings, generator, (first_u, first_g)
        )
        if not check.passed and any(rms_or_one(x) != 1.0 for x in inputs):
            retry = random_direction_check(
                fn, inputs, leaves, outputs, keep, settings, generator, (first_u, first_g), True
            )
            check = _better(check, retry)
    check.held_fixed = held
    check.nonfinite_left_out = left_out
    return check


def _as_real(fn: TensorFn, inputs: list[torch.Tensor]) -> tuple[TensorFn, list[torch.Tensor]]:
    """``fn`` as a function of real tensors to real tensors: a complex input is taken as its
    (real, imaginary) pairs (``torch.view_as_real``) and a complex output returned as them.

    Autograd's gradient of a real loss with respect to ``z = x + iy`` is ``dL/dx + i dL/dy``,
    so the real view's gradient is exactly the pair ``(dL/dx, dL/dy)`` that central
    differences in ``x`` and ``y`` estimate: complex operators (FFTs, ``torch.complex``,
    complex products) are checked by the same real machinery.
    """
    complex_in = {i for i, x in enumerate(inputs) if x.is_complex()}

    # stack/complex rather than the view_as_* views: their backward needs cotangents of even
    # storage offset, and the seeded cotangents are slices of a shared buffer
    def real_fn(*xs: torch.Tensor) -> Sequence[torch.Tensor]:
        args = [
            torch.complex(x[..., 0], x[..., 1]) if i in complex_in else x for i, x in enumerate(xs)
        ]
        return [
            torch.stack([o.real, o.imag], dim=-1)
            if isinstance(o, torch.Tensor) and o.is_complex()
            else o
            for o in fn(*args)
        ]

    real_inputs = [
        torch.view_as_real(x.resolve_conj()).clone() if i in complex_in else x
        for i, x in enumerate(inputs)
    ]
    return real_fn, real_inputs


def _finite_part(fn: TensorFn, base: Sequence[torch.Tensor | None]) -> tuple[TensorFn, int]:
    """``fn`` with its output elements that are NaN or infinite in ``base`` (its outputs at
    the inputs checked) held at 0, and their count.

    Such an element (the ``-inf`` a padding mask writes into attention scores, say) has no
    derivative to check: central differences give ``inf - inf``, NaN, whatever the backward.
    Held at 0 (``torch.where`` with the mask taken at the inputs) it has derivative 0 both
    ways, and every finite element is checked as before. Its backward still multiplies the
    zero cotangent by its own infinite derivative (``log`` at 0: ``0 / 0``), so the input
    gradients are held finite too (:class:`_HeldFinite`): a non-finite gradient entry of such
    a case is taken as coming from the elements held at 0, where the numeric side sees a
    derivative of 0 (docs/gradient-checks.md, "Non-finite values").
    """
    masks = {
        i: ~torch.isfinite(o)
        for i, o in enumerate(base)
        if isinstance(o, torch.Tensor) and o.is_floating_point()
    }
    masks = {i: m for i, m in masks.items() if bool(m.any())}
    if not masks:
        return fn, 0

    def finite_fn(*xs: torch.Tensor) -> Sequence[torch.Tensor]:
        outs = list(fn(*(_HeldFinite.apply(x) for x in xs)))  # type: ignore[no-untyped-call]
        for i, bad in masks.items():
            outs[i] = torch.where(bad, 0.0, outs[i])
        return outs

    return finite_fn, sum(int(m.sum()) for m in masks.values())


class _HeldFinite(torch.autograd.Function):
    """The identity, whose backward holds non-finite gradient entries at 0 (for
    :func:`_finite_part`); written with differentiable operators, so that double backward
    (``second_order``) goes through it."""

    generate_vmap_rule = True  # the full-Jacobian mode batches its evaluations with vmap

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        pass

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return torch.where(torch.isfinite(grad), grad, torch.zeros_like(grad))


def _better(first: BackwardCheck, second: BackwardCheck | None) -> BackwardCheck:
    """The passing check, else the one with the smaller error (``first`` on a tie or without
    ``second``); its error curve is that of the step scaling its verdict used."""
    if second is None:
        return first
    if (second.passed, -second.max_rel_error) > (first.passed, -first.max_rel_error):
        return second
    return first


def _power_of_two(value: float) -> float:
    """The power of two nearest to ``value`` (> 0): dividing and multiplying by it is exact."""
    return 2.0 ** round(math.log2(value))


def _relative_full_jacobian(
    fn: TensorFn,
    inputs: Sequence[torch.Tensor],
    keep: list[int],
    settings: FiniteDifferenceSettings,
) -> BackwardCheck | None:
    """The full-Jacobian check with steps relative to each input's RMS, or None when every
    input's RMS is already about 1. The function is reparametrized, ``y = x / s`` with ``s``
    the power of two nearest each input's RMS, so ``y * s`` is ``x`` exactly and absolute steps
    in ``y`` are relative steps in ``x``."""

    scales = [_power_of_two(rms_or_one(x)) for x in inputs]
    if all(s == 1.0 for s in scales):
        return None

    def scaled(*ys: torch.Tensor) -> Sequence[torch.Tensor]:
        return fn(*(y * s for y, s in zip(ys, scales, strict=True)))

    ys = [x / s for x, s in zip(inputs, scales, strict=True)]
    leaves, outputs, kept = _differentiable_outputs(scaled, ys)
    if kept != keep:
        return None
    check = full_jacobian_check(scaled, ys, leaves, outputs, kept, settings)
    check.step_scale = "relative"
    return check


def _hold_fixed(
    fn: TensorFn, inputs: list[torch.Tensor], leaves: list[torch.Tensor], held: list[int]
) -> tuple[TensorFn, list[torch.Tensor], list[torch.Tensor]]:
    """``fn`` of the remaining inputs, the held ones fixed at their values."""
    free = [i for i in range(len(inputs)) if i not in held]
    fixed = list(inputs)

    def restricted(*xs: torch.Tensor) -> Sequence[torch.Tensor]:
        full = list(fixed)
        for i, x in zip(free, xs, strict=True):
            full[i] = x
        return fn(*full)

    return restricted, [inputs[i] for i in free], [leaves[i] for i in free]


def describe(check: BackwardCheck) -> str:
    """One sentence on a check's outcome, for the evidence item's message."""
    how = (
        f"full Jacobian ({check.input_numel} input elements)"
        if check.mode == "full_jacobian"
        else f"{check.directions} random directions (seed {check.seed})"
    )
    swept = f"; step swept, chose eps={check.eps:.0e}" if check.error_curve else ""
    if check.step_scale != ("absolute" if check.mode == "full_jacobian" else "relative"):
        swept += (  # the retry with the other step scaling gave the verdict
            "; absolute steps (relative ones are lost in the output's rounding)"
            if check.step_scale == "absolute"
            else "; steps relative to each input's RMS (absolute ones are out of scale with it)"
        )
    if check.nonfinite_left_out:
        swept += (
            f"; {check.nonfinite_left_out} output element(s) NaN or infinite at these inputs "
            "left out (no derivative there)"
        )
    verdict = "agrees with" if check.passed else "DISAGREES with"
    if check.nonfinite is not None:  # no error to quote: name the side instead
        return (
            f"backward {verdict} {check.difference} differences in float64 over {how}: "
            f"{check.nonfinite.describe()} (analytic: the backward; numeric: the finite "
            f"differences){swept}"
        )
    return (
        f"backward {verdict} {check.difference} differences in float64 over {how}: "
        f"max relative error {check.max_rel_error:.2e} (rtol {check.rtol:.0e}){swept}"
    )
