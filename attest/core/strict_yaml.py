"""Reading YAML configuration (policies) strictly, and naming the key behind each problem.

PyYAML's ``safe_load`` silently keeps the last of two equal keys; in a policy that would let a
second ``threshold:`` override the first unnoticed. :class:`_UniqueKeyLoader` is a small
subclass that refuses duplicates (PyYAML has no option for it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from attest.errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "load_yaml_mapping", "validation_problems"]

MAX_CONFIG_BYTES = 4 * 1024 * 1024


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that rejects a mapping holding the same key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                mark = key_node.start_mark
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (line {mark.line + 1})", mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml_mapping(
    path: Path, *, what: str, error: type[ConfigError] = ConfigError
) -> dict[str, Any]:
    """Parse a YAML (or JSON) file whose top level is a mapping; errors (of class ``error``)
    name the file and line."""
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise error(f"{what} {path} is {size} bytes, over the {MAX_CONFIG_BYTES}-byte limit")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist", hint="check the path") from None
    except IsADirectoryError:
        raise error(f"{what} {path} is a directory, expected a file") from None
    except UnicodeDecodeError:
        raise error(f"{what} {path} is not UTF-8 text") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        data = yaml.load(
            text, Loader=_UniqueKeyLoader
        )  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise error(f"{what} {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise error(
            f"{what} {path} must hold a mapping at the top level, not {type(data).__name__}"
        )
    return data


def validation_problems(exc: ValidationError, limit: int = 8) -> str:
    """pydantic errors as ``rules[2].comparator: Input should be ...``, joined by '; '."""
    parts = []
    for err in exc.errors()[:limit]:
        where = ""
        for piece in err["loc"]:
            if isinstance(piece, int):
                where += f"[{piece}]"
            else:
                where += f".{piece}" if where else str(piece)
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        elif err["type"] == "missing":
            message = "required key is missing"
        parts.append(f"{where or '<top level>'}: {message}")
    more = len(exc.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)
