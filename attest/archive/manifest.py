"""The archive's signed manifest: an in-toto Statement over every member, in a DSSE envelope.

``attest archive --key K`` writes ``manifest.dsse.json``: a DSSE envelope (signed with
:func:`attest.certificate.signing.dsse_envelope`, the certificate's own DSSE code) whose payload
is the RFC 8785 canonical JSON of an :class:`ArchiveStatement`::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "certificate.json", "digest": {"sha256": "..."}}, ...],  # every member
     "predicateType": "https://gradient-attest.dev/archive-manifest/v1",
     "predicate": {"format": "gradient-attest/archive/v2", "archived_at": "...Z",
                   "certificate_digest": {"sha256": "..."}, "certificate_id": "...",
                   "model": {"name": "...", "version": "..."}}}

The subjects are every member of the zip but the envelope itself (``manifest.json``
included), sorted by name. ``attest verify-archive --trust T`` counts the signature only under
a key of the auditor's trust store ``T`` holding the ``archivist`` role (the trust store's own
key checks: validity window at the archive time, revocation), then holds the members to the
subjects exactly. The JSON Schema is ``schemas/archive-manifest.schema.json``.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from attest.certificate.format import PAYLOAD_TYPE, STATEMENT_TYPE
from attest.certificate.signing import PrivateKey, canonical_json, dsse_envelope, pae
from attest.certificate.signing import verify_signature as _verify_signature
from attest.certificate.statement import DigestSet, ModelIdentity, Subject, Timestamp
from attest.core.io import StrictJSONError, loads_strict
from attest.core.times import parse_timestamp
from attest.verification.envelope import Envelope, Rejected, parse_envelope
from attest.verification.signatures import check_signatures
from attest.verification.trust import LEDGER_ROLE, TrustStore

__all__ = [
    "ARCHIVE_FORMAT",
    "ARCHIVE_PREDICATE_TYPE",
    "ARCHIVIST_ROLE",
    "LEDGER_ROLE",
    "MANIFEST",
    "SIGNED_MANIFEST",
    "ArchivePredicate",
    "ArchiveStatement",
    "ManifestProblem",
    "check_manifest_signature",
    "manifest_statement",
    "read_signed_manifest",
    "sign_manifest",
]

ARCHIVE_FORMAT: Final = "gradient-attest/archive/v2"  # v1 archives had no signed manifest
ARCHIVE_FORMAT_V1: Final = "gradient-attest/archive/v1"
# Versioned like the certificate's: a change old verifiers cannot read gets .../v2.
ARCHIVE_PREDICATE_TYPE: Final = "https://gradient-attest.dev/archive-manifest/v1"
MANIFEST: Final = "manifest.json"
SIGNED_MANIFEST: Final = "manifest.dsse.json"
ARCHIVIST_ROLE: Final = "archivist"  # the trust store role whose keys may sign an archive


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ArchivePredicate(_Strict):
    """What the archivist signs besides the members: when, and which certificate."""

    format: Literal["gradient-attest/archive/v2"] = ARCHIVE_FORMAT
    archived_at: Timestamp
    certificate_digest: DigestSet
    certificate_id: str = Field(min_length=1, max_length=256)
    model: ModelIdentity


class ArchiveStatement(_Strict):
    """An in-toto Statement v1 over every archive member (the signed manifest)."""

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(default=STATEMENT_TYPE, alias="_type")
    subject: list[Subject] = Field(min_length=1, max_length=1024)
    predicateType: Literal["https://gradient-attest.dev/archive-manifest/v1"] = (
        ARCHIVE_PREDICATE_TYPE
    )
    predicate: ArchivePredicate

    @field_validator("subject")
    @classmethod
    def _unique_names(cls, subjects: list[Subject]) -> list[Subject]:
        names = [s.name for s in subjects]
        if len(set(names)) != len(names):
            raise ValueError("subject names must be unique")
        return subjects


class ManifestProblem(Exception):
    """The signed manifest is missing, malformed, or its signature does not count."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def manifest_statement(
    files: dict[str, bytes], *, archived_at: str, certificate_id: str, model: dict[str, Any]
) -> ArchiveStatement:
    """The statement over ``files`` (every member but the envelope)."""
    return ArchiveStatement(
        subject=[
            Subject(name=name, digest=DigestSet(sha256=hashlib.sha256(data).hexdigest()))
            for name, data in sorted(files.items())
        ],
        predicate=ArchivePredicate(
            archived_at=archived_at,
            certificate_digest=DigestSet(
                sha256=hashlib.sha256(files["certificate.json"]).hexdigest()
            ),
            certificate_id=certificate_id,
            model=ModelIdentity.model_validate(model),
        ),
    )


