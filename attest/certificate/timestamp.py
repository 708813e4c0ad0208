"""RFC 3161 trusted timestamps, release side: ask a Time-Stamping Authority for a token.

``rfc3161-client`` builds the request (SHA-256 imprint, a nonce, ``certReq`` so the token
carries the TSA certificate) and parses the answer; the transport is a plain HTTP POST of
``application/timestamp-query`` as RFC 3161 §3.4 says (the standard library does it, so no HTTP
client is needed). The token is checked before it is embedded: status granted, the imprint
and nonce of *this* request. Its signature and certificate chain are checked by the verifier
against the TSA roots in its trust store (:mod:`attest.verification.timestamps`).
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import urlparse

from attest.errors import SigningError

__all__ = ["MAX_TOKEN_BYTES", "request_timestamp", "timestamper"]

MAX_TOKEN_BYTES = 64 * 1024
_TIMEOUT_S = 30.0


def _post(url: str, body: bytes, timeout: float) -> bytes:
    request = urllib.request.Request(
        url,
        data=body,
        headers={"Content-Type": "application/timestamp-query"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if response.headers.get_content_type() != "application/timestamp-reply":
                raise SigningError(
                    f"the TSA at {url} answered {response.headers.get_content_type()!r}, "
                    "not application/timestamp-reply",
                    hint="check --tsa: it must be an RFC 3161 timestamp URL",
                )
            data: bytes = response.read(MAX_TOKEN_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise SigningError(
            f"the TSA at {url} refused the request: HTTP {exc.code}", hint="check --tsa"
        ) from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SigningError(
            f"cannot reach the TSA at {url}: {reason}",
            hint="check --tsa and the network, or sign without --tsa (no trusted time)",
        ) from None
    if len(data) > MAX_TOKEN_BYTES:
        raise SigningError(f"the TSA at {url} answered more than {MAX_TOKEN_BYTES} bytes")
    return data


def request_timestamp(url: str, message: bytes, *, timeout: float = _TIMEOUT_S) -> bytes:
    """The DER ``TimeStampResp`` of a TSA over ``sha256(message)``, checked for status,
    imprint and nonce. Raises :class:`SigningError` on any problem."""
    if urlparse(url).scheme not in ("http", "https"):
        raise SigningError(f"--tsa {url!r} is not an http(s) URL")
    try:
        from rfc3161_client import (
            HashAlgorithm,
            PKIStatus,
            TimestampRequestBuilder,
            decode_timestamp_response,
        )
    except ImportError:
        raise SigningError(
            "timestamps need the rfc3161-client package",
            hint="pip install rfc3161-client (a core dependency of gradient-attest)",
        ) from None
    request = (
        TimestampRequestBuilder()
        .data(message)
        .hash_algorithm(HashAlgorithm.SHA256)
        .nonce(nonce=True)
        .cert_request(cert_request=True)
        .build()
    )
    answer = _post(url, request.as_bytes(), timeout)
    try:
        response = decode_timestamp_response(answer)
        granted = PKIStatus(response.status) in (PKIStatus.GRANTED, PKIStatus.GRANTED_WITH_MODS)
        info = response.tst_info if granted else None
    except Exception as exc:  # the parser raises its own Rust-side error types
        raise SigningError(
            f"the TSA at {url} answered something that is not a token: {exc}"
        ) from None
    if info is None:
        raise SigningError(
            f"the TSA at {url} did not grant the timestamp (status {response.status}: "
            f"{' '.join(response.status_string)[:200]})"
        )
    if info.message_imprint.message != hashlib.sha256(message).digest():
        raise SigningError(f"the TSA at {url} stamped another message (imprint mismatch)")
    if info.nonce != request.nonce:
        raise SigningError(f"the TSA at {url} answered another request (nonce mismatch)")
    return answer


def timestamper(url: str | None) -> Callable[[bytes], bytes] | None:
    """A function that timestamps a message at ``url`` (``None`` without a TSA)."""
    if url is None:
        return None
    return lambda message: request_timestamp(url, message)
