"""Slow and idle clients against ``attest ledger serve`` (issue 33, item 4), as a table.

Each row is an attack holding more connections than the service may keep open: connections that
send nothing, slow-loris request headers, a slow body, idle keep-alives. Each is reproduced first
against the service as it was served before (uvicorn's defaults: no header or body deadline, no
connection limit) in a process whose file-descriptor limit is below the attack: a fresh client's
``/healthz`` and ``/add`` fail while the connections are held, and they are still held after the
guarded service's timeout. Then it is refused: the same attack against ``attest ledger serve``
(same starting descriptor limit) leaves a fresh client's ``/healthz`` and append answered, and
every attacking connection closed within its timeout. Loopback only; 200 connections per row.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from _ledger_service_kit import Keys, ServiceProcess, signed_body, write_clients

ATTACK = 200  # connections per row
NOFILE = (100, 160)  # the child's (soft, hard) descriptor limit: below ATTACK
TIMEOUT_S = 2  # the guarded service's header, body and keep-alive timeouts
MARGIN_S = 4.0  # scheduling slack on a loaded machine
TRICKLE_S = 0.25  # a slow client's pause between bytes

GUARDED = tuple(
    arg
    for option in ("--header-timeout", "--body-timeout", "--keepalive-timeout")
    for arg in (option, str(TIMEOUT_S))
)

# The service as `attest ledger serve` ran it before: uvicorn.run with its defaults.
STOCK = """
import sys, uvicorn
from attest.certificate.signing import load_private_key
from attest.ledger.service.app import ServiceConfig, create_app
from attest.ledger.service.submission import load_clients
o = dict(zip(sys.argv[1::2], sys.argv[2::2]))
host, _, port = o["--listen"].rpartition(":")
config = ServiceConfig(dsn=o["--db"], key=load_private_key(o["--key"]), origin=o["--origin"],
    clients=load_clients(o["--clients"]), checkpoint_interval_s=float(o["--checkpoint-interval"]))
uvicorn.run(create_app(config), host=host, port=int(port), log_level="warning",
    access_log=False, timeout_graceful_shutdown=5)
"""


@dataclass
class Held:
    """The attacker's sockets; a thread sends one byte to each every TRICKLE_S (``trickle``)."""

    socks: list[socket.socket]
    trickle: bytes = b""
    seen: dict[int, bytes] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        if self.trickle:
            threading.Thread(target=self._drip, daemon=True).start()

    def _drip(self) -> None:
        while not self.stop.wait(TRICKLE_S):
            for s in self.socks:
                with contextlib.suppress(OSError):
                    s.send(self.trickle)

    def is_open(self, s: socket.socket) -> bool:
        """False once the service closed it (what it sent before is kept in ``seen``)."""
        s.setblocking(False)
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    return False
                self.seen[s.fileno()] = self.seen.get(s.fileno(), b"") + data
        except BlockingIOError:
            return True
        except OSError:
            return False

    def open_count(self) -> int:
        return sum(self.is_open(s) for s in self.socks)

    def close(self) -> None:
        self.stop.set()
        for s in self.socks:
            s.close()


def _connect(port: int, first: bytes = b"") -> socket.socket | None:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        if first:
            s.sendall(first)
    except OSError:
        return None
    return s


def _many(port: int, first: bytes = b"", count: int = ATTACK) -> list[socket.socket]:
    return [s for s in (_connect(port, first) for _ in range(count)) if s is not None]


def idle(port: int) -> Held:
    """Connect and send nothing."""
    return Held(_many(port))


def slow_headers(port: int) -> Held:
    """Slow loris: a request line, then one header byte now and then, never the blank line."""
    return Held(_many(port, b"POST /add HTTP/1.1\r\nHost: ledger\r\nX-Pad: "), trickle=b"a")


def slow_body(port: int, count: int = ATTACK) -> Held:
    """Whole headers announcing a 4 KiB body, then one body byte now and then."""
    head = (
        b"POST /add HTTP/1.1\r\nHost: ledger\r\nContent-Type: application/json\r\n"
        b"Content-Length: 4096\r\n\r\n{"
    )
    return Held(_many(port, head, count), trickle=b" ")


