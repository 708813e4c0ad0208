"""A small ledger service in memory for the trust-protocol tests: honest reads (checkpoint,
tiles, proofs, /clients) over a real Merkle tree signed by a real key, and a ``POST /add`` that
behaves honestly or as each attack row says. It answers through an httpx MockTransport
(:meth:`FakeLog.transport`) or, for the command-line tests, as a real local HTTP server
(:func:`serve`, uvicorn in a thread)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _ledger_service_kit import ORIGIN, free_port

from attest.certificate.signing import (
    PrivateKey,
    canonical_json,
    generate_keypair,
    key_id,
    load_private_key,
    public_key_pem,
)
from attest.ledger.checkpoint import Checkpoint, sign_checkpoint
from attest.ledger.entries import LedgerEntry, utc_now
from attest.ledger.merkle import (
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root_from_leaf_hashes,
)
from attest.ledger.service.clients_doc import CLIENTS_DOMAIN
from attest.ledger.service.tiles import encode_bundle, parse_tile_path
from attest.ledger.writers import Writer, written_leaf_data

# what POST /add does: given the log and the request body, the (status, JSON answer)
AddBehaviour = Callable[["FakeLog", dict[str, Any]], tuple[int, Any]]


def make_key(folder: Path, name: str) -> PrivateKey:
    key_path, _pub, _ = generate_keypair(folder / name, passphrase=None)
    return load_private_key(key_path, prompt=False)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass
class FakeLog:
    """The log: ``leaves`` (leaf data), signed by ``key`` under ``origin``."""

    key: PrivateKey
    origin: str = ORIGIN
    leaves: list[bytes] = field(default_factory=list)
    clients: list[dict[str, Any]] = field(default_factory=list)  # signed answers, oldest first
    add: AddBehaviour | None = None
    writer_key_ids: dict[str, str] = field(default_factory=dict)  # client name -> key id
    nonces: dict[str, int] = field(default_factory=dict)  # nonce -> index (honest replays)
    gzip_bomb: dict[str, bytes] = field(default_factory=dict)  # path prefix -> gzip body
    # served checkpoint note -> the witnesses' cosignature lines added to it (issue 37)
    cosign: Callable[[str], str] | None = None

    # -- the tree ------------------------------------------------------------------------------

    def _read_nodes(self, keys: Any) -> list[bytes]:
        hashes = [leaf_hash(d) for d in self.leaves]
        return [root_from_leaf_hashes(hashes[i << lv : (i + 1) << lv]) for lv, i in keys]

    def root(self, size: int | None = None) -> bytes:
        size = len(self.leaves) if size is None else size
        return root_from_leaf_hashes(leaf_hash(d) for d in self.leaves[:size])

    def note(self, size: int | None = None, key: PrivateKey | None = None) -> str:
        size = len(self.leaves) if size is None else size
        return sign_checkpoint(Checkpoint(self.origin, size, self.root(size)), key or self.key)

    def inclusion(self, index: int, size: int) -> list[bytes]:
        return inclusion_proof(self._read_nodes, index, size)

    # -- what an honest service writes ---------------------------------------------------------

    def honest_leaf(self, body: dict[str, Any], writer_key_id: str) -> bytes:
        writer = Writer(
            client=body["client"],
            key_id=writer_key_id,
            origin=body["origin"],
            nonce=body["nonce"],
            time=body["time"],
            signature=body["signature"],
        )
        return written_leaf_data(LedgerEntry.model_validate(body["entry"]), writer, utc_now())

    def append_honestly(self, body: dict[str, Any], writer_key_id: str) -> dict[str, Any]:
        leaf = self.honest_leaf(body, writer_key_id)
        self.leaves.append(leaf)
        index = len(self.leaves) - 1
        return {"index": index, "leaf": b64(leaf), "checkpoint": self.note()}

    def admit(self, name: str, key: PrivateKey) -> None:
        """Lets ``name`` write with ``key``: its key id for the leaves, and a signed /clients
        document that lists it."""
        self.writer_key_ids[name] = key_id(key.public_key)
        self.publish_clients([published_client(name, key)])

    def publish_clients(
        self,
        clients: list[dict[str, Any]],
        *,
        key: PrivateKey | None = None,
        version: int | None = None,
        previous: str | None = "auto",
    ) -> dict[str, Any]:
        """Sign and publish a clients document listing ``clients`` (dicts as published)."""
        last = self.clients[-1]["document"] if self.clients else None
        document = {
            "format": "gradient-attest/ledger-clients/v1",
            "origin": self.origin,
            "version": version or (1 if last is None else last["version"] + 1),
            "previous": (None if last is None else hashlib.sha256(canonical_json(last)).hexdigest())
            if previous == "auto"
            else previous,
            "published": utc_now(),
            "clients": clients,
        }
        signature = (key or self.key).sign(CLIENTS_DOMAIN + canonical_json(document))
        answer = {"document": document, "signature": b64(signature)}
        self.clients.append(answer)
        return answer

    # -- HTTP ----------------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, str], body: bytes) -> Raw:
        path = path.lstrip("/")
        for prefix, bomb in self.gzip_bomb.items():
            if path.startswith(prefix):
                return Raw(200, bomb, {"Content-Encoding": "gzip"})
        size = len(self.leaves)
        if path == "checkpoint":
            note = self.note()
            return Raw(200, (note + (self.cosign(note) if self.cosign else "")).encode())
        if path == "add" and method == "POST":
            status, answer = (self.add or honest)(self, json.loads(body))
            return Raw(status, answer) if isinstance(answer, bytes) else _json(status, answer)
        if path == "proof/inclusion":
            index, at = int(query["index"]), int(query["size"])
            proof = self.inclusion(index, at)
            return _json(
                200,
                {
                    "leaf_hash": b64(leaf_hash(self.leaves[index])),
                    "inclusion_proof": [b64(h) for h in proof],
                },
            )
        if path == "proof/consistency":
            old, new = int(query["old"]), int(query["new"])
            if not 0 < old <= new <= size:
                return _json(404, {"error": "NOT_FOUND", "message": "range"})
            proof = consistency_proof(self._read_nodes, old, new)
            return _json(200, {"consistency_proof": [b64(h) for h in proof]})
        if path == "clients":
            if not self.clients:
                return _json(404, {"error": "NOT_FOUND", "message": "none"})
            version = int(query.get("version", len(self.clients)))
            return _json(200, self.clients[version - 1])
        if path.startswith("clients-version/"):  # the path the static files use too
            version = int(path.split("/")[1])
            if not 1 <= version <= len(self.clients):
                return _json(404, {"error": "NOT_FOUND", "message": path})
            return _json(200, self.clients[version - 1])
        if path.startswith("tile/"):
            tile = parse_tile_path(path[len("tile/") :])
            start = tile.index * 256
            leaves = self.leaves[start : start + tile.width]
            if tile.level is None:
                return Raw(200, encode_bundle(leaves))
            if tile.level:  # tiles above level 0: the subtree hashes (8*L, j)
                return Raw(200, b"".join(self._read_nodes(tile.node_keys())))
            return Raw(200, b"".join(leaf_hash(d) for d in leaves))
        return _json(404, {"error": "NOT_FOUND", "message": path})

    def transport(self) -> httpx.MockTransport:
        def handler(request: httpx.Request) -> httpx.Response:
            query = dict(request.url.params)
            raw = self.handle(request.method, request.url.path, query, request.content)
            # the bytes as sent on the network, for the client to stream (iter_raw) and decode
            return httpx.Response(
                raw.status, headers=raw.headers, stream=httpx.ByteStream(raw.body)
            )

        return httpx.MockTransport(handler)


@dataclass(frozen=True)
class Raw:
    """An answer as it goes on the wire (a gzip body stays compressed)."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def _json(status: int, answer: Any) -> Raw:
    return Raw(status, json.dumps(answer).encode(), {"Content-Type": "application/json"})


