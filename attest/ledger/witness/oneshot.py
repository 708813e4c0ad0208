"""``attest ledger witness cosign``: one cosignature, from a local ledger or mirror, through
the same checks as a served add-checkpoint request (:class:`~attest.ledger.witness.core.Witness`).

The request is built from the local copy: its latest stored checkpoint, and the consistency
proof from the size this witness last cosigned, computed from the copy's own nodes. The
witness then verifies that proof against the root it stored, so a copy that does not extend
what it cosigned before is refused exactly as a served request would be.
"""

from __future__ import annotations

from pathlib import Path

from attest.errors import LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError, split_note
from attest.ledger.log import open_ledger
from attest.ledger.merkle import consistency_proof
from attest.ledger.storage import LAST_CHECKPOINT_META
from attest.ledger.witness.core import Witness, add_checkpoint_body
from attest.ledger.witness.cosignature import merge_signatures

__all__ = ["WitnessRefused", "cosign_local"]


class WitnessRefused(LedgerError):
    """The witness did not cosign: a negative result (exit 1), not a usage error."""

    exit_code = 1


def cosign_local(witness: Witness, ledger_path: Path) -> str:
    """The copy's latest checkpoint with this witness's cosignature added (a refusal is a
    :class:`WitnessRefused` saying why, exit 1)."""
    with open_ledger(ledger_path) as book:
        storage = book.storage
        with storage.snapshot():
            stored = storage.checkpoints()
            note = storage.get_meta(LAST_CHECKPOINT_META) or (stored[-1].note if stored else None)
            if note is None:
                raise LedgerError(
                    f"{ledger_path} holds no signed checkpoint to cosign",
                    hint="mirror the log first: attest ledger mirror URL COPY --key LOG.pub",
                )
            try:
                checkpoint = Checkpoint.parse_body(split_note(note)[0])
            except CheckpointError as exc:
                raise LedgerError(
                    f"{ledger_path}: its checkpoint is malformed: {exc.message}"
                ) from None
            log = witness.logs.get(checkpoint.origin)
            if log is None:
                raise LedgerError(
                    f"{ledger_path} holds a checkpoint of {checkpoint.origin!r}, a log this"
                    " witness does not follow (logs.yaml)"
                )
            old, _ = witness.stored(log)
            old_size = old.size if old is not None else 0
            if old_size > checkpoint.size:
                raise LedgerError(
                    f"this witness cosigned {checkpoint.origin!r} at size {old_size}, but the"
                    f" copy's checkpoint is of size {checkpoint.size}: update the copy first"
                )
            if 0 < old_size < checkpoint.size:
                proof = consistency_proof(storage.read_nodes, old_size, checkpoint.size)
            else:
                proof = []
    answer = witness.add_checkpoint(add_checkpoint_body(old_size, proof, note))
    if answer.status != 200:
        raise WitnessRefused(
            f"the witness refused the checkpoint of {checkpoint.origin!r} (size"
            f" {checkpoint.size}) held by {ledger_path}: HTTP {answer.status}"
            f" {answer.body.strip()[:500]}",
            hint="a refusal may be evidence that the log was forked or rewritten: keep the copy",
        )
    return merge_signatures(note, answer.body)
