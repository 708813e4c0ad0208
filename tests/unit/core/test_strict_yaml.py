"""The one YAML loader (specs, policies, trust stores) and the one pydantic error formatter.
The trust store's table of hostile YAML is in tests/unit/verification/test_trust_yaml.py; here
the same protections hold for any file read with :func:`load_yaml_mapping`."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from attest.core.strict_yaml import PLAIN_YAML_HINT, load_yaml_mapping, parse_yaml
from attest.core.validation import validation_problems
from attest.errors import ConfigError, PolicyError

REFUSED = [
    ("a: &x 1\nb: *x\n", "anchors and aliases"),
    ("a: 1\n<<: {b: 2}\n", "merge keys"),
    ("a: 1\na: 2\n", "duplicate key 'a'"),
    ("? [1]\n: x\n", "not a list"),
    ("a: " + "[" * 40 + "]" * 40 + "\n", "nesting deeper than 32"),
]


@pytest.mark.parametrize(("text", "problem"), REFUSED)
def test_refused_with_where_and_a_hint(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        load_yaml_mapping(path, what="policy file", error=PolicyError)
    assert info.value.message.startswith(f"policy file {path}: line ")
    assert problem in info.value.message
    assert info.value.hint == PLAIN_YAML_HINT


def test_plain_yaml_loads(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("a: 1\nb: [x, {c: 2026-01-31}]\n'=': eq\n")
    data = load_yaml_mapping(path, what="policy file")
    assert data["a"] == 1 and data["b"][0] == "x" and data["="] == "eq"


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("- 1\n")
    with pytest.raises(ConfigError, match="must hold a mapping at the top level, not list"):
        load_yaml_mapping(path, what="spec")


def test_broken_yaml_is_bounded() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml("a: [\n" + "x" * 100_000, "spec s.yaml")
    assert "not valid YAML" in info.value.message and len(info.value.message) < 2000


def test_unreadable_value_says_where() -> None:
    with pytest.raises(ConfigError, match=r"line 1, column 4: .*month must be in 1\.\.12"):
        parse_yaml("a: 2026-13-01\n", "spec s.yaml")


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    threshold: float

    @field_validator("threshold")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value < 0:
            raise ValueError("must be >= 0")
        return value


class _Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    rules: list[_Inner]


def _problems(data: object, limit: int = 8) -> str:
    with pytest.raises(ValidationError) as info:
        _Outer.model_validate(data)
    return validation_problems(info.value, limit)


def test_validation_problems_name_the_key() -> None:
    text = _problems({"rules": [{"threshold": -1, "treshold": 1}], "colour": "red"})
    assert "name: required key is missing" in text
    assert "rules[0].threshold: must be >= 0" in text  # no "Value error, " prefix
    assert "rules[0].treshold: unknown key" in text
    assert "colour: unknown key" in text


def test_validation_problems_are_bounded() -> None:
    text = _problems({"rules": [{"threshold": "x"}] * 5}, limit=2)
    assert text.count(": ") == 2 and text.endswith("and 4 more")
    long_key = _problems({"name": "n", "rules": [], "k" * 5000 + "\x1b[2J": 1})
    assert len(long_key) < 400 and "\x1b" not in long_key
