"""The leaf a ledger service writes: the client's entry, who submitted it (client name, key id
and the client's own signature over the entry) and when the service received it.

A service-written leaf (format ``gradient-attest/ledger-leaf/v2``) is the RFC 8785 canonical
JSON of::

    {"format": "gradient-attest/ledger-leaf/v2",
     "entry": {<the ledger entry, as a v1 leaf records it>},
     "writer": {"client": NAME, "key_id": KEY_ID, "origin": ..., "nonce": ..., "time": ...,
                "signature": BASE64},
     "received": "<the service's clock when the write arrived, RFC 3339 UTC>"}

``writer`` holds every field the client signed (:func:`signed_message`): anyone holding the
client's public key (the log publishes them, :mod:`attest.ledger.service.clients_doc`) can
check that this client submitted exactly this entry. ``entry.time`` and ``writer.time`` are the
client's claims; ``received`` is the service's. Leaves written before this format (a bare
``gradient-attest/ledger-entry/v1`` entry: local ledgers, older services) carry no writer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from attest.certificate.signing import (
    PublicKey,
    b64decode_strict,
    canonical_json,
    canonical_json_text,
    verify_signature,
)
from attest.core.io import sha256_bytes
from attest.core.validation import validation_problems
from attest.errors import AttestError, LedgerError
from attest.ledger.entries import MAX_LEAF_BYTES, LedgerEntry, Timestamp, entry_from_leaf_data

__all__ = [
    "LEAF_FORMAT",
    "SUBMISSION_DOMAIN",
    "SUBMISSION_FORMAT",
    "LeafRecord",
    "Writer",
    "entry_of_leaf",
    "is_written_leaf",
    "read_leaf",
    "signed_message",
    "written_leaf_data",
    "written_leaf_data_of",
]

LEAF_FORMAT: Final = "gradient-attest/ledger-leaf/v2"
SUBMISSION_FORMAT: Final = "gradient-attest/ledger-submission/v1"
SUBMISSION_DOMAIN: Final = b"gradient-attest ledger submission v1\n"
# Canonical JSON sorts keys: a v2 leaf starts with its "entry" key, a v1 entry with "actor".
_V2_PREFIX: Final = b'{"entry":'


class Writer(BaseModel):
    """Who submitted a leaf's entry, and every field of their signed request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    client: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    key_id: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16,64}$")]
    origin: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    nonce: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32,64}$")]
    time: Timestamp
    signature: Annotated[str, StringConstraints(min_length=1, max_length=512)]

    def header(self) -> dict[str, str]:
        """The request fields the client's signature covers (beside the entry's digest)."""
        return {
            "format": SUBMISSION_FORMAT,
            "origin": self.origin,
            "client": self.client,
            "nonce": self.nonce,
            "time": self.time,
        }

    def verifies(self, key: PublicKey, entry_data: bytes) -> bool:
        """True when ``signature`` is ``key``'s over this request carrying ``entry_data``."""
        try:
            signature = b64decode_strict(self.signature)
        except Exception:
            return False
        return verify_signature(key, signature, signed_message(self.header(), entry_data))


class _Leaf(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["gradient-attest/ledger-leaf/v2"]
    entry: LedgerEntry
    writer: Writer
    received: Timestamp


@dataclass(frozen=True)
class LeafRecord:
    """A parsed leaf: its entry, the entry's own (v1) leaf data, and for a service-written
    leaf its writer and receive time (None for a bare v1 entry)."""

    entry: LedgerEntry
    entry_data: bytes
    writer: Writer | None = None
    received: str | None = None


def signed_message(header: dict[str, str], entry_data: bytes) -> bytes:
    """What a write's signature covers: the domain, then the canonical JSON of its fields but
    ``signature``, with ``entry`` replaced by the sha256 (hex) of the entry's leaf data."""
    return SUBMISSION_DOMAIN + canonical_json_text({**header, "entry": sha256_bytes(entry_data)})


def written_leaf_data(entry: LedgerEntry, writer: Writer, received: str) -> bytes:
    """The leaf data of ``entry`` written by ``writer`` and received at ``received``."""
    return canonical_json_text(
        {
            "format": LEAF_FORMAT,
            "entry": entry.plain(),
            "writer": writer.model_dump(mode="json"),
            "received": received,
        }
    )


def written_leaf_data_of(entry_data: bytes, writer: Writer, received: str) -> bytes:
    """:func:`written_leaf_data` from the entry's leaf data already encoded (the service has it
    from checking the write's signature): the canonical JSON of the leaf spliced around those
    bytes, byte-identical because a nested object's canonical form does not depend on where it
    sits and ``entry`` sorts first (tests hold the two equal). Saves a second dump and encode
    of the entry on every write."""
    rest = canonical_json_text(
        {
            "format": LEAF_FORMAT,
            "received": received,
            "writer": {
                "client": writer.client,
                "key_id": writer.key_id,
                "nonce": writer.nonce,
                "origin": writer.origin,
                "signature": writer.signature,
                "time": writer.time,
            },
        }
    )
    return b'{"entry":' + entry_data + b"," + rest[1:]


def is_written_leaf(data: bytes) -> bool:
    """True for leaf data in the service-written (v2) format."""
    return data.startswith(_V2_PREFIX)


def read_leaf(data: bytes) -> LeafRecord:
    """Parse a leaf of either format, refusing anything not in its canonical encoding."""
    if not is_written_leaf(data):
        entry = entry_from_leaf_data(data)
        return LeafRecord(entry, data)
    if len(data) > MAX_LEAF_BYTES:
        raise LedgerError(f"leaf data is {len(data)} bytes, over the {MAX_LEAF_BYTES}-byte limit")
    try:
        leaf = _Leaf.model_validate_json(data)
    except ValidationError as exc:
        raise LedgerError(
            f"leaf data is not a valid service-written leaf: {validation_problems(exc, limit=3)}"
        ) from None
    rebuilt = written_leaf_data(leaf.entry, leaf.writer, leaf.received)
    if rebuilt != data and not _canonical_equal(data, rebuilt):
        raise LedgerError("leaf data is not the RFC 8785 canonical encoding of its leaf")
    return LeafRecord(leaf.entry, leaf.entry.leaf_data, leaf.writer, leaf.received)


def entry_of_leaf(data: bytes) -> LedgerEntry:
    """The entry a log's leaf holds, in either format (canonical encoding required)."""
    return read_leaf(data).entry


def _canonical_equal(data: bytes, rebuilt: bytes) -> bool:
    """The ``rfc8785`` package decides where the fast encoder and ``data`` disagree (as
    attest.ledger.entries does for a bare entry)."""
    try:
        return canonical_json(json.loads(rebuilt)) == data
    except (AttestError, ValueError):
        return False
