"""The gradient correctness checks (docs/gradient-checks.md), run as one collect runner.

``run(ctx)`` returns, in this order, the results of ``gradcheck`` (every ATen operator's
backward vs finite differences), ``custom_ops`` (every ``torch.autograd.Function``),
``kinks`` (probe values exactly on non-differentiable points), ``gradient_flow`` (every
trainable parameter gets a gradient), ``accumulation`` (micro-batch accumulation equals the
full batch) and ``second_order`` (Hessian-vector products). Each lives in its own module;
a check that raises becomes an ``error`` result naming where, and never stops the others.

Library use, on a context the orchestrator (or a test) built::

    from attest.collection.gradients import runner
    for result in runner.run(ctx):
        print(result.check, result.status, [i.subject.label() for i in result.failed_items])

The checks run as pieces (:mod:`attest.collection.pieces`, which ``attest collect --workers``
spreads over processes): gradcheck's operator groups
(:mod:`~attest.collection.gradients.gradcheck_groups`), ``kinks``, and the rest together,
since they hand each other data (``rest``); :func:`join` puts the results in order.

The per-operator checks re-run each captured operator alone on its own captured arguments,
so they do not depend on the operator alignment that a failed ``topology`` check withdraws.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from attest.collection.capture.run import mixed_precision_hint
from attest.collection.context import CollectContext, spec_threads
from attest.collection.gradients import accumulation, custom_ops, kinks, second_order
from attest.collection.gradients import flow as gradient_flow
from attest.collection.gradients import gradcheck as gradcheck_ops
from attest.collection.gradients.gradcheck_groups import (
    group_key,
    identical_cases,
    operator_groups,
    operator_work,
)
from attest.collection.pieces import Piece, Split, run_split
from attest.collection.resources import PhaseMeter, release_memory
from attest.errors import AttestError
from attest.evidence.model import CheckResult

__all__ = ["CHECKS", "EXECUTION", "join", "pieces", "run", "run_check", "run_each", "run_piece"]

CheckFn = Callable[[CollectContext], CheckResult]

# The order of the results. Checks run in EXECUTION order, which matters a little:
# gradient_flow tells the later checks whether backward raises, hands custom_ops its forward
# output (the custom Functions forward used are nodes of its graph), accumulation its
# full-batch gradient and second_order its gradient's double-backward graph; custom_ops
# shares the custom Function calls it captured with second_order. So custom_ops and
# second_order run right after gradient_flow, and the graph is not held while accumulation
# runs.
CHECKS: list[tuple[str, CheckFn]] = [
    ("gradcheck", gradcheck_ops.run),
    ("custom_ops", custom_ops.run),
    ("kinks", kinks.run),
    ("gradient_flow", gradient_flow.run),
    ("accumulation", accumulation.run),
    ("second_order", second_order.run),
]
EXECUTION: list[tuple[str, CheckFn]] = [
    CHECKS[0],
    CHECKS[2],
    CHECKS[3],
    CHECKS[1],
    CHECKS[5],
    CHECKS[4],
]


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {Path(last.filename).name}:{last.lineno} in {last.name})"


def _error_reason(check_id: str, exc: Exception) -> str:
    text = " ".join(str(exc).split())[:500]
    return f"{check_id} raised {type(exc).__name__}: {text}{_where(exc)}" + mixed_precision_hint(
        text
    )


def run_check(check_id: str, fn: CheckFn, ctx: CollectContext) -> CheckResult:
    """One check, timed; an exception becomes an ``error`` result that says where."""
    if ctx.progress is not None:
        ctx.progress(f"checks: {check_id}")
    started = time.perf_counter()
    with PhaseMeter() as meter:  # the check's own peak, inside its phase's
        try:
            with torch.random.fork_rng(devices=[]):
                result = fn(ctx)
        except AttestError:
            raise
        except Exception as exc:
            result = CheckResult(
                check=check_id,  # type: ignore[arg-type]
                status="error",
                reason=_error_reason(check_id, exc),
            )
    result.duration_s = round(time.perf_counter() - started, 6)
    result.peak_rss_bytes = meter.usage.peak_rss_bytes
    return result


def _in_order(
    ctx: CollectContext, checks: list[tuple[str, CheckFn]]
) -> Iterator[tuple[str, CheckFn]]:
    """``checks`` in their order, except that ``accumulation`` goes before ``second_order``
    when ``gradient_flow`` handed over no graph (``second_order`` then builds its own on a
    smaller probe): the full-batch gradient accumulation compares with, one float64 copy of
    the weights, is then dropped before the Hessian-vector products allocate (84 MiB of the
    gradient phase's peak on the MONAI ViT). Each check runs from the same random state
    either way (``run_check`` forks it), so the order changes no result."""
    pending = list(checks)
    while pending:
        check = pending.pop(0)
        later = next((c for c in pending if c[0] == "accumulation"), None)
        if check[0] == "second_order" and ctx.gradients.graph is None and later is not None:
            pending.remove(later)
            pending.insert(0, check)
            check = later
        yield check


def run_each(
    ctx: CollectContext, checks: list[tuple[str, CheckFn]] | None = None
) -> Iterator[tuple[str, CheckResult]]:
    """Each check's result as it is computed, in :data:`EXECUTION` order (or that of
    ``checks``), with the hand-offs between checks switched on (and dropped at the end, even if
    the caller stops early; see :class:`~attest.collection.gradients.state.GradientState`)."""
    ctx.gradients.keep_graph = True
    try:
        for check_id, fn in _in_order(ctx, EXECUTION if checks is None else checks):
            result = run_check(check_id, fn, ctx)
            # Hand-offs whose last consumer just ran are dropped, and the collector runs so
            # that autograd graphs caught in reference cycles (a model holding its own output,
            # a hook's closure) go now, not at some later allocation: the next check's peak
            # then does not stack on this one's leftovers.
            ctx.gradients.release_after(check_id)
            ctx.release_spill_pages()
            release_memory()
            yield check_id, result
    finally:
        ctx.gradients.drop_hand_offs()
        ctx.release_shared_models()
        release_memory()


# --- pieces (attest.collection.pieces): gradcheck's operator groups, kinks, the rest --------

# Estimated costs in forward+backward units, per check as bench_certify.py measured them on
# resnet18 (docs/benchmarks.md: gradcheck 26.5 F at 4 directions, kinks 4.9, gradient flow
# and accumulation 15.4, second_order 18.2 at 3 directions): they only balance the workers.
_GRADCHECK_PER_DIRECTION, _KINKS, _FLOW_ACCUMULATION, _SECOND_ORDER_PER_DIRECTION = (
    6.6,
    5.0,
    15.4,
    6.1,
)


def pieces(ctx: CollectContext) -> list[Piece]:
    """gradcheck's operator groups, kinks, and the checks that hand each other data."""
    groups = operator_groups(ctx)
    same = identical_cases(ctx)
    work = [sum(operator_work(r) for r in group if r.id not in same) for group in groups]
    total = sum(work) or 1.0
    gradcheck = _GRADCHECK_PER_DIRECTION * ctx.settings.gradcheck_directions
    rest = _FLOW_ACCUMULATION + _SECOND_ORDER_PER_DIRECTION * ctx.settings.second_order_directions
    return [
        *(Piece(group_key(g), gradcheck * w / total) for g, w in enumerate(work)),
        Piece("kinks", _KINKS),
        Piece("rest", rest),
    ]


