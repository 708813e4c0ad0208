"""The ``attest.yaml`` sections that say how the model is called and what F is: named probe
inputs with roles (:class:`NamedInput`), several outputs each with its target and loss
(:class:`HeadSection`), and the output path syntax (docs/spec.md, "Inputs, outputs, targets").

Pydantic models only (no torch): :mod:`attest.spec.model_call` turns them into the object that
calls the model.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from attest.core.validation import validation_problems

__all__ = [
    "BASELINE_KINDS",
    "EMBEDDED_BASELINES",
    "FACTORY_RE",
    "HeadSection",
    "InputRole",
    "InputsSection",
    "NamedInput",
    "OutputPath",
    "TargetValue",
    "TokenBaseline",
    "check_target",
    "output_path_parts",
]

FACTORY_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_PATH_PART = re.compile(r"^(?:\d+|[A-Za-z_]\w*)$")
_NAME_RE = re.compile(r"^[A-Za-z_]\w*$")

InputRole = Literal["attributed", "embedded", "fixed"]
Baseline = Literal["zero", "mean", "blur", "uniform", "pad"]
BASELINE_KINDS = ("zero", "mean", "blur", "uniform")  # an attributed input's (and the spec's)
# an embedded input's: zero vectors, or a reference-token sequence's embeddings ("pad", or the
# {token: ID, keep: [...]} mapping, :class:`TokenBaseline`)
EMBEDDED_BASELINES = ("zero", "pad")
_BASELINE_FORMS = (
    "an attributed input's baseline is zero, mean, blur or uniform; an embedded input's is "
    "zero, pad or {token: ID, keep: [ID, ...]}"
)
OutputPath = int | str
# an int class index, argmax, label, or "module:callable(output, batch) -> (N,)"
TargetValue = int | str


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def output_path_parts(path: OutputPath) -> list[str]:
    """``heads.risk`` -> ["heads", "risk"]; ``0`` -> ["0"]; a ValueError when not a path."""
    if isinstance(path, bool):
        raise ValueError("an output path is a key, an index or a dotted path such as 'logits'")
    if isinstance(path, int):
        if path < 0:
            raise ValueError(f"output index {path} must be >= 0")
        return [str(path)]
    parts = path.split(".")
    for part in parts:
        if not _PATH_PART.match(part):
            raise ValueError(
                f"{path!r} is not an output path: use a key, an index or a dotted path "
                "such as 'logits', '0' or 'heads.risk'"
            )
    return parts


def check_target(value: Any) -> Any:
    """A target: an int class index >= 0, ``argmax``, ``label`` or ``module:callable``."""
    if isinstance(value, bool):
        raise ValueError("must be a class index, 'argmax', 'label' or 'module:callable'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a class index must be >= 0")
        return value
    if isinstance(value, str) and (value in ("argmax", "label") or FACTORY_RE.match(value)):
        return value
    raise ValueError(
        f"{value!r} is not a class index, 'argmax', 'label' or a target function "
        "'module:callable' (callable(output, batch) -> one value per example)"
    )


class TokenBaseline(_Strict):
    """``baseline: {token: ID, keep: [ID, ...]}`` of an embedded input: every token replaced by
    the reference id ``token`` except the ids ``keep`` lists (``[CLS]``, ``[SEP]``, ``<s>``),
    left in place; the baseline is the embedding module's output for that sequence."""

    token: StrictInt = Field(ge=0)
    keep: list[StrictInt] = Field(default_factory=list)

    @field_validator("keep")
    @classmethod
    def _keep_ids(cls, value: list[int]) -> list[int]:
        if any(v < 0 for v in value):
            raise ValueError("token ids are >= 0")
        if len(set(value)) != len(value):
            raise ValueError("an id is listed twice")
        return value

    @model_validator(mode="after")
    def _reference_not_kept(self) -> TokenBaseline:
        if self.token in self.keep:
            raise ValueError(
                f"the reference token {self.token} is also in keep: keep lists the ids left in "
                "place (e.g. [CLS], [SEP]), token the id every other token becomes"
            )
        return self


def _baseline_value(value: Any) -> Any:
    """A named input's ``baseline:`` as written: a kind's name or the reference-token mapping,
    with one clear message for anything else (not pydantic's union of both forms' errors)."""
    if value is None or isinstance(value, TokenBaseline):
        return value
    if isinstance(value, str):
        if value in (*BASELINE_KINDS, *EMBEDDED_BASELINES):
            return value
        raise ValueError(f"{value!r} is not a baseline: {_BASELINE_FORMS}")
    if isinstance(value, dict):
        try:
            return TokenBaseline.model_validate(value)
        except ValidationError as exc:
            raise ValueError(
                f"{{token: ID, keep: [ID, ...]}}: {validation_problems(exc)}"
            ) from None
    raise ValueError(f"{value!r} is not a baseline: {_BASELINE_FORMS}")


