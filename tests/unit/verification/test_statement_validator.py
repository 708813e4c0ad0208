"""The verifier's generated statement validator agrees with jsonschema.

``attest verify`` checks statements with code that fastjsonschema generated from
statement.schema.json (``attest/certificate/statement_validator.py``, written by ``make schemas``), so that
it never imports the jsonschema stack. These tests hold that code against jsonschema on valid
statements, on systematic mutations of a rich one, and on every statement of the tamper table.
"""

from __future__ import annotations

import base64
import copy
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _certfactory import World, make_world
from fastjsonschema import JsonSchemaValueException
from test_verify_table import TABLE

from attest.certificate import schemas as _schemas
from attest.certificate import statement_validator as _statement_validator
from attest.core.io import StrictJSONError, loads_strict
from attest.errors import AttestError
from attest.verification.verifier import _schema_problem

SCHEMA = json.loads((_schemas.PACKAGE_ROOT / "statement.schema.json").read_text("utf-8"))
REFERENCE = jsonschema.Draft202012Validator(SCHEMA)

WRONG_VALUES: list[Any] = [None, True, 0, 1.5, "", "x", "a" * 257, [], ["x"], {}, {"k": "v"}]
STRING_EDGES = [
    "0" * 64, "0" * 63, "0" * 65, "A" * 64, "g" * 64,
    "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123456Z", "2026-01-01T00:00:00.1234567Z",
    "2026-01-01T00:00:00+00:00", "2026-1-01T00:00:00Z",
    "1", "1.2.3-rc.1+build.5", "v1", "1..2", "1.2.3-",
    "model.onnx", "dir/model.onnx", "../x", "a/../b", "./x", ".hidden", "..x", "a//b", "/abs",
    "a\\b", "a\x00b", "a\x7fb", "é/ü", "a" * 128, "a" * 129, "a" * 256,
]  # fmt: skip


def generated_accepts(statement: Any) -> bool:
    before = copy.deepcopy(statement)
    try:
        _statement_validator.validate(statement)
        accepted = True
    except JsonSchemaValueException:
        accepted = False
    assert statement == before, "validation changed the statement"
    return accepted


def rich_statement(world: World) -> dict[str, Any]:
    """A valid statement that fills every optional part of the predicate."""
    return world.statement(
        deployment={
            "targets": ["cpu:x86_64:avx2"],
            "runtime": {"onnxruntime_version": "1.20.0", "intra_op_threads": 1},
            "fatal_differences": ["onnxruntime_version"],
        },
        evidence_digest={"sha256": "b" * 64},
        environment={"python": "3.11.7", "torch": "2.13.0"},
        findings=[{"rule": "grad.nan", "severity": "error", "where": ["conv1"]}],
        waivers=[{"rule": "grad.kink", "reason": "ReLU"}],
        operators=[{"name": "aten::conv2d", "count": 2}],
        modules=[{"path": "conv1", "type": "Conv2d"}],
        checks={"export": {"status": "computed", "max_abs": 0.0}},
        onnx_mapping={"nodes": {"Conv_0": ["aten::conv2d", "aten::batch_norm"]}},
        model_metrics={"accuracy": 0.98},
        extensions={"vendor": {"x": 1}},
    )


# Free-form parts of the predicate (any JSON object); changes deep inside them prove nothing.
FREE = ("environment", "checks", "onnx_mapping", "model_metrics", "extensions", "runtime")
FREE_ITEMS = ("findings", "waivers", "operators", "modules")


