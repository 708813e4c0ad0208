"""What ``attest.yaml`` holds: the file as a user writes it (:class:`SpecFile`), and the spec
loaded for collection (:class:`LoadedSpec`: the model factory, trained weights and probe inputs).

The pydantic models need no torch; :class:`LoadedSpec` carries torch objects, named here only
for type checkers, so importing this module never imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from attest.spec.sections import (
    FACTORY_RE,
    HeadSection,
    InputsSection,
    OutputPath,
    check_target,
    output_path_parts,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

    from attest.spec.compiled import CompileInfo
    from attest.spec.model_call import ModelCall
    from attest.spec.source import ModelFolder

__all__ = [
    "HeadSection",
    "InputsSection",
    "LoadedSpec",
    "ModelSection",
    "Precision",
    "SpecFile",
    "TargetSpec",
    "TrainingConfig",
    "TrainingSection",
    "budget_seconds",
    "parse_budget",
]

TargetSpec = int | Literal["argmax", "label"]
Precision = Literal["float32", "bfloat16", "float16"]

_DEVICE_RE = re.compile(r"^(cpu|cuda|cuda:\d+)$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Strict):
    """``model:`` -- identity of the model line and how to build it with its trained weights:
    a factory and a weights file, or (``pretrained:``) a local Hugging Face folder loaded with
    transformers' ``from_pretrained`` (:mod:`attest.spec.pretrained`)."""

    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    factory: str | None = None
    factory_args: dict[str, Any] = Field(default_factory=dict)
    weights: str | None = Field(default=None, min_length=1)
    # a local folder: config.json, *.safetensors (with model.safetensors.index.json when
    # sharded), tokenizer files; every file of it is bound by the certificate
    pretrained: str | None = Field(default=None, min_length=1)
    # the transformers class that loads it (default: config.json's architectures[0])
    architecture: str | None = Field(default=None, pattern=r"^[A-Za-z_]\w*$")

    @model_validator(mode="after")
    def _one_source(self) -> ModelSection:
        if self.pretrained is not None:
            if self.factory is not None or self.weights is not None or self.factory_args:
                raise ValueError(
                    "pretrained: loads the model and its weights from the folder; remove "
                    "factory:, factory_args: and weights:"
                )
        elif self.factory is None or self.weights is None:
            missing = "model.weights" if self.factory is not None else "model.factory"
            if self.weights is None and self.factory is None:
                missing = "model.factory and model.weights"
            raise ValueError(
                f"{missing} missing: give factory: and weights: (a model factory and its "
                "trained weights), or pretrained: (a local Hugging Face folder)"
            )
        elif self.architecture is not None:
            raise ValueError("architecture: goes with pretrained:, not with factory:")
        return self

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be a version string such as '1.2.0'")
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            # YAML reads 1.10 as the float 1.1: refuse rather than silently change the version.
            raise ValueError(f"{value!r} was read as a number; quote it, e.g. version: '{value}'")
        return value

    @field_validator("factory")
    @classmethod
    def _factory_shape(cls, value: str | None) -> str | None:
        if value is not None and not FACTORY_RE.match(value):
            raise ValueError(f"{value!r} is not 'module:callable' (e.g. 'model:build')")
        return value


def budget_seconds(value: Any) -> float:
    """A budget (``30m``, ``2h``, ``90s``; at least 10 s, at most 30 days) in seconds."""
    from datetime import timedelta

    from attest.core.times import parse_duration
    from attest.errors import InputError

    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration such as 30m, 2h or 90s")
    try:
        return parse_duration(
            value,
            option="budget",
            minimum=timedelta(seconds=10),
            maximum=timedelta(days=30),
            example="e.g. 90s, 30m, 2h",
        ).total_seconds()
    except InputError as exc:
        raise ValueError(str(exc)) from None


