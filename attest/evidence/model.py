"""The evidence file (``evidence.json``): what ``attest collect`` measured, as plain data.

This module is the contract between the collect side (which fills it, with torch) and the
policy, certificate, report and diff stages (which read it, without torch). It imports
neither torch nor numpy.

Every check reports one :class:`CheckResult` under its check id (:data:`CHECK_IDS`, each
described in docs/metrics.md, "Check ids") in :attr:`Evidence.checks`. A check lists one
:class:`CheckItem` per thing it looked at (an operator, a parameter, an input...), each with
named numeric ``metrics`` that policies hold against thresholds. A check that could not run
says so with ``status`` and ``reason``; it never reports a pass it did not measure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from attest.core.io import read_json_file
from attest.core.validation import validation_problems
from attest.errors import EvidenceError
from attest.evidence.compile_record import CompileRecord
from attest.evidence.export_record import (
    ExportDeployment,
    ExportedFile,
    ExportRecord,
    OnnxMapping,
    OnnxNode,
    OnnxNodeSource,
)
from attest.evidence.training_summary import TrainingSummary

__all__ = [
    "CHECK_IDS",
    "EXPORT_CHECKS",
    "GRADIENT_CHECKS",
    "IG_CHECKS",
    "PROFILE_CHECKS",
    "TOPOLOGY_CHECKS",
    "TRAINING_CHECKS",
    "BudgetCalibration",
    "BudgetRecord",
    "BudgetReduction",
    "CheckId",
    "CheckItem",
    "CheckResult",
    "CheckStatus",
    "CompileRecord",
    "DispatchRecord",
    "Evidence",
    "ExportDeployment",
    "ExportRecord",
    "ExportedFile",
    "ItemStatus",
    "Metric",
    "ModelFailure",
    "ModuleRow",
    "OnnxMapping",
    "OnnxNode",
    "OnnxNodeSource",
    "OperatorRow",
    "PhaseRecord",
    "Subject",
    "TrainingLogRecord",
    "load_evidence",
]

EVIDENCE_SCHEMA_VERSION = "1"

CheckId = Literal[
    "topology",
    "determinism",
    "fidelity",
    "gradcheck",
    "custom_ops",
    "kinks",
    "gradient_flow",
    "numerics",
    "accumulation",
    "second_order",
    "ig_completeness",
    "ig_convergence",
    "ig_baseline",
    "ig_monotonicity",
    "ig_randomization",
    "ig_determinism",
    "export",
    "thread_sensitivity",
    "mixed_precision",
    "recompute",
    "batch_invariance",
    "resume",
]
CHECK_IDS: tuple[str, ...] = CheckId.__args__  # type: ignore[attr-defined]
# The check ids by the stage of ``attest collect`` that produces them (one runner each), in
# the order of CHECK_IDS; together exactly CHECK_IDS. The collector, the IG checks and the
# report take their lists from here.
TOPOLOGY_CHECKS: tuple[CheckId, ...] = ("topology",)
PROFILE_CHECKS: tuple[CheckId, ...] = ("determinism", "fidelity", "numerics", "thread_sensitivity")
GRADIENT_CHECKS: tuple[CheckId, ...] = (
    "gradcheck",
    "custom_ops",
    "kinks",
    "gradient_flow",
    "accumulation",
    "second_order",
)
IG_CHECKS: tuple[CheckId, ...] = (
    "ig_completeness",
    "ig_convergence",
    "ig_baseline",
    "ig_monotonicity",
    "ig_randomization",
    "ig_determinism",
)
EXPORT_CHECKS: tuple[CheckId, ...] = ("export",)
# The training checks (docs/training.md): how the gradients behave under the ``training:``
# configuration the spec declares; not_applicable without it.
TRAINING_CHECKS: tuple[CheckId, ...] = (
    "mixed_precision",
    "recompute",
    "batch_invariance",
    "resume",
)

# computed: the check ran and its items hold the measurements.
# not_computed: the check could not be computed (reason says why, e.g. topology failed,
#   no loss given); a policy that requires it fails.
# not_implemented: this build does not implement it; a policy that requires it fails.
# not_applicable: the spec did not ask for it (no loss given, export not requested); the
#   policy rule's ``when_not_applicable`` decides whether that fails, warns or is accepted.
# error: the check itself raised; reason holds where and what.
CheckStatus = Literal["computed", "not_computed", "not_applicable", "not_implemented", "error"]
# The check's own reading of one item at the tolerances recorded in its parameters.
# Policies decide verdicts from metrics; this status is what the check itself concluded.
ItemStatus = Literal["pass", "fail", "warn", "not_computed", "error"]
Metric = float | int | bool | str | None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class Subject(_Strict):
    """What a result is about: the model, an operator, a module, a parameter, an input..."""

    kind: Literal["model", "operator", "module", "parameter", "input", "custom_op", "output"]
    operator_id: int | None = None
    op: str | None = None
    module: str | None = None
    name: str | None = None
    input_index: int | None = None
    indices: list[int] | None = None

    def label(self) -> str:
        """A short human-readable label, e.g. ``operator 12 aten.relu.default @ blocks.0.act``."""
        parts: list[str] = [self.kind]
        if self.operator_id is not None:
            parts.append(str(self.operator_id))
        if self.op:
            parts.append(self.op)
        if self.name:
            parts.append(self.name)
        if self.input_index is not None:
            parts.append(
                str(self.input_index) if self.kind == "input" else f"input {self.input_index}"
            )
        if self.module is not None:
            parts.append(f"@ {self.module or '<root>'}")
        if self.indices:
            parts.append(f"at {tuple(self.indices)}")
        return " ".join(parts)


class CheckItem(_Strict):
    """One measured result of a check, about one subject."""

    subject: Subject
    status: ItemStatus
    metrics: dict[str, Metric] = Field(default_factory=dict)
    message: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


class CheckResult(_Strict):
    """A check's results: its parameters (seed, eps, tolerances...), summary and items."""

    check: CheckId
    status: CheckStatus
    reason: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)
    summary: dict[str, Metric] = Field(default_factory=dict)
    items: list[CheckItem] = Field(default_factory=list)
    duration_s: float | None = None
    # The peak resident memory of the collect process while the phase that computed this
    # check ran (bytes; Evidence.phases has the phase's whole record); for the gradient
    # checks, while the check itself ran (docs/metrics.md).
    peak_rss_bytes: int | None = None

    @property
    def failed_items(self) -> list[CheckItem]:
        return [i for i in self.items if i.status == "fail"]


