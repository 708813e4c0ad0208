"""Ledger service speed, loopback only, bounded in time and count: a throwaway PostgreSQL
cluster (fsync on, as PostgreSQL ships), ``attest ledger serve`` as a real uvicorn process, and

1. ``--clients`` (32) concurrent writers for ``--duration`` seconds (60), each sending one
   client-signed write and waiting for its acknowledgement (sent after the COMMIT) before
   sending the next: acknowledged appends per second, p50/p99 acknowledgement latency, and
   the CPU per acknowledged write of the service process and of the clients;
2. tile reads per second (32 concurrent readers in ``--read-processes`` (2) processes fetching
   entry bundles and hash tiles), from the service (today's reads: PostgreSQL) and, in the same
   run, from the static files the service wrote (``--static-dir``) served by a real nginx on
   loopback (``--nginx-workers``, default one per CPU): both rates and their ratio;
1b. with ``--witnesses`` (2), the same load against a second service whose checkpoints
   ``--witnesses`` local ``attest ledger witness serve`` processes must all cosign before a
   write is answered: its rate, the ratio to 1., service and witness CPU per write, p99;
1c. the floor (``--floor-seconds``, 10): the same writers against a server doing only what
   every write must (benchmarks/ledger_floor.py: httptools, the strict JSON reader, the
   Ed25519 verification, an answer of the service's size): its CPU per request, the least a
   write can cost in Python here, and the service's CPU per write over it; ``--profile``
   samples the services (and one witness) with py-spy and prints where their CPU goes;
3. the sequencer's transaction alone (PostgresStorage.submit, batches of 32, no HTTP);
4. a full remote audit (``attest ledger verify URL``'s code) of ``--audit-entries`` (10**6)
   entries from tiles; the entries are bulk-loaded through the storage first.

    .venv/bin/python benchmarks/bench_ledger_service.py                      # as in the issue
    .venv/bin/python benchmarks/bench_ledger_service.py --duration 15 --audit-entries 100000

What the writers do, exactly. They run as ``--client-processes`` (2) processes on the same
machine as the service and PostgreSQL. Before the timed window each client signs
``duration x --presign-rate / clients`` writes (2500/s: 4,688 each for 60 s), each a fresh
entry (its own time, for the host the client is listed for) with a fresh nonce and the current time, signed with the
client's Ed25519 key exactly as :func:`attest.ledger.service.submission.sign_submission`
does (the service's 300 s freshness window allows it: a write whose signed time is over 240 s
old is re-signed instead), and opens one keep-alive HTTP/1.1 connection. The processes then
start together (a barrier); in the window each connection sends its next write, reads the
answer (status line and Content-Length only: an asyncio Protocol on uvloop, no HTTP
library) and sends the next; a write left over is never sent, and if a client runs out it
signs more as it goes (counted: ``signed_in_window``). So the window measures the service:
every write is still parsed, validated, signature-checked, replay-checked and committed by it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "unit"))

import httpx
from _ledger_service_kit import ORIGIN, Keys, ServiceProcess, entry, write_clients
from _nginx_kit import NginxProcess, nginx_binary
from _pgcluster import PgCluster, find_pg_bin
from ledger_floor import FloorProcess, answer_size, py_spy, split_samples

from attest.certificate.signing import load_private_key, load_public_key
from attest.ledger.service.postgres import PostgresStorage
from attest.ledger.service.remote_audit import audit_remote
from attest.ledger.service.submission import new_nonce
from attest.ledger.service.tiles import TILE_WIDTH, tile_path, tiles_for_size


def _body_maker(key_path: str, number: int) -> Any:
    """A cheap maker of signed write bodies: one entry template (its ``host`` the one listed for
    the client in clients.yaml), a fresh time and nonce per write, the leaf data and signed message encoded with the standard library's sorted
    compact JSON (byte-identical to RFC 8785 for these number-free objects, as the service's own
    :func:`~attest.certificate.signing.canonical_json_text`: a body that were not would be
    refused 401 and counted), signed with the client's Ed25519 key as a real client does."""
    import hashlib

    from attest.ledger.entries import utc_now
    from attest.ledger.service.submission import DOMAIN, SUBMISSION_FORMAT

    key = load_private_key(key_path, prompt=False)
    template = entry(actor=f"bench-{number}").model_dump(mode="json")

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def make() -> bytes:
        item = {**template, "time": utc_now()}
        header = {"format": SUBMISSION_FORMAT, "origin": ORIGIN, "client": "bench",
                  "nonce": new_nonce(), "time": item["time"]}  # fmt: skip
        # the leaf data the service hashes: the entry without an unset revocation (LedgerEntry.plain)
        leaf = {k: v for k, v in item.items() if not (k == "revocation" and v is None)}
        message = DOMAIN + dumps({**header, "entry": hashlib.sha256(dumps(leaf)).hexdigest()})
        signature = base64.b64encode(key.sign(message)).decode()
        return dumps({**header, "entry": item, "signature": signature})

    return make


