"""Reading ``attest.yaml`` into a validated :class:`~attest.spec.model.SpecFile` (no torch).

Unknown keys are an error naming the key and the file; a key given twice is refused (PyYAML
would silently keep the last one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from attest.errors import ConfigError
from attest.spec.model import SpecFile

__all__ = ["MAX_SPEC_BYTES", "parse_spec_file"]

MAX_SPEC_BYTES = 1 << 20


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (PyYAML silently keeps the last one)."""


def _construct_unique_mapping(
    loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False
) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_unique_mapping,
)


def _format_validation_error(exc: ValidationError, path: Path) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            where = ".".join(str(p) for p in err["loc"][:-1]) or "the top level"
            lines.append(f"unknown key {err['loc'][-1]!r} in {where}")
        elif err["type"] == "missing":
            lines.append(f"missing required key {loc!r}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{loc}: {msg}")
    return f"invalid spec {path}: " + "; ".join(lines)


def parse_spec_file(path: str | Path) -> SpecFile:
    """Read and validate an ``attest.yaml`` without loading the model (no torch needed)."""
    p = Path(path)
    try:
        if p.is_dir():
            raise ConfigError(f"spec {p} is a directory; give the attest.yaml file")
        size = p.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise ConfigError(f"spec {p} is {size} bytes, over the {MAX_SPEC_BYTES}-byte limit")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"spec {p} does not exist", hint="check the path to attest.yaml"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"spec {p} is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"cannot read spec {p}: {exc.strerror}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"spec {p} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"spec {p} must be a YAML mapping with 'model' and 'inputs' sections")
    try:
        return SpecFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            _format_validation_error(exc, p), hint="see docs/spec.md for the spec format"
        ) from None
