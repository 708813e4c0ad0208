"""The random-direction mode of :func:`attest.collection.gradients.finite_differences.check_backward`.

``K`` seeded Gaussian input directions ``v_k`` (each input's part scaled by that input's RMS,
or by 1 with absolute steps) and ``C`` seeded output cotangents ``u`` (direction ``k`` uses
``u_(k mod C)``). One backward per cotangent gives ``J^T u``, hence the analytic side
``a_k = <J^T u, v_k>`` for every direction; central differences give the numeric side
``n_k = <u, f(x + eps v_k) - f(x - eps v_k)> / (2 eps)``. With ``one_sided`` settings
(gradcheck) forward differences ``<u, f(x + eps v_k) - f(x)> / eps`` are tried first at the
default step (K evaluations instead of 2K: F at ``x`` is the output the backward
differentiated), and a case they fail is decided by the
central ones. See the ``finite_differences`` module docstring for the error measure and the
step sweep.

On small operators the cost of a case is the number of kernel calls, not their work (a
float64 ReLU over 4,096 elements takes about 2 us; dispatching any call takes 5-10 us), so
when the 2K perturbed copies of the inputs and outputs fit in :data:`BATCH_NUMEL` elements
the directions are handled together: each input's K directions are one (K, ...) tensor, the
2K perturbed inputs two ``add`` calls, and every dot product of the case one matrix product
(the operator itself is still called once per perturbed input, alone, exactly as captured).
Larger cases, where the kernels' work dominates and 2K copies would cost memory, perturb one
reused buffer per input direction by direction. Both give the same quantities, up to
rounding in the last bits of the dot products.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

from attest.collection.gradients.fd_basics import (
    BackwardCheck,
    FiniteDifferenceSettings,
    GaussianPool,
    TensorFn,
    _evaluate,
    _pick_eps,
    _vjp,
)
from attest.collection.nonfinite import NonFinite, nonfinite

__all__ = ["BATCH_NUMEL", "random_direction_check"]

# Elements of the 2K perturbed copies of a case's inputs plus its outputs held at once by the
# batched path (2^20 float64 values: 8 MiB).
BATCH_NUMEL = 1 << 20

# (analytic a_k, spread_k) for every direction, and the numeric n_k at a step: central
# differences, or with ``central`` False forward ones against F at the unperturbed inputs.
_Sides = tuple[list[float], list[float], Callable[[float, bool], list[float]]]


def random_direction_check(
    fn: TensorFn,
    inputs: Sequence[torch.Tensor],
    leaves: list[torch.Tensor],
    outputs: list[torch.Tensor],
    keep: list[int],
    settings: FiniteDifferenceSettings,
    pool: GaussianPool,
    first: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None,
    absolute: bool = False,
) -> BackwardCheck:
    """The random-direction check of ``fn`` at ``inputs`` (see the module docstring).

    ``first``: the cotangent already drawn, and its ``J^T u``, by the caller; ``absolute``:
    steps of eps itself rather than relative to each input's RMS."""
    # Steps are relative: each input's part of a direction is scaled by that input's RMS, so
    # an input of CT intensities (~1e3) is not probed with steps lost in its rounding.
    scales = [1.0] * len(inputs) if absolute else _rms_each(inputs)
    # One backward per output cotangent, not per direction: direction k pairs input direction
    # v_k with cotangent u_(k mod C), and <J^T u, v_k> for every k comes from that one
    # backward, as in torch's fast gradcheck (one vjp per cotangent). The backward is the
    # expensive half of an operator (2-3 forwards for a convolution); see ``cotangents``.
    n_out = sum(o.numel() for o in outputs)
    few_outputs = n_out <= settings.full_jacobian_max_out_numel
    n_cot = settings.directions if few_outputs else settings.cotangents
    n_cot = max(1, min(n_cot, settings.directions))
    us: list[list[torch.Tensor]] = []
    gs: list[list[torch.Tensor]] = []
    for c in range(n_cot):
        if c == 0 and first is not None:
            u, g = first  # the cotangent already drawn (and differentiated) by check_backward
        else:
            u = [pool.like(o) for o in outputs]
            g = _vjp(outputs, leaves, u)
        us.append(u)
        gs.append(g)
    n_in = sum(x.numel() for x in inputs)
    held = 2 * settings.directions * (n_in + n_out)
    sides = _batched if held <= BATCH_NUMEL else _one_by_one
    # <u^c, f(x)> for each cotangent, from the outputs the backward differentiated: forward
    # differences need F at the unperturbed inputs, and evaluating it again would cost one
    # more operator call (the autograd forward runs the same kernels; a rounding difference
    # between the two would weigh 1e-16 / eps = 1e-10 of the derivative).
    values = [o.detach() for o in outputs]
    base = values if settings.one_sided else []
    largest = max((settings.eps, *settings.eps_sweep))
    reach = [_reachable(x, largest * s) for x, s in zip(inputs, scales, strict=True)]
    analytic, spread, numeric_at = sides(
        fn, inputs, keep, settings.directions, scales, us, gs, pool, base, reach
    )
    floor_factor = settings.atol / settings.rtol
    # The numeric side at the last step evaluated, and whether any step gave a finite one: a
    # numeric side non-finite at every step fails naming that side (attest.collection.nonfinite).
    numeric_seen: dict[str, Any] = {"finite": False, "last": []}

    def error_at(eps: float, central: bool = True) -> float:
        numeric = numeric_at(eps, central)
        numeric_seen["last"] = numeric
        if not all(math.isfinite(n) for n in numeric):
            return math.inf
        numeric_seen["finite"] = True
        worst = 0.0
        for a, n, s in zip(analytic, numeric, spread, strict=True):
            # the floor: a = <g, v> is distributed as N(0, spread^2) over the draw of v
            scale = max(abs(a), abs(n), floor_factor * s)
            error = abs(a - n) / scale if scale > 0 else 0.0
            worst = max(worst, error if math.isfinite(error) else math.inf)
        return worst

    difference: Literal["forward", "central"] = "central"
    curve: dict[str, float | None] = {}
    forward_error: float | None = None
    # A non-finite analytic side fails at once (no step can change it): Python's max() would
    # read its NaN error as 0. The numeric side at the default step says whether it is the
    # only non-finite one.
    bad = nonfinite({"analytic": analytic})
    if bad is not None:
        # the backward's gradients name the kinds (their dot products turn inf - inf into NaN)
        bad = nonfinite({"analytic": [g for cotangent in gs for g in cotangent]}) or bad
        numeric = nonfinite({"numeric": numeric_at(settings.eps, True)})
        if numeric is not None:
            bad = NonFinite({**bad.sides, **numeric.sides})
        eps, error, default_error = settings.eps, math.inf, math.inf
    else:
        # Forward differences first, where the settings ask for them: K evaluations of the
        # operator instead of 2K (for gradcheck's float64 convolutions of a 64^3 volume, most
        # of a collect's gradient phase). Their truncation error at the default step is
        # O(eps) = 1e-6 of the derivative's scale, three orders under rtol, and they cross
        # half as many kinks; a case they fail gets the central differences and the step
        # sweep as before, so every case that passed with central differences still passes.
        forward_error = error_at(settings.eps, False) if settings.one_sided else None
        if forward_error is not None and forward_error <= settings.rtol:
            difference = "forward"
            eps, error, default_error = settings.eps, forward_error, forward_error
        else:
            eps, error, default_error, curve = _pick_eps(error_at, settings)
        if not numeric_seen["finite"]:
            bad = nonfinite({"numeric": numeric_seen["last"]})
    return BackwardCheck(
        mode="random_directions",
        passed=bad is None and error <= settings.rtol,
        max_rel_error=error,
        eps=eps,
        default_eps_error=default_error,
        directions=settings.directions,
        seed=settings.seed,
        atol=settings.atol,
        rtol=settings.rtol,
        input_numel=n_in,
        output_numel=n_out,
        error_curve=curve,
        cotangents=n_cot,
        step_scale="absolute" if absolute else "relative",
        difference=difference,
        forward_eps_error=forward_error if difference == "central" else None,
        nonfinite=bad,
    )


