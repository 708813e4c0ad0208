"""The full-Jacobian mode of :func:`attest.collection.gradients.finite_differences.check_backward`.

For small inputs (see :class:`~attest.collection.gradients.finite_differences.FiniteDifferenceSettings`):
``torch.autograd.gradcheck`` in slow mode gives the verdict, element by element; the analytic
Jacobian (one batched backward over the identity cotangents) and the central-difference one
(two ``torch.func.vmap`` calls per input) are also built here, once per step, to report
``max_rel_error = max|J_analytic - J_numeric| / max|J_numeric|``, which gradcheck does not
return. Both fall back to plain loops for operators vmap cannot batch.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from attest.collection.gradients.fd_basics import (
    BackwardCheck,
    FiniteDifferenceSettings,
    TensorFn,
    _evaluate,
    _pick_eps,
    _vjp,
)
from attest.collection.nonfinite import nonfinite

__all__ = ["full_jacobian_check"]


def _analytic_jacobian(
    outputs: list[torch.Tensor], leaves: list[torch.Tensor], n_in: int, n_out: int
) -> torch.Tensor:
    """(n_out, n_in): one batched backward over the identity cotangents (vmap), or one
    backward per output element for operators without a batching rule."""
    eye = torch.eye(n_out, dtype=torch.float64, device=outputs[0].device)
    cotangents = list(torch.split(eye, [o.numel() for o in outputs], dim=1))
    batched = [c.reshape(n_out, *o.shape) for c, o in zip(cotangents, outputs, strict=True)]
    try:
        with warnings.catch_warnings():  # vmap's "no batching rule, falling back" notice
            warnings.simplefilter("ignore")
            grads = torch.autograd.grad(
                outputs,
                leaves,
                batched,
                retain_graph=True,
                allow_unused=True,
                is_grads_batched=True,
            )
        columns = [
            torch.zeros(n_out, x.numel(), dtype=torch.float64)
            if g is None
            else g.reshape(n_out, -1).cpu()
            for g, x in zip(grads, leaves, strict=True)
        ]
        return torch.cat(columns, dim=1)
    except Exception:  # any vmap limitation: fall back to the plain loop
        pass
    analytic = torch.zeros(n_out, n_in, dtype=torch.float64)
    for row in range(n_out):
        grads_row = _vjp(outputs, leaves, [b[row] for b in batched])
        analytic[row] = torch.cat([g.reshape(-1).to("cpu", torch.float64) for g in grads_row])
    return analytic


def _jacobians(
    fn: TensorFn,
    inputs: Sequence[torch.Tensor],
    leaves: list[torch.Tensor],
    outputs: list[torch.Tensor],
    keep: list[int],
) -> tuple[torch.Tensor, Callable[[float], torch.Tensor]]:
    """The analytic Jacobian (backward of every output element) and a numeric one per step."""
    n_in = sum(x.numel() for x in inputs)
    n_out = sum(o.numel() for o in outputs)
    analytic = _analytic_jacobian(outputs, leaves, n_in, n_out)

    def numeric(eps: float) -> torch.Tensor:
        batched = _numeric_jacobian_batched(fn, inputs, keep, eps)
        return batched if batched is not None else numeric_loop(eps)

    def numeric_loop(eps: float) -> torch.Tensor:
        jac = torch.zeros(n_out, n_in, dtype=torch.float64)
        col = 0
        for i, x in enumerate(inputs):
            for e in range(x.numel()):
                step = torch.zeros(x.shape, dtype=x.dtype, device=x.device)
                step.view(-1)[e] = eps
                plus = list(inputs)
                minus = list(inputs)
                plus[i] = x + step
                minus[i] = x - step
                f_plus = _evaluate(fn, plus, keep)
                f_minus = _evaluate(fn, minus, keep)
                jac[:, col] = torch.cat(
                    [
                        ((p - m) / (2 * eps)).reshape(-1).cpu()
                        for p, m in zip(f_plus, f_minus, strict=True)
                    ]
                )
                col += 1
        return jac

    return analytic, numeric


def _numeric_jacobian_batched(
    fn: TensorFn, inputs: Sequence[torch.Tensor], keep: list[int], eps: float
) -> torch.Tensor | None:
    """The central-difference Jacobian (n_out, n_in) with every column's two evaluations
    batched by ``torch.func.vmap`` (two calls per input instead of two per element), or None
    when the operator cannot be batched. The perturbed inputs are the loop's exactly
    (``x`` plus or minus ``eps`` in one element)."""
    columns = []
    try:
        for i, x in enumerate(inputs):
            n = x.numel()
            steps = torch.eye(n, dtype=x.dtype, device=x.device).mul_(eps).reshape(n, *x.shape)

            def at(xi: torch.Tensor, i: int = i) -> tuple[torch.Tensor, ...]:
                args = list(inputs)
                args[i] = xi
                outs = fn(*args)
                return tuple(outs[k] for k in keep)

            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # vmap's "no batching rule, falling back"
                plus = torch.func.vmap(at)(x + steps)
                minus = torch.func.vmap(at)(x - steps)
            columns.append(
                torch.cat(
                    [
                        ((p - m) / (2 * eps)).reshape(n, -1).to("cpu", torch.float64)
                        for p, m in zip(plus, minus, strict=True)
                    ],
                    dim=1,
                ).T
            )
    except Exception:  # any vmap limitation: the caller falls back to the plain loop
        return None
    return torch.cat(columns, dim=1)


def full_jacobian_check(
    fn: TensorFn,
    inputs: Sequence[torch.Tensor],
    leaves: list[torch.Tensor],
    outputs: list[torch.Tensor],
    keep: list[int],
    settings: FiniteDifferenceSettings,
) -> BackwardCheck:
    """The full-Jacobian check of ``fn`` at ``inputs`` (see the module docstring)."""
    analytic, numeric = _jacobians(fn, inputs, leaves, outputs, keep)
    scales: dict[float, float] = {}
    # The numeric Jacobian at the last step evaluated, and whether any step gave a finite one
    # (a numeric side non-finite at every step fails naming it: attest.collection.nonfinite).
    numeric_seen: dict[str, Any] = {"finite": False, "last": None}

    def error_at(eps: float) -> float:
        jac = numeric(eps)
        numeric_seen["last"] = jac
        scales[eps] = float(jac.abs().max()) if jac.numel() else 0.0
        if not bool(torch.isfinite(jac).all()):
            return math.inf
        numeric_seen["finite"] = True
        scale = float(jac.abs().max()) if jac.numel() else 0.0
        diff = float((analytic - jac).abs().max()) if jac.numel() else 0.0
        if scale == 0.0:
            return 0.0 if diff == 0.0 else math.inf
        return diff / scale

    # A non-finite analytic Jacobian fails at once, whatever the step (torch's max would carry
    # its NaN into an error that compares False with everything); the numeric side at the
    # default step says whether it is the only non-finite one.
    bad = nonfinite({"analytic": analytic})
    verdict = False
    curve: dict[str, float | None]
    if bad is not None:
        bad = nonfinite({"analytic": analytic, "numeric": numeric(settings.eps)})
        eps, error, default_error, curve = settings.eps, math.inf, math.inf, {}
    else:
        eps, error, default_error, curve = _pick_eps(error_at, settings)
        if not numeric_seen["finite"]:
            bad = nonfinite({"numeric": numeric_seen["last"]})
        verdict = _torch_gradcheck(fn, inputs, keep, settings, eps, scales.get(eps, 0.0))
    return BackwardCheck(
        mode="full_jacobian",
        passed=bad is None and verdict and error <= settings.rtol,
        max_rel_error=error,
        eps=eps,
        default_eps_error=default_error,
        directions=sum(x.numel() for x in inputs),
        seed=settings.seed,
        atol=settings.atol,
        rtol=settings.rtol,
        input_numel=sum(x.numel() for x in inputs),
        output_numel=sum(o.numel() for o in outputs),
        error_curve=curve,
        step_scale="absolute",
        torch_gradcheck=verdict if bad is None else None,
        cotangents=sum(o.numel() for o in outputs),
        nonfinite=bad,
    )


def _torch_gradcheck(
    fn: TensorFn,
    inputs: Sequence[torch.Tensor],
    keep: list[int],
    settings: FiniteDifferenceSettings,
    eps: float,
    jac_scale: float,
) -> bool:
    """torch.autograd.gradcheck's verdict at the chosen step, with an absolute tolerance
    scaled to the Jacobian's largest entry (``jac_scale``) so that the verdict does not
    depend on the units of the operator's values."""
    jac_scale = jac_scale if math.isfinite(jac_scale) else 0.0
    atol_abs = max(settings.atol * jac_scale, 1e-300)

    def only_kept(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = fn(*xs)
        return tuple(outs[i] for i in keep)

    return bool(
        torch.autograd.gradcheck(
            only_kept,
            tuple(x.detach().clone().requires_grad_(True) for x in inputs),
            eps=eps,
            atol=atol_abs,
            rtol=settings.rtol,
            raise_exception=False,
            fast_mode=False,
        )
    )
