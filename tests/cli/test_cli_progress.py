"""The progress display of ``attest collect`` and ``attest certify`` on stderr.

Shown on a terminal only; nothing with a pipe or file for stderr, with ``--json`` or with
``--quiet``. The display itself is tested in tests/unit/core/test_progress.py; here the commands.
"""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from attest.evidence.model import CHECK_IDS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from _collect_models import LINEAR_RELU, make_spec
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


def test_collect_with_stderr_not_a_terminal_prints_nothing(
    spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        attest(["collect", str(spec), "-o", str(tmp_path / "e.json")], capsys, io.StringIO()) == ""
    )


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
