"""What a MONAI bundle or Hugging Face folder says of itself, in the certificate's model block.

``predicate.model.card`` (absent for a model given by a factory and weights file) holds the
bundle's ``configs/metadata.json`` facts a reviewer reads before deployment -- its own version
and changelog, task, intended use, data source, authors, copyright, license -- or a Hugging
Face folder's architecture and model type. The card is signed with the rest of the statement
and carried into the exports (CycloneDX ``modelCard``, SPDX AI). Absent keys are left out of
the JSON, so certificates without a card keep the bytes they always had.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

__all__ = ["ModelCard"]

Short = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Long = Annotated[str, StringConstraints(min_length=1, max_length=16384)]


def _absent(value: Any) -> bool:
    return value is None


def _optional() -> Any:
    return Field(default=None, exclude_if=_absent)


class ModelCard(BaseModel):
    """A model folder's own description (docs/certificate-format.md, "The model card")."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["monai_bundle", "huggingface"]
    name: Short | None = _optional()
    version: Short | None = _optional()  # the bundle's version as its metadata writes it
    task: Long | None = _optional()
    description: Long | None = _optional()
    intended_use: Long | None = _optional()
    data_source: Long | None = _optional()
    copyright: Long | None = _optional()
    license: Long | None = _optional()
    authors: list[Long] | None = _optional()
    changelog: dict[str, Long] | None = _optional()  # version -> what changed
    monai_version: Short | None = _optional()
    pytorch_version: Short | None = _optional()
    architecture: Short | None = _optional()  # Hugging Face: the transformers class
    model_type: Short | None = _optional()
    transformers_version: Short | None = _optional()
