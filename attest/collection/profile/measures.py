"""What the profiler measured: one :class:`OpMeasure` per operator of the reference run and the
:class:`Profile` of the whole run, shared with the checks built from it (``ctx.profiler``,
a :class:`~attest.collection.profile.state.ProfileState`). Data types only, so the checks import them without importing the
profiler that fills them.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from attest.collection.capture.run import ModelFailure, RunOutcome
from attest.collection.capture.spill import SpillFile, TensorRef

__all__ = [
    "OpMeasure",
    "Profile",
    "is_allocation_op",
    "is_random_op",
    "median_or_none",
]

# The ATen random family: a forward that calls one of these is not deterministic unless the
# generator is seeded identically before every call, which a deployment rarely guarantees.
_RANDOM_PREFIXES = (
    "aten.bernoulli",
    "aten.native_dropout",
    "aten.dropout",
    "aten.feature_dropout",
    "aten.alpha_dropout",
    "aten.feature_alpha_dropout",
    "aten.rand",
    "aten.randn",
    "aten.randint",
    "aten.randperm",
    "aten.rand_like",
    "aten.randn_like",
    "aten.randint_like",
    "aten.normal",
    "aten.uniform",
    "aten.exponential",
    "aten.geometric",
    "aten.cauchy",
    "aten.log_normal",
    "aten.multinomial",
    "aten.poisson",
    "aten.random_",
    "aten.rrelu",
    "aten._standard_gamma",
    "aten._sample_dirichlet",
    "aten.binomial",
    "aten._fused_dropout",
)


def is_random_op(op: str) -> bool:
    """True for ATen operators that draw from a random generator."""
    return op.startswith(_RANDOM_PREFIXES)


_ALLOCATION_RE = re.compile(r"^aten\.(new_)?empty(_like|_strided|_permuted)?\.")


def is_allocation_op(op: str) -> bool:
    """True for ATen operators that return uninitialized memory (``empty_like``...): their
    bytes are whatever the allocator held, so comparing them between runs or against float64
    measures nothing. The operator that then fills the memory is measured instead."""
    return bool(_ALLOCATION_RE.match(op))


@dataclass
class OpMeasure:
    """Everything measured about one operator of the reference run."""

    id: int
    op: str
    module: str
    output_shapes: list[list[int]]
    output_dtypes: list[str]
    random: bool
    func: Any = None  # the OpOverload (repeat runs align with run 0 by it)
    # output is uninitialized memory (an allocation, or a view of one before anything wrote it)
    uninitialized: bool = False
    engine_detaches: int = 0  # detaches the autograd engine issues right after this operator
    outputs: list[TensorRef] = field(default_factory=list)
    grad_outputs: list[TensorRef | None] | None = None
    grad_inputs: list[TensorRef | None] | None = None
    forward_ns: list[int] = field(default_factory=list)
    backward_ns: list[int] = field(default_factory=list)
    # determinism
    runs_compared: int = 0
    runs_exact: int = 0
    origin_runs: int = 0  # runs in which this operator is where a difference starts
    max_deviation: float = 0.0
    repeat_nonfinite: str | None = None  # a tensor NaN or infinite in one run only, named
    # thread sensitivity
    thread_changed: bool | None = None
    thread_deviation: float | None = None
    # fidelity (relative errors; None = not measured)
    out_err: float | None = None
    grad_err: float | None = None
    local_out_err: float | None = None
    local_grad_sq: list[float] = field(default_factory=lambda: [0.0, 0.0])  # diff^2, ref^2
    local_grad_failed: str | None = None
    local_out_failed: str | None = None
    # the side of an accumulated comparison that was NaN or infinite alone (a failure)
    nonfinite: str | None = None
    float64_aligned: bool = False
    # memory
    saved_activation_bytes: int | None = None
    saved_parameter_bytes: int | None = None
    memory_delta_bytes: int | None = None
    allocator_delta_bytes: int | None = None
    # fingerprints
    output_sha256: str | None = None
    grad_sha256: str | None = None

    @property
    def local_grad_err(self) -> float | None:
        diff_sq, ref_sq = self.local_grad_sq
        if self.local_grad_failed or (
            diff_sq == 0.0 and ref_sq == 0.0 and self.grad_inputs is None
        ):
            return None
        if ref_sq == 0.0:
            return 0.0 if diff_sq == 0.0 else math.inf
        return math.sqrt(diff_sq / ref_sq)


@dataclass
class Profile:
    """The profiler's result, shared with the checks through ``ctx.profiler.profile``."""

    precision: str
    device: str
    ops: list[OpMeasure]
    reference: RunOutcome
    failure: ModelFailure | None = None
    runs: int = 1
    model_exact_runs: int = 0  # repeats whose output and all gradients equal run 0's
    sequence_changed_runs: int = 0
    float64_failure: ModelFailure | None = None
    float64_unaligned_ops: int = 0
    thread_counts: tuple[int, int] | None = None
    thread_failure: ModelFailure | None = None
    thread_model_changed: bool | None = None
    forward_memory_bytes: list[int] = field(default_factory=list)
    backward_memory_bytes: list[int] = field(default_factory=list)
    peak_memory_bytes: int | None = None
    fragmentation: float | None = None
    model_forward_ns: list[int] = field(default_factory=list)
    model_backward_ns: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    # the files behind the kept tensors (run 0's reference, the operators' arguments)
    spills: list[SpillFile] = field(default_factory=list, repr=False)

    @property
    def spill_bytes(self) -> int:
        """Bytes written to the spill files (the disk ``collect`` needs for run 0)."""
        return sum(s.size for s in self.spills)


def median_or_none(values: list[int]) -> int | None:
    """Median of timings, as an int of nanoseconds."""
    return int(statistics.median(values)) if values else None
