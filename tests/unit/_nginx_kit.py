"""Test kit: a real nginx serving a ledger's static tiles directory on loopback, started by the
test with its own minimal configuration in a temporary folder (pid, logs and temp files there,
``daemon off``, a child process the test stops). Without the nginx binary the tests using it
skip, except under CI=true, where they fail (.ci/run installs the Debian nginx package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from _ledger_service_kit import free_port

# The server block docs/ledger.md shows (static tiles with nginx), with the root and port filled
# in: the checkpoint and the latest clients document are mutable (no-cache), everything else
# immutable; entry bundles and tiles gzip-compressed when the client asks.
SERVER_BLOCK = """
    keepalive_requests 1000000;
    types { }
    default_type application/octet-stream;
    gzip on;
    gzip_types application/octet-stream application/json;
    server {
        listen 127.0.0.1:%(port)d;
        root %(root)s;
        location = /checkpoint {
            default_type "text/plain; charset=utf-8";
            add_header Cache-Control "no-cache";
        }
        location = /clients {
            default_type application/json;
            add_header Cache-Control "no-cache";
        }
        location /clients-version/ {
            default_type application/json;
            add_header Cache-Control "public, max-age=31536000, immutable";
        }
        location /tile/ {
            add_header Cache-Control "public, max-age=31536000, immutable";
        }
    }
"""


def nginx_binary() -> str | None:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    return found


def require_nginx() -> str:
    binary = nginx_binary()
    if binary is None:
        message = "nginx not found; install the Debian nginx package (apt-get install nginx)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return binary


class NginxProcess:
    """nginx serving ``root`` at ``url`` (a free loopback port); ``stop()`` ends it."""

    def __init__(self, root: Path, folder: Path, *, workers: int = 1) -> None:
        binary = require_nginx()
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        temp = {name: folder / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
        user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read the tmp folder
        config = (
            f"{user}daemon off;\nworker_processes {workers};\npid {folder / 'nginx.pid'};\n"
            f"error_log {folder / 'error.log'} warn;\n"
            "events { worker_connections 1024; }\n"
            "http {\n    access_log off;\n"
            f"    client_body_temp_path {temp['body']};\n    proxy_temp_path {temp['proxy']};\n"
            f"    fastcgi_temp_path {temp['fastcgi']};\n    uwsgi_temp_path {temp['uwsgi']};\n"
            f"    scgi_temp_path {temp['scgi']};\n"
            + SERVER_BLOCK % {"port": self.port, "root": root}
            + "}\n"
        )
        self.config = folder / "nginx.conf"
        self.config.write_text(config)
        self.log = folder / "stderr.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [binary, "-p", str(folder), "-c", str(self.config), "-e", str(folder / "e.log")],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited {self.proc.returncode}: {self._logs()}")
            try:
                httpx.get(self.url, timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not come up: {self._logs()}")

    def _logs(self) -> str:
        parts = [p.read_text(errors="replace") for p in self.log.parent.glob("*.log")]
        return "\n".join(parts)[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: nginx's fast shutdown
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
