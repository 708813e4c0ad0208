"""One run of the model under :class:`~attest.collection.capture.capture.OperatorCapture`.

:func:`run_model` drives one forward (+ backward) pass of the probe objective with the
observers given (the profiler's phases, the checks' captures) and returns a
:class:`RunOutcome`: the model output, the class indices differentiated, the gradients, and
a :class:`ModelFailure` saying where the model raised instead of an exception.
:func:`capture_operators` is the plain inventory (:class:`~attest.collection.capture.records.OpRecord`
per forward ATen call, arguments kept as the operator read them).
"""

from __future__ import annotations

import gc
import re
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map

from attest.collection.capture.capture import (
    CaptureObserver,
    ForwardCall,
    OperatorCapture,
    _ModuleStack,
)
from attest.collection.capture.records import OpRecord, target_scalar
from attest.collection.capture.tensors import (
    TensorVault,
    VaultBox,
    flat_tensors,
    map_tensors,
)
from attest.spec import LoadedSpec

__all__ = [
    "ModelFailure",
    "RunOutcome",
    "capture_operators",
    "mixed_precision_hint",
    "model_output_tensor",
    "run_model",
]

MIXED_PRECISION_HINT = (
    "the model mixes float64 and float32 tensors: a tensor it keeps as a plain attribute (made "
    "with an explicit dtype, not registered as a parameter or buffer) is not converted by "
    "Module.to(torch.float64); register it with register_buffer (persistent=False if it is not "
    "part of the weights) so that every precision the checks run in converts it"
)


def mixed_precision_hint(message: str) -> str:
    """:data:`MIXED_PRECISION_HINT` prefixed with "; " when ``message`` is a dtype mismatch
    between float64 and float32 (which the float64 checks meet in a model that hard-codes a
    float32 tensor, such as MONAI's GlobalNet grid), else ""."""
    text = message.lower()
    wide = "double" in text or "float64" in text
    narrow = "float32" in text or re.search(r"\bfloat\b(?!\d)", text) is not None
    return f"; {MIXED_PRECISION_HINT}" if wide and narrow else ""


@dataclass
class ModelFailure:
    """Where a model raised: phase, module path, operator (when inside one) and the error."""

    phase: str  # "forward" | "backward"
    module: str | None
    operator_id: int | None
    op: str | None
    error_type: str
    message: str

    def describe(self) -> str:
        """One sentence for evidence and error items."""
        where = []
        if self.op:
            where.append(f"operator {self.operator_id} {self.op}")
        if self.module is not None:
            where.append(f"module {self.module or '<root>'!r}")
        loc = " in " + ", ".join(where) if where else ""
        hint = mixed_precision_hint(self.message)
        return f"model raised {self.error_type} in {self.phase}{loc}: {self.message}{hint}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "module": self.module,
            "operator_id": self.operator_id,
            "op": self.op,
            "error_type": self.error_type,
            "message": self.message,
        }


