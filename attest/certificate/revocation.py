"""Certificate revocation statements: a signed in-toto statement that withdraws one certificate.

Revoking a key withdraws every certificate that key ever signed; a revocation statement
withdraws exactly one, named by the sha256 of its signed payload (so neither a re-signed copy
nor a cosigned one escapes it)::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "certificate/<certificate_id>", "digest": {"sha256": <payload sha256>}}],
     "predicateType": "https://gradient-attest.dev/revocation/v1",
     "predicate": {"certificate_id": ..., "model": {"name": ..., "version": ...},
                   "reason": ..., "revoked_at": ..., "revoked_by": ...}}

It is a DSSE envelope like the certificate. The verifier honours it only when it is signed by a
trusted key that was valid when it signed and that the trust store allows to revoke
(``revocation_roles``; :mod:`attest.verification.revocations`). With a ``timestamper`` (an RFC
3161 TSA, ``attest revoke --tsa URL``) the signature carries a signer attestation (the revoker's
name, ``role``, meaning ``responsibility``) and a token over it: the verifier then judges the
key at the token's time, so a revocation signed before the key expired or was revoked still
counts afterwards. Without one the key is judged at verification time.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any, Final

from attest.certificate.format import PAYLOAD_TYPE, STATEMENT_TYPE
from attest.certificate.signing import PrivateKey, canonical_json, dsse_envelope
from attest.core.io import loads_strict
from attest.core.times import format_timestamp
from attest.errors import InputError

__all__ = ["REVOCATION_PREDICATE_TYPE", "certificate_payload", "revocation_envelope"]

REVOCATION_PREDICATE_TYPE: Final = "https://gradient-attest.dev/revocation/v1"


def certificate_payload(envelope: Mapping[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """The signed payload bytes of a certificate envelope and the statement they hold."""
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
        statement = loads_strict(payload)
    except (KeyError, TypeError, ValueError):
        raise InputError("not a certificate: no readable DSSE payload") from None
    if not isinstance(statement, dict) or not isinstance(statement.get("predicate"), dict):
        raise InputError("not a certificate: the payload is not an in-toto statement")
    return payload, statement


def revocation_envelope(
    certificate: Mapping[str, Any],
    key: PrivateKey,
    *,
    reason: str,
    revoked_by: str,
    revoked_at: datetime | None = None,
    role: str = "release-engineer",
    timestamper: Callable[[bytes], bytes] | None = None,
) -> dict[str, Any]:
    """A signed revocation of ``certificate`` (its envelope as JSON data); with
    ``timestamper``, a signer attestation (``revoked_by``, ``role``) with a trusted time."""
    if not reason.strip() or not revoked_by.strip():
        raise InputError("a revocation needs a reason and the revoker's name")
    payload, statement = certificate_payload(certificate)
    predicate = statement["predicate"]
    model = predicate.get("model") if isinstance(predicate.get("model"), dict) else {}
    cert_id = str(predicate.get("certificate_id", ""))
    moment = (revoked_at or datetime.now(timezone.utc)).replace(microsecond=0)
    revocation = {
        "_type": STATEMENT_TYPE,
        "subject": [
            {
                "name": f"certificate/{cert_id}",
                "digest": {"sha256": hashlib.sha256(payload).hexdigest()},
            }
        ],
        "predicateType": REVOCATION_PREDICATE_TYPE,
        "predicate": {
            "certificate_id": cert_id,
            "model": {"name": str(model.get("name", "")), "version": str(model.get("version", ""))},
            "reason": reason,
            "revoked_at": format_timestamp(moment),
            "revoked_by": revoked_by,
        },
    }
    if timestamper is None:
        return dsse_envelope(canonical_json(revocation), PAYLOAD_TYPE, [key])
    from attest.certificate.signers import SignerIdentity, sign_payload

    who = SignerIdentity(revoked_by, role, "responsibility")
    return sign_payload(
        canonical_json(revocation), PAYLOAD_TYPE, [key], [who], timestamper=timestamper
    )