def _batched(
    fn: TensorFn,
    inputs: Sequence[torch.Tensor],
    keep: list[int],
    k: int,
    scales: list[float],
    us: list[list[torch.Tensor]],
    gs: list[list[torch.Tensor]],
    pool: GaussianPool,
    base: list[torch.Tensor],
    reach: list[torch.Tensor | None],
) -> _Sides:
    """Every direction of the case at once (the module docstring); ``base``: f(x), the kept
    outputs; ``reach``: per input, the coordinates a step can move (None: all)."""
    c = len(us)
    # z_i: input i's K standard Gaussian directions, one (K, ...) view of the pool (zero
    # where no step moves the input: :func:`_reachable`).
    zs = [_within(pool.stacked(x, k), r) for x, r in zip(inputs, reach, strict=True)]
    # Per input: its K dot products s_i <g_i, z_ik> and the norm(s) of g_i, all fetched with
    # one sync and summed here (a = sum_i s_i <g_i, z_ik>, spread = sqrt(sum_i s_i^2 ||g_i||^2)).
    parts: list[torch.Tensor] = []
    for i, (x, z) in enumerate(zip(inputs, zs, strict=True)):
        flat = z.view(k, x.numel())
        if c == 1:
            g = gs[0][i].reshape(-1)
            parts += [torch.mv(flat, g), torch.linalg.vector_norm(g).reshape(1)]
        else:  # direction j's row is g^(j mod C)
            rows = torch.stack([gs[j % c][i].reshape(-1) for j in range(k)])
            parts += [(flat * rows).sum(1), torch.linalg.vector_norm(rows, dim=1)]
    values = torch.cat(parts).tolist()
    width = k + (1 if c == 1 else k)
    analytic = [0.0] * k
    square = [0.0] * k
    for i, s in enumerate(scales):
        chunk = values[i * width : (i + 1) * width]
        for d in range(k):
            analytic[d] += s * chunk[d]
            norm = chunk[k] if c == 1 else chunk[k + d]
            square[d] += (s * norm) ** 2
    spread = [math.sqrt(v) for v in square]
    # The perturbed inputs: a (2K, ...) buffer per input, +eps rows then -eps rows, each row
    # laid out like the input (strides as captured).
    buffers = [_batch_like(x, 2 * k) for x in inputs]
    halves = [(b[:k], b[k:]) for b in buffers]
    cotangents = [  # per output: u, or the (2K, n) rows u^(d mod C) for +eps then -eps
        us[0][j].reshape(-1)
        if c == 1
        else torch.stack([us[d % c][j].reshape(-1) for d in [*range(k), *range(k)]])
        for j in range(len(keep))
    ]

    def numeric_at(eps: float, central: bool = True) -> list[float]:
        n = 2 * k if central else k
        for x, z, s, (p, m) in zip(inputs, zs, scales, halves, strict=True):
            torch.add(x, z, alpha=eps * s, out=p)
            if central:
                torch.add(x, z, alpha=-eps * s, out=m)
        rows = [b.unbind(0) for b in buffers]
        with torch.no_grad():
            outs = [fn(*[r[d] for r in rows]) for d in range(n)]
        # <u, f(x + eps v_k) - f(x - eps v_k)> (or - f(x)), per output: the outputs are
        # differenced before the dot product, so entries no step changes (a mask's
        # finfo.min fill, ~1e38) cancel exactly instead of swamping the dot products
        dots = []
        for i, (j, u) in enumerate(zip(keep, cotangents, strict=True)):
            both = torch.stack([o[j] for o in outs]).reshape(n, -1 if u.numel() else 0)
            diff = both[:k] - (both[k:] if central else base[i].reshape(1, -1))
            dots.append(torch.mv(diff, u) if c == 1 else (diff * u[:k]).sum(1))
        values = (torch.stack(dots).sum(0) if len(dots) > 1 else dots[0]).tolist()
        return [v / ((2 if central else 1) * eps) for v in values]

    return analytic, spread, numeric_at


