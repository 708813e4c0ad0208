"""Reading YAML configuration (specs, policies, trust stores) strictly: the one YAML loader.

PyYAML's ``safe_load`` silently keeps the last of two equal keys (in a policy, a second
``threshold:`` would override the first unnoticed) and expands aliases (a few hundred bytes
of nested aliases, the "billion laughs", expand to gigabytes). :class:`_StrictLoader` refuses,
as it reads and before anything is expanded, what none of these files needs: anchors and
aliases, merge keys (``<<``), lists or mappings as keys, repeated keys and nesting deeper than
:data:`MAX_YAML_DEPTH`. A value a constructor cannot read (a date like 2026-13-01, a
5000-digit number) is a YAML error that says where. Every message names the file, the line
and the column, and quotes only bounded excerpts (:func:`excerpt`, :func:`cut`) of what the
file holds.

No pydantic and no torch here: the verifier reads its trust store with this module.
"""

from __future__ import annotations

import reprlib
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from attest.core.files import read_text_checked
from attest.errors import AttestError, ConfigError

__all__ = [
    "EXCERPT_CHARS",
    "MAX_CONFIG_BYTES",
    "MAX_YAML_DEPTH",
    "PLAIN_YAML_HINT",
    "cut",
    "excerpt",
    "load_yaml_mapping",
    "parse_yaml",
]

MAX_CONFIG_BYTES = 4 * 1024 * 1024
# A policy or a spec nests a handful of levels; this stops recursion long before Python would.
MAX_YAML_DEPTH = 32
# Bounds on what an error message quotes from the file: a value, a YAML parser's text.
EXCERPT_CHARS = 200
PLAIN_YAML_HINT = (
    "write plain YAML: no anchors (&), aliases (*), merge keys (<<), "
    "lists or mappings as keys, or repeated keys"
)

_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxset = 2, 6, 6, 6
_REPR.maxstring, _REPR.maxlong, _REPR.maxother = EXCERPT_CHARS, EXCERPT_CHARS, EXCERPT_CHARS


def cut(text: str) -> str:
    """``text`` cut to :data:`EXCERPT_CHARS` characters, with a marker when it was longer."""
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "...(cut)"


def excerpt(value: Any) -> str:
    """A bounded ``repr`` of a value read from a file (never its whole expansion)."""
    return cut(_REPR.repr(value))


class _Refused(yaml.MarkedYAMLError):
    """YAML a configuration file never needs (anchors, aliases, merge keys, lists or maps as
    keys, deep nesting) or a duplicate key: refused while reading, before anything is expanded."""


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML without anchors, aliases, merge keys, non-scalar or duplicate mapping keys
    (PyYAML silently keeps the last of two equal keys), nesting deeper than
    :data:`MAX_YAML_DEPTH`, and with every value error of a constructor turned into a YAML
    error that says where."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        # Refused at the first anchor or alias event, before any node is composed twice:
        # an alias bomb never gets the chance to expand (into memory or into a message).
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused(
                None, None, "anchors and aliases (&name, *name) are not allowed", event.start_mark
            )
        if self._depth >= MAX_YAML_DEPTH:
            raise _Refused(
                None, None, f"nesting deeper than {MAX_YAML_DEPTH} levels", event.start_mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read this value: {cut(str(exc))}", node.start_mark
            ) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise _Refused(None, None, f"expected a mapping, found {node.id}", node.start_mark)
        result: dict[Hashable, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _VALUE_TAG:  # "=" as a key is the text "=" (as PyYAML reads it)
                key_node.tag = "tag:yaml.org,2002:str"
            if key_node.tag == _MERGE_TAG:
                raise _Refused(None, None, "merge keys (<<) are not allowed", key_node.start_mark)
            if not isinstance(key_node, yaml.ScalarNode):
                raise _Refused(
                    None,
                    None,
                    f"a mapping key must be a plain value, not a {_NODE_KINDS[type(key_node)]}",
                    key_node.start_mark,
                )
            key = self.construct_object(key_node, deep=True)
            if key in result:
                raise _Refused(None, None, f"duplicate key {excerpt(key)}", key_node.start_mark)
            result[key] = self.construct_object(value_node, deep=True)
        return result


_NODE_KINDS = {yaml.SequenceNode: "list", yaml.MappingNode: "mapping"}


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's explanation, bounded, and where in the file."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return cut(str(exc))
    text = "; ".join(cut(str(part)) for part in (exc.context, exc.problem) if part)
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + (text or "invalid")


def parse_yaml(
    text: str,
    source: str,
    *,
    error: type[AttestError] = ConfigError,
    hint: str = PLAIN_YAML_HINT,
) -> Any:
    """Parse YAML text strictly; any problem is an ``error`` whose message starts with
    ``source`` (e.g. "policy file p.yaml") and says where. ``hint`` goes with YAML refused
    for its shape (anchors, repeated keys...)."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no objects
    except _Refused as exc:
        raise error(f"{source}: {_yaml_problem(exc)}", hint=hint) from None
    except yaml.YAMLError as exc:
        raise error(f"{source} is not valid YAML: {_yaml_problem(exc)}") from None
    except (ValueError, OverflowError, TypeError, RecursionError) as exc:  # a last resort
        raise error(f"{source} cannot be read: {cut(str(exc))}") from None


def load_yaml_mapping(
    path: str | Path,
    *,
    what: str,
    error: type[AttestError] = ConfigError,
    max_bytes: int = MAX_CONFIG_BYTES,
    missing_hint: str | None = "check the path",
    mapping_hint: str | None = None,
) -> dict[str, Any]:
    """Read and parse a YAML (or JSON) file whose top level is a mapping; every problem (the
    file cannot be read, the YAML is refused, the top level is not a mapping) is an ``error``
    naming ``what`` and the file."""
    p = Path(path)
    text = read_text_checked(
        p, what=what, max_bytes=max_bytes, error=error, missing_hint=missing_hint
    )
    data = parse_yaml(text, f"{what} {p}", error=error)
    if not isinstance(data, dict):
        raise error(
            f"{what} {p} must hold a mapping at the top level, not {type(data).__name__}",
            hint=mapping_hint,
        )
    return data
