"""``attest ledger serve``: the ledger service as a Starlette application (served by uvicorn).

Read API (C2SP tlog-tiles, plain GETs): ``/checkpoint``, ``/tile/<L>/<N>[.p/<W>]``,
``/tile/entries/<N>[.p/<W>]``; for convenience ``/proof/inclusion?index=I&size=S`` and
``/proof/consistency?old=M&new=N`` (JSON, base64 hashes). Write: ``POST /add`` (a client-signed
entry, :mod:`attest.ledger.service.submission`), answered after the commit with the index and
the signed checkpoint of a tree holding it. ``/healthz`` and OpenMetrics ``/metrics``.

Errors are JSON ``{"error": CODE, "message": ..., "retryable": bool}`` with the HTTP status:
400 MALFORMED / WRONG_ORIGIN / REQUEST_EXPIRED, 401 UNKNOWN_CLIENT / SIGNATURE_INVALID, 403
ENTRY_TYPE_NOT_ALLOWED / READ_ONLY, 404 NOT_FOUND, 409 REPLAY, 413 BODY_TOO_LARGE, 415
UNSUPPORTED_MEDIA_TYPE, 500 STORAGE_INCONSISTENT, 503 UNAVAILABLE (retryable, Retry-After).
"""

from __future__ import annotations

import base64
import contextlib
import queue
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from attest.certificate.signing import PrivateKey
from attest.core.io import StrictJSONError, loads_strict
from attest.core.validation import validation_problems
from attest.errors import AttestError, InputError, LedgerError
from attest.ledger.merkle import consistency_proof, inclusion_proof, subtree_hash
from attest.ledger.service.metrics import CONTENT_TYPE, ServiceMetrics
from attest.ledger.service.postgres import DatabaseUnavailable, PostgresStorage, Submission
from attest.ledger.service.sequencer import Sequencer
from attest.ledger.service.submission import (
    MAX_BODY_BYTES,
    MAX_SKEW_S,
    ClientPolicy,
    SubmissionRequest,
    now_utc,
    parse_entry,
)
from attest.ledger.service.tiles import MAX_ENTRY_BYTES, TilePath, encode_bundle, parse_tile_path

__all__ = ["ServiceConfig", "create_app"]

_IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}
_OCTETS = "application/octet-stream"


@dataclass(frozen=True)
class ServiceConfig:
    """What ``attest ledger serve`` was given."""

    dsn: str
    key: PrivateKey
    origin: str
    clients: ClientPolicy
    checkpoint_interval_s: float = 10.0
    max_batch: int = 512
    read_connections: int = 8


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    retryable = status == 503
    headers = {"Retry-After": "1"} if retryable else None
    body = {"error": code, "message": message, "retryable": retryable, **extra}
    return JSONResponse(body, status_code=status, headers=headers)


class _Readers:
    """A small pool of read connections (one :class:`PostgresStorage` per borrower)."""

    def __init__(self, dsn: str, size: int) -> None:
        self.dsn = dsn
        self._free: queue.LifoQueue[PostgresStorage] = queue.LifoQueue()
        self._slots = queue.Queue[None]()
        for _ in range(size):
            self._slots.put(None)

    @contextlib.contextmanager
    def borrow(self) -> Iterator[PostgresStorage]:
        self._slots.get()
        try:
            try:
                storage = self._free.get_nowait()
            except queue.Empty:
                storage = PostgresStorage(self.dsn)
            try:
                yield storage
            except DatabaseUnavailable:
                storage.close()  # the others were opened to the same server: drop them too
                self.close()
                raise
            except BaseException:
                self._free.put(storage)
                raise
            self._free.put(storage)
        finally:
            self._slots.put(None)

    def close(self) -> None:
        while not self._free.empty():
            self._free.get_nowait().close()