def parse_budget(budget: str | float | None) -> float | None:
    """A budget given as text (``--budget 30m``) or seconds, in seconds (None: none given); an
    :class:`~attest.errors.InputError` when it is not a usable duration."""
    from attest.errors import InputError

    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, (int, float, str)):
        raise InputError(f"budget {budget!r} is not a duration", hint="e.g. --budget 30m")
    try:
        return budget_seconds(budget if isinstance(budget, str) else f"{float(budget)}s")
    except ValueError as exc:
        raise InputError(str(exc), hint="e.g. --budget 30m, 2h or 900s") from None


class TrainingSection(_Strict):
    """``training:``: how the model is trained, for the training checks (docs/training.md).

    Every key is optional; a spec without the mapping keeps the checks ``not_applicable``.
    """

    optimizer: str | None = None  # "module:callable": callable(params) -> torch.optim.Optimizer
    autocast: Literal["float16", "bfloat16"] | None = None
    grad_scaler: bool = False
    checkpoint: list[str] = Field(default_factory=list)  # module-name globs, e.g. "encoder.*"
    batch_sizes: list[int] = Field(default_factory=list)
    steps: int = Field(default=3, ge=1, le=1000)

    @field_validator("optimizer")
    @classmethod
    def _optimizer_shape(cls, value: str | None) -> str | None:
        if value is not None and not FACTORY_RE.match(value):
            raise ValueError(f"{value!r} is not 'module:callable' (e.g. 'model:make_optimizer')")
        return value

    @field_validator("checkpoint")
    @classmethod
    def _checkpoint_globs(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern or not pattern.strip():
                raise ValueError("a checkpoint pattern must be a non-empty module name or glob")
        return value

    @field_validator("batch_sizes")
    @classmethod
    def _batch_sizes(cls, value: list[int]) -> list[int]:
        for size in value:
            if isinstance(size, bool) or size < 1 or size > 4096:
                raise ValueError(f"batch size {size!r} must be an integer from 1 to 4096")
        if len(set(value)) != len(value):
            raise ValueError("batch sizes must be distinct")
        return sorted(value)

    @model_validator(mode="after")
    def _scaler_needs_autocast(self) -> TrainingSection:
        if self.grad_scaler and self.autocast is None:
            raise ValueError("grad_scaler: true needs autocast: float16 (or bfloat16)")
        return self


@dataclass
class TrainingConfig:
    """The loaded ``training:`` mapping: the optimizer factory resolved to a callable."""

    optimizer: str | None = None
    make_optimizer: Callable[..., Any] | None = None  # callable(params) -> Optimizer
    autocast: Literal["float16", "bfloat16"] | None = None
    grad_scaler: bool = False
    checkpoint: list[str] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    steps: int = 3


class SpecFile(_Strict):
    """The ``attest.yaml`` file, as written by a user (every field in docs/spec.md)."""

    # None only beside a MONAI bundle, which defines the model (attest.spec.monai_bundle)
    model: ModelSection | None = None
    inputs: InputsSection
    # int class | argmax | label | "module:callable(output, batch)" (a target function)
    target: int | str = "argmax"
    loss: str | None = None
    output: OutputPath | None = None  # which output is F's: a key, an index or a dotted path
    heads: dict[str, HeadSection] | None = None  # several outputs, each its target and loss
    # named inputs whose values set the shapes the model works with (sequence lengths, what
    # packs a sequence): topology compares examples of the same values (docs/spec.md)
    dynamic: list[str] | None = None
    baseline: Literal["zero", "mean", "blur", "uniform"] = "zero"
    precision: Literal["float32", "bfloat16", "float16"] = "float32"
    device: str = "cpu"
    threads: int = Field(default=2, ge=1, le=1024)
    repeats: int = Field(default=20, ge=1, le=100000)
    export: Literal["onnx"] | None = None
    training: TrainingSection | None = None
    # The time attest collect may take (e.g. 30m, 2h); it plans the work to fit and says in
    # the evidence what it reduced. None: the full work, however long it takes.
    budget: str | None = None

    @field_validator("budget", mode="before")
    @classmethod
    def _budget_duration(cls, value: Any) -> Any:
        if value is None:
            return None
        budget_seconds(value)  # raises ValueError with the reason
        return str(value)

    @field_validator("target", mode="before")
    @classmethod
    def _target_not_bool(cls, value: Any) -> Any:
        return check_target(value)

    @field_validator("output")
    @classmethod
    def _output_path(cls, value: OutputPath | None) -> OutputPath | None:
        if value is not None:
            output_path_parts(value)
        return value

    @model_validator(mode="after")
    def _dynamic_inputs(self) -> SpecFile:
        for name in self.dynamic or []:
            if name not in self.inputs.named:
                raise ValueError(
                    f"dynamic: {name!r} is not a named input; name the inputs under inputs: "
                    "(e.g. lengths: {role: fixed, arg: 1}) and list them here"
                )
        return self

    @model_validator(mode="after")
    def _heads_alone(self) -> SpecFile:
        if self.heads is not None:
            if not self.heads:
                raise ValueError("heads: needs at least one head")
            if self.output is not None or self.loss is not None or self.target != "argmax":
                raise ValueError(
                    "with heads:, each head has its own output, target and loss; "
                    "remove the top-level output:, target: and loss:"
                )
            with_loss = [h.loss is not None for h in self.heads.values()]
            if any(with_loss) and not all(with_loss):
                raise ValueError(
                    "give every head a loss: (their sum is the objective the gradient checks "
                    "differentiate), or none (then the heads' F)"
                )
        return self

    @field_validator("loss")
    @classmethod
    def _loss_shape(cls, value: str | None) -> str | None:
        if value is not None and not FACTORY_RE.match(value):
            raise ValueError(f"{value!r} is not 'module:callable' (e.g. 'model:loss')")
        return value

    @field_validator("device")
    @classmethod
    def _device_shape(cls, value: str) -> str:
        if not _DEVICE_RE.match(value):
            raise ValueError(f"{value!r} is not one of cpu, cuda, cuda:N")
        return value


@dataclass
class LoadedSpec:
    """A validated ``attest.yaml`` with its model factory, weights and probe inputs loaded."""

    path: Path
    name: str
    version: str
    factory: str
    factory_args: dict[str, Any]
    build_model: Callable[[], nn.Module]  # fresh module with the trained weights, as stored (CPU)
    # probe inputs "x", shape (N, ...); with named inputs, the differentiated inputs packed by
    # ``call`` (attest.spec.model_call)
    inputs: torch.Tensor
    # probe "target", shape (N,) or None (integer labels, or float targets for a loss); with
    # heads or a target function, the probe's row numbers, from which the heads' targets and
    # the function's batch are read (ModelCall.loss)
    labels: torch.Tensor | None
    target: TargetSpec = "argmax"
    # how the model is called and what F is read from (None: the single-input form, model(x))
    call: ModelCall | None = None
    # ``dynamic:``: each probe example's shape signature (examples with equal values of the
    # dynamic inputs share one) and a label per signature ("lengths=7"); None: not declared
    signatures: list[int] | None = None
    signature_labels: list[str] = field(default_factory=list)
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    loss: str | None = None
    baseline: Literal["zero", "mean", "blur", "uniform"] = "zero"
    precision: Precision = "float32"
    device: str = "cpu"
    threads: int = 2
    repeats: int = 20
    export: Literal["onnx"] | None = None
    artifacts: dict[str, Path] = field(default_factory=dict)  # role -> path (weights, spec, probe)
    training: TrainingConfig | None = None  # the ``training:`` mapping; None: not declared
    budget_s: float | None = None  # ``budget:`` in seconds; None: the full work
    # torch.compile: what was compiled and how, weights keys stripped (None: nothing compiled)
    compiled: CompileInfo | None = None
    # a MONAI bundle or a Hugging Face folder: the folder, bound whole through its manifest by
    # the certificate, and what it says of itself (attest.spec.source.ModelFolder)
    folder: ModelFolder | None = None
    # the attest.yaml given with --spec for a bundle (None: found beside it, or none)
    spec_override: Path | None = None