def _batch_like(x: torch.Tensor, k: int) -> torch.Tensor:
    """An uninitialised (K, *x.shape) tensor whose rows have ``x``'s layout (as
    ``torch.empty_like`` gives it: the captured strides for a dense input)."""
    if x.is_contiguous():
        return torch.empty((k, *x.shape), dtype=x.dtype, device=x.device)
    like = torch.empty_like(x)
    if like.is_contiguous() or x.numel() == 0:
        return torch.empty((k, *x.shape), dtype=x.dtype, device=x.device)
    return torch.empty_strided(
        (k, *x.shape), (x.numel(), *like.stride()), dtype=x.dtype, device=x.device
    )


def _one_by_one(
    fn: TensorFn,
    inputs: Sequence[torch.Tensor],
    keep: list[int],
    k: int,
    scales: list[float],
    us: list[list[torch.Tensor]],
    gs: list[list[torch.Tensor]],
    pool: GaussianPool,
    base: list[torch.Tensor],
    reach: list[torch.Tensor | None],
) -> _Sides:
    """Direction by direction, through one reused buffer per input (large cases); ``base``:
    f(x), the kept outputs; ``reach`` as for :func:`_batched`."""
    c = len(us)
    zs = [[_within(pool.like(x), r) for x, r in zip(inputs, reach, strict=True)] for _ in range(k)]
    analytic = [
        sum(s * _dot([g], [z]) for g, z, s in zip(gs[d % c], zs[d], scales, strict=True))
        for d in range(k)
    ]
    spread_of = [
        math.sqrt(sum((s * _norm(g)) ** 2 for g, s in zip(gs[j], scales, strict=True)))
        for j in range(c)
    ]
    spread = [spread_of[d % c] for d in range(k)]
    buffers = [torch.empty_like(x) for x in inputs]

    def perturbed(d: int, step: float) -> list[torch.Tensor]:
        for buffer, x, z, s in zip(buffers, inputs, zs[d], scales, strict=True):
            torch.add(x, z, alpha=step * s, out=buffer)
        # copied: an output that aliases the buffer (a view operator) would change with it
        return [o.clone() for o in _evaluate(fn, buffers, keep)]

    def numeric_at(eps: float, central: bool = True) -> list[float]:
        # differenced before the dot product, as in _batched
        numeric = []
        for d in range(k):
            plus = perturbed(d, eps)
            minus = perturbed(d, -eps) if central else base
            diff = [p - m for p, m in zip(plus, minus, strict=True)]
            numeric.append(_dot(us[d % c], diff) / ((2 if central else 1) * eps))
        return numeric

    return analytic, spread, numeric_at