class _RowMapping(_Strict):
    """Typed row that also reads like the plain dict it replaced: ``row["id"]``,
    ``row.get("fidelity_pct")``, ``"fidelity_pct" in row`` (true when measured, i.e. not None)
    and ``dict(row)``."""

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        """The field's value, or ``default`` when unknown or not measured (None)."""
        value = getattr(self, key, None) if key in type(self).model_fields else None
        return default if value is None else value

    def __contains__(self, key: object) -> bool:
        return (
            isinstance(key, str)
            and key in type(self).model_fields
            and getattr(self, key) is not None
        )

    def keys(self) -> list[str]:
        """Field names, as a dict would list them."""
        return list(type(self).model_fields)


class OperatorRow(_RowMapping):
    """One operator (one ATen call of the forward pass) with its measurements (docs/metrics.md).

    A figure that could not be measured is None, with the reason in :attr:`not_computed`.
    ``per_target`` holds each hardware target's figures once evidence from several targets
    is merged (the top-level figures are then the worst over targets).
    """

    id: int
    op: str
    module: str
    output_shapes: list[list[int]] = Field(default_factory=list)
    output_dtypes: list[str] = Field(default_factory=list)
    has_backward: bool | None = None
    random: bool = False
    bit_exact_rate: float | None = None
    stability_score: float | None = None
    max_relative_deviation: float | None = None
    nondeterminism_origin: bool | None = None
    fidelity_pct: float | None = None
    output_fidelity_pct: float | None = None
    grad_fidelity_pct: float | None = None
    local_fidelity_pct: float | None = None
    local_output_fidelity_pct: float | None = None
    local_grad_fidelity_pct: float | None = None
    memory_delta_bytes: int | None = None
    saved_activation_bytes: int | None = None
    saved_parameter_bytes: int | None = None
    allocator_delta_bytes: int | None = None
    hardware_affinity_mask: list[str] = Field(default_factory=list)
    forward_ns: int | None = None
    backward_ns: int | None = None
    # the spread of the timings across runs (docs/metrics.md): None below two timings
    forward_ns_iqr: int | None = None
    forward_ns_p95: int | None = None
    backward_ns_iqr: int | None = None
    backward_ns_p95: int | None = None
    output_sha256: str | None = None
    grad_sha256: str | None = None
    thread_sensitive: bool | None = None
    nonfinite: bool | None = None
    not_computed: dict[str, str] = Field(default_factory=dict)
    per_target: dict[str, dict[str, Metric]] = Field(default_factory=dict)


class ModuleRow(_RowMapping):
    """The operator figures rolled up per module path, for humans (worst value, or the sum).

    Times are the sums of the operators' medians; the timing spread is not rolled up
    (percentiles of operators do not add up to the module's).
    """

    module: str
    operators: int
    operator_ids: list[int] = Field(default_factory=list)
    bit_exact_rate: float | None = None
    stability_score: float | None = None
    fidelity_pct: float | None = None
    local_fidelity_pct: float | None = None
    memory_delta_bytes: int | None = None
    forward_ns: int | None = None
    backward_ns: int | None = None
    thread_sensitive_operators: int = 0
    nonfinite_operators: int = 0
    random_operators: int = 0
    annotation: str | None = None


class ModelFailure(_Strict):
    """Where the model raised during collection (forward or backward), instead of a crash."""

    phase: Literal["forward", "backward"]
    module: str | None = None
    operator_id: int | None = None
    op: str | None = None
    error_type: str
    message: str


