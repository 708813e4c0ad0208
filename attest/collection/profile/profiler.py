"""The operator profiler: one reference run, float64 fidelity, repeats, thread count.

Phases (each a forward + backward pass under :class:`~attest.collection.capture.capture.OperatorCapture`,
each measuring through its own :class:`~attest.collection.capture.capture.CaptureObserver`):

1. reference (run 0, deployed precision, configured threads): the operator inventory, every
   operator's outputs, the gradient flowing into them (``grad_outputs``) and the gradient they
   compute (``grad_inputs``); what each operator saves for backward; sha256 fingerprints.
2. float64 (:mod:`attest.collection.profile.float64_pass`): the same model in float64. Accumulated
   fidelity compares each operator's outputs and output gradients with the reference; local
   fidelity re-runs each operator (and each of its backward ATen calls) alone in the
   deployed precision on the float64 inputs cast down.
3. repeats (runs 1..R-1, :mod:`attest.collection.profile.repeats`): bitwise comparison with the
   reference, per operator, and the largest relative deviation where the bits differ.
4. thread count (same module): one run at 1 intra-op thread (or 2 when 1 is configured),
   compared bitwise.

Memory: run 0's outputs and gradients (the reference) and the operators' captured arguments
(``ctx.operators``, for the checks that re-run operators) are moved to a memory-mapped
temporary file when run 0 is over (:mod:`attest.collection.capture.spill`), not held as tensors, so
each later run, the float64 one included, runs next to page cache rather than next to about
two more copies of the model's activations and gradients.

Nothing is estimated: every figure comes from these runs. The checks ``determinism``,
``fidelity``, ``numerics`` and ``thread_sensitivity`` are built from the result in
``checks.py``; :func:`run` is their entry in ``attest.collection.CHECK_RUNNERS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from attest.collection.capture.capture import CaptureObserver, ForwardCall
from attest.collection.capture.run import RunOutcome, _RecordObserver, run_model
from attest.collection.capture.spill import PAGED_EVERY, SpillFile, spill_storages
from attest.collection.capture.tensors import (
    TensorVault,
    VaultBox,
    flat_tensors,
    map_tensors,
    tensor_storage,
)
from attest.collection.context import CollectContext, OpRecord
from attest.collection.pieces import Split, run_split
from attest.collection.profile.float64_pass import measure_fidelity
from attest.collection.profile.measures import (
    OpMeasure,
    Profile,
    is_allocation_op,
    is_random_op,
    median_or_none,
)
from attest.collection.profile.op_metrics import (
    tensors_sha256,
)
from attest.collection.profile.repeats import (
    allocated_bytes,
    attach_backward_times,
    is_view_op,
    measure_repeats,
    parameter_storages,
    storage_ptrs,
)
from attest.collection.profile.split import join, pieces, run_piece
from attest.evidence.model import CheckResult

__all__ = [
    "OpMeasure",
    "Profile",
    "capture_reference",
    "is_random_op",
    "join",
    "measure_fidelity",
    "measure_repeats",
    "median_or_none",
    "pieces",
    "run",
    "run_piece",
]

# --- phase 1: reference ----------------------------------------------------------------------


class _ReferenceObserver(CaptureObserver):
    wants_grads = True
    wants_saved = True

    def __init__(self, vault: TensorVault, spill: SpillFile, parameter_storages: set[int]) -> None:
        self.vault = vault
        self.spill = spill
        self.parameter_storages = parameter_storages
        self.ops: list[OpMeasure] = []
        self.seen_storages: set[int] = set()
        self.unwritten_storages: set[int] = set()  # allocated, not yet written by any operator
        self.parameter_bytes: dict[int, int] = {}

    def forward(self, call: ForwardCall) -> None:
        measure = OpMeasure(
            id=call.index,
            op=call.op,
            module=call.module,
            output_shapes=[list(t.shape) for t in call.outputs],
            output_dtypes=[str(t.dtype).removeprefix("torch.") for t in call.outputs],
            random=is_random_op(call.op),
            func=call.func,
            outputs=[self.vault.keep(t) for t in call.outputs],
        )
        outputs = storage_ptrs(call.outputs)
        if is_allocation_op(call.op):
            measure.uninitialized = True
            self.unwritten_storages |= outputs
        elif outputs & self.unwritten_storages:
            if is_view_op(call.func):  # e.g. a detach of the allocation: still unwritten
                measure.uninitialized = True
            else:  # an operator wrote into it (copy_, fill_, out=...): initialized from here on
                self.unwritten_storages -= outputs
        measure.forward_ns.append(call.elapsed_ns)
        measure.allocator_delta_bytes = call.allocator_delta_bytes
        self.ops.append(measure)

    def saved(self, op_id: int, tensors: list[torch.Tensor]) -> None:
        activations: dict[int, int] = {}
        parameters: dict[int, int] = {}
        for t in tensors:
            storage = tensor_storage(t)
            if storage is None:
                continue
            ptr = int(storage.data_ptr())
            target = parameters if ptr in self.parameter_storages else activations
            target[ptr] = int(storage.nbytes())
        measure = self.ops[op_id]
        measure.saved_activation_bytes = sum(activations.values())
        measure.saved_parameter_bytes = sum(parameters.values())
        self.parameter_bytes.update(parameters)
        fresh = [ptr for ptr in activations if ptr not in self.seen_storages]
        measure.memory_delta_bytes = sum(activations[p] for p in fresh)
        self.seen_storages.update(fresh)

    def grads(
        self,
        op_id: int,
        grad_outputs: Sequence[torch.Tensor | None],
        grad_inputs: Sequence[torch.Tensor | None],
    ) -> None:
        measure = self.ops[op_id]
        # Copied out now (hooks run between ATen calls): held until run 0 ends, the gradients
        # would add about one forward+backward peak to it. Forward outputs stay in the vault
        # (most are alive anyway, saved for backward, and the operators' arguments view the
        # same storages) and move to the spill file with them when the run is over.
        put = self.spill.put
        measure.grad_outputs = [put(g) if g is not None else None for g in grad_outputs]
        measure.grad_inputs = [put(g) if g is not None else None for g in grad_inputs]

    def before_write(self, tensor: torch.Tensor) -> None:
        self.vault.before_write(tensor)


def capture_reference(ctx: CollectContext) -> Profile:
    """Run 0: fill ``ctx.operators`` and keep the reference every later phase compares with
    (moved to a spill file once the run is over, see :mod:`attest.collection.capture.spill`)."""
    spec = ctx.spec
    model = ctx.fresh_model()
    x = ctx.inputs()
    cuda = x.device.type == "cuda"
    vault = TensorVault()  # run 0's forward tensors, copy on write until the run is over
    spill = SpillFile()
    recorder = _RecordObserver(vault)
    reference = _ReferenceObserver(vault, spill, parameter_storages(model))
    base = allocated_bytes(x.device)
    if cuda:
        torch.cuda.reset_peak_memory_stats(x.device)
    outcome = run_model(
        model,
        x,
        spec,
        [recorder, reference],
        labels=spec.labels,
        seed=ctx.settings.seed,
        cuda_timing=cuda,
        cuda_memory=cuda,
    )
    if cuda:  # run 0's per-operator times: the CUDA-event times resolved after the run, as
        # the repeats record them, not the host launch time taken when each call returned
        for measure in reference.ops:
            if measure.forward_ns and measure.id < len(outcome.forward_ns):
                measure.forward_ns[0] = outcome.forward_ns[measure.id]
    vault.clear()  # later phases only read; nothing of run 0 is written any more
    ctx.operators = recorder.records()
    _spill_run0(spill, ctx.operators, reference.ops, outcome, x)
    outcome.nodes = {}  # autograd nodes of run 0 (they hold its parameters): not needed after
    profile = Profile(
        precision=spec.precision,
        device=str(x.device),
        ops=reference.ops,
        reference=outcome,
        failure=outcome.failure,
        spills=[spill],
    )
    attach_backward_times(profile.ops, outcome.backward_ns)
    for op_id, count in outcome.engine_detaches.items():
        if op_id < len(profile.ops):
            profile.ops[op_id].engine_detaches = count
    _digest_outputs(profile.ops, profile.spills[0].release)
    profile.model_forward_ns.append(sum(outcome.forward_ns))
    profile.model_backward_ns.append(sum(outcome.backward_ns.values()))
    profile.extra["saved_parameter_bytes_total"] = sum(reference.parameter_bytes.values())
    if cuda:
        profile.extra["reference_peak_bytes"] = (
            int(torch.cuda.max_memory_allocated(x.device)) - base
        )
    ctx.profiler.profile = profile
    if outcome.failure is not None:
        ctx.profiler.failure = outcome.failure
    return profile


def _digest_outputs(ops: list[OpMeasure], release: Callable[[], None]) -> None:
    """Each operator's output and gradient sha256, on as many threads as the run used:
    ``hashlib`` releases the GIL while it hashes a large buffer, and run 0's tensors are only
    read by now (a real-size model has gigabytes of them: a ViT-S/16's took 0.52 s of a
    2.2 s capture one after the other, 0.32 s on two threads).

    They are read from the spill file's map, so every page read stays in the process's
    resident set until given back: ``release`` (the spill file's) runs after every
    :data:`PAGED_EVERY` operators or :data:`_DIGEST_BYTES` read. Without it, the capture's peak resident size held the
    whole file (SwinUNETR at 64^3: 6.5 GiB of file pages, 6x the bare process's peak)."""

    def digest(measure: OpMeasure) -> None:
        measure.output_sha256 = tensors_sha256(b.value for b in measure.outputs)
        if measure.grad_inputs is not None:
            measure.grad_sha256 = tensors_sha256(
                b.value if b is not None else None for b in measure.grad_inputs
            )

    workers = max(1, torch.get_num_threads())
    chunks = _chunks(ops)
    if workers == 1 or len(ops) < 2:
        for chunk in chunks:
            for measure in chunk:
                digest(measure)
            release()
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attest-sha256") as pool:
        for chunk in chunks:
            for _ in pool.map(digest, chunk):  # re-raises a worker's exception here
                pass
            release()


# Bytes of run 0 read between two releases of the map while hashing: a 3D model's operators
# are tens of MiB each, so PAGED_EVERY of them alone left 1.9 GiB resident on SwinUNETR.
_DIGEST_BYTES = 256 << 20


def _chunks(ops: list[OpMeasure]) -> list[list[OpMeasure]]:
    """``ops`` in runs of at most :data:`PAGED_EVERY` operators and about
    :data:`_DIGEST_BYTES` of outputs and gradients (one operator at least)."""
    chunks: list[list[OpMeasure]] = []
    chunk: list[OpMeasure] = []
    size = 0
    for measure in ops:
        boxes = [*measure.outputs, *(b for b in measure.grad_inputs or () if b is not None)]
        nbytes = sum(b.value.numel() * b.value.element_size() for b in boxes)
        if chunk and (len(chunk) == PAGED_EVERY or size + nbytes > _DIGEST_BYTES):
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(measure)
        size += nbytes
    if chunk:
        chunks.append(chunk)
    return chunks


def _spill_run0(
    spill: SpillFile,
    records: list[OpRecord],
    ops: list[OpMeasure],
    outcome: RunOutcome,
    x: torch.Tensor,
) -> None:
    """Move the rest of what run 0 leaves for later phases from tensor memory to ``spill``
    (which already holds its gradients) and seal it: every operator's outputs (the reference),
    the operators' captured arguments (``ctx.operators``: run 0's activations and parameters),
    the model output and gradients. Each storage is written once, however many of these
    tensors view it; only the probe inputs stay (they are the spec's own tensor). Readers see
    the same values, strides and aliasing as before.
    """
    boxes = [b for m in ops for b in m.outputs if isinstance(b, VaultBox)]
    grads = {k: v for k, v in outcome.param_grads.items() if v is not None}
    ends = [t for t in (outcome.output, outcome.input_grad) if t is not None]
    leaves = [t for r in records for t in flat_tensors((r.args, r.kwargs))]
    tensors = [*leaves, *(b.value for b in boxes), *ends, *grads.values()]
    _, moved = spill_storages(tensors, storage_ptrs([x]), into=spill)
    if not moved:
        return

    def swap(v: torch.Tensor) -> torch.Tensor:
        return moved.get(id(v), v)

    for r in records:
        r.args = tuple(map_tensors(swap, r.args))
        r.kwargs = dict(map_tensors(swap, r.kwargs))
    for box in boxes:
        box.value = swap(box.value)
    outcome.output = map_tensors(swap, outcome.output)
    outcome.input_grad = map_tensors(swap, outcome.input_grad)
    outcome.param_grads.update({k: swap(v) for k, v in grads.items()})


def run(ctx: CollectContext) -> list[CheckResult]:
    """Check runner: the measurement phases, then the determinism, fidelity, numerics and
    thread_sensitivity results built from them. The phases are pieces
    (:mod:`attest.collection.profile.split`): the float64 pass, each repeat, the thread-count
    run; here one after another, split over workers by ``attest collect --workers``."""
    if ctx.profiler.profile is None:
        capture_reference(ctx)
    return run_split(ctx, Split(pieces, run_piece, join))
