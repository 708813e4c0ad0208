"""``attest ledger serve``: the ledger service as an ASGI application (served by uvicorn): a
Starlette application for the reads, and ``POST /add`` answered by a plain ASGI handler in front
of it (a write is the hot path: no router, middleware or Request object on it).

Read API (C2SP tlog-tiles, plain GETs): ``/checkpoint``, ``/tile/<L>/<N>[.p/<W>]``,
``/tile/entries/<N>[.p/<W>]``; for convenience ``/proof/inclusion?index=I&size=S`` and
``/proof/consistency?old=M&new=N`` (JSON, base64 hashes); ``/clients[?version=N]`` and
``/clients-version/N``, the signed clients document (:mod:`attest.ledger.service.clients_doc`). Write: ``POST /add`` (a
client-signed entry, :mod:`attest.ledger.service.submission`), recorded as a service-written
leaf (:mod:`attest.ledger.writers`) and answered after the commit with the index, the leaf
(base64) and the signed checkpoint of a tree holding it; a replay of a stored entry (409)
carries the same three for the stored one. ``/healthz`` and OpenMetrics ``/metrics``.

With ``static_dir`` the same reads are also written as files (:mod:`.static_tiles`) for a
static web server: production reads go there, never to PostgreSQL; the read endpoints here
stay for compatibility and for the proofs.

Errors are JSON ``{"error": CODE, "message": ..., "retryable": bool}`` with the HTTP status:
400 MALFORMED / WRONG_ORIGIN / REQUEST_EXPIRED, 401 UNKNOWN_CLIENT / SIGNATURE_INVALID, 403
ENTRY_TYPE_NOT_ALLOWED / HOST_NOT_ALLOWED / READ_ONLY, 404 NOT_FOUND, 409 REPLAY, 413 BODY_TOO_LARGE, 415
UNSUPPORTED_MEDIA_TYPE, 500 STORAGE_INCONSISTENT, 503 UNAVAILABLE (retryable, Retry-After).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from attest.certificate.signing import PrivateKey
from attest.errors import AttestError, LedgerError
from attest.ledger.asgi_body import BodyTooLarge, read_bounded_body
from attest.ledger.entries import utc_now
from attest.ledger.merkle import (
    NodeKey,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    subtree_hash,
)
from attest.ledger.service.clients_doc import publish_clients
from attest.ledger.service.metrics import CONTENT_TYPE, ServiceMetrics
from attest.ledger.service.postgres import DatabaseUnavailable, PostgresStorage, Submission
from attest.ledger.service.readers import Readers
from attest.ledger.service.recent_nodes import RecentNodes
from attest.ledger.service.sequencer import Sequencer, ServedCheckpoint
from attest.ledger.service.static_tiles import StaticTiles
from attest.ledger.service.submission import (
    MAX_BODY_BYTES,
    ClientPolicy,
    WriteRefused,
    check_write,
)
from attest.ledger.service.tiles import TilePath, encode_bundle, parse_tile_path
from attest.ledger.service.witnessing import Witnessing
from attest.ledger.witness.client import WitnessingConfig
from attest.ledger.writers import written_leaf_data_of

__all__ = ["ServiceConfig", "appended_answer", "create_app"]

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
    witnessing: WitnessingConfig | None = None  # the witnesses asked to cosign checkpoints
    static_dir: Path | None = None  # where the reads are written as static files


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    headers = {"Retry-After": "1"} if status == 503 else None
    return JSONResponse(
        _error_body(status, code, message, **extra), status_code=status, headers=headers
    )


class _Service:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.metrics = ServiceMetrics()
        self._appended = self.metrics.submissions.labels("appended")  # looked up once
        self.sequencer = Sequencer(
            config.dsn,
            config.key,
            config.origin,
            self.metrics,
            max_batch=config.max_batch,
            checkpoint_interval_s=config.checkpoint_interval_s,
        )
        self.readers = Readers(config.dsn, config.read_connections)
        self.published = publish_clients(config.dsn, config.key, config.origin, config.clients)
        self.witnessing: Witnessing | None = None
        self.nodes = RecentNodes()  # what the cosigning rounds' proofs need (its docstring)
        self._keep: list[list[tuple[NodeKey, bytes]]] = []  # read by _prove, to keep
        if config.witnessing is not None:
            self.witnessing = Witnessing(config.witnessing, self._prove, self._prove_kept)
            self.sequencer.on_serve = self.witnessing.offer
            self.sequencer.on_nodes = self.nodes.add
        self.static = self._static_tiles()

    def _static_tiles(self) -> StaticTiles | None:
        """The static files (``--static-dir``), checked and fed the published checkpoints."""
        config = self.config
        if config.static_dir is None:
            return None
        static = StaticTiles(config.static_dir, config.dsn, config.key.public_key, config.origin)
        static.prepare(self.sequencer.served.head.size, self.published)
        if self.witnessing is not None:  # only what a quorum cosigned is published
            self.witnessing.on_publish = static.offer
        else:
            self.sequencer.on_serve = static.offer
            static.offer(self.sequencer.served)
        return static

    def _prove(self, old: int, new: int) -> list[bytes]:
        """From the database (in a thread); the nodes read are kept for the next rounds."""
        read: list[tuple[NodeKey, bytes]] = []

        def read_nodes(keys: Sequence[NodeKey]) -> list[bytes]:
            hashes = storage.read_nodes(keys)
            read.extend(zip(keys, hashes, strict=True))
            return hashes

        with self.readers.borrow() as storage:
            proof = consistency_proof(read_nodes, old, new)
        self._keep.append(read)  # added on the event loop, by the next _prove_kept
        return proof

    def _prove_kept(self, old: int, new: int) -> list[bytes] | None:
        """From the kept nodes, on the event loop; None when one is not kept."""
        while self._keep:
            self.nodes.add(self._keep.pop())
        try:
            return consistency_proof(self.nodes.read, old, new)
        except KeyError:
            return None

    # -- reads (sync: Starlette runs them in its thread pool) ----------------------------------

    def checkpoint(self, request: Request) -> Response:
        """The latest checkpoint a quorum of witnesses cosigned, when witnesses are configured
        (the log's own latest before the first is cosigned), else the log's own latest."""
        cosigned = self.witnessing.current() if self.witnessing is not None else None
        note = (cosigned or self.sequencer.served).note
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
            raise WriteRefused(
                400, "MALFORMED", f"query parameter {name} must be a decimal integer"
            )
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

    def clients(self, request: Request) -> Response:
        """The signed clients document: the latest, or ``?version=N``."""
        if "version" not in request.query_params:
            return JSONResponse(self.published[-1], headers={"Cache-Control": "no-cache"})
        return self._clients_version(self._int_param(request, "version"))

    def clients_version(self, request: Request) -> Response:
        """``/clients-version/N``: version N, at the path the static files use."""
        return self._clients_version(request.path_params["version"])

    def _clients_version(self, version: int) -> Response:
        if not 1 <= version <= len(self.published):
            return _error(404, "NOT_FOUND", f"versions 1 to {len(self.published)} are published")
        return JSONResponse(self.published[version - 1], headers=_IMMUTABLE)

    def healthz(self, request: Request) -> Response:
        with self.readers.borrow() as storage:
            storage.ping()
        served = self.sequencer.served
        return JSONResponse(
            {"status": "ok", "origin": self.config.origin, "tree_size": served.head.size}
        )

    def metrics_text(self, request: Request) -> Response:
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    # -- writes: a raw ASGI handler (no routing, middleware or Request object per write) ------

    async def add(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /add``: read the body, check it (:func:`check_write`), queue it for the
        sequencer and answer once its batch is committed."""
        try:
            body = await self._body(scope, receive)
            if body is None:  # the client went away before sending it all: nothing to do
                return
            checked = check_write(body, origin=self.config.origin, policy=self.config.clients)
        except WriteRefused as exc:
            self.metrics.submissions.labels(exc.code.lower()).inc()
            await _send_json(send, exc.status, _error_body(exc.status, exc.code, exc.message))
            return
        leaf = written_leaf_data_of(checked.leaf_data, checked.writer, utc_now())
        submission = Submission(
            checked.client, checked.nonce, leaf, entry_hash=leaf_hash(checked.leaf_data)
        )
        try:
            outcome, served = await self.sequencer.submit(submission)
        except DatabaseUnavailable as exc:
            await _send_json(send, 503, _error_body(503, "UNAVAILABLE", exc.message))
            return
        except LedgerError as exc:
            await _send_json(send, 500, _error_body(500, "STORAGE_INCONSISTENT", exc.message))
            return
        if outcome.replay:
            self.metrics.submissions.labels("replay").inc()
            same = (
                ""
                if outcome.index is None
                else f" (it recorded this entry at index {outcome.index})"
            )
            message = f"this nonce was used before{same}; nothing appended"
            proof: dict[str, Any] = {}
            if outcome.index is not None:  # the stored entry, for the client to prove
                try:
                    stored = await anyio.to_thread.run_sync(self._leaf_data, outcome.index)
                except LedgerError as exc:  # DatabaseUnavailable too: the client retries
                    await _send_json(send, 503, _error_body(503, "UNAVAILABLE", exc.message))
                    return
                proof = {"leaf": _b64(stored), "tree_size": served.head.size}
                proof["checkpoint"] = served.note
            refusal = _error_body(409, "REPLAY", message, index=outcome.index, **proof)
            await _send_json(send, 409, refusal)
            return
        self._appended.inc()
        witnessed: bool | None = None
        if self.witnessing is not None:
            cosigned = await self.witnessing.wait_for(served.head.size)
            served = cosigned or served
            witnessed = cosigned is not None
        assert outcome.index is not None  # an appended entry has its index
        body = appended_answer(outcome.index, outcome.leaf_hash, leaf, served, witnessed)
        await send({"type": "http.response.start", "status": 200, "headers": _json_headers(body)})
        await send({"type": "http.response.body", "body": body})

    def _leaf_data(self, index: int) -> bytes:
        with self.readers.borrow() as storage:
            return storage.leaf(index).data

    @staticmethod
    async def _body(scope: Scope, receive: Receive) -> bytes | None:
        """The request body, after the media type and size checks; None on a disconnect."""
        content_type = declared = b""
        for name, value in scope["headers"]:
            if name == b"content-type":
                content_type = value
            elif name == b"content-length":
                declared = value
        if content_type.split(b";")[0].strip().lower() != b"application/json":
            raise WriteRefused(415, "UNSUPPORTED_MEDIA_TYPE", "send the entry as application/json")
        too_large = WriteRefused(
            413, "BODY_TOO_LARGE", f"request bodies are limited to {MAX_BODY_BYTES} bytes"
        )
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise too_large
        try:
            return await read_bounded_body(receive, MAX_BODY_BYTES)
        except BodyTooLarge:
            raise too_large from None


def _error_body(status: int, code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "message": message, "retryable": status == 503, **extra}


async def _send_json(send: Send, status: int, content: dict[str, Any]) -> None:
    """A JSON answer, encoded as Starlette's JSONResponse does."""
    body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    headers = _json_headers(body)
    if status == 503:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _json_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]


