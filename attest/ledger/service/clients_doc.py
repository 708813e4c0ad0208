"""The log's published clients: ``GET /clients``, a document signed by the log key saying
which client keys may have written the log's leaves; versioned and append-only.

Answer: ``{"document": DOC, "signature": BASE64}``; the signature is the log key's over
:data:`CLIENTS_DOMAIN` followed by the RFC 8785 canonical JSON of ``DOC``::

    {"format": "gradient-attest/ledger-clients/v1", "origin": "<the log's origin>",
     "version": N, "previous": "<sha256 hex of version N-1's canonical JSON>" | null,
     "published": "<RFC 3339 UTC>",
     "clients": [{"name": ..., "key_id": ..., "public_key": "<PEM>",
                  "status": "active" | "retired", "entry_types": [...], "hosts": [...]}]}

``GET /clients?version=N`` serves version N. The service publishes a new version when it
starts with a ``clients.yaml`` that differs from the last published one: every key ever listed
stays listed (a client removed, or given a new key, keeps its old key as ``retired``), so a
new version always extends the old one (:func:`extension_problem`), and each version names
its predecessor's digest. Versions are stored in the append-only table ``ledger_clients``.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Final, Literal

import psycopg
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from attest.certificate.signing import (
    PrivateKey,
    PublicKey,
    b64decode_strict,
    canonical_json,
    load_public_key_pem,
    public_key_pem,
    verify_signature,
)
from attest.core.io import loads_strict, sha256_bytes
from attest.core.validation import validation_problems
from attest.errors import AttestError, LedgerError
from attest.ledger.entries import Event, ShortText, Timestamp, utc_now
from attest.ledger.service.pg_sql import WRITER_LOCK
from attest.ledger.service.submission import ClientPolicy

__all__ = [
    "CLIENTS_DOMAIN",
    "ClientsDocument",
    "PublishedClient",
    "extension_problem",
    "open_clients",
    "publish_clients",
]

CLIENTS_FORMAT: Final = "gradient-attest/ledger-clients/v1"
CLIENTS_DOMAIN: Final = b"gradient-attest ledger clients v1\n"


class PublishedClient(BaseModel):
    """One client key the log has listed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    key_id: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    public_key: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    status: Literal["active", "retired"]
    entry_types: list[Event] = Field(max_length=8)
    hosts: list[ShortText] = Field(max_length=1000)


class ClientsDocument(BaseModel):
    """One version of the published clients (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["gradient-attest/ledger-clients/v1"]
    origin: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    version: int = Field(ge=1, le=1_000_000)
    previous: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] | None
    published: Timestamp
    clients: list[PublishedClient] = Field(max_length=100_000)

    def plain(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @property
    def digest(self) -> str:
        """sha256 (hex) of the canonical JSON: what the next version names as ``previous``."""
        return sha256_bytes(canonical_json(self.plain()))

    def keys(self) -> dict[tuple[str, str], PublicKey]:
        """``(client name, key id) -> key`` of every key listed, active or retired."""
        out: dict[tuple[str, str], PublicKey] = {}
        for client in self.clients:
            out[(client.name, client.key_id)] = load_public_key_pem(
                client.public_key, source=f"published client {client.name!r}"
            )
        return out


def _signed(document: ClientsDocument, key: PrivateKey) -> dict[str, Any]:
    signature = key.sign(CLIENTS_DOMAIN + canonical_json(document.plain()))
    return {"document": document.plain(), "signature": base64.b64encode(signature).decode()}


def open_clients(answer: Any, log_key: PublicKey, *, where: str) -> ClientsDocument:
    """A signed clients answer checked against the log key (LedgerError when it is not)."""
    if not isinstance(answer, dict) or set(answer) != {"document", "signature"}:
        raise LedgerError(f"{where}: not a signed clients document")
    try:
        document = ClientsDocument.model_validate(answer["document"])
        signature = b64decode_strict(str(answer["signature"]))
    except ValidationError as exc:
        raise LedgerError(f"{where}: {validation_problems(exc, limit=3)}") from None
    except (ValueError, AttestError):
        raise LedgerError(f"{where}: the signature is not base64") from None
    if document.plain() != answer["document"] or not verify_signature(
        log_key, signature, CLIENTS_DOMAIN + canonical_json(document.plain())
    ):
        raise LedgerError(f"{where}: the signature does not verify under the log's key")
    try:
        document.keys()
    except AttestError as exc:
        raise LedgerError(f"{where}: {exc.message}") from None
    return document


def extension_problem(old: ClientsDocument, new: ClientsDocument) -> str | None:
    """Why ``new`` is not the next version after ``old`` (None when it is): the same origin,
    the next number, ``old``'s digest as ``previous``, and every key of ``old`` kept."""
    if new.origin != old.origin:
        return (
            f"version {new.version} is of {new.origin!r}, version {old.version} of {old.origin!r}"
        )
    if new.version != old.version + 1 or new.previous != old.digest:
        return f"version {new.version} does not name version {old.version} as its predecessor"
    kept = {(c.name, c.key_id): c.public_key for c in new.clients}
    for client in old.clients:
        if kept.get((client.name, client.key_id)) != client.public_key:
            return (
                f"version {new.version} drops key {client.key_id[:16]} of client"
                f" {client.name!r} that version {old.version} listed: the clients are append-only"
            )
    return None


