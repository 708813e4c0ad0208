"""targets.yaml: each hardware target's name and the Ray resources a node must offer to run it.

```yaml
cpu-avx512: {num_cpus: 2, resources: {avx512: 1}}
gpu-a100: {num_gpus: 1, accelerator_type: A100, max_retries: 2,
           collector_key: /etc/attest/collector.key, collector_name: gpu-pool-a100}
```

Keys of a target (all optional): ``num_cpus`` (default 1), ``num_gpus`` (default 0),
``accelerator_type`` (Ray's ``accelerator_type`` option: the node must carry the resource
``accelerator_type:NAME``), ``resources`` (custom resources, e.g. ``{avx512: 1}``),
``memory`` (bytes of heap Ray reserves for the task), ``max_retries`` (how often Ray runs the
task again when its worker process dies; default 2; a collect that fails is never retried),
``collector_key`` (the path, *on the target's node*, of the collector key that signs its
evidence there; only the path travels: :mod:`.node_signing`) and ``collector_name`` (the
collector's name in its statement [default: the node's ``ATTEST_COLLECTOR_NAME``, else the key
file's stem]).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from attest.core.strict_yaml import load_yaml_mapping
from attest.core.validation import validation_problems
from attest.errors import InputError

__all__ = ["TargetRequirements", "load_targets", "parse_targets"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}$")
_MAX_TARGETS = 64


class TargetRequirements(BaseModel):
    """The Ray resources one target's task asks for (the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    num_cpus: float = Field(default=1.0, gt=0, le=4096)
    num_gpus: float = Field(default=0.0, ge=0, le=1024)
    accelerator_type: str | None = Field(default=None, min_length=1, max_length=64)
    resources: dict[str, float] = Field(default_factory=dict)
    memory: int | None = Field(default=None, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    collector_key: str | None = Field(default=None, min_length=1, max_length=4096)
    collector_name: str | None = Field(default=None, min_length=1, max_length=256)

    def ray_options(self) -> dict[str, Any]:
        """The keyword arguments of Ray's ``.options()`` for this target's task."""
        options: dict[str, Any] = {
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus,
            "max_retries": self.max_retries,
            "retry_exceptions": False,
        }
        if self.resources:
            options["resources"] = dict(self.resources)
        if self.accelerator_type:
            options["accelerator_type"] = self.accelerator_type
        if self.memory is not None:
            options["memory"] = self.memory
        return options

    def node_resources(self) -> dict[str, float]:
        """What a node must offer, in the names Ray lists them under (``ray.nodes()``)."""
        needed: dict[str, float] = {"CPU": self.num_cpus}
        if self.num_gpus:
            needed["GPU"] = self.num_gpus
        if self.memory is not None:
            needed["memory"] = float(self.memory)
        if self.accelerator_type:
            needed[f"accelerator_type:{self.accelerator_type}"] = 0.001
        needed.update(self.resources)
        return needed


def parse_targets(data: Any, *, source: str = "targets file") -> dict[str, TargetRequirements]:
    """Validate targets.yaml data: a mapping of target names to requirements."""
    if not isinstance(data, dict) or not data:
        raise InputError(
            f"{source} must map at least one target name to its Ray resources",
            hint="e.g. cpu-avx512: {num_cpus: 2, resources: {avx512: 1}}",
        )
    if len(data) > _MAX_TARGETS:
        raise InputError(f"{source} names {len(data)} targets; at most {_MAX_TARGETS}")
    targets: dict[str, TargetRequirements] = {}
    for name, raw in data.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError(
                f"{source}: target name {name!r} is not usable",
                hint="letters, digits and . _ : + -, starting with a letter or digit, at most 64",
            )
        try:
            requirements = TargetRequirements.model_validate(raw if raw is not None else {})
        except ValidationError as exc:
            raise InputError(f"{source}: target {name}: {validation_problems(exc)}") from None
        bad = [k for k, v in requirements.resources.items() if not k or v <= 0]
        if bad:
            raise InputError(
                f"{source}: target {name}: resource {bad[0]!r} must be a positive amount"
            )
        targets[name] = requirements
    return targets


def load_targets(path: str | Path) -> dict[str, TargetRequirements]:
    """Read and validate targets.yaml."""
    data = load_yaml_mapping(path, what="targets file", error=InputError)
    return parse_targets(data, source=f"targets file {path}")
