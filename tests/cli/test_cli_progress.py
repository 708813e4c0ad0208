"""The progress display of ``attest collect`` and ``attest certify`` on stderr.

A live display on a terminal; plain lines with a heartbeat when stderr is a pipe or a file (a
CI log) or with ``--progress plain``; nothing with ``--progress none``, ``--quiet`` or (in
``auto``) ``--json``. The display itself is tested in tests/unit/core/test_progress.py; here the commands.
"""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import attest as attest_pkg
from attest.evidence.model import CHECK_IDS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from _collect_models import LINEAR_RELU, MLP, make_spec
from test_cli_certify import MINI_POLICY, write_policy, write_tiny

from attest.certificate.signing import generate_keypair
from attest.cli import main


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def attest(args: list[str], capsys: pytest.CaptureFixture[str], stderr: io.StringIO) -> str:
    """Run ``attest ARGS`` in process with ``stderr`` as sys.stderr; returns what it wrote there."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stderr", stderr)
        with pytest.raises(SystemExit) as info:
            main(args)
    out = capsys.readouterr().out
    assert info.value.code in (0, None), out + stderr.getvalue()
    return stderr.getvalue()


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    return make_spec(tmp_path / "m", LINEAR_RELU, x=torch.randn(3, 4), spec_extra="repeats: 2\n")


def test_collect_on_a_terminal_shows_stage_elapsed_and_estimate(
    spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("rich")
    shown = attest(["collect", str(spec), "-o", str(tmp_path / "e.json")], capsys, FakeTerminal())
    assert (
        f"{len(CHECK_IDS)}/{len(CHECK_IDS)} checks" in shown
        and "finished" in shown
        and "done" in shown
    )
    assert "0:0" in shown  # the elapsed time


@pytest.mark.parametrize("flag", ["--quiet", "-q", "--json"])
def test_collect_quiet_or_json_prints_nothing_on_stderr(
    spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    args = ["collect", str(spec), "-o", str(tmp_path / "e.json"), flag]
    assert attest(args, capsys, FakeTerminal()) == ""


_LINE = re.compile(
    r"  (?P<beat>still running \| )?(?P<stage>.+?)(?: \| (?P<done>\d+)/(?P<total>\d+) checks)?"
    r" \| (?P<elapsed>\d+:\d\d(?::\d\d)?) elapsed \| (?P<left>.+)"
)


def _seconds(text: str) -> int:
    seconds = 0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def _collect_logged(spec: Path, tmp_path: Path, *extra: str, heartbeat: str = "0.2") -> str:
    """``attest collect`` in a subprocess with stderr to a file, as docs/ci.md runs it."""
    log = tmp_path / "collect.log"
    command = [sys.executable, "-m", "attest", "collect", str(spec), "-o", str(tmp_path / "e.json")]
    env = {**os.environ, "ATTEST_PROGRESS_HEARTBEAT_S": heartbeat}
    root = str(Path(attest_pkg.__file__).resolve().parents[1])  # this checkout's attest
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    with log.open("w", encoding="utf-8") as stderr:
        done = subprocess.run(
            [*command, *extra], stdout=subprocess.PIPE, stderr=stderr, env=env, timeout=300
        )
    assert done.returncode == 0, log.read_text(encoding="utf-8")
    assert b"evidence for tiny" in done.stdout and b"elapsed" not in done.stdout
    return log.read_text(encoding="utf-8")


def test_collect_logged_to_a_file_prints_phases_a_heartbeat_and_a_weighted_estimate(
    tmp_path: Path,
) -> None:
    spec = make_spec(tmp_path / "m", MLP, spec_extra="repeats: 5\n")
    started = time.monotonic()
    logged = _collect_logged(spec, tmp_path)
    wall = time.monotonic() - started
    lines = logged.splitlines()
    read = [_LINE.fullmatch(line) for line in lines]
    assert all(read), [line for line, m in zip(lines, read, strict=True) if m is None]
    matches = [m for m in read if m is not None]
    phases = [m["stage"] for m in matches if not m["beat"] and m["stage"].startswith("checks: ")]
    for phase in ("topology", "profile", "gradients", "ig", "export", "training"):
        assert f"checks: {phase}" in phases, phases
    beats = [m for m in matches if m["beat"]]
    assert beats, "a heartbeat line while a stage ran longer than the interval"
    assert lines[-1].startswith("  finished") and lines[-1].endswith(" done")
    # counts and clock only go forward; once the plan is known every line has an estimate
    done = [int(m["done"]) for m in matches if m["done"]]
    assert done == sorted(done) and done[-1] == len(CHECK_IDS)
    elapsed = [_seconds(m["elapsed"]) for m in matches]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= wall + 1
    planned = lines.index(next(line for line in lines if "checks: topology" in line))
    for m in matches[planned:-1]:
        left = re.fullmatch(r"about (\d+:\d\d(?::\d\d)?) left|finishing", m["left"])
        assert left is not None, m.group(0)
        if left.group(1):  # never 0:00 while busy, and of the order of the whole run
            assert 1 <= _seconds(left.group(1)) <= 20 * wall + 10, m.group(0)
    assert matches[-2]["left"] == "finishing"


def test_collect_progress_none_prints_nothing_in_a_log(spec: Path, tmp_path: Path) -> None:
    assert _collect_logged(spec, tmp_path, "--progress", "none") == ""


def test_a_bad_heartbeat_interval_is_an_input_error(
    spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTEST_PROGRESS_HEARTBEAT_S", "soon")
    with pytest.raises(SystemExit) as info:
        main(["collect", str(spec), "-o", str(tmp_path / "e.json")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "ATTEST_PROGRESS_HEARTBEAT_S" in err and "Traceback" not in err
    assert not (tmp_path / "e.json").exists()


@pytest.mark.slow
def test_certify_logged_prints_its_phases_and_closes_before_its_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_tiny(tmp_path / "model")
    policy = write_policy(tmp_path / "mini.yaml", MINI_POLICY)
    key, _, _ = generate_keypair(tmp_path / "keys" / "release", passphrase=None)
    args = ["certify", str(spec), "--policy", str(policy), "--key", str(key)]
    args += ["-o", str(tmp_path / "out" / "gradient_certificate.json"), "--progress", "plain"]
    lines = attest(args, capsys, FakeTerminal()).splitlines()
    assert all(_LINE.fullmatch(line) for line in lines), lines
    for phase in ("topology", "profile", "gradients", "ig"):
        assert any(line.startswith(f"  checks: {phase} ") for line in lines), lines
    assert lines[-1].startswith("  finished") and lines[-1].endswith(" done")


@pytest.mark.slow
def test_certify_quiet_prints_nothing_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_tiny(tmp_path / "model")
    policy = write_policy(tmp_path / "mini.yaml", MINI_POLICY)
    key, _, _ = generate_keypair(tmp_path / "keys" / "release", passphrase=None)
    args = ["certify", str(spec), "--policy", str(policy), "--key", str(key)]
    args += ["-o", str(tmp_path / "out" / "gradient_certificate.json"), "--quiet"]
    assert attest(args, capsys, FakeTerminal()) == ""


def test_collect_in_a_pseudo_terminal_draws_the_display(spec: Path, tmp_path: Path) -> None:
    """The real thing: stderr is a pty, stdout a pipe (the summary stays clean on stdout)."""
    pytest.importorskip("rich")
    master, slave = pty.openpty()
    command = [sys.executable, "-m", "attest", "collect", str(spec), "-o", str(tmp_path / "e.json")]
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    child = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env
    )
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not select.select([master], [], [], 1.0)[0]:
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    else:
        child.kill()
        pytest.fail("attest collect did not finish within 120 s")
    os.close(master)
    assert child.stdout is not None
    with child.stdout:
        stdout = child.stdout.read().decode()
    assert child.wait(timeout=120) == 0, stdout
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert "checks" in shown and "elapsed" not in stdout
    assert f"{len(CHECK_IDS)}/{len(CHECK_IDS)} checks" in shown and "done" in shown
    assert "\x1b[" in shown, "a live display redraws with terminal control codes"
    assert "evidence for tiny" in stdout and "\x1b[" not in stdout
