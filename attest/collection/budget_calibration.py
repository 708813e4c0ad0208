"""The calibration a ``--budget`` plans from: a short measurement of the model itself.

Right after the reference capture (run 0), :func:`calibrate` times

- one plain forward+backward of the probe in the deployed precision (``forward_backward_s``:
  F, the objective the checks differentiate, with respect to the inputs and every trainable
  parameter, without any capture), and
- :data:`REPEATS` captured runs as the determinism repeats run them (``repeat_s``: the
  per-operator capture that compares every operator's outputs and gradients with run 0's bit
  for bit; the results are thrown away, only their times are kept). The first warms caches
  and allocator pools, so ``repeat_s`` is the slowest of the others: one timed run measured
  2.5 s where resnet18's repeats then ran 3.9 s each on a loaded machine (issue 38); the
  planner goes on measuring the repeats as they run and re-plans from those
  (:meth:`attest.collection.budget.BudgetPlanner.repeat_allowed`).

Both are counted in the budget (they run inside the collect's clock). With the reference
capture's own time (``capture_s``) and the preflight's float64 pass (``float64_s``), they are
the figures every phase's estimate is made of (:mod:`attest.collection.budget`): a repeat
costs what a repeat costs on this model, and a phase that runs the model plainly costs
multiples of F, while one that walks every operator (gradcheck, the float64 local re-runs,
the topology captures) scales with the captured run's per-operator overhead, which on a small
model dwarfs F.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from attest.collection.capture.records import target_scalar
from attest.collection.capture.run import model_output_tensor
from attest.collection.checkpointing import checkpointing_off
from attest.collection.context import CollectContext

__all__ = ["REPEATS", "Calibration", "calibrate"]

REPEATS = 3  # captured runs timed; the first warms, the slowest of the others is the estimate


@dataclass(frozen=True)
class Calibration:
    """Seconds measured on the model itself (see the module docstring)."""

    forward_backward_s: float  # F: one plain forward+backward of the probe
    repeat_s: float  # one captured run compared with run 0, as a determinism repeat
    capture_s: float  # the reference capture (run 0), as measured as the first phase
    float64_s: float  # one plain forward+backward in float64 (the preflight's, cold)
    took_s: float  # what the calibration itself took (inside the budget)
    repeats_s: tuple[float, ...] = ()  # each timed captured run, the warming one first

    @property
    def unit_s(self) -> float:
        """The unit the phases' fixed costs are estimated in: a pass that runs every operator
        of the model, at least F, at least the captured run's per-operator overhead when that
        is larger (small models: the Python around each operator, not the arithmetic)."""
        return max(self.forward_backward_s, self.repeat_s, 1e-4)

    def seconds(self, kind: str) -> float:
        """The seconds of one pass of ``kind``: ``repeat`` (a captured determinism repeat),
        ``float64`` (a plain float64 forward+backward), ``capture`` (the reference capture)
        or ``pass`` (:attr:`unit_s`)."""
        if kind == "repeat":
            return self.repeat_s
        if kind == "capture":
            return self.capture_s
        if kind == "float64":
            return self.float64_s
        return self.unit_s


def calibrate(ctx: CollectContext, *, capture_s: float, float64_s: float) -> Calibration:
    """Time one plain forward+backward and :data:`REPEATS` captured repeats of the model
    (after run 0)."""
    started = time.perf_counter()
    with checkpointing_off():
        try:
            forward_backward = _timed_forward_backward(ctx)
        except Exception:  # the preflight ran it; a model that raises here is the checks' to
            forward_backward = capture_s  # report (as run 0 does): plan from run 0's time
        repeats = [t for t in (_timed_repeat(ctx) for _ in range(REPEATS)) if t is not None]
    warm = repeats[1:] or repeats
    return Calibration(
        forward_backward_s=forward_backward,
        repeat_s=max(warm) if warm else forward_backward,
        capture_s=capture_s,
        float64_s=max(float64_s, forward_backward),
        took_s=time.perf_counter() - started,
        repeats_s=tuple(repeats),
    )


def _timed_forward_backward(ctx: CollectContext) -> float:
    """One forward and backward of the probe objective, as the preflight runs it (without its
    module hooks), the model built before the clock starts."""
    model = ctx.fresh_model()
    x = ctx.inputs().detach().clone().requires_grad_(True)
    params = [p for p in model.parameters() if p.requires_grad]
    cuda = x.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(x.device)
    started = time.perf_counter()
    objective = target_scalar(model_output_tensor(model(x)), ctx.spec).sum()
    if objective.requires_grad:
        torch.autograd.grad(objective, [x, *params], allow_unused=True)
    if cuda:  # the kernels queued, not only launched
        torch.cuda.synchronize(x.device)
    return time.perf_counter() - started


def _timed_repeat(ctx: CollectContext) -> float | None:
    """One determinism repeat (a lean one: past the detailed runs), compared with run 0 and
    dropped; None when run 0 failed (there is nothing to compare with)."""
    from attest.collection.profile.repeats import DETAILED_RUNS, repeat_run

    profile = ctx.profiler.profile
    if profile is None or profile.failure is not None:
        return None
    started = time.perf_counter()
    repeat_run(ctx, profile, DETAILED_RUNS + 1)
    return time.perf_counter() - started
