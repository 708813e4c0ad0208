"""RFC 3161 timestamp tokens, checked offline against the TSA roots of the trust store.

``rfc3161-client`` does the work (it is the maintained implementation sigstore uses): the
PKCS#7 signature of the token, the chain to a trusted root *at the token's own time*
(``genTime``), the TSA certificate's critical ``id-kp-timeStamping`` extended key usage and the
message imprint. A token under no trusted root, over another message, or signed by a TSA
certificate that had expired (or was not yet valid) at its ``genTime`` is refused. Imported only
when a certificate carries a token, so a plain ``attest verify`` does not load it.
"""

from __future__ import annotations

from datetime import datetime, timezone

from attest.core.text import safe_text
from attest.verification.trust import TimestampAuthority

__all__ = ["TokenResult", "check_token"]


class TokenResult:
    """The trusted time of a token (``time``, ``authority``) or why it is refused (``problem``)."""

    def __init__(
        self, time: datetime | None = None, authority: str = "", problem: str | None = None
    ) -> None:
        self.time = time
        self.authority = authority
        self.problem = problem


def check_token(
    token: bytes, message: bytes, authorities: tuple[TimestampAuthority, ...]
) -> TokenResult:
    """Verify ``token`` (a DER TimeStampResp) over ``message`` under any of ``authorities``."""
    try:
        from cryptography import x509
        from rfc3161_client import VerificationError, VerifierBuilder, decode_timestamp_response
    except ImportError:
        return TokenResult(
            problem="this installation cannot check RFC 3161 tokens (rfc3161-client is missing)"
        )
    if not authorities:
        return TokenResult(
            problem="the trust store names no timestamp authority, so the token proves nothing "
            "(add one with: attest trust tsa ROOT.pem --name NAME)"
        )
    try:
        response = decode_timestamp_response(token)
    except Exception as exc:  # the Rust parser raises its own error types
        return TokenResult(problem=f"the token is not an RFC 3161 response: {safe_text(exc, 200)}")
    failures: list[str] = []
    for authority in authorities:
        root = x509.load_pem_x509_certificate(authority.pem.encode("ascii", "replace"))
        verifier = VerifierBuilder().add_root_certificate(root).build()
        try:
            verifier.verify_message(response, message)
        except (VerificationError, ValueError) as exc:
            failures.append(f"{authority.name}: {safe_text(exc, 200)}")
            continue
        except Exception as exc:  # fail closed on anything the library did not foresee
            failures.append(f"{authority.name}: {type(exc).__name__}: {safe_text(exc, 200)}")
            continue
        moment = response.tst_info.gen_time
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return TokenResult(time=moment.astimezone(timezone.utc), authority=authority.name)
    return TokenResult(
        problem="the token verifies under no trusted TSA (" + "; ".join(failures) + ")"
    )
