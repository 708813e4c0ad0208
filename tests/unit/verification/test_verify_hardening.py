"""What a red-team review did to the verifier, one row each: none may verify what it should
not, crash (exit 3, a traceback), or reach the terminal unescaped.

Each row builds its inputs in a :class:`World` and runs ``attest verify`` (or ``inspect``)
through the real entry point; it gives the exit code expected and what the output must and
must not contain. The probe, external data and order-of-effects cases are in
test_verify_probe_bytes.py and test_verify_effects.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _certfactory import NOW, World, iso, make_world, sign_raw

from attest.cli import main
from attest.verification.trust import save_trust_store

# Characters that must never reach a terminal raw.
DANGEROUS = ("\x1b", "\r", "\u202e", "\u2066", "\x07", "\x9b")


def _trust(w: World) -> Path:
    return save_trust_store(w.trust, w.root / "trust.yaml")


def _args(w: World, cert: Path, *extra: str, artifacts: list[Path] | None = None) -> list[str]:
    args = [str(cert), "--trust", str(_trust(w)), "--at", iso(NOW), "--no-state"]
    for artifact in artifacts if artifacts is not None else [w.onnx]:
        args += ["--artifact", str(artifact)]
    return [*args, *extra]


def surrogate_keyid_beside_valid_signature(w: World) -> list[str]:
    env = w.envelope()
    env["signatures"].append({"keyid": "\ud800\udfff\ud83d", "sig": "A" * 86 + "=="})
    return _args(w, w.write(json.dumps(env, ensure_ascii=True).encode()))


def surrogate_keyid_json(w: World) -> list[str]:
    return [*surrogate_keyid_beside_valid_signature(w), "--json"]


def surrogate_payload_type(w: World) -> list[str]:
    env = w.envelope()
    env["payloadType"] = "application/vnd.in-toto+json\udc80"
    return _args(w, w.write(json.dumps(env, ensure_ascii=True).encode()))


def escape_sequence_in_keyid_hint(w: World) -> list[str]:
    env = sign_raw(w.statement(), [w.attacker])
    env["signatures"][0]["keyid"] = "\x1b[1A\x1b[2K\rVERIFIED\u202e"
    return _args(w, w.write(env))


def escape_sequence_model_name_inspect(w: World) -> list[str]:
    statement = w.statement()
    statement["predicate"]["model"]["name"] = "\x1b[1A\x1b[2K\rVERIFIED \u202e\u2066x"
    env = sign_raw(statement, [w.attacker])  # unsigned as far as the reader knows
    return [str(w.write(env))]


def inspect_odd_shapes(w: World) -> list[str]:
    statement = w.statement()
    statement["predicate"]["model"] = ["\x1b[2J", 3]
    statement["subject"] = [{"name": "\x1b]0;title\x07", "digest": "x"}, 7]
    return [str(w.write(sign_raw(statement, [w.attacker])))]


def inspect_json_surrogates(w: World) -> list[str]:
    env = sign_raw(b'{"predicate": {"model": {"name": "\\udcff\\u202e"}}}', [w.attacker])
    return [str(w.write(env)), "--json"]


def _certified_directory(w: World, name: str) -> tuple[Path, Path]:
    """A directory ``name`` holding a.txt, and a certificate whose subjects include it."""
    from attest.certificate.statement import subjects_from_paths

    folder = w.root / "server" / name
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    statement = w.statement()
    statement["subject"] += [
        {"name": n, "digest": {"sha256": d}} for n, d in subjects_from_paths({name: folder}).items()
    ]
    return w.write(sign_raw(statement, [w.key])), folder


def newline_in_directory_file_name(w: World) -> list[str]:
    cert, folder = _certified_directory(w, "bundle")
    (folder / "x\nVERIFIED: fake line").write_text("x")
    return _args(w, cert, artifacts=[w.onnx, folder])


def very_deep_directory(w: World) -> list[str]:
    cert, folder = _certified_directory(w, "deep")
    fd = os.open(folder, os.O_RDONLY)
    for _ in range(1_100):  # one level at a time: the path would be too long for one mkdir
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    return _args(w, cert, artifacts=[w.onnx, folder])


def at_far_future(w: World) -> list[str]:
    return [*_args(w, w.write(w.envelope())), "--at", "9999-12-31T23:59:00Z"]  # last one wins


def at_year_one(w: World) -> list[str]:
    args = _args(w, w.write(w.envelope()))
    return [*args, "--at", "0001-01-01T00:00:00Z"]


def at_overflowing_offset(w: World) -> list[str]:
    return [*_args(w, w.write(w.envelope())), "--at", "0001-01-01T00:30:00+01:00"]


def huge_clock_skew(w: World) -> list[str]:
    return [*_args(w, w.write(w.envelope())), "--clock-skew", "99999999999999999999s"]


def nul_in_artifact_path(w: World) -> list[str]:
    return _args(w, w.write(w.envelope()), artifacts=[Path(f"{w.onnx}\x00.onnx")])


def surrogate_in_certificate_path(w: World) -> list[str]:
    return _args(w, Path(str(w.root / "cert\ud800.json")))


def trust_key_not_after_overflows(w: World) -> list[str]:
    args = _args(w, w.write(w.envelope()))
    trust = Path(args[args.index("--trust") + 1])
    edited = trust.read_text().replace(
        "  pem:", '  not_after: "0001-01-01T00:30:00+01:00"\n  pem:', 1
    )
    assert edited != trust.read_text()
    trust.write_text(edited)
    return args


TABLE: list[tuple[Callable[[World], list[str]], int, str, list[str]]] = [
    (surrogate_keyid_beside_valid_signature, 0, "verify", ["VERIFIED", "\\ud83d"]),
    (surrogate_keyid_json, 0, "verify", ['"verified": true']),
    (surrogate_payload_type, 1, "verify", ["MALFORMED", "payloadType"]),
    (escape_sequence_in_keyid_hint, 1, "verify", ["UNTRUSTED_KEY", "\\x1b[1A"]),
    (escape_sequence_model_name_inspect, 0, "inspect", ["NOT VERIFIED", "\\x1b[1A", "\\u202e"]),
    (inspect_odd_shapes, 0, "inspect", ["NOT VERIFIED", "\\x1b]0;title\\x07"]),
    (inspect_json_surrogates, 0, "inspect", ["\\udcff", "\\u202e"]),
    (newline_in_directory_file_name, 1, "verify", ["SUBJECT_MISMATCH", "x\\nVERIFIED: fake"]),
    (very_deep_directory, 1, "verify", ["SUBJECT_MISMATCH", "nested deeper than"]),
    (at_far_future, 2, "verify", ["outside the supported range"]),
    (at_year_one, 2, "verify", ["outside the supported range"]),
    (at_overflowing_offset, 2, "verify", ["outside the supported range"]),
    (huge_clock_skew, 2, "verify", ["over the limit of 1 day"]),
    (nul_in_artifact_path, 2, "verify", ["NUL"]),
    (surrogate_in_certificate_path, 2, "verify", ["\\ud800"]),
    (trust_key_not_after_overflows, 2, "verify", ["not_after"]),
]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield make_world(tmp_path)
    deep = tmp_path / "server" / "deep"
    if deep.exists():  # shutil.rmtree (pytest's cleanup) recurses once per level
        _remove_deep(deep)


def _remove_deep(folder: Path) -> None:
    depth = 0
    fd = os.open(folder, os.O_RDONLY)
    fds = [fd]
    while "d" in os.listdir(fd):
        fd = os.open("d", os.O_RDONLY, dir_fd=fd)
        fds.append(fd)
        depth += 1
    for parent in reversed(fds[:-1]):
        os.rmdir("d", dir_fd=parent)
    for fd in fds:
        os.close(fd)


@pytest.mark.parametrize(
    ("build", "exit_code", "command", "must_show"),
    TABLE,
    ids=[row[0].__name__ for row in TABLE],
)
def test_attack_is_answered_without_a_crash(
    world: World,
    build: Callable[[World], list[str]],
    exit_code: int,
    command: str,
    must_show: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ATTEST_STATE_FILE", raising=False)
    args = build(world)
    try:
        main([command, *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    shown = out + err
    assert code == exit_code, shown[-2000:]
    assert "Traceback" not in shown and "internal error" not in shown
    for text in must_show:
        assert text in shown, (text, shown[-2000:])
    for char in DANGEROUS:
        assert char not in shown, (char, shown[-2000:])
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in shown)  # would not encode as UTF-8
    if "--json" in args:
        json.loads(out)
    else:  # one line per fact: nothing in a name may start a line of its own
        assert not any(line.startswith("VERIFIED: fake") for line in shown.splitlines())


def test_non_utf8_file_name_on_a_strict_utf8_stdout(world: World) -> None:
    """A file name that is not UTF-8 (a surrogate escape in Python) inside an artifact
    directory, printed to a stdout that refuses what it cannot encode."""
    cert, folder = _certified_directory(world, "bundle")
    (Path(os.fsdecode(bytes(folder) + b"/caf\xe9.txt"))).write_text("x")
    args = _args(world, cert, artifacts=[world.onnx, folder])
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    result = subprocess.run(
        [sys.executable, "-m", "attest", "verify", *args],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    out = (result.stdout + result.stderr).decode("utf-8")  # must be valid UTF-8
    assert result.returncode == 1, out
    assert "SUBJECT_MISMATCH" in out and "caf\\udce9.txt" in out
    assert "internal error" not in out and "Traceback" not in out
