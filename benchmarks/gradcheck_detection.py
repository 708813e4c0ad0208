"""Detection power of gradcheck's random directions: forward against central differences.

Each case is an operator with a backward that carries a planted defect (or none, for the
false-alarm rows), checked by :func:`check_backward` as gradcheck checks a captured operator
(K = 4 directions, one shared cotangent for outputs over 1024 elements, rtol 1e-3), once with
central differences only and once with forward differences first (central ones and the step
sweep where they fail: the default since 2026-12-04). Each seed draws new inputs and new
directions; printed: the share of seeds whose check fails, per case and difference, and the
operator evaluations per check (the cost forward differences save).

    .venv/bin/python benchmarks/gradcheck_detection.py [--seeds 200] [--only conv]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from attest.collection.gradients.finite_differences import (
    FiniteDifferenceSettings,
    check_backward,
)

Fn = Callable[..., torch.Tensor]
Defect = Callable[[list[torch.Tensor], list[torch.Tensor]], list[torch.Tensor]]


def planted(op: Fn, defect: Defect | None) -> Fn:
    """``op`` with a backward equal to autograd's, then changed by ``defect``(grads, inputs)."""

    class Planted(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *xs: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(*xs)
            return op(*xs)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
            xs = [x.detach().requires_grad_(True) for x in ctx.saved_tensors]
            with torch.enable_grad():
                grads = list(torch.autograd.grad(op(*xs), xs, grad))
            if defect is not None:
                grads = defect(grads, list(ctx.saved_tensors))
            return tuple(grads)

    return Planted.apply  # type: ignore[no-any-return]


def scale(factor: float, which: tuple[int, ...] = (0, 1)) -> Defect:
    return lambda gs, xs: [g * factor if i in which else g for i, g in enumerate(gs)]


def row0_of_weight(factor: float) -> Defect:
    """The weight gradient of output 0 (a convolution's channel, a linear map's output) off
    by ``factor``."""

    def defect(gs: list[torch.Tensor], xs: list[torch.Tensor]) -> list[torch.Tensor]:
        w = gs[1].clone()
        w[0] *= factor
        return [gs[0], w]

    return defect


def where_positive(factor: float) -> Defect:
    return lambda gs, xs: [torch.where(xs[0] > 0, gs[0] * factor, gs[0])]


def one_element(factor: float) -> Defect:
    def defect(gs: list[torch.Tensor], xs: list[torch.Tensor]) -> list[torch.Tensor]:
        g = gs[0].clone()
        g.view(-1)[7] *= factor
        return [g]

    return defect


def _conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, w, padding=1)


def _layer_norm(x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:])


def _rsqrt_var(x: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt(x.var(dim=-1, keepdim=True) + 1e-5)


def _make(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64)


Case = tuple[str, Fn, Defect | None, Callable[[torch.Generator], list[torch.Tensor]]]
CONV = lambda g: [_make(g, 4, 8, 16, 16), _make(g, 8, 8, 3, 3) * 0.1]  # noqa: E731
CASES: list[Case] = [
    ("clean conv 4x8x16x16", _conv, None, CONV),
    ("clean tanh, 1024 elements", torch.tanh, None, lambda g: [_make(g, 1024)]),
    ("clean relu, 4096 elements", torch.relu, None, lambda g: [_make(g, 4096)]),
    ("clean softmax 16x256", lambda x: x.softmax(-1), None, lambda g: [_make(g, 16, 256) * 3]),
    ("clean layer_norm 16x256", _layer_norm, None, lambda g: [_make(g, 16, 256)]),
    ("clean x / sqrt(var + 1e-5), 16x256", _rsqrt_var, None, lambda g: [_make(g, 16, 256)]),
    ("clean exp of 4 sigma, 2048", torch.exp, None, lambda g: [_make(g, 2048) * 4]),
    ("clean 1 / x, 2048", torch.reciprocal, None, lambda g: [_make(g, 2048)]),
    ("clean log(|x| + 1e-3), 2048", lambda x: torch.log(x.abs() + 1e-3), None,
     lambda g: [_make(g, 2048)]),
    ("conv: all gradients x1.02", _conv, scale(1.02), CONV),
    ("conv: weight gradient only x1.02", _conv, scale(1.02, (1,)), CONV),
    ("conv: input gradient only x1.02", _conv, scale(1.02, (0,)), CONV),
    ("conv: output channel 0 of 8 x1.02", _conv, row0_of_weight(1.02), CONV),
    ("tanh, 1024: x1.02 where x > 0", torch.tanh, where_positive(1.02),
     lambda g: [_make(g, 1024)]),
    ("linear, 4 outputs: output 0 x1.02", F.linear, row0_of_weight(1.02),
     lambda g: [_make(g, 16, 32), _make(g, 4, 32)]),
    ("conv: output channel 0 of 8 x1.002 (edge)", _conv, row0_of_weight(1.002), CONV),
    ("tanh, 1100: one element x1.5 (edge)", torch.tanh, one_element(1.5),
     lambda g: [_make(g, 1100)]),
]  # fmt: skip


class Counting:
    """``fn`` with a count of its calls outside autograd (the finite-difference evaluations)."""

    def __init__(self, fn: Fn) -> None:
        self.fn, self.calls = fn, 0

    def __call__(self, *xs: torch.Tensor) -> list[torch.Tensor]:
        if not torch.is_grad_enabled():
            self.calls += 1
        return [self.fn(*xs)]


def rate(case: Case, seeds: int, one_sided: bool) -> tuple[float, float]:
    """Share of seeds failing, and operator evaluations per check."""
    _, op, defect, make = case
    fn = Counting(planted(op, defect))
    failed = 0
    for seed in range(seeds):
        inputs = make(torch.Generator().manual_seed(10_000 + seed))
        settings = FiniteDifferenceSettings(seed=seed, one_sided=one_sided)
        check = check_backward(fn, inputs, settings, mode="random_directions")
        failed += not check.passed
    return failed / seeds, fn.calls / seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--only", default="", help="the cases whose label contains this")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"| case ({args.seeds} seeds) | central: failed | forward first: failed | "
          "evaluations central / forward first |")  # fmt: skip
    print("| --- | ---: | ---: | ---: |")
    for case in CASES:
        if args.only not in case[0]:
            continue
        central, n_central = rate(case, args.seeds, False)
        forward, n_forward = rate(case, args.seeds, True)
        print(
            f"| {case[0]} | {central:.1%} | {forward:.1%} | {n_central:.1f} / {n_forward:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
