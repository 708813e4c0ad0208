"""A throwaway PostgreSQL cluster for the session (tests/unit/_pgcluster.py); each test gets
its own database. Without the PostgreSQL binaries the tests skip, except under CI=true,
where they fail (.ci/run installs the Debian postgresql package)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from _pgcluster import PgCluster, find_pg_bin


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
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
def pg_dsn(pg_cluster: PgCluster) -> str:
    return pg_cluster.create_database("t_" + uuid.uuid4().hex[:12])