def next_version(
    policy: ClientPolicy, origin: str, last: ClientsDocument | None
) -> ClientsDocument | None:
    """The version to publish for ``policy`` after ``last``; None when nothing changed."""
    current = {
        (name, c.key_id): PublishedClient(
            name=name,
            key_id=c.key_id,
            public_key=public_key_pem(c.key),
            status="active",
            entry_types=sorted(c.entry_types),
            hosts=sorted(c.hosts),
        )
        for name, c in policy.clients.items()
    }
    listed: list[PublishedClient] = []
    for old in last.clients if last is not None else []:
        fresh = current.pop((old.name, old.key_id), None)
        listed.append(fresh or old.model_copy(update={"status": "retired"}))
    listed += sorted(current.values(), key=lambda c: (c.name, c.key_id))
    if last is not None and listed == last.clients:
        return None
    return ClientsDocument(
        format=CLIENTS_FORMAT,
        origin=origin,
        version=1 if last is None else last.version + 1,
        previous=None if last is None else last.digest,
        published=utc_now(),
        clients=listed,
    )


def publish_clients(
    dsn: str, key: PrivateKey, origin: str, policy: ClientPolicy
) -> list[dict[str, Any]]:
    """Publish a new version when ``policy`` differs from the last one stored (under the
    writer lock, so concurrent services agree); every version's signed answer, oldest first."""
    try:
        with psycopg.connect(dsn, connect_timeout=5) as db, db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
            rows = db.execute(
                "SELECT document, signature FROM ledger_clients ORDER BY version"
            ).fetchall()
            answers = [
                {"document": loads_strict(bytes(r[0])), "signature": str(r[1])} for r in rows
            ]
            last = (
                open_clients(answers[-1], key.public_key, where="the stored clients document")
                if answers
                else None
            )
            if last is not None and last.origin != origin:
                raise LedgerError(
                    f"the stored clients are of {last.origin!r}, not {origin!r}",
                    hint="a log keeps its origin; serve this database under its own origin",
                )
            new = next_version(policy, origin, last)
            if new is not None:
                answer = _signed(new, key)
                db.execute(
                    "INSERT INTO ledger_clients (version, document, signature) VALUES (%s, %s, %s)",
                    (new.version, canonical_json(new.plain()), answer["signature"]),
                )
                answers.append(answer)
    except psycopg.Error as exc:
        raise LedgerError(f"cannot publish the clients document: {exc}") from None
    return answers
