"""A batch of client writes as the sequencer hands it to the storage
(:meth:`~attest.ledger.service.postgres.PostgresStorage.submit`), and what became of each."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Submission", "SubmitOutcome"]


@dataclass(frozen=True)
class Submission:
    """One client-signed write: who sent it, its nonce, the leaf data, and the hash that
    identifies its entry for a replay (default: the leaf hash; a service-written leaf gives
    the leaf hash of its bare entry, so a retry with a new signature matches)."""

    client: str
    nonce: str
    data: bytes
    entry_hash: bytes | None = None


@dataclass(frozen=True)
class SubmitOutcome:
    """What became of a submission: appended at ``index``, or a replay (``replay`` true) of
    the one stored at ``index`` (None when the replay carried a different entry)."""

    index: int | None
    leaf_hash: bytes
    replay: bool
