"""A throwaway PostgreSQL cluster for tests and benchmarks: ``initdb`` into a temporary
directory, ``pg_ctl start`` listening only on a unix socket inside it, removed at the end.

The binaries come from ``$ATTEST_PG_BIN``, else Debian's ``/usr/lib/postgresql/15/bin`` (or
another version there), else ``pg_config --bindir``. PostgreSQL refuses to run as root, so under root the server runs as
the ``postgres`` user (created by the Debian package) through ``runuser``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

DEBIAN_BIN = Path("/usr/lib/postgresql/15/bin")


def find_pg_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or None."""
    candidates = [os.environ.get("ATTEST_PG_BIN"), str(DEBIAN_BIN)]
    candidates += sorted(map(str, Path("/usr/lib/postgresql").glob("*/bin")), reverse=True)
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(out.stdout.strip())
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


class PgCluster:
    """One cluster; :attr:`dsn` connects as the superuser ``postgres`` over the socket."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.base = Path(tempfile.mkdtemp(prefix="attest-pg-"))
        self.data = self.base / "data"
        self.socket = self.base / "sock"
        self.socket.mkdir()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            self._as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.base, "postgres")
            shutil.chown(self.socket, "postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
        )
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self._as_user, str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stdout}\n{done.stderr}")

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, database: str) -> str:
        return f"host={self.socket} port=5432 user=postgres dbname={database}"

    def start(self) -> None:
        options = f"-k {self.socket} -c listen_addresses='' -c max_connections=200"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.base / "log"),
            "-w",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def create_database(self, name: str) -> str:
        """A new empty database; returns its DSN."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
        return self.dsn_for(name)

    def destroy(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)
