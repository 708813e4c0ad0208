"""An HTTP client (httpx) of the ledger service: the signed checkpoint, tiles, proofs, writes.

Failures are :class:`~attest.errors.LedgerError` subclasses: :class:`Unreachable` (no answer,
a timeout, 503: retry later, nothing is lost) and :class:`Refused` (the service answered
4xx or 5xx: ``status``, ``code`` and, for a replay, the ``index`` the first request got).
"""

from __future__ import annotations

from typing import Any

import httpx

from attest.certificate.signing import PublicKey, b64decode_strict
from attest.core.io import StrictJSONError, loads_strict
from attest.errors import LedgerError
from attest.ledger.checkpoint import Checkpoint, open_checkpoint
from attest.ledger.merkle import verify_inclusion
from attest.ledger.service.tiles import TilePath, decode_bundle, split_hashes, tile_path

__all__ = ["LedgerClient", "Refused", "Unreachable"]

MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class Unreachable(LedgerError):
    """The service did not answer, or answered 503: retryable."""


class Refused(LedgerError):
    """The service answered with an error status."""

    def __init__(self, message: str, *, status: int, code: str, index: int | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.index = status, code, index


class LedgerClient:
    """One service at ``url`` (its tlog-tiles prefix)."""

    def __init__(self, url: str, *, timeout_s: float = 15.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise LedgerError(f"{url!r} is not an http:// or https:// URL")
        self.url = url.rstrip("/") + "/"
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout_s,
            headers={"Accept-Encoding": "gzip, identity", "User-Agent": "gradient-attest"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LedgerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise Unreachable(
                f"ledger service {self.url} did not answer ({type(exc).__name__}: {exc})",
                hint="check the URL and that the service runs; retry later",
            ) from None
        if len(response.content) > MAX_RESPONSE_BYTES:
            raise LedgerError(f"ledger service {self.url}: answer over {MAX_RESPONSE_BYTES} bytes")
        if response.status_code >= 400:
            raise self._refusal(response, path)
        return response

    def _refusal(self, response: httpx.Response, path: str) -> LedgerError:
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
        )

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = loads_strict(response.content)
        except StrictJSONError as exc:
            raise LedgerError(f"ledger service {self.url}: not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise LedgerError(f"ledger service {self.url}: expected a JSON object")
        return body

    # -- reads ---------------------------------------------------------------------------------

    def checkpoint_note(self) -> str:
        return self._request("GET", "checkpoint").content.decode("utf-8", "replace")

    def checkpoint(self, key: PublicKey, key_name: str | None = None) -> tuple[Checkpoint, str]:
        """The log's checkpoint, verified with ``key`` (a bad one raises CheckpointError)."""
        note = self.checkpoint_note()
        return open_checkpoint(note, key, key_name=key_name), note

    def origin_unverified(self) -> str:
        """The origin line of the checkpoint, not verified (it binds a write to this log)."""
        return self.checkpoint_note().split("\n", 1)[0]

    def bundle(self, tile: TilePath) -> list[bytes]:
        content = self._request("GET", tile_path(None, tile.index, tile.width)).content
        return decode_bundle(content, tile.width)

    def hashes(self, tile: TilePath) -> list[bytes]:
        content = self._request("GET", tile_path(tile.level, tile.index, tile.width)).content
        return split_hashes(content, tile.width)

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

    def confirm(
        self, answer: dict[str, Any], leaf: bytes, key: PublicKey, key_name: str | None
    ) -> int:
        """Check a write's answer: the checkpoint verifies under ``key``, covers the index,
        and the inclusion proof the service gives leads from ``leaf`` to its root."""
        index = answer.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise LedgerError(f"ledger service {self.url}: the answer names no index")
        checkpoint = open_checkpoint(str(answer.get("checkpoint", "")), key, key_name=key_name)
        served_leaf, path = self.inclusion_proof(index, checkpoint.size)
        if served_leaf != leaf or not verify_inclusion(
            index, checkpoint.size, leaf, path, checkpoint.root
        ):
            raise LedgerError(
                f"ledger service {self.url}: entry {index} is not proven in the signed checkpoint"
                f" of {checkpoint.size} entries it answered with",
                hint="the service is misbehaving; keep its answer and tell the log's operator",
            )
        return index
