"""Test kit for the ledger service: a PostgreSQL cluster per session, keys, clients.yaml, and
the service as a real ``attest ledger serve`` process (uvicorn) on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from attest.certificate.signing import generate_keypair, load_private_key
from attest.ledger.entries import LedgerEntry, utc_now
from attest.ledger.service.submission import new_nonce, sign_submission

ORIGIN = "test.example/ledger"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Keys:
    folder: Path

    def make(self, name: str) -> tuple[Path, Path]:
        key, pub, _ = generate_keypair(self.folder / name, passphrase=None)
        return key, pub


def write_clients(path: Path, clients: list[tuple[str, Path, list[str]]]) -> Path:
    lines = ["clients:"] if clients else ["clients: []"]
    for name, pub, types in clients:
        lines += [f"  - name: {name}", f"    public_key: {pub}", f"    entry_types: [{', '.join(types)}]"]
    path.write_text("\n".join(lines) + "\n")
    return path


class ServiceProcess:
    """``attest ledger serve`` as a child process; ``kill()`` sends SIGKILL."""

    def __init__(self, dsn: str, key: Path, clients: Path, log: Path, *, interval: float = 1.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.args = [
            sys.executable, "-m", "attest", "ledger", "serve", "--db", dsn, "--key", str(key),
            "--origin", ORIGIN, "--listen", f"127.0.0.1:{self.port}", "--clients", str(clients),
            "--checkpoint-interval", str(interval),
        ]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self, timeout_s: float = 30.0) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"service did not come up: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def entry(event: str = "verified", actor: str = "tester") -> LedgerEntry:
    return LedgerEntry(
        event=event,  # type: ignore[arg-type]
        time=utc_now(),
        result="pass" if event == "verified" else "fail",
        certificate_checked=True,
        actor=actor,
        host="host-" + uuid.uuid4().hex[:8],
    )


def signed_body(client: str, key_path: Path, item: LedgerEntry | None = None, **kw: Any) -> dict[str, Any]:
    key = load_private_key(key_path, prompt=False)
    return sign_submission(item or entry(), origin=ORIGIN, client=client, nonce=kw.pop("nonce", new_nonce()), key=key, **kw)
