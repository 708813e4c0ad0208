"""What every write to the ledger service must cost at least, in Python on this machine: a
server that does only the work no write can skip, on the service's loop and HTTP parser
(uvloop and httptools, as uvicorn runs the service), and the split of the real service's CPU
under the same load (py-spy). Used by ``bench_ledger_service.py --floor`` and ``--profile``.

The floor server, per request: feed the bytes to httptools' request parser, collect the body,
parse it with the service's strict reader (:func:`attest.core.io.loads_strict`), encode the
entry's leaf data as the service does (its canonical JSON) and the signed message over it
(:func:`attest.ledger.writers.signed_message`), verify the client's Ed25519 signature with
cryptography, and write an answer of exactly the size of a real service's answer (status line,
headers and a body of that length) in one ``write``. No validation of fields, no database, no
sequencer, no checkpoint: a lower bound, not a service.

    python benchmarks/ledger_floor.py PORT CLIENT.pub ANSWER_BYTES   # serve until SIGTERM
"""

from __future__ import annotations

import asyncio
import base64
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"


def fixed_answer(size: int) -> bytes:
    """A 200 answer of ``size`` bytes in all: the head above and a JSON string as body."""
    for length in range(2, size):
        if len(HEAD % length) + length == size:
            return HEAD % length + b'"' + b"x" * (length - 2) + b'"'
    raise ValueError(f"no answer of {size} bytes")


class _FloorProtocol(asyncio.Protocol):
    """One connection: httptools parses, every complete request is checked and answered."""

    def __init__(self, key: Any, answer: bytes) -> None:
        import httptools

        self.key, self.answer = key, answer
        self.parser = httptools.HttpRequestParser(self)
        self.body: list[bytes] = []
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        from attest.core.io import loads_strict
        from attest.ledger.entries import leaf_data_of
        from attest.ledger.writers import signed_message

        sent = loads_strict(b"".join(self.body), max_depth=16)
        self.body = []
        header = {k: sent[k] for k in ("format", "origin", "client", "nonce", "time")}
        message = signed_message(header, leaf_data_of(dict(sent["entry"])))
        self.key.verify(base64.b64decode(sent["signature"]), message)  # raises when forged
        self.transport.write(self.answer)


def serve(port: int, public_key: Path, answer_size: int) -> None:
    """Serve the floor on 127.0.0.1:``port`` until SIGTERM."""
    import uvloop

    from attest.certificate.signing import load_public_key

    key = load_public_key(public_key)
    answer = fixed_answer(answer_size)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
        server = await loop.create_server(
            lambda: _FloorProtocol(key, answer), "127.0.0.1", port, backlog=1024
        )
        await stop
        server.close()

    uvloop.run(main())


@dataclass
class FloorProcess:
    """The floor server as a child process, with the ``url`` and ``proc`` the bench reads."""

    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @classmethod
    def start(cls, public_key: Path, answer_size: int, port: int) -> FloorProcess:
        proc = subprocess.Popen(
            [sys.executable, __file__, str(port), str(public_key), str(answer_size)]
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return cls(port, proc)
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("the floor server exited at start") from None
                time.sleep(0.1)
        proc.kill()
        raise RuntimeError("the floor server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def answer_size(url: str, request: bytes) -> int:
    """The byte size (head and body) of the service's answer to one write ``request``."""
    host, port = url.split("//")[1].rstrip("/").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, rest = data.partition(b"\r\n\r\n")
        found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        length = int(found.group(1)) if found else 0
        while len(rest) < length:
            rest += sock.recv(65536)
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"the service refused the probe write: {head[:60]!r}")
    return len(head) + 4 + length


# -- where the service's CPU goes: py-spy's samples, by what the write is doing ----------------

# (part, pattern): a sample belongs to the first part whose pattern matches any of its frames
# ("function (file:line)"), so the specific parts come before the layers that call them.
_PARTS = [
    ("ed25519 verification (with its message)", r"SubmissionRequest\.verify "),
    ("static files", r"static_tiles\.py"),
    ("witness rounds (the service's side)", r"witnessing\.py|witness/client\.py"),
    ("witness: state file", r"witness/state\.py"),
    ("witness: add-checkpoint checks and cosigning", r"witness/(core|cosignature|app)\.py"),
    ("checkpoint refresh", r"Sequencer\._refresh"),
    ("postgresql (the sequencer's transaction)", r"psycopg|postgres\.py"),
    ("request checks: strict JSON", r"loads_strict "),
    ("request checks: pydantic, leaf data, the rest", r"check_write "),
    ("building the leaf", r"written_leaf_data_of "),
    ("answer: formatting and sending", r"appended_answer|_send_json|RequestResponseCycle\.send"),
    ("metrics", r"prometheus_client|metrics\.py"),
    ("sequencer: queue, futures, thread hand-off", r"sequencer\.py|anyio|threading"),
    (
        "HTTP/ASGI: reading the request (uvicorn, httptools, guard)",
        r"uvicorn|httptools|guard\.py|app\.py",
    ),
]


_WAITING = re.compile(r"^(Condition\.wait|_worker|WorkerThread\.run|Queue\.get) \(")


def split_samples(raw: str) -> dict[str, float]:
    """py-spy's raw (collapsed) output -> the share of samples per part (``_PARTS``); what no
    pattern names is the event loop itself (uvloop's callbacks, asyncio's tasks)."""
    parts = [(name, re.compile(pattern)) for name, pattern in _PARTS]
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        if _WAITING.search(stack.rpartition(";")[2]):
            continue  # a worker thread waiting for work: py-spy counts some lock waits as active
        # the frames above the event loop (the command, uvicorn's start) are in every sample
        stack = stack.rpartition("Runner.run (asyncio/runners.py")[2]
        part = next((name for name, pattern in parts if pattern.search(stack)), "event loop")
        counts[part] += int(count)
    total = sum(counts.values()) or 1
    return {name: round(count / total, 3) for name, count in counts.most_common()}


def py_spy(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy recording ``pid`` for ``seconds`` into ``out`` (raw), or None without py-spy."""
    binary = Path(sys.executable).with_name("py-spy")
    if not binary.exists():
        return None
    return subprocess.Popen(
        [str(binary), "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate",
         "250", "--format", "raw", "--nonblocking", "--output", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


if __name__ == "__main__":
    serve(int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