def idle_keepalive(port: int) -> Held:
    """One complete request per connection, its answer read, then the connection kept idle."""
    socks = []
    for _ in range(ATTACK):
        s = _connect(port, b"GET /healthz HTTP/1.1\r\nHost: ledger\r\n\r\n")
        if s is None:
            continue
        with contextlib.suppress(OSError):
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
        socks.append(s)
    return Held(socks)


ROWS: list[tuple[Callable[[int], Held], bool]] = [
    # (attack, held past the timeout by the stock service)
    (idle, True),
    (slow_headers, True),
    (slow_body, True),
    (idle_keepalive, False),  # uvicorn's own keep-alive timeout (5 s) closes these eventually
]


class Fleet:
    def __init__(self, dsn: str, tmp: Path) -> None:
        keys = Keys(tmp)
        self.log_key, _ = keys.make("ledger")
        self.client_key, pub = keys.make("infer")
        self.dsn = dsn
        self.tmp = tmp
        self.clients = write_clients(tmp / "clients.yaml", [("infer-01", pub, ["verified"])])

    def serve(self, name: str, *, stock: bool = False, **kw: Any) -> ServiceProcess:
        options: dict[str, Any] = {"nofile": NOFILE, "extra_args": GUARDED}
        if stock:
            options = {"nofile": NOFILE, "command": [sys.executable, "-c", STOCK]}
        options.update(kw)
        log = self.tmp / f"{name}.log"
        return ServiceProcess(self.dsn, self.log_key, self.clients, log, **options)

    def fresh_client(self, url: str) -> tuple[int | str, int | str]:
        """What a new client gets from ``/healthz`` and ``POST /add`` (status or error)."""
        answers: list[int | str] = []
        with httpx.Client(timeout=4) as http:
            for method, path, body in (
                ("GET", "healthz", None),
                ("POST", "add", signed_body("infer-01", self.client_key)),
            ):
                try:
                    answers.append(http.request(method, url + path, json=body).status_code)
                except httpx.HTTPError as exc:
                    answers.append(type(exc).__name__)
        return answers[0], answers[1]


@pytest.fixture(scope="module")
def fleet(pg_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    dsn = pg_cluster.create_database("t_" + uuid.uuid4().hex[:12])
    return Fleet(dsn, tmp_path_factory.mktemp("slow"))


@pytest.fixture(scope="module")
def stock(fleet: Fleet) -> Iterator[ServiceProcess]:
    service = fleet.serve("stock", stock=True)
    yield service
    service.stop()


@pytest.fixture(scope="module")
def guarded(fleet: Fleet) -> Iterator[ServiceProcess]:
    # few request slots: slow uploads must not take them (they wait on the client, not on us)
    service = fleet.serve("guarded", extra_args=(*GUARDED, "--max-requests", "8"))
    yield service
    service.stop()


def _wait_healthy(url: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"{url} did not recover")


@pytest.mark.parametrize(("attack", "stock_holds"), ROWS, ids=[r[0].__name__ for r in ROWS])
def test_reproduced_on_the_stock_service(
    attack: Callable[[int], Held], stock_holds: bool, stock: ServiceProcess, fleet: Fleet
) -> None:
    _wait_healthy(stock.url)
    held = attack(stock.port)
    held.start()
    try:
        assert len(held.socks) > NOFILE[0] // 2, "the attack did not get its connections"
        health, add = fleet.fresh_client(stock.url)
        assert (health, add) != (200, 200), "a fresh client got through: not reproduced"
        time.sleep(TIMEOUT_S + 1)
        if stock_holds:
            assert held.open_count() > NOFILE[0] // 2, "the stock service closed them"
    finally:
        held.close()
    _wait_healthy(stock.url)


@pytest.mark.parametrize("attack", [r[0] for r in ROWS], ids=[r[0].__name__ for r in ROWS])
def test_refused_by_the_guarded_service(
    attack: Callable[[int], Held], guarded: ServiceProcess, fleet: Fleet
) -> None:
    _wait_healthy(guarded.url)
    began = time.monotonic()
    held = attack(guarded.port)
    held.start()
    try:
        assert held.socks
        assert fleet.fresh_client(guarded.url) == (200, 200)
        deadline = began + TIMEOUT_S + MARGIN_S
        while held.open_count() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert held.open_count() == 0, "attacking connections outlived the timeouts"
        if attack in (slow_headers, slow_body):  # those that did not get evicted were told why
            assert any(b" 408 " in data.split(b"\r\n")[0] for data in held.seen.values())
    finally:
        held.close()


def _soft_nofile(pid: int) -> int:
    return resource.prlimit(pid, resource.RLIMIT_NOFILE)[0]


def test_file_descriptor_limit_raised_and_connections_fitted(guarded: ServiceProcess) -> None:
    assert guarded.proc is not None
    assert _soft_nofile(guarded.proc.pid) == NOFILE[1]
    budget = NOFILE[1] - 64  # FD_RESERVE
    assert f"limits: {budget} connections (lowered from 1000" in guarded.log.read_text()


def test_accept_at_the_descriptor_limit_does_not_stop_the_server(fleet: Fleet) -> None:
    """Descriptors used up by something else (here: the limit lowered under the running process):
    accepting fails for a while, the server stays up and serves once descriptors are free."""
    service = fleet.serve("emfile", nofile=None)
    try:
        assert service.proc is not None
        pid = service.proc.pid
        before = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        in_use = len(os.listdir(f"/proc/{pid}/fd"))
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 10, before[1]))
        held = idle(service.port)
        try:
            health, _ = fleet.fresh_client(service.url)
            assert health != 200, "the descriptor limit was not reached"
        finally:
            held.close()
        resource.prlimit(pid, resource.RLIMIT_NOFILE, before)
        _wait_healthy(service.url)
        assert fleet.fresh_client(service.url) == (200, 200)
        assert service.proc.poll() is None
    finally:
        service.stop()