class _Service:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.metrics = ServiceMetrics()
        self.sequencer = Sequencer(
            config.dsn,
            config.key,
            config.origin,
            self.metrics,
            max_batch=config.max_batch,
            checkpoint_interval_s=config.checkpoint_interval_s,
        )
        self.readers = _Readers(config.dsn, config.read_connections)

    # -- reads (sync: Starlette runs them in its thread pool) ----------------------------------

    def checkpoint(self, request: Request) -> Response:
        note = self.sequencer.served.note
        return PlainTextResponse(
            note, media_type="text/plain; charset=utf-8", headers={"Cache-Control": "no-cache"}
        )

    def tile(self, request: Request) -> Response:
        try:
            tile = parse_tile_path(request.path_params["rest"])
        except LedgerError as exc:
            return _error(404, "NOT_FOUND", exc.message)
        size = self.sequencer.served.head.size
        if tile.leaves_needed() > size:
            return _error(404, "NOT_FOUND", f"the log's checkpoint covers {size} entries")
        headers = _IMMUTABLE
        with self.readers.borrow() as storage:
            body = (
                self._bundle(storage, tile)
                if tile.level is None
                else b"".join(storage.read_nodes(tile.node_keys()))
            )
        return Response(body, media_type=_OCTETS, headers=headers)

    @staticmethod
    def _bundle(storage: PostgresStorage, tile: TilePath) -> bytes:
        start = tile.index * 256
        leaves = list(storage.iter_leaves(start, start + tile.width))
        for offset, leaf in enumerate(leaves):
            if leaf.index != start + offset:
                raise LedgerError(f"the log's storage is missing entry {start + offset}")
        if len(leaves) != tile.width:
            raise LedgerError(f"the log's storage is missing entry {start + len(leaves)}")
        return encode_bundle([leaf.data for leaf in leaves])

    def _int_param(self, request: Request, name: str) -> int:
        text = request.query_params.get(name, "")
        if not text.isdigit() or len(text) > 19:
            raise _Refused(400, "MALFORMED", f"query parameter {name} must be a decimal integer")
        return int(text)

    def inclusion(self, request: Request) -> Response:
        index, size = self._int_param(request, "index"), self._int_param(request, "size")
        if not 0 <= index < size <= self.sequencer.served.head.size:
            return _error(404, "NOT_FOUND", "need index < size <= the checkpoint's size")
        with self.readers.borrow() as storage:
            proof = inclusion_proof(storage.read_nodes, index, size)
            leaf = storage.read_nodes([(0, index)])[0]
        return JSONResponse(
            {
                "index": index,
                "tree_size": size,
                "leaf_hash": _b64(leaf),
                "inclusion_proof": [_b64(h) for h in proof],
            }
        )

    def consistency(self, request: Request) -> Response:
        old, new = self._int_param(request, "old"), self._int_param(request, "new")
        if not 0 < old <= new <= self.sequencer.served.head.size:
            return _error(404, "NOT_FOUND", "need 0 < old <= new <= the checkpoint's size")
        with self.readers.borrow() as storage:
            proof = consistency_proof(storage.read_nodes, old, new)
            roots = [subtree_hash(storage.read_nodes, 0, s) for s in (old, new)]
        return JSONResponse(
            {
                "old_size": old,
                "new_size": new,
                "old_root": _b64(roots[0]),
                "new_root": _b64(roots[1]),
                "consistency_proof": [_b64(h) for h in proof],
            }
        )

    def healthz(self, request: Request) -> Response:
        with self.readers.borrow() as storage:
            storage.ping()
        served = self.sequencer.served
        return JSONResponse(
            {"status": "ok", "origin": self.config.origin, "tree_size": served.head.size}
        )

    def metrics_text(self, request: Request) -> Response:
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    # -- writes --------------------------------------------------------------------------------

    async def add(self, request: Request) -> Response:
        try:
            submission = await self._admit(request)
        except _Refused as exc:
            self.metrics.submissions.labels(exc.code.lower()).inc()
            return _error(exc.status, exc.code, exc.message)
        outcome, served = await self.sequencer.submit(submission)
        if outcome.replay:
            self.metrics.submissions.labels("replay").inc()
            same = (
                ""
                if outcome.index is None
                else f" (it recorded this entry at index {outcome.index})"
            )
            return _error(
                409,
                "REPLAY",
                f"this nonce was used before{same}; nothing appended",
                index=outcome.index,
            )
        self.metrics.submissions.labels("appended").inc()
        return JSONResponse(
            {
                "index": outcome.index,
                "leaf_hash": _b64(outcome.leaf_hash),
                "tree_size": served.head.size,
                "checkpoint": served.note,
            }
        )

    async def _admit(self, request: Request) -> Submission:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise _Refused(415, "UNSUPPORTED_MEDIA_TYPE", "send the entry as application/json")
        declared = request.headers.get("content-length", "0")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise _Refused(
                413, "BODY_TOO_LARGE", f"request bodies are limited to {MAX_BODY_BYTES} bytes"
            )
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise _Refused(
                    413, "BODY_TOO_LARGE", f"request bodies are limited to {MAX_BODY_BYTES} bytes"
                )
        try:
            sent = SubmissionRequest.model_validate(loads_strict(bytes(body), max_depth=16))
        except StrictJSONError as exc:
            raise _Refused(400, "MALFORMED", f"the body is not strict JSON: {exc}") from None
        except ValidationError as exc:
            raise _Refused(400, "MALFORMED", validation_problems(exc, limit=3)) from None
        policy = self.config.clients
        if not policy.clients:
            raise _Refused(
                403, "READ_ONLY", "this service accepts no writes (clients.yaml lists none)"
            )
        if sent.origin != self.config.origin:
            raise _Refused(
                400, "WRONG_ORIGIN", f"this log is {self.config.origin!r}, not {sent.origin!r}"
            )
        key = policy.key_of(sent.client)
        if key is None:
            raise _Refused(401, "UNKNOWN_CLIENT", f"client {sent.client!r} is not listed")
        try:
            entry = parse_entry(sent.entry)
        except InputError as exc:
            raise _Refused(400, "MALFORMED", exc.message) from None
        data = entry.leaf_data
        if not sent.verify(key, data):
            raise _Refused(
                401,
                "SIGNATURE_INVALID",
                f"the signature does not verify under {sent.client!r}'s key",
            )
        if sent.seconds_from(now_utc()) > MAX_SKEW_S:
            raise _Refused(
                400,
                "REQUEST_EXPIRED",
                f"the request time is over {MAX_SKEW_S:.0f} s from the service's clock",
            )
        if not policy.may_write(sent.client, entry.event):
            raise _Refused(
                403,
                "ENTRY_TYPE_NOT_ALLOWED",
                f"client {sent.client!r} may not write {entry.event!r} entries",
            )
        if len(data) > MAX_ENTRY_BYTES:
            raise _Refused(413, "BODY_TOO_LARGE", f"the entry is over {MAX_ENTRY_BYTES} bytes")
        return Submission(sent.client, sent.nonce, data)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def create_app(config: ServiceConfig) -> Starlette:
    """The application; connecting, migrating and checking the stored tree happen here, so a
    database that is unreachable or inconsistent fails before anything is served."""
    service = _Service(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await service.sequencer.start()
        try:
            yield
        finally:
            await service.sequencer.stop()
            service.readers.close()

    async def on_unavailable(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AttestError)
        return _error(503, "UNAVAILABLE", exc.message)

    async def on_ledger_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AttestError)
        return _error(500, "STORAGE_INCONSISTENT", exc.message)

    async def on_refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _Refused)
        return _error(exc.status, exc.code, exc.message)

    routes = [
        Route("/checkpoint", service.checkpoint),
        Route("/tile/{rest:path}", service.tile),
        Route("/proof/inclusion", service.inclusion),
        Route("/proof/consistency", service.consistency),
        Route("/add", service.add, methods=["POST"]),
        Route("/healthz", service.healthz),
        Route("/metrics", service.metrics_text),
    ]
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        # tlog-tiles: entry bundles SHOULD be compressed at the HTTP layer (when asked for)
        middleware=[Middleware(GZipMiddleware, minimum_size=4096)],
        exception_handlers={
            DatabaseUnavailable: on_unavailable,
            LedgerError: on_ledger_error,
            _Refused: on_refused,
        },
    )
