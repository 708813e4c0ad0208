"""Test-wide isolation: nothing a test runs touches the user's own state or ledger."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster for the session (tests/unit/_pgcluster.py). Without the
    PostgreSQL binaries the tests using it skip, except under CI=true, where they fail
    (.ci/run installs the Debian postgresql package)."""
    from _pgcluster import PgCluster, find_pg_bin

    bin_dir = find_pg_bin()
    if bin_dir is None:
        message = (
            "PostgreSQL binaries not found (initdb, pg_ctl in /usr/lib/postgresql/15/bin, "
            "$ATTEST_PG_BIN or pg_config --bindir); install the Debian postgresql package"
        )
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    cluster = PgCluster(bin_dir)
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_dsn(pg_cluster: Any) -> str:
    """A new empty database in the session's cluster."""
    return pg_cluster.create_database("t_" + uuid.uuid4().hex[:12])