def test_slow_uploads_below_the_connection_limit_take_no_request_slot(
    guarded: ServiceProcess, fleet: Fleet
) -> None:
    """40 slow bodies: fewer than the connections allowed (nothing is evicted), more than the
    8 request slots; writes still get through."""
    _wait_healthy(guarded.url)
    held = slow_body(guarded.port, 40)
    held.start()
    try:
        time.sleep(0.5)
        assert held.open_count() == 40
        assert fleet.fresh_client(guarded.url) == (200, 200)
        assert held.open_count() == 40
    finally:
        held.close()


def test_an_oversized_request_head_is_refused(guarded: ServiceProcess) -> None:
    """Quickly sent but endless headers: bounded by size, not only by time (431, closed)."""
    s = _connect(guarded.port, b"GET /healthz HTTP/1.1\r\nHost: ledger\r\n")
    assert s is not None
    held = Held([s])
    try:
        with contextlib.suppress(OSError):
            for _ in range(66):  # just over 64 KiB, then stop (no reset)
                s.sendall(b"X-Pad: " + b"a" * 1000 + b"\r\n")
        deadline = time.monotonic() + 2
        while held.is_open(s) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not held.is_open(s)
        assert held.seen[s.fileno()].startswith(b"HTTP/1.1 431 ")
    finally:
        held.close()


def test_a_connection_answered_before_its_body_is_in_does_not_linger(
    guarded: ServiceProcess,
) -> None:
    """An oversized POST is answered 413 at once; the client then sends the body it announced
    and goes quiet. The connection is idle from then on and is closed like any idle one."""
    head = (
        b"POST /add HTTP/1.1\r\nHost: ledger\r\nContent-Type: application/json\r\n"
        b"Content-Length: 200000\r\n\r\n"
    )
    s = _connect(guarded.port, head)
    assert s is not None
    held = Held([s])
    try:
        s.settimeout(5)
        assert s.recv(12) == b"HTTP/1.1 413"
        s.sendall(b" " * 200000)
        deadline = time.monotonic() + TIMEOUT_S + MARGIN_S
        while held.is_open(s) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not held.is_open(s), "the connection outlived the keep-alive timeout"
    finally:
        held.close()
