"""An HTTP client (httpx) of the ledger service: the signed checkpoint, tiles, proofs, writes.

Failures are :class:`~attest.errors.LedgerError` subclasses: :class:`Unreachable` (no answer,
a timeout, 503: retry later, nothing is lost) and :class:`Refused` (the service answered
4xx or 5xx: ``status``, ``code``, the JSON ``body`` and, for a replay, the ``index`` the first
request got).

Partial tiles are skipped once the log has grown past them (C2SP tlog-tiles: a client that
needs a partial tile may fetch the full one instead once it exists, and a log MAY delete partial
tiles then): the client remembers the largest tree size a checkpoint it fetched showed, and a
partial tile that tree has completed is read as the full tile (its first entries or hashes), an
immutable file a cache keeps; a partial answered 404 is read from the full tile too. That size
is not trusted for anything else: what a tile holds is checked by its user against a signed
root, and a full tile that is not there sends the client back to the partial one.

Every answer is read as a stream and its size counted as it is produced: the raw bytes, and for a
gzip answer the bytes its decompression yields (zlib with ``max_length``, never more than the
cap at once), so an answer that would inflate past :data:`MAX_RESPONSE_BYTES` (a gzip bomb in a
tile, a checkpoint, an entry bundle or ``/clients``) is refused when the cap is reached, with
memory bounded by the cap. httpx's own decoding decompresses a whole network chunk at once
(about a thousand times its size for zeros), hence the hand-written loop.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import httpx

from attest.certificate.signing import PublicKey, b64decode_strict
from attest.core.io import StrictJSONError, loads_strict
from attest.errors import LedgerError
from attest.ledger.checkpoint import Checkpoint, open_checkpoint
from attest.ledger.service.tiles import (
    TILE_HEIGHT,
    TILE_WIDTH,
    TilePath,
    clients_version_path,
    decode_bundle,
    split_hashes,
    tile_path,
)

__all__ = ["LedgerClient", "Refused", "Unreachable"]

MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class Unreachable(LedgerError):
    """The service did not answer, or answered 503: retryable."""


class Refused(LedgerError):
    """The service answered with an error status."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str,
        index: int | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.index = status, code, index
        self.body = body or {}


@dataclass(frozen=True)
class Answer:
    """An answer read within the cap: its status and (decoded) content."""

    status_code: int
    content: bytes


