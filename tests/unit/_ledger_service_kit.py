"""Test kit for the ledger service: a PostgreSQL cluster per session, keys, clients.yaml, and
the service as a real ``attest ledger serve`` process (uvicorn) on a free loopback port."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from attest.certificate.signing import generate_keypair, load_private_key
from attest.ledger.entries import LedgerEntry, utc_now
from attest.ledger.service.submission import new_nonce, sign_submission

ORIGIN = "test.example/ledger"
TEST_HOST = "test-host-01"
# the hosts every test client may write for: the kit's own and this machine's (attest verify
# --ledger records socket.gethostname())
HOSTS = (TEST_HOST, socket.gethostname())


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


def write_clients(
    path: Path,
    clients: list[tuple[str, Path, list[str]]],
    hosts: tuple[str, ...] | list[str] = HOSTS,
) -> Path:
    lines = ["clients:"] if clients else ["clients: []"]
    for name, pub, types in clients:
        lines += [
            f"  - name: {name}",
            f"    public_key: {pub}",
            f"    entry_types: [{', '.join(types)}]",
            f"    hosts: [{', '.join(repr(h) for h in hosts)}]",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


class ServiceProcess:
    """``attest ledger serve`` as a child process; ``kill()`` sends SIGKILL."""

    def __init__(
        self,
        dsn: str,
        key: Path,
        clients: Path,
        log: Path,
        *,
        interval: float = 1.0,
        port: int | None = None,
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.args = [
            sys.executable,
            "-m",
            "attest",
            "ledger",
            "serve",
            "--db",
            dsn,
            "--key",
            str(key),
            "--origin",
            ORIGIN,
            "--listen",
            f"127.0.0.1:{self.port}",
            "--clients",
            str(clients),
            "--checkpoint-interval",
            str(interval),
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
                raise RuntimeError(
                    f"service exited {self.proc.returncode}: {self.log.read_text()[-3000:]}"
                )
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


def entry(event: str = "verified", actor: str = "tester", host: str = TEST_HOST) -> LedgerEntry:
    return LedgerEntry(
        event=event,  # type: ignore[arg-type]
        time=utc_now(),
        result="pass" if event == "verified" else "fail",
        certificate_checked=True,
        actor=actor,
        host=host,
    )


def signed_body(
    client: str, key_path: Path, item: LedgerEntry | None = None, **kw: Any
) -> dict[str, Any]:
    key = load_private_key(key_path, prompt=False)
    return sign_submission(
        item or entry(),
        origin=ORIGIN,
        client=client,
        nonce=kw.pop("nonce", new_nonce()),
        key=key,
        **kw,
    )


@dataclass
class LoadResult:
    """What a load run saw: acknowledged ``(index, leaf hash)``, latencies, error counts."""

    acks: list[tuple[int, bytes]]
    latencies: list[float]
    errors: dict[str, int]
    seconds: float


def run_load(
    url: str,
    client: str,
    key_path: Path,
    *,
    workers: int = 32,
    duration_s: float = 3.0,
    retry: bool = True,
) -> LoadResult:
    """``workers`` threads, each submitting fresh entries one after another for ``duration_s``.
    A failed write is retried with the same nonce (re-signed) while the run lasts, so a write
    whose answer was lost is acknowledged by its 409 (the index it got) instead."""
    import threading
    from collections import Counter

    from attest.ledger.merkle import leaf_hash
    from attest.ledger.writers import read_leaf

    key = load_private_key(key_path, prompt=False)
    stop = threading.Event()
    lock = threading.Lock()
    acks: list[tuple[int, bytes]] = []
    latencies: list[float] = []
    errors: Counter[str] = Counter()

    def work(number: int) -> None:
        with httpx.Client(timeout=15) as http:
            while not stop.is_set():
                item = entry(actor=f"load-{number}")
                nonce = new_nonce()
                while not stop.is_set():
                    body = sign_submission(item, origin=ORIGIN, client=client, nonce=nonce, key=key)
                    started = time.perf_counter()
                    try:
                        response = http.post(url + "add", json=body)
                    except httpx.HTTPError as exc:
                        with lock:
                            errors[type(exc).__name__] += 1
                        time.sleep(0.05)
                        continue
                    answer = response.json()
                    index = answer.get("index")
                    if response.status_code == 200 or (
                        response.status_code == 409 and index is not None
                    ):
                        leaf = base64.b64decode(answer["leaf"])
                        if read_leaf(leaf).entry_data != item.leaf_data:
                            with lock:
                                errors["answered with another entry"] += 1
                        with lock:
                            acks.append((int(index), leaf_hash(leaf)))
                            latencies.append(time.perf_counter() - started)
                        break
                    with lock:
                        errors[
                            f"{response.status_code} {answer.get('error')} retryable={answer.get('retryable')}"
                        ] += 1
                    if response.status_code != 503 or not retry:
                        break
                    time.sleep(0.05)

    threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(workers)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(duration_s)
    stop.set()
    for t in threads:
        t.join(30)
    return LoadResult(acks, latencies, dict(errors), time.perf_counter() - began)
