"""Test-wide isolation: nothing a test runs touches the user's own state or ledger."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `attest verify` keeps its rollback state in the user's state directory by default;
    # each test gets its own, so tests never see each other's (or the user's) versions.
    home: Path = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.delenv("ATTEST_STATE_FILE", raising=False)
    monkeypatch.delenv("ATTEST_LEDGER", raising=False)
