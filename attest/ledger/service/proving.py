"""Proving a write's answer: what must hold before the spool lets an event go.

A service's answer to ``POST /add`` (200, or 409 for a replay of a stored entry) counts only
when it carries a checkpoint signed by the log key, of the log the write was signed for; the
leaf it names holds exactly this client's entry (a service-written leaf: this client, this
nonce, this client's signature; a bare entry from a service that records no writer: the
entry's own bytes); the service's inclusion proof leads from that leaf's hash to the signed
root; and that checkpoint is consistent with the last one this client has seen of the log
(kept per log key, :class:`~attest.ledger.service.spool.Spool`), in whichever order the two
come. Anything else is :class:`Unproven` and the event stays pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attest.certificate.signing import PublicKey, b64decode_strict
from attest.errors import LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from attest.ledger.merkle import leaf_hash, verify_consistency, verify_inclusion
from attest.ledger.service.client import LedgerClient, Unreachable
from attest.ledger.writers import read_leaf

__all__ = ["Proven", "Unproven", "WriteClaim", "prove_answer"]


class Unproven(LedgerError):
    """An answer that does not prove the write (the message says what is missing)."""


@dataclass(frozen=True)
class WriteClaim:
    """What was sent: the log's origin, the client's name, public key and nonce, and the
    entry's leaf data."""

    origin: str
    client: str
    client_key: PublicKey
    nonce: str
    entry_data: bytes


@dataclass(frozen=True)
class Proven:
    """A proven write: its index, and the newer of the answer's checkpoint and the one seen
    before (its note), which becomes the last seen."""

    index: int
    latest: Checkpoint
    latest_note: str


def prove_answer(
    client: LedgerClient,
    answer: Any,
    claim: WriteClaim,
    *,
    log_key: PublicKey,
    log_key_name: str | None,
    seen_note: str | None,
) -> Proven:
    """Check ``answer`` proves ``claim`` (module docstring); :class:`Unproven` if not,
    :class:`Unreachable` when the service stops answering the proof requests."""
    if not isinstance(answer, dict):
        raise Unproven("the answer is not a JSON object")
    index = answer.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise Unproven(f"the answer names no entry index ({_shown(index)})")
    note = answer.get("checkpoint")
    if not isinstance(note, str):
        raise Unproven("the answer carries no signed checkpoint")
    try:
        checkpoint = open_checkpoint(note, log_key, key_name=log_key_name)
    except CheckpointError as exc:
        raise Unproven(
            f"the answer's checkpoint does not verify under the log key: {exc.message}"
        ) from None
    if checkpoint.origin != claim.origin:
        raise Unproven(f"the answer's checkpoint is of {checkpoint.origin!r}, not {claim.origin!r}")
    if index >= checkpoint.size:
        raise Unproven(f"entry {index} is not covered by the checkpoint of {checkpoint.size}")
    leaf = _leaf(answer, claim)
    try:
        _, path = client.inclusion_proof(index, checkpoint.size)
    except Unreachable:
        raise
    except LedgerError as exc:
        raise Unproven(f"no inclusion proof for entry {index}: {exc.message}") from None
    if not verify_inclusion(index, checkpoint.size, leaf_hash(leaf), path, checkpoint.root):
        raise Unproven(
            f"entry {index} is not proven in the signed checkpoint of {checkpoint.size} entries"
        )
    latest, latest_note = _consistent(client, checkpoint, note, seen_note, log_key, log_key_name)
    return Proven(index, latest, latest_note)


def _shown(value: Any) -> str:
    return repr(value)[:60]


def _leaf(answer: dict[str, Any], claim: WriteClaim) -> bytes:
    """The leaf the answer names, checked to hold this client's entry."""
    encoded = answer.get("leaf")
    if encoded is None:  # a service that records the bare entry: its leaf is the entry's bytes
        return claim.entry_data
    try:
        leaf = b64decode_strict(str(encoded))
        record = read_leaf(leaf)
    except (ValueError, LedgerError) as exc:
        raise Unproven(f"the answer's leaf is not a ledger leaf ({exc})") from None
    if record.entry_data != claim.entry_data:
        raise Unproven("the answer's leaf holds another entry than the one sent")
    writer = record.writer
    if writer is not None and (
        writer.client != claim.client
        or writer.nonce != claim.nonce
        or writer.origin != claim.origin
        or not writer.verifies(claim.client_key, claim.entry_data)
    ):
        raise Unproven("the answer's leaf was not written by this client's request")
    return leaf


def _consistent(
    client: LedgerClient,
    checkpoint: Checkpoint,
    note: str,
    seen_note: str | None,
    log_key: PublicKey,
    log_key_name: str | None,
) -> tuple[Checkpoint, str]:
    """The newer of ``checkpoint`` and the last seen one, once the service proved the newer
    extends the older (:class:`Unproven` when it cannot)."""
    if seen_note is None:
        return checkpoint, note
    seen = open_checkpoint(seen_note, log_key, key_name=log_key_name)  # stored after a check
    if seen.origin != checkpoint.origin:
        raise Unproven(f"this client last saw {seen.origin!r} under this key")
    (old, _), (new, new_note) = sorted(((seen, seen_note), (checkpoint, note)), key=_size)
    if old.size == new.size:
        if old.root != new.root:
            raise Unproven(f"two signed checkpoints of {old.size} entries differ: a forked log")
        return new, new_note
    if old.size > 0:
        try:
            proof = client.consistency_proof(old.size, new.size)
        except Unreachable:
            raise
        except LedgerError as exc:
            raise Unproven(
                f"no consistency proof from {old.size} to {new.size}: {exc.message}"
            ) from None
        if not verify_consistency(old.size, new.size, old.root, new.root, proof):
            raise Unproven(
                f"the checkpoint of {new.size} entries does not extend the one of {old.size}"
                " this client saw before: a forked or rewritten log"
            )
    return new, new_note


def _size(item: tuple[Checkpoint, str]) -> int:
    return item[0].size
