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

The per-operator checks re-run each captured operator alone on its own captured arguments,
so they do not depend on the operator alignment that a failed ``topology`` check withdraws.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from attest.collection.capture.run import mixed_precision_hint
from attest.collection.context import CollectContext
from attest.collection.gradients import accumulation, custom_ops, kinks, second_order
from attest.collection.gradients import flow as gradient_flow
from attest.collection.gradients import gradcheck as gradcheck_ops
from attest.errors import AttestError
from attest.evidence.model import CheckResult

__all__ = ["CHECKS", "EXECUTION", "run", "run_check", "run_each"]

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


def run_check(check_id: str, fn: CheckFn, ctx: CollectContext) -> CheckResult:
    """One check, timed; an exception becomes an ``error`` result that says where."""
    if ctx.progress is not None:
        ctx.progress(f"checks: {check_id}")
    started = time.perf_counter()
    try:
        with torch.random.fork_rng(devices=[]):
            result = fn(ctx)
    except AttestError:
        raise
    except Exception as exc:
        text = " ".join(str(exc).split())[:500]
        result = CheckResult(
            check=check_id,  # type: ignore[arg-type]
            status="error",
            reason=f"{check_id} raised {type(exc).__name__}: {text}{_where(exc)}"
            + mixed_precision_hint(text),
        )
    result.duration_s = round(time.perf_counter() - started, 6)
    return result


def run_each(ctx: CollectContext) -> Iterator[tuple[str, CheckResult]]:
    """Each check's result as it is computed, in :data:`EXECUTION` order, with the hand-offs
    between checks switched on (and dropped at the end, even if the caller stops early; see
    :class:`~attest.collection.gradients.state.GradientState`)."""
    ctx.gradients.keep_graph = True
    try:
        for check_id, fn in EXECUTION:
            result = run_check(check_id, fn, ctx)
            # Hand-offs whose last consumer just ran are dropped, and the collector runs so
            # that autograd graphs caught in reference cycles (a model holding its own output,
            # a hook's closure) go now, not at some later allocation: the next check's peak
            # then does not stack on this one's leftovers.
            ctx.gradients.release_after(check_id)
            ctx.release_spill_pages()
            _release_memory()
            yield check_id, result
    finally:
        ctx.gradients.drop_hand_offs()
        ctx.release_shared_models()
        _release_memory()


def _release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the system. glibc keeps what a
    check freed in its arenas (measured: the process's resident size never fell between
    checks), so without ``malloc_trim`` each check's peak stacks on the last one's."""
    gc.collect()
    # not glibc (macOS, musl): nothing to trim
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def run(ctx: CollectContext) -> list[CheckResult]:
    """Every gradient correctness check on ``ctx`` (see the module docstring), in
    :data:`CHECKS` order."""
    previous = torch.get_num_threads()
    if ctx.spec.threads:
        torch.set_num_threads(ctx.spec.threads)
    try:
        results = dict(run_each(ctx))
        return [results[check_id] for check_id, _ in CHECKS]
    finally:
        torch.set_num_threads(previous)
