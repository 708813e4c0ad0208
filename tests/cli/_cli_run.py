"""Running ``attest`` in process the way a user's shell would, for the CLI tests."""

from __future__ import annotations

from typing import Any

import pytest

from attest.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str, str]:
    """``attest ARGS...`` through the real entry point: (exit code, stdout, stderr); fails the
    test if a traceback reached the user."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def exit_code(*args: Any) -> int:
    """``attest ARGS...`` through the real entry point, for tests that read only its exit code."""
    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
