"""Atomic writes: whole files only, with the mode a plain write would give."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from attest.core.io import atomic_write_bytes, atomic_write_text


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = atomic_write_text(tmp_path / "report.json", "{}")
    finally:
        os.umask(old)
    assert _mode(path) == 0o644
    assert path.read_text() == "{}"


def test_replacing_keeps_the_existing_mode_and_explicit_mode_wins(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    path.write_text("old")
    path.chmod(0o640)
    atomic_write_bytes(path, b"new")
    assert _mode(path) == 0o640 and path.read_bytes() == b"new"
    atomic_write_bytes(path, b"key", mode=0o600)
    assert _mode(path) == 0o600


def test_no_temporary_file_is_left_behind(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "a.txt", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
