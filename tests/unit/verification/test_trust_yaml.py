"""The trust store's YAML reader refuses what a trust store never needs, quickly, with short
messages: anchors and aliases (an alias bomb of a few hundred bytes used to print 254 MB),
lists or mappings as keys, merge keys, duplicate keys, deep nesting, unreadable values, and
times outside 1970..9000 (quoted or as YAML's own timestamps).

Each row is checked twice: through :func:`attest.verification.trust.load_trust_store` (a ConfigError naming
the file, a message under a few KB) and through ``attest trust list`` (exit 2, no traceback,
no 'internal error', short stderr).
"""

from __future__ import annotations

import itertools
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _certfactory import new_key

from attest.certificate.signing import public_key_pem
from attest.cli import main
from attest.errors import ConfigError
from attest.verification.trust import add_key, empty_trust_store, load_trust_store, save_trust_store

MAX_MESSAGE = 2000  # characters: messages quote bounded excerpts, never a whole value


def _key_block(indent: int = 6) -> str:
    pem = public_key_pem(new_key().public_key)
    return "".join(" " * indent + line + "\n" for line in pem.splitlines())


def _store(not_after: str | None = None, extra: str = "") -> str:
    window = f"    not_after: {not_after}\n" if not_after is not None else ""
    return f"version: 1\nkeys:\n  - name: k\n{window}    pem: |\n{_key_block()}{extra}"