class NamedInput(_Strict):
    """One model argument: where it comes from in the probe, its role and how it is passed."""

    key: str | None = None  # the probe tensor's key (default: the input's name)
    role: InputRole = "attributed"
    arg: int | None = Field(default=None, ge=0)  # positional argument index...
    kwarg: str | None = None  # ...or keyword argument name
    embedding: str | None = None  # role embedded: the embedding module's path
    # the IG baseline: attributed, one of BASELINE_KINDS (default: the spec's); embedded, zero
    # (the default), pad or a TokenBaseline
    baseline: Baseline | TokenBaseline | None = None

    @field_validator("baseline", mode="before")
    @classmethod
    def _baseline_form(cls, value: Any) -> Any:
        return _baseline_value(value)

    @field_validator("kwarg")
    @classmethod
    def _kwarg_name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME_RE.match(value):
            raise ValueError(f"{value!r} is not a keyword argument name")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> NamedInput:
        if (self.arg is None) == (self.kwarg is None):
            raise ValueError("give exactly one of arg: N (positional) or kwarg: NAME (keyword)")
        if self.role == "embedded" and not self.embedding:
            raise ValueError(
                "role: embedded needs embedding: the path of the embedding module "
                "(e.g. bert.embeddings.word_embeddings)"
            )
        if self.role != "embedded" and self.embedding is not None:
            raise ValueError("embedding: applies to role: embedded only")
        if self.role == "fixed" and self.baseline is not None:
            raise ValueError("a fixed input is never integrated: it has no baseline")
        reference = isinstance(self.baseline, TokenBaseline) or self.baseline == "pad"
        if self.role == "attributed" and reference:
            raise ValueError(
                "a reference-token baseline (pad, {token: ID}) is for role: embedded token ids; "
                "an attributed input's baseline is zero, mean, blur or uniform"
            )
        if self.role == "embedded" and self.baseline in ("mean", "blur", "uniform"):
            raise ValueError(
                f"baseline: {self.baseline} is an image baseline and means nothing for token "
                "ids: an embedded input's baseline is zero (zero vectors), pad (every token "
                "the padding token, special tokens kept) or {token: ID, keep: [ID, ...]}"
            )
        return self


class InputsSection(_Strict):
    """``inputs:`` -- the probe file, and optionally its tensors as named model arguments.

    ``inputs: {probe: probe.safetensors}`` alone is the single-input form: the model is
    called as ``model(x)``. Any other key names a model argument (:class:`NamedInput`).
    """

    probe: str = Field(min_length=1)
    named: dict[str, NamedInput] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _gather_named(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        named = {k: v for k, v in data.items() if k != "probe"}
        return {"probe": data.get("probe"), "named": named} if named else data

    @model_validator(mode="after")
    def _arguments(self) -> InputsSection:
        if not self.named:
            return self
        for name in self.named:
            if not _NAME_RE.match(name):
                raise ValueError(f"input name {name!r} must be a plain identifier")
        roles = [i.role for i in self.named.values()]
        if "attributed" not in roles and "embedded" not in roles:
            raise ValueError(
                "at least one input must be role: attributed or role: embedded "
                "(what the gradients and integrated gradients are taken with respect to)"
            )
        positions = sorted(i.arg for i in self.named.values() if i.arg is not None)
        if positions != list(range(len(positions))):
            raise ValueError(f"positional arguments must be 0, 1, ... without gaps: {positions}")
        kwargs = [i.kwarg for i in self.named.values() if i.kwarg is not None]
        if len(set(kwargs)) != len(kwargs):
            raise ValueError("two inputs name the same kwarg")
        return self


class HeadSection(_Strict):
    """One of ``heads:``: a model output with its own target and loss."""

    output: OutputPath
    target: TargetValue = "argmax"
    loss: str | None = None  # "module:callable(output, labels)"
    labels: str | None = None  # the probe key of this head's targets (for target: label, loss)

    @field_validator("output")
    @classmethod
    def _output(cls, value: OutputPath) -> OutputPath:
        output_path_parts(value)
        return value

    @field_validator("target", mode="before")
    @classmethod
    def _target(cls, value: Any) -> Any:
        return check_target(value)

    @field_validator("loss")
    @classmethod
    def _loss(cls, value: str | None) -> str | None:
        if value is not None and not FACTORY_RE.match(value):
            raise ValueError(f"{value!r} is not 'module:callable' (e.g. 'model:loss')")
        return value

    @model_validator(mode="after")
    def _labels_needed(self) -> HeadSection:
        if (self.target == "label" or self.loss) and not self.labels:
            raise ValueError("target: label and loss: need labels: the probe key of the targets")
        return self