def run_piece(ctx: CollectContext, key: str) -> Any:
    """One piece's output: a group's items (or why it raised), or finished results."""
    with spec_threads(ctx.spec.threads):
        if key.startswith("gradcheck/"):
            if ctx.progress is not None:
                ctx.progress(f"checks: {key}")
            started = time.perf_counter()
            try:
                with PhaseMeter() as meter:
                    items = gradcheck_ops.check_group(ctx, int(key.partition("/")[2]))
            except AttestError:
                raise
            except Exception as exc:
                return {"error": _error_reason("gradcheck", exc)}
            finally:
                # the group's float64 cases go before the next group's allocate: untrimmed,
                # glibc kept them and the resident set grew group by group (SwinUNETR fs12
                # 64^3: 2.09 -> 2.60 GiB at the groups' starts, each group's peak on top)
                ctx.release_spill_pages()
                release_memory()
            return {
                "items": items,
                "duration_s": time.perf_counter() - started,
                "peak_rss_bytes": meter.usage.peak_rss_bytes,
            }
        if key == "kinks":
            return dict(run_each(ctx, [c for c in EXECUTION if c[0] == "kinks"]))
        # the checks that hand each other the gradient graph, the forward output and the
        # custom calls; second_order asks for gradcheck's cases only to localize a failure,
        # so they are built on demand
        ctx.gradients.gradcheck_cases = gradcheck_ops.GradcheckCases(ctx)
        return dict(run_each(ctx, [c for c in EXECUTION if c[0] not in ("gradcheck", "kinks")]))


def join(ctx: CollectContext, outputs: dict[str, Any]) -> list[CheckResult]:
    """The results in :data:`CHECKS` order: gradcheck's from its groups, in operator order."""
    groups = [v for k, v in outputs.items() if k.startswith("gradcheck/")]
    failed = next((g["error"] for g in groups if "error" in g), None)
    if failed is not None:
        gradcheck = CheckResult(check="gradcheck", status="error", reason=failed)
    else:
        gradcheck = gradcheck_ops.result_of(ctx, [i for g in groups for i in g["items"]])
        gradcheck.duration_s = round(sum(g["duration_s"] for g in groups), 6)
        peaks = [g["peak_rss_bytes"] for g in groups if g.get("peak_rss_bytes") is not None]
        gradcheck.peak_rss_bytes = max(peaks, default=None)
    results = {"gradcheck": gradcheck, **outputs["kinks"], **outputs["rest"]}
    return [results[check_id] for check_id, _ in CHECKS]


def run(ctx: CollectContext) -> list[CheckResult]:
    """Every gradient correctness check on ``ctx`` (see the module docstring), in
    :data:`CHECKS` order: its pieces one after another, then their join."""
    return run_split(ctx, Split(pieces, run_piece, join))