def _reachable(x: torch.Tensor, step: float) -> torch.Tensor | None:
    """The coordinates of ``x`` that a step of ``step`` (the sweep's largest, in units of a
    direction's entry) moves in ``x``'s dtype; None when it moves them all. A value near the
    dtype's range (an attention mask's ``finfo.min`` fill) absorbs every step, so differences
    cannot measure a derivative there: directions leave it out, on both the analytic and the
    numeric side, rather than call the backward wrong."""
    if x.numel() == 0 or not x.is_floating_point():
        return None
    moved = torch.ne(x + step, x) & torch.ne(x - step, x)
    return None if bool(moved.all()) else moved


def _within(z: torch.Tensor, reach: torch.Tensor | None) -> torch.Tensor:
    """Directions ``z`` (one input's, or a (K, ...) stack of them) zero outside ``reach``."""
    return z if reach is None else z * reach.to(z.dtype)


def _rms_each(inputs: Sequence[torch.Tensor]) -> list[float]:
    """:func:`rms_or_one` of every input, from one foreach norm and one sync."""
    norms = torch.stack(torch._foreach_norm(list(inputs))).tolist()
    out = []
    for x, norm in zip(inputs, norms, strict=True):
        rms = norm / math.sqrt(x.numel()) if x.numel() else 0.0
        out.append(rms if rms > 0 and math.isfinite(rms) else 1.0)
    return out


def _dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    """Sum of the elementwise products of two tensor lists (one fused kernel per pair)."""
    total = 0.0
    for x, y in zip(a, b, strict=True):
        total += float(torch.dot(x.reshape(-1), y.reshape(-1).to(x.dtype)))
    return total


def _norm(t: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(t))
