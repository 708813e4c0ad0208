"""The checked-in schemas are generated from the pydantic models and must not drift."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from _certfactory import make_world

from attest.certificate import schemas as _schemas


@pytest.mark.parametrize("name", sorted(_schemas.SCHEMAS))
def test_checked_in_schema_matches_its_model(name: str) -> None:
    path = _schemas.ROOT / name
    assert path.exists(), f"{name} is missing: run `make schemas`"
    expected = _schemas.render(_schemas.generate(_schemas.SCHEMAS[name]))
    assert path.read_text(encoding="utf-8") == expected, f"{name} drifted: run `make schemas`"


@pytest.mark.parametrize("name", sorted(_schemas.PACKAGED))
def test_packaged_copy_matches_its_model(name: str) -> None:
    path = _schemas.PACKAGE_ROOT / name
    expected = _schemas.render(_schemas.generate(_schemas.SCHEMAS[name]))
    assert path.read_text(encoding="utf-8") == expected, f"attest/schemas/{name} drifted"


def test_drift_reports_nothing() -> None:
    assert _schemas.drift() == []


def test_statement_schema_accepts_what_the_model_builds(tmp_path: Path) -> None:
    schema = json.loads((_schemas.PACKAGE_ROOT / "statement.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    statement = make_world(tmp_path).statement()
    jsonschema.Draft202012Validator(schema).validate(statement)
    statement["predicate"]["unknown"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(statement)
