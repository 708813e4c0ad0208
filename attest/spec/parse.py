"""Reading ``attest.yaml`` into a validated :class:`~attest.spec.model.SpecFile` (no torch).

The file is read with the one strict YAML loader (:mod:`attest.core.strict_yaml`: a key given
twice, anchors and aliases, merge keys are refused) and validated by pydantic; unknown keys
are an error naming the key and the file (:func:`attest.core.validation.validation_problems`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from attest.core.strict_yaml import load_yaml_mapping
from attest.core.validation import validation_problems
from attest.errors import ConfigError
from attest.spec.model import SpecFile

__all__ = ["MAX_SPEC_BYTES", "parse_spec_file"]

MAX_SPEC_BYTES = 1 << 20


def parse_spec_file(path: str | Path) -> SpecFile:
    """Read and validate an ``attest.yaml`` without loading the model (no torch needed)."""
    p = Path(path)
    data = load_yaml_mapping(
        p,
        what="spec",
        error=ConfigError,
        max_bytes=MAX_SPEC_BYTES,
        missing_hint="check the path to attest.yaml",
        mapping_hint="an attest.yaml is a mapping with 'model' and 'inputs' sections",
    )
    try:
        return SpecFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid spec {p}: {validation_problems(exc)}",
            hint="see docs/spec.md for the spec format",
        ) from None
