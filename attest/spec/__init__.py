"""The model spec (``attest.yaml``): what to certify, and loading it into a :class:`LoadedSpec`.

- :mod:`attest.spec.model`: the file as written (:class:`SpecFile`) and the loaded spec
  (:class:`LoadedSpec`) that collection receives.
- :mod:`attest.spec.parse`: :func:`parse_spec_file`, the YAML validated, without torch.
- :mod:`attest.spec.load`: :func:`load_spec`, the factory resolved, weights and probe read.
- :mod:`attest.spec.source`: where the model comes from: a factory and weights, a MONAI
  bundle (:mod:`attest.spec.monai_bundle`, its probe checked by
  :mod:`attest.spec.bundle_format`) or a Hugging Face folder (:mod:`attest.spec.pretrained`).

The spec is a contract: collection imports it, it imports nothing of collection.
"""

from __future__ import annotations

from attest.spec.factory import resolve_callable
from attest.spec.load import load_spec
from attest.spec.model import (
    InputsSection,
    LoadedSpec,
    ModelSection,
    Precision,
    SpecFile,
    TargetSpec,
)
from attest.spec.parse import MAX_SPEC_BYTES, parse_spec_file

__all__ = [
    "MAX_SPEC_BYTES",
    "InputsSection",
    "LoadedSpec",
    "ModelSection",
    "Precision",
    "SpecFile",
    "TargetSpec",
    "load_spec",
    "parse_spec_file",
    "resolve_callable",
]
