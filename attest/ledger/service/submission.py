"""Client-signed writes to the ledger service, and ``clients.yaml`` (who may write what).

A write is one JSON object (``POST /add``, ``Content-Type: application/json``)::

    {"format": "gradient-attest/ledger-submission/v1", "origin": "<the log's origin>",
     "client": "<name in clients.yaml>", "nonce": "<32..64 lowercase hex>",
     "time": "<RFC 3339 UTC>", "entry": {<a ledger entry, every field>},
     "signature": "<base64>"}

The signature (the client's Ed25519 or ECDSA P-256 key) covers :data:`DOMAIN` followed by the
RFC 8785 canonical JSON of every field but ``signature``, with ``entry`` replaced by the
sha256 (hex) of the entry's leaf data (its canonical JSON: the bytes the log records). Replay protection: the service
stores ``(client, nonce)`` with the entry in the same transaction and refuses a nonce seen
before (409, naming the index the first request got when it carried the same entry, so a
client that lost an answer learns its entry is in); it also refuses a ``time`` further than
:data:`MAX_SKEW_S` from its clock, and the origin binds the request to one log.

``clients.yaml``::

    clients:
      - name: inference-01
        public_key: keys/inference-01.pub     # PEM, relative to the file
        entry_types: [verified, rejected]     # events this client may write
        hosts: [inference-01.example.org]     # the entry's ``host`` must be one of these

A write that passes is recorded as a service-written leaf (:mod:`attest.ledger.writers`): the
entry, the client's name, key id and signed request, and the service's receive time.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from attest.certificate.signing import (
    PrivateKey,
    PublicKey,
    b64decode_strict,
    ed25519_r_refused_before_verify,
    key_id,
    load_public_key,
    verify_signature,
)
from attest.core.io import StrictJSONError, loads_strict
from attest.core.strict_yaml import load_yaml_mapping
from attest.core.validation import validation_problems
from attest.errors import ConfigError, InputError
from attest.ledger.entries import Event, LedgerEntry, ShortText, leaf_data_of, utc_now
from attest.ledger.service.tiles import MAX_ENTRY_BYTES
from attest.ledger.writers import SUBMISSION_DOMAIN, SUBMISSION_FORMAT, Writer, signed_message

__all__ = [
    "DOMAIN",
    "MAX_BODY_BYTES",
    "SUBMISSION_FORMAT",
    "CheckedWrite",
    "ClientPolicy",
    "ListedClient",
    "SubmissionRequest",
    "WriteRefused",
    "check_write",
    "load_clients",
    "new_nonce",
    "sign_submission",
]

DOMAIN: Final = SUBMISSION_DOMAIN
MAX_BODY_BYTES = 96 * 1024  # an entry is at most 64 KiB of leaf data, plus the envelope
MAX_SKEW_S = 300.0
ClientName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
Nonce = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32,64}$")]
Timestamp = Annotated[
    str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")
]


class SubmissionRequest(BaseModel):
    """The body of ``POST /add`` (module docstring); unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["gradient-attest/ledger-submission/v1"]
    origin: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    client: ClientName
    nonce: Nonce
    time: Timestamp
    entry: dict[str, Any]
    signature: Annotated[str, StringConstraints(min_length=1, max_length=512)]

    def header(self) -> dict[str, str]:
        """The signed fields but ``entry`` (whose leaf data's digest takes its place)."""
        return {
            "format": self.format,
            "origin": self.origin,
            "client": self.client,
            "nonce": self.nonce,
            "time": self.time,
        }

    def verify(self, key: PublicKey, leaf_data: bytes) -> bool:
        """True when the signature verifies under ``key`` for this request carrying the
        entry whose leaf data is ``leaf_data``."""
        try:
            signature = b64decode_strict(self.signature)
        except Exception:
            return False
        message = signed_message(self.header(), leaf_data)
        if not isinstance(key, ed25519.Ed25519PublicKey):
            return verify_signature(key, signature, message)
        # The listed key was checked when clients.yaml was loaded (check_public_key); per
        # request the signature's R half is refused as verify_signature refuses it, its
        # on-curve check left to the verification (ed25519_r_refused_before_verify says why).
        if len(signature) != 64 or ed25519_r_refused_before_verify(signature[:32]):
            return False
        try:
            key.verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def seconds_from(self, now: datetime) -> float:
        """How far ``time`` is from ``now``, in seconds (absolute); ValueError for a time the
        pattern lets through but the calendar does not have (month 13, second 60)."""
        t = self.time  # YYYY-MM-DDTHH:MM:SS[.f{1,6}]Z, checked by the pattern
        fraction = t[20:-1]
        sent = datetime(
            int(t[0:4]),
            int(t[5:7]),
            int(t[8:10]),
            int(t[11:13]),
            int(t[14:16]),
            int(t[17:19]),
            int(fraction.ljust(6, "0")) if fraction else 0,
            tzinfo=timezone.utc,
        )
        return abs((now - sent).total_seconds())