class PhaseRecord(_Strict):
    """One phase of ``attest collect`` as the process measured it: the reference capture, then
    one per check runner. Times in seconds; memory is the process's resident set (bytes)."""

    phase: str
    checks: list[str] = Field(default_factory=list)
    duration_s: float
    cpu_s: float  # user + system CPU time of the process during the phase
    peak_rss_bytes: int | None = None  # the highest resident set the phase reached
    rss_start_bytes: int | None = None
    rss_end_bytes: int | None = None
    peak_method: Literal["VmHWM", "sampled", "none"] = "none"
    # the worker process that ran it (attest collect --workers); None: this process
    worker: int | None = None
    # True: measured by an earlier, killed process of the same collect and read back from its
    # work folder by `attest collect --resume` (its times and memory are that process's);
    # None: measured by the process that wrote the evidence
    reused: bool | None = None
    # the pieces of the runner this record measured (attest.collection.pieces): their keys,
    # or ["join"] for the joining of every piece's output; None: the whole runner (and in
    # evidence written before runners had pieces)
    pieces: list[str] | None = None


class BudgetReduction(_Strict):
    """One setting a ``--budget`` plan lowered from the full work, and why."""

    setting: str
    full: Metric
    planned: Metric
    saves_s: float  # the planned saving, in seconds of the estimate


class BudgetCalibration(_Strict):
    """What a ``--budget`` collect measured on the model before planning (seconds)."""

    forward_backward_s: float  # one plain forward+backward of the probe (F)
    repeat_s: float  # one captured run compared with run 0, as a determinism repeat
    capture_s: float  # the reference capture (run 0)
    float64_s: float  # one plain float64 forward+backward (the preflight's)
    took_s: float  # the calibration's own time, inside the budget
    repeats_s: list[float] = Field(default_factory=list)  # each timed repeat, the warming first


class BudgetRecord(_Strict):
    """What ``attest collect --budget`` planned: the limit, the calibration, the floors and the
    smallest budget that meets them, the estimates, what it reduced, and an overrun."""

    limit_s: float
    unit_s: float  # the seconds of one pass (max of F and the captured repeat) estimates use
    estimate_full_s: float  # the estimated time of the full work
    estimate_planned_s: float  # the estimated time of the planned work
    elapsed_s: float | None = None  # what the collect took
    full_work: bool  # True: nothing had to be reduced
    reductions: list[BudgetReduction] = Field(default_factory=list)
    note: str | None = None  # set when the collect took longer than the limit
    calibration: BudgetCalibration | None = None  # None: evidence written before calibration
    minimum_s: float | None = None  # the smallest budget that meets the floors
    floors: dict[str, Metric] = Field(default_factory=dict)  # each setting's least work
    correction: float | None = None  # measured / estimated over the phases run
    # each phase run: its estimate when it started (planned_s) and its wall time (actual_s)
    phases: dict[str, dict[str, float]] = Field(default_factory=dict)


class TrainingLogRecord(_Strict):
    """A training log (``attest certify --training-log``): the file the certificate binds as a
    subject, its summary, and the headline series for the report's charts."""

    log: str  # the subject name of the log in the certificate
    sha256: str
    summary: TrainingSummary
    series: list[dict[str, float | int | None]] = Field(default_factory=list)


class DispatchRecord(_Strict):
    """Where a cluster ran one target's collect (``attest collect --ray``): the engine, the
    node, how many times the task was started (a worker that died is retried by the engine),
    what the task asked for and how long the successful attempt took."""

    target: str
    engine: Literal["ray"]
    engine_version: str
    address: str
    node: str | None = None
    hostname: str | None = None
    attempts: int = Field(ge=1)
    requested: dict[str, Any] = Field(default_factory=dict)
    duration_s: float | None = None


class Evidence(_Strict):
    """The whole evidence file. The profiler owns the model-level and per-operator fields;
    every check writes its :class:`CheckResult` into :attr:`checks`."""

    schema_version: str = EVIDENCE_SCHEMA_VERSION
    tool_version: str
    created_at: str
    model: dict[str, Any] = Field(default_factory=dict)
    artifacts: dict[str, dict[str, Any]] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    model_metrics: dict[str, Metric] = Field(default_factory=dict)
    operators: list[OperatorRow] = Field(default_factory=list)
    modules: list[ModuleRow] = Field(default_factory=list)
    checks: dict[str, CheckResult] = Field(default_factory=dict)
    annotations: list[dict[str, Any]] = Field(default_factory=list)
    attributions: dict[str, Any] | None = None
    model_failure: ModelFailure | None = None
    targets: list[str] = Field(default_factory=list)
    export: ExportRecord | None = None
    phases: list[PhaseRecord] = Field(default_factory=list)
    budget: BudgetRecord | None = None
    training_log: TrainingLogRecord | None = None
    dispatch: list[DispatchRecord] = Field(default_factory=list)
    compile: CompileRecord | None = None  # torch.compile settings (None: nothing compiled)


def load_evidence(path: str | Path) -> Evidence:
    """Read and validate an evidence file; any problem is an :class:`EvidenceError`."""
    data = read_json_file(path, what="evidence file")
    try:
        return Evidence.model_validate(data)
    except ValidationError as exc:
        raise EvidenceError(
            f"evidence file {path} is not valid evidence: {validation_problems(exc)}",
            hint="produce it with: attest collect SPEC -o evidence.json",
        ) from None