# A pre-signed write is sent only while its signed time is well inside the service's window
# (MAX_SKEW_S, 300 s); an older one is replaced by a freshly signed write (counted).
_FRESH_FOR_S = 240.0


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection that sends a request and waits for its answer: the
    status line and Content-Length found with bytes.find, no header objects, no HTTP library."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.waiter: asyncio.Future[int] | None = None
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:  # uvloop's is no asyncio.Transport
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        at = self.buffer.lower().find(b"\r\ncontent-length:", 0, end)
        length = int(self.buffer[at + 17 : self.buffer.find(b"\r\n", at + 2)]) if at >= 0 else 0
        if len(self.buffer) < end + 4 + length:
            return
        status = int(self.buffer[9:12])
        del self.buffer[: end + 4 + length]
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(status)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("the service closed the connection"))

    async def request(self, data: bytes) -> int:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return await self.waiter


def _requests(key_path: str, number: int, count: int, host: str) -> tuple[list[bytes], Any]:
    """``count`` pre-signed ``POST /add`` requests (head and body) and a maker of more."""
    make = _body_maker(key_path, number)

    def request() -> bytes:
        body = make()
        return (
            f"POST /add HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body

    return [request() for _ in range(count)], request


async def _writers(
    url: str, key_path: str, first: int, tasks: int, presign: int, seconds: float, start: Any
) -> dict[str, Any]:
    """``tasks`` connections, each sending its pre-signed writes one after another (the next
    once the answer to the last came) for ``seconds`` after every process is ready."""
    host, port = url.split("//")[1].rstrip("/").split(":")
    prepared = [_requests(key_path, first + n, presign, host) for n in range(tasks)]
    signed_at = time.monotonic()
    loop = asyncio.get_running_loop()
    connections = [
        (await loop.create_connection(_Connection, host, int(port)))[1] for _ in range(tasks)
    ]
    start.wait(600)  # a multiprocessing barrier: every client process starts the window together
    cpu_before = time.process_time()
    latencies: list[float] = []
    errors: dict[str, int] = {}
    fresh = 0
    deadline = time.perf_counter() + seconds

    async def one(connection: _Connection, queue: list[bytes], more: Any) -> None:
        nonlocal fresh
        queue.reverse()
        while time.perf_counter() < deadline:
            if queue and time.monotonic() - signed_at < _FRESH_FOR_S:
                data = queue.pop()
            else:
                data = more()
                fresh += 1
            started = time.perf_counter()
            status = await connection.request(data)
            if status == 200:
                latencies.append(time.perf_counter() - started)
            else:
                errors[str(status)] = errors.get(str(status), 0) + 1

    await asyncio.gather(*(one(c, q, m) for c, (q, m) in zip(connections, prepared, strict=True)))
    for connection in connections:
        assert connection.transport is not None
        connection.transport.close()
    cpu_s = time.process_time() - cpu_before
    return {"latencies": latencies, "errors": errors, "signed_in_window": fresh, "cpu_s": cpu_s}


def _writer_process(
    args: tuple[str, str, int, int, int, float, Any, Any],
) -> None:
    url, key_path, first, tasks, presign, seconds, start, results = args
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop comes with the ledger-service extra
        runner = asyncio.run
    try:
        results.put(runner(_writers(url, key_path, first, tasks, presign, seconds, start)))
    except BaseException:
        start.abort()  # the others (and the main process) stop waiting at the barrier
        raise


async def _readers(url: str, paths: list[str], tasks: int, seconds: float) -> tuple[int, int]:
    """``tasks`` keep-alive HTTP/1.1 connections fetching ``paths`` round robin."""
    host, port = url.split("//")[1].rstrip("/").split(":")
    done = 0
    size = 0
    deadline = time.perf_counter() + seconds

    async def one(number: int) -> None:
        nonlocal done, size
        reader, writer = await asyncio.open_connection(host, int(port))
        at = number
        try:
            while time.perf_counter() < deadline:
                path = paths[at % len(paths)]
                writer.write(f"GET /{path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
                status_line = await reader.readline()
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                if status_line.split()[1] != b"200":
                    raise RuntimeError(f"GET /{path}: {status_line!r}")
                done += 1
                size += len(body)
                at += tasks
        finally:
            writer.close()

    await asyncio.gather(*(one(n) for n in range(tasks)))
    return done, size


def _read_process(args: tuple[str, list[str], int, float]) -> tuple[int, int]:
    url, paths, tasks, seconds = args
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop comes with the ledger-service extra
        runner = asyncio.run
    result: tuple[int, int] = runner(_readers(url, paths, tasks, seconds))
    return result


def _read_rate(url: str, paths: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """32 readers in ``args.read_processes`` processes fetching ``paths`` for ``read_seconds``."""
    processes = args.read_processes
    tasks = max(1, 32 // processes)
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes) as pool:
        parts = pool.map(
            _read_process,
            [(url, paths[n:] + paths[:n], tasks, args.read_seconds) for n in range(processes)],
        )
    done, size = sum(p[0] for p in parts), sum(p[1] for p in parts)
    return {
        "per_second": round(done / args.read_seconds, 1),
        "mib_per_second": round(size / args.read_seconds / 2**20, 1),
    }


def _tile_paths(size: int) -> list[str]:
    """Up to 64 entry bundles and their level-0 hash tiles the tree of ``size`` has (the full
    ones; the partial one when there is no full one)."""
    tiles = [t for t in tiles_for_size(size) if t.width == TILE_WIDTH][:64]
    tiles = tiles or list(tiles_for_size(size))
    return [tile_path(None, t.index, t.width) for t in tiles] + [
        tile_path(0, t.index, t.width) for t in tiles
    ]


def _wait_for_static(path: Path, public: Any, size: int, limit_s: float = 600) -> float:
    """Seconds until the static checkpoint at ``path`` covers ``size`` entries."""
    from attest.ledger.checkpoint import open_checkpoint

    started = time.monotonic()
    while time.monotonic() < started + limit_s:
        if path.exists() and open_checkpoint(path.read_text(), public).size >= size:
            return time.monotonic() - started
        time.sleep(0.2)
    raise RuntimeError(f"the static files did not reach {size} entries")


def _static_reads(
    static: Path, tmp: Path, paths: list[str], pg: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    """The same reads through nginx serving the static files, and the ratio to ``pg``."""
    if nginx_binary() is None:
        return {"skipped": "nginx not found: install the Debian nginx package"}
    workers = args.nginx_workers or multiprocessing.cpu_count()
    nginx = NginxProcess(static, tmp / "nginx", workers=workers)
    try:
        figures = _read_rate(nginx.url, paths, args)
    finally:
        nginx.stop()
    figures["nginx_workers"] = workers
    figures["ratio_to_postgresql"] = round(figures["per_second"] / pg["per_second"], 1)
    return figures


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _bulk_load(dsn: str, total: int) -> float:
    started = time.perf_counter()
    with PostgresStorage(dsn) as storage:
        have = storage.tree_head().size
        chunk: list[bytes] = []
        for number in range(have, total):
            chunk.append(entry(actor=f"bulk-{number}").leaf_data)
            if len(chunk) == 20_000:
                storage.append_many(chunk)
                chunk = []
        if chunk:
            storage.append_many(chunk)
    return time.perf_counter() - started


def _storage_only(dsn: str, key_path: Path, batch: int = 32, batches: int = 100) -> dict[str, Any]:
    """The sequencer's transaction alone (no HTTP, no clients): batches of ``batch`` writes."""
    from attest.ledger.checkpoint import Checkpoint, sign_checkpoint
    from attest.ledger.service.postgres import Submission

    key = load_private_key(key_path, prompt=False)
    datas = [entry(actor=f"s{n}").leaf_data for n in range(batch * batches)]
    with PostgresStorage(dsn, create=True) as storage:
        started, cpu = time.perf_counter(), time.process_time()
        for b in range(batches):
            storage.submit(
                [Submission("s", new_nonce(), d) for d in datas[b * batch : (b + 1) * batch]],
                lambda size, root: sign_checkpoint(Checkpoint(ORIGIN, size, root), key),
            )
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "batch": batch,
        # this process's CPU (psycopg, the tree's hashes, the checkpoint's signature) per write
        "cpu_ms_per_write": round(1000 * cpu / (batch * batches), 3),
        "per_second": round(batch * batches / elapsed),
        "ms_per_batch": round(1000 * elapsed / batches, 2),
    }


def _wait_for_size(url: str, public: Any, size: int, limit_s: float = 120) -> None:
    from attest.ledger.checkpoint import open_checkpoint

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        note = httpx.get(url + "checkpoint", timeout=10).text
        if open_checkpoint(note, public).size >= size:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the service did not reach {size} entries")


def _write_phase(
    service: ServiceProcess | FloorProcess,
    client_key: Path,
    args: argparse.Namespace,
    *,
    profile: tuple[tuple[str, int], ...] = (),
    seconds: float | None = None,
) -> dict[str, Any]:
    """``args.clients`` writers for ``seconds`` (``args.duration``) against ``service`` (module
    docstring, item 1): the figures of the window; with ``profile`` ((name, pid), ...) each
    process is sampled by py-spy during the window and the split of its samples reported."""
    url = service.url
    duration = args.duration if seconds is None else seconds
    per = [args.clients // args.client_processes] * args.client_processes
    per[0] += args.clients - sum(per)
    presign = max(1, -(-int(args.presign_rate * duration) // args.clients))
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(args.client_processes + 1), context.Queue()
    processes = [
        context.Process(
            target=_writer_process,
            args=((url, str(client_key), sum(per[:i]), n, presign, duration, start, results),),
        )
        for i, n in enumerate(per)
    ]
    for process in processes:
        process.start()
    start.wait(600)  # every client has signed its writes and opened its connections
    spies = [
        (name, py_spy(pid, duration, Path(tempfile.mkdtemp()) / "spy.txt")) for name, pid in profile
    ]
    started = time.perf_counter()
    load_before = os.getloadavg()
    assert service.proc is not None
    service_cpu_before = _cpu_seconds(service.proc.pid)
    parts = [results.get(timeout=duration + 600) for _ in processes]
    elapsed = time.perf_counter() - started
    service_cpu = _cpu_seconds(service.proc.pid) - service_cpu_before
    for process in processes:
        process.join()
    latencies = sorted(x for part in parts for x in part["latencies"])
    errors: dict[str, int] = {}
    for part in parts:
        for code, count in part["errors"].items():
            errors[code] = errors.get(code, 0) + count
    if not latencies:  # say why, rather than fail on an empty median
        raise SystemExit(f"no write was acknowledged; answers by status: {errors}")
    split = _spy_split(spies)
    return split | {
        "clients": args.clients,
        "presigned_per_client": presign,
        "signed_in_window": sum(part["signed_in_window"] for part in parts),
        "load_average_at_start": [round(x, 2) for x in load_before],
        "seconds": round(elapsed, 1),
        "acknowledged": len(latencies),
        "per_second": round(len(latencies) / elapsed, 1),
        # CPU per acknowledged write: the service process (all its threads), the clients
        "service_cpu_ms": round(1000 * service_cpu / len(latencies), 3),
        "client_cpu_ms": round(1000 * sum(p["cpu_s"] for p in parts) / len(latencies), 3),
        "p50_ms": round(1000 * statistics.median(latencies), 1),
        "p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1),
        "errors": errors,
    }


def _spy_split(spies: list[tuple[str, Any]]) -> dict[str, Any]:
    """The py-spy recordings' splits (``--profile``), by process name."""
    found: dict[str, Any] = {}
    for name, spy in spies:
        if spy is None:
            found[f"profile_{name}"] = "py-spy not found next to this Python"
            continue
        spy.wait(120)
        out = Path(spy.args[spy.args.index("--output") + 1])
        found[f"profile_{name}"] = split_samples(out.read_text()) if out.exists() else "no samples"
    return found


def _floor_phase(
    service: ServiceProcess, client_key: Path, client_pub: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """The floor (benchmarks/ledger_floor.py) under the same writers: CPU per request of a
    server doing only what every write must, with answers of the service's answer size."""
    from _ledger_service_kit import free_port

    probe = _requests(str(client_key), 10_000, 1, "127.0.0.1")[0][0]
    size = answer_size(service.url, probe)
    floor = FloorProcess.start(client_pub, size, free_port())
    try:
        # the floor answers faster than the service: sign enough writes before its window
        fast = argparse.Namespace(**{**vars(args), "presign_rate": max(args.presign_rate, 6000)})
        figures = _write_phase(floor, client_key, fast, seconds=args.floor_seconds)
    finally:
        floor.stop()
    figures["answer_bytes"] = size
    return figures


def _witnessed_phase(
    cluster: PgCluster, tmp: Path, keys: Keys, args: argparse.Namespace
) -> dict[str, Any]:
    """The same write load against a second service (its own database) that has each checkpoint
    cosigned by ``args.witnesses`` local ``attest ledger witness serve`` processes, all of them
    needed (an n-of-n quorum), every write answered once its checkpoint is cosigned."""
    from _witness_kit import WitnessProcess, write_logs

    from attest.ledger.witness.cosignature import witness_key

    log_key, log_pub = keys.make("ledger-witnessed")
    client_key, client_pub = keys.make("bench-witnessed")
    logs = write_logs(tmp / "logs.yaml", log_pub, ORIGIN)
    witnesses: list[WitnessProcess] = []
    service = None
    lines = ["witnesses:"]
    try:
        for n in range(args.witnesses):
            key_path, _ = keys.make(f"witness{n}")
            folder = tmp / f"witness{n}"
            folder.mkdir()
            name = f"bench.example/w{n}"
            process = WitnessProcess(folder, key_path, name, logs, tmp / f"witness{n}.log")
            witnesses.append(process)
            vkey = witness_key(name, load_private_key(key_path, prompt=False)).text
            lines += [f"  - name: w{n}", f"    url: {process.url}", f"    key: {vkey}"]
        config = tmp / "witnesses.yaml"
        config.write_text("\n".join(lines) + f"\nquorum: {args.witnesses}\nwait: 10\n")
        clients = write_clients(tmp / "clients-w.yaml", [("bench", client_pub, ["verified"])])
        service = ServiceProcess(
            cluster.create_database("witnessed"), log_key, clients, tmp / "service-w.log",
            interval=5.0, extra_args=("--witnesses", str(config)),
        )  # fmt: skip
        before = sum(_cpu_seconds(w.proc.pid) for w in witnesses)
        assert service.proc is not None
        spied = (("service", service.proc.pid), ("witness0", witnesses[0].proc.pid))
        figures = _write_phase(service, client_key, args, profile=spied if args.profile else ())
        after = sum(_cpu_seconds(w.proc.pid) for w in witnesses)
        figures["witnesses"] = args.witnesses
        figures["quorum"] = args.witnesses
        figures["witness_cpu_ms"] = round(1000 * (after - before) / figures["acknowledged"], 3)
        return figures
    finally:
        if service is not None:
            service.stop()
        for witness in witnesses:
            witness.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of write load (60)")
    parser.add_argument("--clients", type=int, default=32, help="concurrent writers (32)")
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument(
        "--presign-rate",
        type=float,
        default=2500.0,
        help="writes/s to pre-sign for (2500): each client signs duration x this / clients"
        " writes before the window; beyond them it signs as it goes",
    )
    parser.add_argument("--read-seconds", type=float, default=10.0)
    parser.add_argument("--read-processes", type=int, default=2, help="reader processes (2)")
    parser.add_argument(
        "--nginx-workers", type=int, default=0, help="nginx worker processes (0: one per CPU)"
    )
    parser.add_argument("--audit-entries", type=int, default=1_000_000)
    parser.add_argument(
        "--witnesses",
        type=int,
        default=2,
        help="also run the write load with each checkpoint cosigned by this many local witness"
        " processes, all of them required (2: a 2-of-2 quorum; 0 skips)",
    )
    parser.add_argument(
        "--no-static",
        action="store_true",
        help="run the service without --static-dir (no static files, no nginx reads): what"
        " writing the static files costs the write load",
    )
    parser.add_argument(
        "--floor-seconds",
        type=float,
        default=10.0,
        help="seconds of the same write load against the floor server (benchmarks/"
        "ledger_floor.py: HTTP parse, strict JSON, Ed25519 verification, a fixed answer);"
        " its CPU per request is the least a write costs in Python here (10; 0 skips)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="sample the service (and one witness) with py-spy during the write windows and"
        " print how their samples split (py-spy's own CPU runs on the same cores)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    bin_dir = find_pg_bin()
    if bin_dir is None:
        sys.exit("PostgreSQL binaries not found (see tests/unit/_pgcluster.py)")
    tmp = Path(tempfile.mkdtemp(prefix="bench-ledger-service-"))
    cluster = PgCluster(bin_dir)
    service = None
    figures: dict[str, Any] = {
        "machine": f"{platform.machine()}, {multiprocessing.cpu_count()} CPUs"
    }
    try:
        dsn = cluster.create_database("bench")
        keys = Keys(tmp)
        log_key, log_pub = keys.make("ledger")
        client_key, client_pub = keys.make("bench")
        clients = write_clients(tmp / "clients.yaml", [("bench", client_pub, ["verified"])])
        static = tmp / "static"
        service = ServiceProcess(
            dsn, log_key, clients, tmp / "service.log", interval=5.0,
            extra_args=() if args.no_static else ("--static-dir", str(static)),
        )  # fmt: skip
        url, public = service.url, load_public_key(log_pub)

        assert service.proc is not None
        spied = (("service", service.proc.pid),) if args.profile else ()
        figures["writes"] = _write_phase(service, client_key, args, profile=spied)
        print(json.dumps(figures["writes"]), flush=True)
        if args.floor_seconds > 0:
            floor = figures["floor"] = _floor_phase(service, client_key, client_pub, args)
            floor["service_cpu_over_floor"] = round(
                figures["writes"]["service_cpu_ms"] / floor["service_cpu_ms"], 2
            )
            print(json.dumps(floor), flush=True)
        if args.witnesses:
            figures["writes_witnessed"] = _witnessed_phase(cluster, tmp, keys, args)
            ratio = figures["writes_witnessed"]["per_second"] / figures["writes"]["per_second"]
            figures["writes_witnessed"]["ratio_to_unwitnessed"] = round(ratio, 2)
            print(json.dumps(figures["writes_witnessed"]), flush=True)

        load_s = _bulk_load(dsn, args.audit_entries)
        _wait_for_size(url, public, args.audit_entries)
        figures["storage_only"] = _storage_only(cluster.create_database("storage"), log_key)
        print(json.dumps(figures["storage_only"]), flush=True)
        figures["bulk_load"] = {"entries": args.audit_entries, "seconds": round(load_s, 1)}
        size = httpx.get(url + "healthz", timeout=10).json()["tree_size"]
        if not args.no_static:
            static_s = _wait_for_static(static / "checkpoint", public, size)
            figures["static_catch_up_s"] = round(static_s, 1)
        paths = _tile_paths(size)
        figures["tile_reads"] = _read_rate(url, paths, args)
        print(json.dumps(figures["tile_reads"]), flush=True)
        if not args.no_static:
            figures["static_tile_reads"] = _static_reads(
                static, tmp, paths, figures["tile_reads"], args
            )
            print(json.dumps(figures["static_tile_reads"]), flush=True)

        started = time.perf_counter()
        report = audit_remote(url, public, state_path=tmp / "auditor.checkpoint")
        audit_s = time.perf_counter() - started
        if not report.ok:
            raise RuntimeError(f"the audit failed: {report.problems[:3]}")
        figures["audit"] = {
            "entries": report.entries_checked,
            "seconds": round(audit_s, 1),
            "entries_per_second": round(report.entries_checked / audit_s),
        }
        print(json.dumps(figures["audit"]), flush=True)
    finally:
        if service is not None:
            service.stop()
        cluster.destroy()
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