def _locations(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if (path and path[-1] in FREE) or (len(path) > 1 and path[-2] in FREE_ITEMS):
        return out
    if isinstance(value, dict):
        for key, item in value.items():
            out += _locations(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _locations(item, (*path, index))
    return out


def _replaced(statement: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(statement)
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def mutations(statement: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Statements one change away from ``statement``: deletions, wrong values, extra keys."""
    out: list[tuple[str, dict[str, Any]]] = []
    for path in _locations(statement):
        here: Any = statement
        for key in path:
            here = here[key]
        if isinstance(here, dict):
            out.append((f"{path} + extra key", _replaced(statement, (*path, "zz_extra"), 1)))
        if not path:
            continue
        parent = _replaced(statement, path, None)
        container: Any = parent
        for key in path[:-1]:
            container = container[key]
        del container[path[-1]]
        out.append((f"{path} deleted", parent))
        out += [(f"{path} = {v!r:.20}", _replaced(statement, path, v)) for v in WRONG_VALUES]
        if isinstance(here, str):
            out += [(f"{path} = {v!r:.20}", _replaced(statement, path, v)) for v in STRING_EDGES]
    return out


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def test_both_accept_valid_statements(world: World) -> None:
    for statement in (world.statement(), rich_statement(world)):
        assert REFERENCE.is_valid(statement)
        assert generated_accepts(statement)
        assert _schema_problem(statement) is None


def test_agrees_with_jsonschema_on_every_single_change(world: World) -> None:
    cases = mutations(rich_statement(world))
    disagreements = []
    rejected = 0
    for label, statement in cases:
        expected = REFERENCE.is_valid(statement)
        rejected += not expected
        if generated_accepts(statement) != expected:
            disagreements.append(f"{label}: jsonschema {'accepts' if expected else 'rejects'}")
    assert not disagreements, "\n".join(disagreements[:20])
    # The table must exercise both answers, most of all rejections of every kind.
    assert len(cases) > 1000 and rejected > 500 and len(cases) - rejected > 100


def test_agrees_on_the_tamper_table(tmp_path: Path) -> None:
    compared, rejected = 0, 0
    for index, (case, _) in enumerate(TABLE):
        (tmp_path / str(index)).mkdir()
        world = make_world(tmp_path / str(index))
        cert, _ = case(world)
        try:
            envelope = loads_strict(cert.read_bytes())
            statement = loads_strict(base64.b64decode(envelope["payload"], validate=True))
        except (ValueError, KeyError, TypeError, StrictJSONError):
            continue  # a case rejected before the statement is read
        expected = REFERENCE.is_valid(statement)
        assert generated_accepts(statement) == expected, case.__name__
        compared += 1
        rejected += not expected
    assert compared >= 30 and rejected >= 3


def test_a_trailing_newline_is_refused_where_jsonschema_lets_it_pass(world: World) -> None:
    # The one known difference: in JSON Schema (ECMA-262) and in pydantic, which writes the
    # certificates, "$" ends the string; Python's re.search, which jsonschema uses, also lets
    # "$" match before a final newline. The generated code anchors with \Z: stricter.
    from pydantic import ValidationError

    from attest.certificate.statement import Statement

    statement = world.statement()
    statement["predicate"]["model"]["version"] = "1.2.0\n"
    assert REFERENCE.is_valid(statement)
    assert not generated_accepts(statement)
    with pytest.raises(ValidationError):
        Statement.model_validate(statement)


def test_the_rejection_names_the_place(world: World) -> None:
    statement = world.statement()
    statement["predicate"]["model"]["version"] = "v1"
    problem = _schema_problem(statement)
    assert problem == (
        "the statement breaks its schema at predicate/model/version: 'v1' is not of the required form"
    )
    del statement["predicate"]["certificate_id"]
    statement["predicate"]["model"]["version"] = "1"
    assert "at predicate: " in str(_schema_problem(statement))
    assert "certificate_id" in str(_schema_problem(statement))


def test_a_broken_validator_fails_closed(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(data: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(_statement_validator, "validate", broken)
    report = world.verify(world.write(world.envelope()))
    assert not report.verified
    assert report.codes == ["MALFORMED"]
    assert "could not be checked" in report.reasons[0][1]


def test_without_fastjsonschema_the_verifier_refuses(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "fastjsonschema", None)
    with pytest.raises(AttestError, match="cannot validate statements"):
        _schema_problem(world.statement())


def test_the_checked_in_validator_is_generated_from_the_packaged_schema() -> None:
    for name, module in _schemas.VALIDATORS.items():
        schema = json.loads((_schemas.PACKAGE_ROOT / name).read_text("utf-8"))
        expected = _schemas.render_validator(schema, name)
        text = (_schemas.VALIDATOR_ROOT / module).read_text("utf-8")
        assert text == expected, f"attest/{module} drifted: run `make schemas`"


@pytest.mark.parametrize(
    "change",
    [
        {"format": "date-time"},
        {"prefixItems": [{"type": "string"}]},
        {"items": [{"type": "string"}]},
        {"$ref": "#/$defs/DigestSet", "minLength": 1},
        {"$ref": "other.json#/x"},
        {"unevaluatedProperties": False},
    ],
)
def test_the_generator_refuses_keywords_it_is_not_vouched_for(change: dict[str, Any]) -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["_type"] = {**change}
    with pytest.raises(ValueError):
        _schemas.render_validator(schema, "statement.schema.json")
    schema = copy.deepcopy(SCHEMA)
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    with pytest.raises(ValueError, match="2020-12"):
        _schemas.render_validator(schema, "statement.schema.json")