def honest(log: FakeLog, body: dict[str, Any]) -> tuple[int, Any]:
    """What the service does: append and answer with the proof material; a nonce seen before
    is answered 409 with the stored entry."""
    index = log.nonces.get(body["nonce"])
    if index is not None:
        answer = {"error": "REPLAY", "message": "nonce used before", "retryable": False}
        answer |= {"index": index, "leaf": b64(log.leaves[index]), "checkpoint": log.note()}
        return 409, answer
    answer = log.append_honestly(body, log.writer_key_ids[body["client"]])
    log.nonces[body["nonce"]] = answer["index"]
    return 200, answer


def published_client(name: str, key: PrivateKey, *, status: str = "active") -> dict[str, Any]:
    public = key.public_key
    return {
        "name": name,
        "key_id": key_id(public),
        "public_key": public_key_pem(public),
        "status": status,
        "entry_types": ["rejected", "verified"],
        "hosts": ["test-host-01"],
    }


@contextlib.contextmanager
def serve(log: FakeLog) -> Iterator[str]:
    """``log`` as a real HTTP server on a loopback port (uvicorn in a thread); yields its URL."""
    import uvicorn

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = dict(httpx.QueryParams(scope["query_string"].decode()))
        raw = log.handle(scope["method"], scope["path"], query, body)
        headers = [(k.encode(), v.encode()) for k, v in raw.headers.items()]
        await send({"type": "http.response.start", "status": raw.status, "headers": headers})
        await send({"type": "http.response.body", "body": raw.body})

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(10)