def new_nonce() -> str:
    """A fresh random nonce (128 bits, hex)."""
    return secrets.token_hex(16)


def sign_submission(
    entry: LedgerEntry,
    *,
    origin: str,
    client: str,
    nonce: str,
    key: PrivateKey,
    time: str | None = None,
) -> dict[str, Any]:
    """A signed write of ``entry`` for the log ``origin`` (module docstring)."""
    header = {
        "format": SUBMISSION_FORMAT,
        "origin": origin,
        "client": client,
        "nonce": nonce,
        "time": time or utc_now(),
    }
    signature = key.sign(signed_message(header, entry.leaf_data))
    return {
        **header,
        "entry": entry.model_dump(mode="json"),
        "signature": base64.b64encode(signature).decode("ascii"),
    }


def parse_entry(entry: dict[str, Any]) -> tuple[LedgerEntry, bytes]:
    """The entry of a write, which must be given with every field, as the leaf records it,
    and its leaf data (encoded once, from the dump that checked it)."""
    try:
        parsed = LedgerEntry.model_validate(entry)
    except ValidationError as exc:
        raise InputError(f"entry: {validation_problems(exc, limit=3)}") from None
    dumped = parsed.model_dump(mode="json")
    if dumped != entry:
        raise InputError("entry: give every field, exactly as the ledger records it")
    return parsed, leaf_data_of(dumped)


