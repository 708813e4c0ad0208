"""docs/quickstart.md works as written: every ``sh`` block runs, in order, in a fresh folder."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "docs" / "quickstart.md"


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.S | re.M)


def test_quickstart_has_the_whole_flow() -> None:
    commands = "\n".join(shell_blocks(QUICKSTART.read_text()))
    for step in (
        "attest keygen",
        "attest certify",
        "attest inspect",
        "attest trust add",
        "attest verify",
    ):
        assert step in commands


@pytest.mark.slow
def test_quickstart_commands_run(tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "OMP_NUM_THREADS": "2",
    }
    script = "set -euo pipefail\n" + "\n".join(shell_blocks(QUICKSTART.read_text()))
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert "policy clinical-strict 1: PASS" in done.stdout
    assert "VERIFIED" in done.stdout.upper()
    assert "NOT VERIFIED" in done.stdout  # inspect says what it is
    assert (tmp_path / "release" / "gradient_certificate.json").is_file()