def appended_answer(
    index: int, leaf_hash: bytes, leaf: bytes, served: ServedCheckpoint, witnessed: bool | None
) -> bytes:
    """The 200 answer to an appended write: ``{"index", "leaf_hash", "leaf", "tree_size",
    "checkpoint"[, "witnessed"]}``, byte for byte what :func:`_send_json` writes for that
    object (tested), from the checkpoint's note encoded once per checkpoint instead of once per
    write (the other values are integers and base64, which JSON writes as they are)."""
    tail = (
        b"" if witnessed is None else b',"witnessed":true' if witnessed else b',"witnessed":false'
    )
    return b'{"index":%d,"leaf_hash":"%s","leaf":"%s","tree_size":%d,"checkpoint":%s%s}' % (
        index,
        base64.b64encode(leaf_hash),
        base64.b64encode(leaf),
        served.head.size,
        served.note_json,
        tail,
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def create_app(config: ServiceConfig) -> ASGIApp:
    """The application; connecting, migrating and checking the stored tree happen here, so a
    database that is unreachable or inconsistent fails before anything is served."""
    service = _Service(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await service.sequencer.start()
        if service.static is not None:
            await service.static.start()
        if service.witnessing is not None:
            await service.witnessing.start(service.sequencer.served)
        try:
            yield
        finally:
            if service.witnessing is not None:
                await service.witnessing.stop()
            if service.static is not None:
                await service.static.stop()
            await service.sequencer.stop()
            service.readers.close()

    async def on_unavailable(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AttestError)
        return _error(503, "UNAVAILABLE", exc.message)

    async def on_ledger_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AttestError)
        return _error(500, "STORAGE_INCONSISTENT", exc.message)

    async def on_refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, WriteRefused)
        return _error(exc.status, exc.code, exc.message)

    routes = [
        Route("/checkpoint", service.checkpoint),
        Route("/tile/{rest:path}", service.tile),
        Route("/proof/inclusion", service.inclusion),
        Route("/proof/consistency", service.consistency),
        Route("/clients", service.clients),
        Route("/clients-version/{version:int}", service.clients_version),
        Route("/add", _post_only, methods=["POST"]),  # GET /add: 405, as for any route
        Route("/healthz", service.healthz),
        Route("/metrics", service.metrics_text),
    ]
    reads = Starlette(
        routes=routes,
        lifespan=lifespan,
        # tlog-tiles: entry bundles SHOULD be compressed at the HTTP layer (when asked for)
        middleware=[Middleware(GZipMiddleware, minimum_size=4096)],
        exception_handlers={
            DatabaseUnavailable: on_unavailable,
            LedgerError: on_ledger_error,
            WriteRefused: on_refused,
        },
    )

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        # Writes skip Starlette's middleware stack and router: a write's answer is small (no
        # gzip) and every error it can meet is answered by _Service.add itself.
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/add":
            await service.add(scope, receive, send)
        else:
            await reads(scope, receive, send)

    return app


async def _post_only(request: Request) -> Response:  # pragma: no cover - POSTs never get here
    raise LedgerError("POST /add is answered before routing")