def model_output_tensor(output: Any) -> torch.Tensor:
    """The tensor a model's output stands for: itself, the first tensor of a tuple/list, or
    ``"out"``/``"logits"``/the first tensor value of a mapping."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        for key in ("out", "logits"):
            if isinstance(output.get(key), torch.Tensor):
                return output[key]  # type: ignore[no-any-return]
    tensors = flat_tensors(output)
    if not tensors:
        raise TypeError(f"the model returned {type(output).__name__} holding no tensor")
    return tensors[0]


@dataclass
class RunOutcome:
    """What one run produced, beyond what its observers recorded."""

    ops: list[tuple[str, str]]
    output: torch.Tensor | None = None  # model output (detached)
    classes: torch.Tensor | None = None  # the class index differentiated per example
    input_grad: torch.Tensor | None = None
    param_grads: dict[str, torch.Tensor | None] = field(default_factory=dict)
    failure: ModelFailure | None = None
    forward_ns: list[int] = field(default_factory=list)
    backward_ns: dict[int, int] = field(default_factory=dict)
    # the model's whole backward (``torch.autograd.grad``), host clock, synchronized on CUDA:
    # the per-operator times leave out the autograd engine and whatever no hook sees
    backward_wall_ns: int | None = None
    no_grad_path: bool = False  # the target does not depend on anything that requires grad
    nodes: dict[int, Any] = field(default_factory=dict)
    engine_detaches: dict[int, int] = field(default_factory=dict)
    packed_saved: dict[int, int] = field(default_factory=dict)  # op id -> values left packed
    memory_marks: tuple[int, int] | None = (
        None  # CUDA memory_allocated after forward, after backward
    )


def _failure(
    phase: str,
    exc: BaseException,
    capture: OperatorCapture,
    modules: _ModuleStack | None,
    model: nn.Module,
) -> ModelFailure:
    op_id: int | None = None
    op: str | None = None
    module: str | None = None
    if capture.in_flight is not None:
        op_id, module, op = capture.in_flight
    if phase == "backward":
        if op_id is None:
            op_id = capture.backward_op
        module = None
        if op_id is not None and op_id < len(capture.ops):
            fwd_op, module = capture.ops[op_id]
            op = f"{op} (backward of {fwd_op})" if op else fwd_op
    if module is None and modules is not None:
        module = modules.failed_in
    if module is None:
        module = _module_from_traceback(exc, model)
    message = " ".join(str(exc).split())[:500]
    return ModelFailure(phase, module, op_id, op, type(exc).__name__, message)


def _module_from_traceback(exc: BaseException, model: nn.Module) -> str | None:
    names = {id(m): n for n, m in model.named_modules()}
    found: str | None = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        owner = frame.f_locals.get("self")
        if owner is not None and id(owner) in names:
            found = names[id(owner)]
    return found


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for one run, back on (if it was) afterwards.

    A run allocates many small Python objects (one per ATen call and autograd node), which
    triggers collections, and each full collection walks every live object, among them all
    that the profiler keeps of run 0: with it on, the profiler's cost per operator grew with
    the model (measured: +40 % per operator on the float64 run from 61 to 453 operators);
    off, it stays flat. Tensors are freed by reference counting either way; cycles made
    during the run are collected after it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def _seeded(seed: int | None) -> Iterator[None]:
    """Seed the generators for one run and restore their state afterwards.

    On a CPU-only build this seeds the CPU generator directly: ``torch.manual_seed`` would
    also queue lazy seeding calls for every accelerator backend, each formatting a stack
    trace, which costs more than a small model's forward pass.
    """
    if seed is None:
        yield
        return
    if torch.cuda.is_available():
        initialized = bool(torch.cuda.is_initialized())  # type: ignore[no-untyped-call]
        devices: list[int] = list(range(torch.cuda.device_count())) if initialized else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            yield
        return
    state = torch.get_rng_state()
    torch.default_generator.manual_seed(seed)
    try:
        yield
    finally:
        torch.set_rng_state(state)


def run_model(
    model: nn.Module,
    inputs: torch.Tensor,
    spec: LoadedSpec,
    observers: Sequence[CaptureObserver] = (),
    *,
    labels: torch.Tensor | None = None,
    classes: torch.Tensor | None = None,
    backward: bool = True,
    seed: int | None = 0,
    cuda_timing: bool = False,
    cuda_memory: bool = False,
    memory_marks: bool = False,
    capture_factory: Callable[[_ModuleStack], OperatorCapture] | None = None,
    track_modules: bool = True,
) -> RunOutcome:
    """One forward (+ backward) pass of ``model`` on ``inputs`` under :class:`OperatorCapture`.

    Backward differentiates ``sum_n F(x_n)`` (:func:`~attest.collection.capture.records.target_scalar`)
    with respect to the inputs and every trainable parameter. ``classes`` fixes the class index
    per example (so that runs in other precisions differentiate the same quantity); without it
    the spec's target decides and the chosen classes are returned. A model that raises gives a
    :class:`ModelFailure` in the outcome instead of an exception. ``capture_factory`` replaces
    the dispatch mode (the profiler's repeat runs use a leaner one); ``track_modules=False``
    skips module attribution.
    """
    x = inputs.detach().clone().requires_grad_(True)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    outcome = RunOutcome(ops=[])
    with _gc_paused(), _seeded(seed), _ModuleStack(model, track_modules) as modules:
        if capture_factory is not None:
            capture = capture_factory(modules)
        else:
            capture = OperatorCapture(
                modules, observers, cuda_timing=cuda_timing, cuda_memory=cuda_memory
            )
        after_forward = 0
        try:
            try:
                with capture:
                    output = model(x)
                    capture.settle()
                if memory_marks:
                    after_forward = int(torch.cuda.memory_allocated(x.device))
                for obs in observers:
                    obs.mark("forward_done")
            except Exception as exc:
                outcome.failure = _failure("forward", exc, capture, modules, model)
                return _finish(outcome, capture)
            try:
                out_tensor = model_output_tensor(output)
                outcome.output = out_tensor.detach()
                if not backward:
                    return _finish(outcome, capture)
                if classes is None:
                    classes = _classes_for(out_tensor, spec, labels)
                outcome.classes = classes
                fixed = replace(spec, target="label") if classes is not None else spec
                objective = target_scalar(out_tensor, fixed, classes).sum()
            except Exception as exc:
                outcome.failure = ModelFailure(
                    "forward", "", None, None, type(exc).__name__, " ".join(str(exc).split())[:500]
                )
                return _finish(outcome, capture)
            if not objective.requires_grad:
                outcome.no_grad_path = True
                return _finish(outcome, capture)
            wrt = [x] + [p for _, p in params]
            try:
                capture.in_backward_phase = True
                if cuda_timing:
                    torch.cuda.synchronize(x.device)
                started = time.perf_counter_ns()
                if capture.wants_backward_calls:
                    with capture:
                        grads = torch.autograd.grad(objective, wrt, allow_unused=True)
                else:  # node hooks only: the backward ATen calls run at full speed
                    grads = torch.autograd.grad(objective, wrt, allow_unused=True)
                if cuda_timing:
                    torch.cuda.synchronize(x.device)
                outcome.backward_wall_ns = time.perf_counter_ns() - started
            except Exception as exc:
                outcome.failure = _failure("backward", exc, capture, None, model)
                return _finish(outcome, capture)
            for obs in observers:
                obs.mark("backward_done")
            if memory_marks:
                outcome.memory_marks = (after_forward, int(torch.cuda.memory_allocated(x.device)))
            outcome.input_grad = grads[0].detach() if grads[0] is not None else None
            outcome.param_grads = {
                n: (g.detach() if g is not None else None)
                for (n, _), g in zip(params, grads[1:], strict=True)
            }
            return _finish(outcome, capture)
        finally:
            capture.remove_hooks()


def _classes_for(
    output: torch.Tensor, spec: LoadedSpec, labels: torch.Tensor | None
) -> torch.Tensor | None:
    if output.dim() < 2:
        return None
    n, c = output.shape[0], output.shape[1]
    if isinstance(spec.target, int):
        if spec.target >= c:
            raise ValueError(f"target class {spec.target} but the model has {c} output classes")
        return torch.full((n,), spec.target, dtype=torch.long, device=output.device)
    if spec.target == "label":
        lab = labels if labels is not None else spec.labels
        if lab is None:
            raise ValueError("target: label needs a 'target' tensor in the probe inputs")
        lab = lab.to(device=output.device, dtype=torch.long).reshape(n)
        if bool((lab >= c).any()):
            raise ValueError(
                f"probe labels go up to {int(lab.max())} but the model has {c} output classes"
            )
        return lab
    return output.detach().reshape(n, c, -1).sum(dim=2).argmax(dim=1)


def _finish(outcome: RunOutcome, capture: OperatorCapture) -> RunOutcome:
    capture.resolve_cuda_timings()
    outcome.ops = list(capture.ops)
    outcome.forward_ns = list(capture.forward_ns)
    outcome.backward_ns = dict(capture.backward_ns)
    outcome.nodes = dict(capture.nodes)
    outcome.engine_detaches = dict(capture.engine_detaches)
    outcome.packed_saved = dict(capture.packed_saved)
    return outcome


def _keep_tree(vault: TensorVault, value: Any) -> Any:
    return map_tensors(vault.keep, value)


def _unbox_tree(value: Any) -> Any:
    if isinstance(value, VaultBox):
        return value.value
    kind = type(value)
    if kind is list or kind is tuple:
        return kind(_unbox_tree(v) for v in value)
    if kind is dict:
        return {k: _unbox_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, dict)):
        return tree_map(lambda v: v.value if isinstance(v, VaultBox) else v, value)
    return value


class _RecordObserver(CaptureObserver):
    """Builds :class:`OpRecord` rows with stable snapshots of each call's arguments (as the
    operator read them: an in-place call's written argument is kept from before the write)."""

    wants_inputs = True

    def __init__(self, vault: TensorVault, keep: Callable[[str], bool] | None = None) -> None:
        self.vault = vault
        self.keep = keep
        self.pending: list[tuple[_Placed, Any, Any]] = []

    def forward(self, call: ForwardCall) -> None:
        # The call's name and place, not the call: a ForwardCall holds its live arguments and
        # outputs, so holding every call held every activation of the run to its end (the
        # kinks check's float64 run of a 64^3 SwinUNETR, feature_size 24: 8.8 GiB over what
        # the collect held, its peak; issue #38).
        placed = _Placed(
            call.index,
            call.op,
            call.module,
            call.func,
            [list(t.shape) for t in call.outputs],
            [str(t.dtype).removeprefix("torch.") for t in call.outputs],
        )
        if self.keep is not None and not self.keep(call.op):
            self.pending.append((placed, (), {}))  # named and placed, its arguments not kept
            return
        args, kwargs = call.inputs()
        kept = (placed, _keep_tree(self.vault, args), _keep_tree(self.vault, kwargs))
        self.pending.append(kept)

    def before_write(self, tensor: torch.Tensor) -> None:
        self.vault.before_write(tensor)

    def records(self) -> list[OpRecord]:
        return [
            OpRecord(
                id=placed.index,
                op=placed.op,
                module=placed.module,
                func=placed.func,
                args=tuple(_unbox_tree(args)),
                kwargs=dict(_unbox_tree(kwargs)),
                output_shapes=placed.output_shapes,
                output_dtypes=placed.output_dtypes,
            )
            for placed, args, kwargs in self.pending
        ]


@dataclass
class _Placed:
    """What a record needs of a forward call besides its arguments."""

    index: int
    op: str
    module: str
    func: Any
    output_shapes: list[list[int]]
    output_dtypes: list[str]


def capture_operators(
    model: nn.Module,
    inputs: torch.Tensor,
    spec: LoadedSpec,
    *,
    labels: torch.Tensor | None = None,
    backward: bool = True,
    observers: Sequence[CaptureObserver] = (),
    seed: int | None = 0,
    keep: Callable[[str], bool] | None = None,
) -> tuple[list[OpRecord], RunOutcome]:
    """The operator inventory of one forward (+ backward) pass: :class:`OpRecord` per forward
    ATen call in execution order (arguments detached and kept unchanged), plus the run outcome
    (a model that raises gives ``outcome.failure`` and the records up to that point).
    ``keep(op)``: whether to keep that operator's arguments (default all); the others' records
    carry the name, module and output shapes with empty ``args`` and ``kwargs``, so a caller
    that reads a few operators' values does not hold the whole run's."""
    vault = TensorVault()
    recorder = _RecordObserver(vault, keep)
    outcome = run_model(
        model, inputs, spec, [recorder, *observers], labels=labels, backward=backward, seed=seed
    )
    records = recorder.records()
    vault.clear()
    return records, outcome
