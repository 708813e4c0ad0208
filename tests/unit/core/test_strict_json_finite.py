"""Strict JSON refuses every number that is not finite (issue 33, item 9), with its position,
and every ``--json`` the command line prints is valid JSON (non-finite figures as null).

The standard parser reads ``1e999`` as infinity: the strict reader accepted it, so an evidence
file could carry an infinite figure into a policy and a training log into ``--json`` output as
the non-JSON ``Infinity``. Each row was reproduced (accepted) before the fix.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attest.cli.output import echo_json
from attest.core.io import StrictJSONError, loads_strict, read_json_file
from attest.core.text import finite_json, printable_json
from attest.errors import InputError

REFUSED = [  # (text, the number shown, line, column)
    (b"[1e999]", "1e999", 1, 2),
    (b"[-1e999]", "-1e999", 1, 2),
    (b'{"a": 1E400}', "1E400", 1, 7),
    (b'{"a": 1.0e+309}', "1.0e+309", 1, 7),
    (b'{"a": -17976931348623159e292}', "-17976931348623159e292", 1, 7),
    (b"[NaN]", "NaN", 1, 2),
    (b"[Infinity]", "Infinity", 1, 2),
    (b"[-Infinity]", "-Infinity", 1, 2),
    (b'{"1e999": "1e999 NaN",\n "b": [1, 2.5,\n   -1e999]}', "-1e999", 3, 4),
    (b'{"k": "\\"1e999", "n": [\n\n  {"x": 1e999}]}', "1e999", 3, 9),
    (b"[" + b"9" * 400 + b", 1e400]", "1e400", 1, 404),
    (b'{"deep": [[[[{"v": 2e308}]]]]}', "2e308", 1, 20),
]


@pytest.mark.parametrize(("text", "shown", "line", "column"), REFUSED)
def test_a_non_finite_number_is_refused_with_its_position(
    text: bytes, shown: str, line: int, column: int
) -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict(text)
    assert f"non-finite number {shown} at line {line} column {column}" in str(info.value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (b"[1.7976931348623157e308]", 1.7976931348623157e308),
        (b"[-1e308]", -1e308),
        (b"[1e-400]", 0.0),  # underflows to zero: finite
        (b"[" + b"9" * 400 + b"]", int("9" * 400)),  # an integer stays exact
        (b'["1e999", "NaN"]', "1e999"),
    ],
)
def test_large_finite_numbers_and_look_alike_strings_are_kept(text: bytes, value: object) -> None:
    assert loads_strict(text)[0] == value


def test_a_file_names_the_position(tmp_path: Path) -> None:
    path = tmp_path / "evidence.json"
    path.write_text('{\n  "model_metrics": {\n    "bit_exact_rate": 1e999\n  }\n}\n')
    with pytest.raises(InputError, match=r"1e999 at line 3 column 23"):
        read_json_file(path, what="evidence file")


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_float_round_trips(value: float) -> None:
    assert loads_strict(json.dumps([value]).encode()) == [value]


def test_finite_json_replaces_and_names_each_non_finite_figure() -> None:
    data = {"a": math.inf, "b": [1.0, math.nan, {"c/d": -math.inf}], "e": "Infinity"}
    clean, where = finite_json(data)
    assert clean == {"a": None, "b": [1.0, None, {"c/d": None}], "e": "Infinity"}
    assert where == ["/a", "/b/1", "/b/2/c~1d"]
    assert json.loads(printable_json(data)) == clean  # never raises, never prints NaN


def test_echo_json_prints_valid_json_and_notes_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    @click.command()
    def command() -> None:
        echo_json({"growth": math.inf, "rsd": math.nan, "ok": 1.5})

    with pytest.raises(SystemExit) as info:
        command.main(args=[], standalone_mode=True)
    assert info.value.code == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"growth": None, "rsd": None, "ok": 1.5}
    assert "2 non-finite figure(s) written as null: /growth, /rsd" in err


def test_no_command_prints_json_without_the_guard() -> None:
    """Every ``--json`` goes through echo_json or printable_json (allow_nan=False)."""
    root = Path(__file__).resolve().parents[3] / "attest" / "cli"
    offenders = [p.name for p in root.glob("*.py") if "json.dumps(" in p.read_text()]
    assert offenders == []