def read_capped(response: httpx.Response, cap: int, where: str) -> bytes:
    """The body of ``response``, decoded (identity or gzip), refused past ``cap`` bytes of
    raw or decoded data (module docstring)."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity", "gzip"):
        raise LedgerError(f"{where}: answered with content encoding {encoding[:40]!r}")
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding == "gzip" else None
    too_large = LedgerError(
        f"{where}: the answer is over {cap} bytes (decompressed); refused",
        hint="the service is misbehaving or hostile; tell the log's operator",
    )
    parts: list[bytes] = []
    produced = raw = 0
    for chunk in response.iter_raw():
        raw += len(chunk)
        if raw > cap:
            raise too_large
        pending = chunk
        while pending:
            if decoder is None:
                out, pending = pending, b""
            else:
                try:
                    out = decoder.decompress(pending, cap + 1 - produced)
                except zlib.error as exc:
                    raise LedgerError(f"{where}: the gzip answer is corrupt ({exc})") from None
                pending = decoder.unconsumed_tail
                if decoder.eof and decoder.unused_data:
                    raise LedgerError(f"{where}: data after the end of the gzip answer")
            produced += len(out)
            if produced > cap:
                raise too_large
            parts.append(out)
    if decoder is not None and not decoder.eof:
        raise LedgerError(f"{where}: the gzip answer is truncated")
    return b"".join(parts)


class LedgerClient:
    """One service at ``url`` (its tlog-tiles prefix); ``transport``: an httpx transport to
    use instead of the network (tests)."""

    def __init__(
        self, url: str, *, timeout_s: float = 15.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise LedgerError(f"{url!r} is not an http:// or https:// URL")
        self.url = url.rstrip("/") + "/"
        self.known_size = 0  # the largest tree size a fetched checkpoint showed (docstring)
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout_s,
            headers={"Accept-Encoding": "gzip, identity", "User-Agent": "gradient-attest"},
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LedgerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Answer:
        where = f"ledger service {self.url}{path}"
        try:
            with self._http.stream(method, path, **kwargs) as streamed:
                response = Answer(
                    streamed.status_code, read_capped(streamed, MAX_RESPONSE_BYTES, where)
                )
        except httpx.HTTPError as exc:
            raise Unreachable(
                f"ledger service {self.url} did not answer ({type(exc).__name__}: {exc})",
                hint="check the URL and that the service runs; retry later",
            ) from None
        if response.status_code >= 400:
            raise self._refusal(response, path)
        return response

    def _refusal(self, response: Answer, path: str) -> LedgerError:
        try:
            body = loads_strict(response.content)
        except StrictJSONError:
            body = {}
        body = body if isinstance(body, dict) else {}
        code, message = str(body.get("error", "HTTP_ERROR")), str(body.get("message", ""))[:2000]
        text = f"ledger service {self.url}{path}: HTTP {response.status_code} {code}: {message}"
        if response.status_code == 503:
            return Unreachable(text, hint="the service or its database is down; retry later")
        index = body.get("index")
        return Refused(
            text,
            status=response.status_code,
            code=code,
            index=index if isinstance(index, int) and not isinstance(index, bool) else None,
            body=body,
        )

    def _json(self, response: Answer) -> dict[str, Any]:
        try:
            body = loads_strict(response.content)
        except StrictJSONError as exc:
            raise LedgerError(f"ledger service {self.url}: not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise LedgerError(f"ledger service {self.url}: expected a JSON object")
        return body

    # -- reads ---------------------------------------------------------------------------------

    def checkpoint_note(self) -> str:
        note = self._request("GET", "checkpoint").content.decode("utf-8", "replace")
        lines = note.split("\n", 2)
        if len(lines) == 3 and lines[1].isdigit() and len(lines[1]) <= 20:
            self.known_size = max(self.known_size, int(lines[1]))  # module docstring
        return note

    def checkpoint(self, key: PublicKey, key_name: str | None = None) -> tuple[Checkpoint, str]:
        """The log's checkpoint, verified with ``key`` (a bad one raises CheckpointError)."""
        note = self.checkpoint_note()
        return open_checkpoint(note, key, key_name=key_name), note

    def origin_unverified(self) -> str:
        """The origin line of the checkpoint, not verified (it binds a write to this log)."""
        return self.checkpoint_note().split("\n", 1)[0]

    def bundle(self, tile: TilePath) -> list[bytes]:
        content, width = self._tile(None, tile)
        return decode_bundle(content, width)[: tile.width]

    def hashes(self, tile: TilePath) -> list[bytes]:
        content, width = self._tile(tile.level, tile)
        return split_hashes(content, width)[: tile.width]

    def _tile(self, level: int | None, tile: TilePath) -> tuple[bytes, int]:
        """A tile's content and the width it was read at: the full tile in place of a partial
        one the log has grown past (module docstring)."""
        full = tile_path(level, tile.index, TILE_WIDTH)
        if not tile.is_partial:
            return self._request("GET", full).content, TILE_WIDTH
        grown = self.known_size >> (TILE_HEIGHT * (level or 0)) >= (tile.index + 1) * TILE_WIDTH
        if grown:
            try:
                return self._request("GET", full).content, TILE_WIDTH
            except Refused as exc:
                if exc.status != 404:
                    raise
        try:
            return self._request(
                "GET", tile_path(level, tile.index, tile.width)
            ).content, tile.width
        except Refused as exc:
            if exc.status != 404 or grown:
                raise
        return self._request("GET", full).content, TILE_WIDTH  # the partial was deleted

    def inclusion_proof(self, index: int, size: int) -> tuple[bytes, list[bytes]]:
        body = self._json(
            self._request("GET", "proof/inclusion", params={"index": index, "size": size})
        )
        try:
            path = [b64decode_strict(h) for h in body["inclusion_proof"]]
            return b64decode_strict(body["leaf_hash"]), path
        except (KeyError, TypeError, ValueError):
            raise LedgerError(f"ledger service {self.url}: malformed inclusion proof") from None

    # -- writes --------------------------------------------------------------------------------

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST a signed write; the answer (index, leaf_hash, tree_size, checkpoint)."""
        return self._json(self._request("POST", "add", json=body))

    def consistency_proof(self, old: int, new: int) -> list[bytes]:
        """The service's proof that its tree of ``new`` entries extends that of ``old``."""
        body = self._json(
            self._request("GET", "proof/consistency", params={"old": old, "new": new})
        )
        try:
            return [b64decode_strict(h) for h in body["consistency_proof"]]
        except (KeyError, TypeError, ValueError):
            raise LedgerError(f"ledger service {self.url}: malformed consistency proof") from None

    def clients(self, version: int | None = None) -> Any:
        """The log's signed clients document (JSON, not verified): the latest or ``version``."""
        path = "clients" if version is None else clients_version_path(version)
        return self._json(self._request("GET", path))
