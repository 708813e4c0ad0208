"""Run the four training checks, each from its own module, in the order of TRAINING_CHECKS.

A spec without ``training:`` gets ``not_applicable`` for each, with the reason. A check module
that is not in this build reports ``not_implemented``; one that raises reports ``error`` naming
where, and the others still run (as :func:`attest.collection.collect` does for runners).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import time
import traceback
from pathlib import Path

from attest.collection.checkpointing import checkpointing_off
from attest.collection.context import CollectContext
from attest.errors import AttestError
from attest.evidence.model import TRAINING_CHECKS, CheckResult

__all__ = ["NO_TRAINING_REASON", "run"]

NO_TRAINING_REASON = (
    "the spec declares no training: mapping (autocast, checkpoint, batch_sizes, optimizer), "
    "so the certificate does not cover the gradients as produced in training"
)

# check id -> the module whose run(ctx) -> CheckResult computes it
CHECK_MODULES: dict[str, str] = {
    "mixed_precision": "attest.collection.training.mixed_precision",
    "recompute": "attest.collection.training.recompute",
    "batch_invariance": "attest.collection.training.batch_invariance",
    "resume": "attest.collection.training.resume",
}


def run(ctx: CollectContext) -> list[CheckResult]:
    """The four training checks' results (not_applicable without ``training:``)."""
    if ctx.spec.training is None:
        return [
            CheckResult(check=check_id, status="not_applicable", reason=NO_TRAINING_REASON)
            for check_id in TRAINING_CHECKS
        ]
    results: list[CheckResult] = []
    for check_id in TRAINING_CHECKS:
        started = time.perf_counter()
        result = _run_one(ctx, check_id)
        if result.duration_s is None:
            result.duration_s = round(time.perf_counter() - started, 6)
        results.append(result)
        gc.collect()  # each check builds its own model copies and graphs: release them
    return results


def _run_one(ctx: CollectContext, check_id: str) -> CheckResult:
    module_name = CHECK_MODULES[check_id]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            return CheckResult(
                check=check_id,  # type: ignore[arg-type]
                status="not_implemented",
                reason=f"{module_name} is not part of this build",
            )
        raise
    try:
        # batch_invariance is an eval-mode check of batch behaviour: checkpointed regions run
        # plainly there, as in every eval-mode check (reentrant ones refuse autograd.grad)
        plain = checkpointing_off() if check_id == "batch_invariance" else contextlib.nullcontext()
        with plain:
            result = module.run(ctx)
        if not isinstance(result, CheckResult) or result.check != check_id:
            raise TypeError(f"{module_name}.run returned {result!r:.80}, expected {check_id}")
        return result
    except AttestError:
        raise
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        return CheckResult(
            check=check_id,  # type: ignore[arg-type]
            status="error",
            reason=f"{check_id} raised {type(exc).__name__}: {exc}{where}",
        )