def alias_bomb(levels: int) -> Callable[[], str]:
    """The billion-laughs shape, using only fields a trust store has: each level a list of
    nine aliases of the level before, all under ``version`` (a message used to quote it)."""

    def make() -> str:
        names = [f"lol{i}" for i in range(levels)]
        lines = [f"  - &{names[0]} [" + ", ".join(['"lol"'] * 9) + "]"]
        for prev, cur in itertools.pairwise(names):
            lines.append(f"  - &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
        return "keys: []\nversion:\n" + "\n".join(lines) + "\n"

    return make


# (name, trust.yaml text, what the message says)
TABLE: list[tuple[str, Callable[[], str], str]] = [
    ("alias_bomb_9_levels", alias_bomb(9), "anchors and aliases"),
    ("alias_bomb_10_levels", alias_bomb(10), "anchors and aliases"),
    ("anchor_only", lambda: "keys: &k []\n", "anchors and aliases"),
    ("alias_to_later_anchor", lambda: "threshold: *t\nkeys: []\n", "anchors and aliases"),
    ("list_as_key", lambda: "keys: []\n[1, 2]: x\n", "not a list"),
    ("map_as_key", lambda: "keys: []\n? {a: 1}\n: x\n", "not a mapping"),
    ("list_as_key_in_entry", lambda: "keys:\n  - {[a]: 1, name: k}\n", "not a list"),
    ("merge_key", lambda: "keys: []\n<<: {threshold: 1}\n", "merge keys"),
    ("duplicate_key", lambda: "keys: []\nkeys: []\n", "duplicate key"),
    ("duplicate_key_in_entry", lambda: _store(extra="    name: again\n"), "duplicate key"),
    ("deep_nesting", lambda: "keys: " + "[" * 100_000 + "]" * 100_000 + "\n", "nesting deeper"),
    ("month_13", lambda: "keys: []\nthreshold: 2026-13-01\n", "month must be in 1..12"),
    ("huge_int", lambda: "keys: []\nthreshold: " + "9" * 6000 + "\n", "cannot read this value"),
    ("long_tag", lambda: "keys: !" + "x" * 50_000 + " 1\n", "could not determine"),
    ("long_unknown_field", lambda: "keys: []\n? " + "x" * 50_000 + "\n: 1\n", "unknown field"),
    ("long_version", lambda: "version: " + "v" * 50_000 + "\nkeys: []\n", "not supported"),
    ("long_threshold", lambda: "keys: []\nthreshold: " + "t" * 50_000 + "\n", "threshold"),
    ("broken_yaml", lambda: "keys: [\n" + "x" * 100_000, "not valid YAML"),
    ("year_1_unquoted", lambda: _store("0001-01-01T00:30:00+01:00"), "outside the supported range"),
    ("year_1_quoted", lambda: _store('"0001-01-01T00:30:00+01:00"'), "outside the supported range"),
    ("year_9999_date", lambda: _store("9999-12-31"), "outside the supported range"),
    (
        "year_9999_offset",
        lambda: _store("9999-12-31T23:59:59-23:00"),
        "outside the supported range",
    ),
    ("year_1969", lambda: _store('"1969-12-31T23:59:59Z"'), "outside the supported range"),
    ("time_is_a_list", lambda: _store("[1, 2]"), "not a timestamp"),
    ("time_is_long_text", lambda: _store("x" * 100_000), "not a timestamp"),
]
IDS = [name for name, _, _ in TABLE]


@pytest.mark.parametrize(("name", "make", "problem"), TABLE, ids=IDS)
def test_refused_by_the_loader(
    tmp_path: Path, name: str, make: Callable[[], str], problem: str
) -> None:
    path = tmp_path / "trust.yaml"
    path.write_text(make())
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(ConfigError) as info:
            load_trust_store(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 10
    assert peak < 50 * 1024 * 1024, peak
    text = info.value.diagnostics()
    assert problem in text
    assert str(path) in text
    assert len(text) < MAX_MESSAGE, len(text)


@pytest.mark.parametrize(("name", "make", "problem"), TABLE, ids=IDS)
def test_refused_on_the_command_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    make: Callable[[], str],
    problem: str,
) -> None:
    path = tmp_path / "trust.yaml"
    path.write_text(make())
    with pytest.raises(SystemExit) as exit_info:
        main(["trust", "list", "--trust", str(path)])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2
    assert problem in err
    assert "Traceback" not in out + err and "internal error" not in out + err
    assert len(err) < MAX_MESSAGE


def test_the_alias_bomb_is_small() -> None:
    assert 300 < len(alias_bomb(9)()) < 800
    assert len(alias_bomb(10)()) < 900


def test_a_normal_store_still_loads(tmp_path: Path) -> None:
    store, _ = add_key(empty_trust_store("t"), public_key_pem(new_key().public_key), name="a")
    path = save_trust_store(store, tmp_path / "trust.yaml")
    assert [k.name for k in load_trust_store(path).keys] == ["a"]
    # YAML's own (unquoted) timestamps inside the range still work, as UTC.
    path.write_text(_store("2027-01-31T01:00:00+01:00"))
    loaded = load_trust_store(path).keys[0]
    assert (
        loaded.not_after is not None and loaded.not_after.isoformat() == "2027-01-31T00:00:00+00:00"
    )
    path.write_text(_store("2027-01-31"))
    assert load_trust_store(path).keys[0].not_after.isoformat() == "2027-01-31T00:00:00+00:00"  # type: ignore[union-attr]


# (flag value, what the message says): attest trust add --not-before/--not-after
CLI_TIMES: list[tuple[str, str]] = [
    ("0001-01-01T00:30:00+01:00", "outside the supported range"),
    ("9999-12-31T23:59:59-23:00", "outside the supported range"),
    ("10000-01-01T00:00:00Z", "not a timestamp"),
    ("1969-01-01T00:00:00Z", "outside the supported range"),
    ("2026-01-01T00:00:00", "no time zone"),
    ("x" * 10_000, "not a timestamp"),
]


@pytest.mark.parametrize("flag", ["--not-before", "--not-after"])
@pytest.mark.parametrize(("value", "problem"), CLI_TIMES, ids=[v[:30] for v, _ in CLI_TIMES])
def test_trust_add_times_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, problem: str
) -> None:
    pub = tmp_path / "k.pub"
    pub.write_text(public_key_pem(new_key().public_key))
    args: list[Any] = ["trust", "add", pub, "--trust", tmp_path / "trust.yaml", flag, value]
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2
    assert problem in err and flag in err
    assert "Traceback" not in out + err and "internal error" not in out + err
    assert len(err) < MAX_MESSAGE
    assert not (tmp_path / "trust.yaml").exists()