class WriteRefused(Exception):
    """A write the service refuses: the HTTP ``status``, the error ``code`` and a message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class CheckedWrite:
    """A write that passed every check: who sent it, its nonce, the entry's leaf data, and the
    writer record (name, key id, signed request) its leaf will carry."""

    client: str
    nonce: str
    leaf_data: bytes
    event: str
    entry: LedgerEntry
    writer: Writer


def check_write(
    body: bytes, *, origin: str, policy: ClientPolicy, now: datetime | None = None
) -> CheckedWrite:
    """Every check of ``POST /add`` on the body (module docstring), each refusal a
    :class:`WriteRefused`: the body parsed once (strict JSON), validated once (the request,
    then its entry), the leaf data encoded once and both the signature's message and the
    appended leaf made from those bytes."""
    try:
        sent = SubmissionRequest.model_validate(loads_strict(body, max_depth=16))
    except StrictJSONError as exc:
        raise WriteRefused(400, "MALFORMED", f"the body is not strict JSON: {exc}") from None
    except ValidationError as exc:
        raise WriteRefused(400, "MALFORMED", validation_problems(exc, limit=3)) from None
    if not policy.clients:
        raise WriteRefused(
            403, "READ_ONLY", "this service accepts no writes (clients.yaml lists none)"
        )
    if sent.origin != origin:
        raise WriteRefused(400, "WRONG_ORIGIN", f"this log is {origin!r}, not {sent.origin!r}")
    listed = policy.clients.get(sent.client)
    key = None if listed is None else listed.key
    if listed is None or key is None:
        raise WriteRefused(401, "UNKNOWN_CLIENT", f"client {sent.client!r} is not listed")
    try:
        entry, data = parse_entry(sent.entry)
    except InputError as exc:
        raise WriteRefused(400, "MALFORMED", exc.message) from None
    if not sent.verify(key, data):
        raise WriteRefused(
            401, "SIGNATURE_INVALID", f"the signature does not verify under {sent.client!r}'s key"
        )
    try:
        skew = sent.seconds_from(now or now_utc())
    except ValueError:
        raise WriteRefused(400, "MALFORMED", f"time {sent.time!r} is not a real date") from None
    if skew > MAX_SKEW_S:
        raise WriteRefused(
            400,
            "REQUEST_EXPIRED",
            f"the request time is over {MAX_SKEW_S:.0f} s from the service's clock",
        )
    if not policy.may_write(sent.client, entry.event):
        raise WriteRefused(
            403,
            "ENTRY_TYPE_NOT_ALLOWED",
            f"client {sent.client!r} may not write {entry.event!r} entries",
        )
    if entry.host not in listed.hosts:
        raise WriteRefused(
            403,
            "HOST_NOT_ALLOWED",
            f"client {sent.client!r} may write entries only for the hosts listed for it in"
            f" clients.yaml ({', '.join(sorted(listed.hosts))}), not for host {entry.host!r}",
        )
    if len(data) > MAX_ENTRY_BYTES:
        raise WriteRefused(413, "BODY_TOO_LARGE", f"the entry is over {MAX_ENTRY_BYTES} bytes")
    writer = Writer(
        client=sent.client,
        key_id=listed.key_id,
        origin=sent.origin,
        nonce=sent.nonce,
        time=sent.time,
        signature=sent.signature,
    )
    return CheckedWrite(sent.client, sent.nonce, data, entry.event, entry, writer)


class _ClientFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: ClientName
    public_key: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    entry_types: list[Event] = Field(min_length=1)
    hosts: list[ShortText] = Field(min_length=1, max_length=1000)


class _ClientsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    clients: list[_ClientFile] = Field(max_length=10_000)


@dataclass(frozen=True)
class ListedClient:
    """One client of ``clients.yaml``: its key (and key id), the events it may write and the
    hosts it may write for."""

    key: PublicKey
    entry_types: frozenset[Event]
    hosts: frozenset[str]
    key_id: str


class ClientPolicy:
    """Who may write: client name -> :class:`ListedClient`. Empty: read-only."""

    def __init__(self, clients: dict[str, ListedClient]) -> None:
        self.clients = clients

    def key_of(self, name: str) -> PublicKey | None:
        entry = self.clients.get(name)
        return None if entry is None else entry.key

    def may_write(self, name: str, event: str) -> bool:
        entry = self.clients.get(name)
        return entry is not None and event in entry.entry_types


def load_clients(path: str | Path) -> ClientPolicy:
    """Read ``clients.yaml`` strictly (keys relative to the file); an empty list is valid."""
    p = Path(path)
    raw = load_yaml_mapping(p, what="clients file")
    try:
        parsed = _ClientsFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"clients file {p}: {validation_problems(exc)}") from None
    clients: dict[str, ListedClient] = {}
    for number, client in enumerate(parsed.clients):
        if client.name in clients:
            raise ConfigError(f"clients file {p}: clients[{number}]: name {client.name!r} repeated")
        key_path = Path(client.public_key)
        if not key_path.is_absolute():
            key_path = p.parent / key_path
        key = load_public_key(key_path)
        clients[client.name] = ListedClient(
            key, frozenset(client.entry_types), frozenset(client.hosts), key_id(key)
        )
    return ClientPolicy(clients)


def now_utc() -> datetime:
    """The service's clock (UTC), for the freshness check."""
    return datetime.now(timezone.utc)
