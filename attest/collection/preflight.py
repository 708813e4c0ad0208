"""The preflight: one forward and backward of the probe in float32 and in float64, before any
check runs (in ``collect``, run 0 stands for the float32 pass, see :func:`preflight`, and the
profiler's float64 fidelity pass for the float64 one where it runs next, after the topology
check: :func:`defer_float64`).

Every check runs the model on the probe, most of them many times and in float64 as well; a
model that cannot run its probe at all (a probe too small for the architecture's bottleneck,
a float32 tensor hard-coded in a float64 run, a target class the model does not have) made
every check report the same error after minutes of work, and ``collect`` exit 0 (MONAI's
SwinUNETR at 32^3: an InstanceNorm at its 1x1x1 bottleneck refuses a single spatial element,
after 47 s of checks on two cores). :func:`preflight` runs the objective the checks
differentiate (:func:`~attest.collection.capture.records.target_scalar` of the spec's target,
summed, with respect to the inputs and every trainable parameter) once per precision, with
plain forward hooks instead of the operator capture, and raises a
:class:`~attest.errors.CollectError` (exit 2) naming the precision, the phase, the deepest
module that was running, the shapes it was given, the probe's shape, the error and the way
out.

The module: forward pre-hooks push each module with the shapes of its tensor arguments and
forward hooks pop it; the hook of the innermost module sees the exception first
(``always_call=True``). In backward, a pre-hook on the autograd node of each module's output
records the module whose backward began last, which is where the engine was when it raised.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from attest.collection.capture.records import target_scalar
from attest.collection.capture.run import mixed_precision_hint, model_output_tensor
from attest.collection.capture.tensors import flat_tensors
from attest.collection.checkpointing import checkpointing_off
from attest.collection.context import CollectContext, precision_dtype
from attest.collection.resources import is_out_of_memory, out_of_memory_error, release_memory
from attest.errors import AttestError, CollectError

__all__ = ["PreflightFailure", "defer_float64", "float64_after_fidelity", "preflight"]

Shapes = list[tuple[int, ...]]


@dataclass
class PreflightFailure:
    """Where the preflight run raised."""

    precision: str
    phase: str  # "building the model" | "forward" | "the target" | "backward"
    module: str | None  # dotted path; "" the model itself; None: not inside a module
    module_type: str | None
    module_inputs: Shapes
    probe_shape: tuple[int, ...]
    error_type: str
    message: str

    def describe(self) -> str:
        where = ""
        if self.module is not None:
            where = f" in module {self.module or '<root>'!r}"
            if self.module_type:
                where += f" ({self.module_type})"
            if self.module_inputs:
                shapes = ", ".join(_shape(s) for s in self.module_inputs)
                where += f" given {shapes}"
        return (
            f"the model cannot run its probe {_shape(self.probe_shape)} in {self.precision}: "
            f"{self.phase} raised {self.error_type}{where}: {self.message}"
        )

    def hint(self) -> str:
        advice = mixed_precision_hint(self.message).removeprefix("; ")
        if advice:
            return advice
        if self.phase == "the target":
            return (
                "check the spec's target: against the model's output (an int target must be "
                "one of its output channels; target: label needs the probe's 'target' tensor)"
            )
        common = (
            f"every check runs one forward and backward of the probe in float32 and float64 (the "
            f"spec's precision and the reference); run model(x) and its backward on a probe of "
            f"shape {_shape(self.probe_shape)} yourself to reproduce it"
        )
        if self.precision == "float64":
            return (
                "the checks compare the model against a float64 run of itself (fidelity, "
                "second_order, the float64 gradcheck), so every operator needs a float64 path: "
                "register a float64 kernel of a custom operator, and tensors the model keeps "
                f"as attributes with register_buffer; {common}"
            )
        if self.phase == "forward":
            return (
                "use a probe the architecture supports (a spatial size large enough for every "
                "downsampling stage, the channel count and dtype the model expects), or fix "
                f"the module; {common}"
            )
        return f"fix the module's backward (or the custom autograd Function it calls); {common}"


@dataclass
class _Tracker:
    """The module stack of a forward pass and the module whose backward began last."""

    model: nn.Module
    stack: list[tuple[str, Shapes]] = field(default_factory=list)
    failed_in: tuple[str, Shapes] | None = None
    backward_in: tuple[str, Shapes] | None = None
    handles: list[Any] = field(default_factory=list)
    hooked: dict[int, Any] = field(default_factory=dict)  # id -> node (held: ids stay unique)

    def __enter__(self) -> _Tracker:
        for name, module in self.model.named_modules():
            self.handles.append(module.register_forward_pre_hook(self._push(name)))
            self.handles.append(module.register_forward_hook(self._pop(name), always_call=True))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.hooked.clear()

    def _push(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            self.stack.append((name, [tuple(t.shape) for t in flat_tensors(args)]))

        return hook

    def _pop(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            entry = self.stack.pop() if self.stack and self.stack[-1][0] == name else None
            if sys.exc_info()[1] is not None:
                if self.failed_in is None and entry is not None:
                    self.failed_in = entry  # the innermost module's hook runs first
                return
            if entry is not None:
                for tensor in flat_tensors(output):
                    node = tensor.grad_fn
                    # a node already hooked is an inner module's output passed on unchanged
                    if node is not None and id(node) not in self.hooked:
                        self.hooked[id(node)] = node
                        node.register_prehook(self._entered(entry))

        return hook

    def _entered(self, entry: tuple[str, Shapes]) -> Callable[..., None]:
        def hook(grad_outputs: Any) -> None:
            self.backward_in = entry

        return hook


def preflight(ctx: CollectContext, precisions: list[str] | None = None) -> list[float]:
    """Run the probe objective forward and backward once in each of ``precisions`` (default:
    the spec's precision, then float64); raise :class:`~attest.errors.CollectError` (see the
    module doc) when one raises. Returns the seconds each precision took.

    ``collect`` asks for float64 only, after run 0: run 0 (the reference capture) is the same
    forward and backward in the spec's precision, so a plain pass before it repeated it (about
    1 F of SwinUNETR's 4.8 F preflight). Only when run 0 failed does ``collect`` run the
    spec's precision here, to say where (and a model that fails only under the capture goes on
    as before, its failure in the evidence)."""
    if precisions is None:
        precisions = [ctx.spec.precision, "float64"]
    took = []
    for precision in precisions:
        # the float64 pass needs twice the model's memory: not on top of what run 0 and the
        # float32 pass freed and glibc kept (UNETR at 64^3: 1.28 GiB of 2.10 resident)
        ctx.release_spill_pages()
        release_memory()
        started = time.perf_counter()
        # as every phase but the training checks runs it (attest.collection.checkpointing):
        # reentrant checkpointing refuses the autograd.grad below
        with checkpointing_off():
            failure = _run_once(ctx, precision)
        if failure is not None:
            raise CollectError(failure.describe(), hint=failure.hint())
        took.append(time.perf_counter() - started)
    return took


# ctx.extras: the float64 pass is left to the profiler's float64 fidelity pass (defer_float64)
_DEFERRED = "preflight_float64_deferred"
_PROFILER = "attest.collection.profile.profiler:run"


def defer_float64(
    ctx: CollectContext, order: list[Any], *, workers: int, budget_s: float | None, resumed: bool
) -> bool:
    """Whether ``collect`` leaves the preflight's float64 pass to the profiler's float64
    fidelity pass, the first of the profile phase (after topology, which runs the model in
    its own precision only): that pass is the same forward and backward of the probe in
    float64 (the objective, the input and every trainable parameter), so a model that runs
    it ran the plain pass too, which then only cost one more float64 pass (3 s of resnet18's
    collect at 224^2, 8 s of SegResNet's at 64^3). When the fidelity pass fails, the plain
    pass runs right after it (:func:`float64_after_fidelity`) and raises as it would have
    here; a model that fails only under the capture goes on, its failure in the evidence, as
    before. Not deferred where the fidelity pass may not run next in this process: another
    runner list without the profiler, run 0 failed, ``--workers``, a ``--budget`` (its
    calibration reads the pass's time) or phases resumed from a work folder."""
    profile = ctx.profiler.profile
    if (
        workers != 1
        or budget_s is not None
        or resumed
        or _PROFILER not in order
        or profile is None
        or profile.failure is not None
    ):
        return False
    ctx.extras[_DEFERRED] = True
    return True


def float64_after_fidelity(ctx: CollectContext, failed: bool) -> None:
    """The float64 fidelity pass ran (``failed``: the model raised in it, or the pass did):
    when it stood for the preflight's float64 pass (:func:`defer_float64`) and failed, that
    pass runs now, plainly, and raises :class:`~attest.errors.CollectError` (exit 2) naming
    where, as it would have before the checks."""
    if ctx.extras.pop(_DEFERRED, False) and failed:
        preflight(ctx, ["float64"])


def _run_once(ctx: CollectContext, precision: str) -> PreflightFailure | None:
    dtype = precision_dtype(precision)
    probe = ctx.spec.inputs
    probe_shape = tuple(probe.shape)

    def failed(
        phase: str, exc: BaseException, entry: tuple[str, Shapes] | None
    ) -> PreflightFailure:
        if is_out_of_memory(exc):  # the machine, not the model: said as such
            raise out_of_memory_error(exc, f"the preflight's {precision} {phase}") from None
        module_type = None
        if entry is not None:
            found = dict(model.named_modules()).get(entry[0]) if model is not None else None
            module_type = type(found).__name__ if found is not None else None
        return PreflightFailure(
            precision=precision,
            phase=phase,
            module=entry[0] if entry is not None else None,
            module_type=module_type,
            module_inputs=entry[1] if entry is not None else [],
            probe_shape=probe_shape,
            error_type=type(exc).__name__,
            message=" ".join(str(exc).split())[:500],
        )

    model: nn.Module | None = None
    try:
        model = ctx.fresh_model(dtype)
    except AttestError:
        raise
    except Exception as exc:
        return failed("building the model", exc, None)
    x = ctx.inputs(dtype).detach().clone().requires_grad_(True)
    params = [p for p in model.parameters() if p.requires_grad]
    with _Tracker(model) as tracker:
        try:
            output = model(x)
        except Exception as exc:
            return failed("forward", exc, tracker.failed_in or ("", [probe_shape]))
        try:
            objective = target_scalar(model_output_tensor(output), ctx.spec).sum()
        except Exception as exc:
            return failed("the target", exc, None)
        if not objective.requires_grad:
            return None  # no gradient path: the checks say so, each in its own terms
        try:
            torch.autograd.grad(objective, [x, *params], allow_unused=True)
        except Exception as exc:
            return failed("backward", exc, tracker.backward_in)
    return None


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"
