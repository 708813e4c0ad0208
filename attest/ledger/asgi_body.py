"""A request body read from an ASGI ``receive`` with a size bound: the ledger service's write
route and the witness's add-checkpoint route both answer on the bare ASGI interface (no
Starlette ``Request`` per request, for their CPU per request) and share this reader."""

from __future__ import annotations

from typing import Any

from starlette.types import Receive

__all__ = ["BodyTooLarge", "read_bounded_body"]


class BodyTooLarge(Exception):
    """The body sent grew past the bound (each route answers 413 in its own format)."""


async def read_bounded_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, at most ``limit`` bytes (:class:`BodyTooLarge` as soon as it passes
    it, without reading on); None when the client left before the end."""
    body = b""
    while True:
        message: Any = await receive()
        if message["type"] != "http.request":
            return None
        chunk: bytes = message.get("body", b"")
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge
        if not message.get("more_body", False):
            return body