def sign_manifest(statement: ArchiveStatement, key: PrivateKey) -> dict[str, Any]:
    """The DSSE envelope of ``statement`` signed by ``key`` (the certificate's DSSE code)."""
    payload = canonical_json(statement.model_dump(mode="json", by_alias=True))
    return dsse_envelope(payload, PAYLOAD_TYPE, [key])


def read_signed_manifest(raw: bytes) -> tuple[Envelope, ArchiveStatement]:
    """The envelope and its statement, parsed strictly but not yet trusted
    (:class:`ManifestProblem` ARCHIVE_INVALID when malformed)."""
    where = SIGNED_MANIFEST
    try:
        envelope = parse_envelope(raw)
    except Rejected as exc:  # the verifier's words are about a certificate's envelope
        message = exc.message.replace("the certificate", "the envelope", 1)
        raise ManifestProblem("ARCHIVE_INVALID", f"{where}: {message}") from None
    if envelope.payload_type != PAYLOAD_TYPE:
        raise ManifestProblem("ARCHIVE_INVALID", f"{where}: payloadType is not {PAYLOAD_TYPE}")
    try:
        statement = ArchiveStatement.model_validate(loads_strict(envelope.payload))
    except StrictJSONError as exc:
        raise ManifestProblem(
            "ARCHIVE_INVALID", f"{where}: the payload is not strict JSON: {exc}"
        ) from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()[:3]
        )
        raise ManifestProblem(
            "ARCHIVE_INVALID", f"{where}: not an archive manifest statement: {problems}"
        ) from None
    return envelope, statement


def _archivists(trust: TrustStore) -> TrustStore:
    """The auditor's store cut to its archivist keys: one of them must sign, no requirement."""
    keys = tuple(k for k in trust.keys if ARCHIVIST_ROLE in k.roles)
    return replace(trust, keys=keys, threshold=1, requirements=())


def check_manifest_signature(
    envelope: Envelope, statement: ArchiveStatement, trust: TrustStore
) -> list[str]:
    """Notes on the signatures that counted; :class:`ManifestProblem` ARCHIVE_UNTRUSTED unless
    a key of ``trust`` holding the archivist role signed, valid and unrevoked at the signed
    archive time. The signature check is the verifier's own (:func:`check_signatures`)."""
    archivists = _archivists(trust)
    archivist_ids = {k.keyid for k in archivists.keys}
    at: datetime = parse_timestamp(statement.predicate.archived_at)
    check = check_signatures(envelope, archivists, at, timedelta(0)) if archivists.keys else None
    if check is not None and not check.problems:
        return [f"archive signed by {k.label()} ({ARCHIVIST_ROLE})" for k in check.counted]
    message = pae(envelope.payload_type, envelope.payload)
    others = [
        k.label()
        for k in trust.keys
        if k.keyid not in archivist_ids
        and any(_verify_signature(k.public_key, s.sig, message) for s in envelope.signatures)
    ]
    if others:
        raise ManifestProblem(
            "ARCHIVE_UNTRUSTED",
            f"the archive is signed by {', '.join(others)}, which {trust.source} does not give "
            f"the {ARCHIVIST_ROLE} role",
        )
    if check is None:
        raise ManifestProblem(
            "ARCHIVE_UNTRUSTED",
            f"{trust.source} gives no key the {ARCHIVIST_ROLE} role, so no archive signature "
            f"can count (attest trust add ARCHIVIST.pub --role {ARCHIVIST_ROLE})",
        )
    reasons = "; ".join(f"{code}: {text}" for code, text in check.problems)
    raise ManifestProblem("ARCHIVE_UNTRUSTED", f"no archivist signature counts: {reasons}")
