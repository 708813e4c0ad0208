"""Proof files an auditor checks offline, with no database: ``attest ledger prove`` writes an
inclusion proof, ``attest ledger consistency -o`` a consistency proof, and
``attest ledger verify-proof`` checks either against a signed checkpoint and a public key.

An inclusion proof file holds the entry's leaf data (base64 of its canonical JSON), the entry
decoded for readers, the RFC 9162 audit path and the signed checkpoint it is relative to. The
verifier trusts none of it: it recomputes the leaf hash from the leaf data, checks that the
decoded entry is that data, checks the checkpoint's signature with the key it is given, and
checks the path against the checkpoint's root.

A checkpoint the auditor supplies (``--checkpoint``) is always used, never passed over: for an
inclusion proof it replaces the embedded one; for a consistency proof it is the earlier tree
head the proof must start from (same origin, same size, same root), so a proof of a forked or
rewritten log is rejected even when it carries checkpoints of its own that verify.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from attest.certificate.signing import PublicKey
from attest.core.files import read_bytes_checked
from attest.core.io import MAX_JSON_BYTES, StrictJSONError, loads_strict
from attest.errors import InputError, LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from attest.ledger.log import ConsistencyResult, InclusionResult
from attest.ledger.merkle import leaf_hash, verify_consistency, verify_inclusion
from attest.ledger.writers import entry_of_leaf

__all__ = [
    "CONSISTENCY_FORMAT",
    "INCLUSION_FORMAT",
    "ConsistencyProofFile",
    "InclusionProofFile",
    "ProofVerdict",
    "consistency_proof_file",
    "inclusion_proof_file",
    "verify_proof_document",
]

INCLUSION_FORMAT: Final = "gradient-attest/ledger-inclusion-proof/v1"
CONSISTENCY_FORMAT: Final = "gradient-attest/ledger-consistency-proof/v1"
MAX_PROOF_HASHES = 128
Base64Text = Annotated[str, Field(max_length=1 << 20)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InclusionProofFile(_Strict):
    """``attest ledger prove`` output: one entry, its audit path and the checkpoint."""

    format: Literal["gradient-attest/ledger-inclusion-proof/v1"] = INCLUSION_FORMAT
    index: int = Field(ge=0)
    tree_size: int = Field(ge=1)
    leaf_data: Base64Text = Field(description="base64 of the entry's RFC 8785 canonical JSON")
    leaf_hash: Base64Text = Field(description="base64 of SHA-256(0x00 || leaf data), for readers")
    entry: dict[str, Any] = Field(
        description="the entry decoded, for readers; must equal leaf_data"
    )
    inclusion_proof: list[Base64Text] = Field(max_length=MAX_PROOF_HASHES)
    checkpoint: str = Field(max_length=1 << 20, description="the signed checkpoint note")


class ConsistencyProofFile(_Strict):
    """``attest ledger consistency -o`` output: two tree heads and the proof joining them."""

    format: Literal["gradient-attest/ledger-consistency-proof/v1"] = CONSISTENCY_FORMAT
    old_size: int = Field(ge=1)
    new_size: int = Field(ge=1)
    old_root: Base64Text
    new_root: Base64Text
    consistency_proof: list[Base64Text] = Field(max_length=MAX_PROOF_HASHES)
    old_checkpoint: str | None = Field(default=None, max_length=1 << 20)
    new_checkpoint: str | None = Field(default=None, max_length=1 << 20)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def inclusion_proof_file(result: InclusionResult) -> InclusionProofFile:
    """The proof file for an inclusion proof made by :meth:`Ledger.prove_inclusion`."""
    return InclusionProofFile(
        index=result.index,
        tree_size=result.checkpoint.size,
        leaf_data=_b64(result.leaf.data),
        leaf_hash=_b64(result.leaf.leaf_hash),
        entry=result.entry.plain(),
        inclusion_proof=[_b64(h) for h in result.proof],
        checkpoint=result.checkpoint.note,
    )


def consistency_proof_file(result: ConsistencyResult) -> ConsistencyProofFile:
    """The proof file for a consistency proof made by :meth:`Ledger.prove_consistency`."""
    return ConsistencyProofFile(
        old_size=result.old.size,
        new_size=result.new.size,
        old_root=_b64(result.old.root),
        new_root=_b64(result.new.root),
        consistency_proof=[_b64(h) for h in result.proof],
        old_checkpoint=result.old_checkpoint.note if result.old_checkpoint else None,
        new_checkpoint=result.new_checkpoint.note if result.new_checkpoint else None,
    )


@dataclass
class ProofVerdict:
    """Outcome of :func:`verify_proof_document`: ``ok`` and ``(code, message)`` reasons."""

    ok: bool
    kind: str
    reasons: list[tuple[str, str]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``--json`` output)."""
        return {
            "verified": self.ok,
            "kind": self.kind,
            "reasons": [{"code": c, "message": m} for c, m in self.reasons],
            **self.details,
        }


def _decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise LedgerError(f"{what} is not base64") from None


def _open(note: str, key: PublicKey, key_name: str | None, what: str) -> Checkpoint:
    try:
        return open_checkpoint(note, key, key_name=key_name)
    except CheckpointError as exc:
        raise CheckpointError(f"{what}: {exc.message}", code=exc.code, hint=exc.hint) from None


def _verify_inclusion_file(
    proof: InclusionProofFile, key: PublicKey, key_name: str | None, checkpoint_note: str | None
) -> ProofVerdict:
    verdict = ProofVerdict(
        ok=False, kind="inclusion", details={"index": proof.index, "tree_size": proof.tree_size}
    )
    try:
        note = proof.checkpoint if checkpoint_note is None else checkpoint_note
        label = "the checkpoint" if checkpoint_note is None else _GIVEN
        checkpoint = _open(note, key, key_name, label)
    except CheckpointError as exc:
        verdict.reasons.append((f"CHECKPOINT_{exc.code}", exc.message))
        return verdict
    verdict.details["origin"] = checkpoint.origin
    verdict.details["checkpoint"] = "embedded" if checkpoint_note is None else "given"
    if checkpoint.size != proof.tree_size:
        verdict.reasons.append(
            (
                "SIZE_MISMATCH",
                f"the proof is for a tree of {proof.tree_size} entries, the checkpoint for {checkpoint.size}; "
                f"ask for a proof at that size: attest ledger prove {proof.index} --tree-size {checkpoint.size}",
            )
        )
        return verdict
    data = _decode(proof.leaf_data, "leaf_data")
    try:
        entry = entry_of_leaf(data)
    except LedgerError as exc:
        verdict.reasons.append(("LEAF_MALFORMED", exc.message))
        return verdict
    if entry.plain() != proof.entry:
        verdict.reasons.append(
            ("ENTRY_MISMATCH", "the decoded 'entry' is not what leaf_data holds")
        )
        return verdict
    computed = leaf_hash(data)
    if _decode(proof.leaf_hash, "leaf_hash") != computed:
        verdict.reasons.append(("LEAF_MISMATCH", "leaf_hash is not the hash of leaf_data"))
        return verdict
    path = [_decode(h, "an inclusion_proof hash") for h in proof.inclusion_proof]
    if not verify_inclusion(proof.index, checkpoint.size, computed, path, checkpoint.root):
        verdict.reasons.append(
            (
                "PROOF_INVALID",
                f"the audit path does not lead from entry {proof.index} to the checkpoint's root",
            )
        )
        return verdict
    verdict.ok = True
    verdict.details["entry"] = proof.entry
    return verdict


_GIVEN = "the given checkpoint"


def _check_trusted_old(
    proof: ConsistencyProofFile, trusted: Checkpoint, old_root: bytes
) -> tuple[str, str] | None:
    """Why the auditor's checkpoint is not the proof's old tree head, or None when it is."""
    if trusted.size != proof.old_size:
        if trusted.size <= proof.new_size:
            todo = (
                "ask for a proof from it: attest ledger consistency "
                f"{trusted.size} {proof.new_size} -o PROOF"
            )
        else:
            todo = "it is later than the proof's new tree; ask for a proof up to a later tree"
        return (
            "SIZE_MISMATCH",
            f"the given checkpoint is for a tree of {trusted.size} entries, but the proof starts "
            f"from a tree of {proof.old_size}; {todo}",
        )
    if trusted.root != old_root:
        return (
            "ROOT_MISMATCH",
            f"the given checkpoint of size {trusted.size} has another root than the proof's old "
            "tree head: the log was forked or rewritten since that checkpoint was signed",
        )
    return None


def _verify_consistency_file(
    proof: ConsistencyProofFile, key: PublicKey, key_name: str | None, trusted_note: str | None
) -> ProofVerdict:
    verdict = ProofVerdict(
        ok=False,
        kind="consistency",
        details={
            "old_size": proof.old_size,
            "new_size": proof.new_size,
            "checkpoint": "embedded" if trusted_note is None else "given",
        },
    )
    old_root = _decode(proof.old_root, "old_root")
    new_root = _decode(proof.new_root, "new_root")
    # (note, which head it must vouch for, its name in messages)
    vouchers: list[tuple[str, int, bytes, str]] = []
    if trusted_note is not None:
        vouchers.append((trusted_note, proof.old_size, old_root, _GIVEN))
    if proof.old_checkpoint is not None:
        vouchers.append((proof.old_checkpoint, proof.old_size, old_root, "old_checkpoint"))
    if proof.new_checkpoint is not None:
        vouchers.append((proof.new_checkpoint, proof.new_size, new_root, "new_checkpoint"))
    if not vouchers:
        verdict.reasons.append(("UNSIGNED", "no signed checkpoint vouches for either tree head"))
        return verdict
    origins: set[str] = set()
    for note, size, root, label in vouchers:
        try:
            checkpoint = _open(note, key, key_name, label)
        except CheckpointError as exc:
            verdict.reasons.append((f"CHECKPOINT_{exc.code}", exc.message))
            return verdict
        origins.add(checkpoint.origin)
        if label == _GIVEN:
            problem = _check_trusted_old(proof, checkpoint, old_root)
            if problem is not None:
                verdict.reasons.append(problem)
                return verdict
        elif checkpoint.size != size:
            verdict.reasons.append(
                ("SIZE_MISMATCH", f"{label} is for {checkpoint.size} entries, not {size}")
            )
            return verdict
        elif checkpoint.root != root:
            verdict.reasons.append(
                (
                    "ROOT_MISMATCH",
                    f"the signed checkpoint of size {checkpoint.size} has another root",
                )
            )
            return verdict
    if len(origins) > 1:
        verdict.reasons.append(
            (
                "ORIGIN_MISMATCH",
                f"the checkpoints name different logs ({', '.join(sorted(origins))})",
            )
        )
        return verdict
    verdict.details["origin"] = origins.pop()
    path = [_decode(h, "a consistency_proof hash") for h in proof.consistency_proof]
    if not verify_consistency(proof.old_size, proof.new_size, old_root, new_root, path):
        verdict.reasons.append(
            ("PROOF_INVALID", "the consistency proof does not join the two tree heads")
        )
        return verdict
    verdict.ok = True
    return verdict


def verify_proof_document(
    path: str | Path,
    public_key: PublicKey,
    *,
    key_name: str | None = None,
    checkpoint_notes: Sequence[str] = (),
) -> ProofVerdict:
    """Check a proof file offline (no database) against a public key.

    ``checkpoint_notes`` (at most one: :class:`InputError` otherwise) is a checkpoint from a
    source the auditor trusts, and it is always used. For an inclusion proof it replaces the
    embedded checkpoint. For a consistency proof it must be the old tree head (same size and
    root, else ``SIZE_MISMATCH`` / ``ROOT_MISMATCH``), and the embedded checkpoints must agree
    with the heads and its origin. Without it, at least one tree head must be vouched for by an
    embedded signed checkpoint.
    """
    if len(checkpoint_notes) > 1:
        raise InputError(
            f"{len(checkpoint_notes)} checkpoints given; a proof is checked against one you trust",
            hint="pass --checkpoint once: for an inclusion proof the checkpoint it is relative "
            "to, for a consistency proof the earlier one the proof starts from",
        )
    p = Path(path)
    raw = read_bytes_checked(p, what="proof", max_bytes=MAX_JSON_BYTES)
    try:
        document = loads_strict(raw)
    except StrictJSONError as exc:
        return ProofVerdict(False, "unknown", [("MALFORMED", f"{p} is not valid JSON: {exc}")])
    kind = document.get("format") if isinstance(document, dict) else None
    note = checkpoint_notes[0] if checkpoint_notes else None
    try:
        if kind == INCLUSION_FORMAT:
            return _verify_inclusion_file(
                InclusionProofFile.model_validate(document), public_key, key_name, note
            )
        if kind == CONSISTENCY_FORMAT:
            parsed = ConsistencyProofFile.model_validate(document)
            return _verify_consistency_file(parsed, public_key, key_name, note)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3]
        )
        return ProofVerdict(False, str(kind), [("MALFORMED", f"{p}: {problems}")])
    except LedgerError as exc:
        return ProofVerdict(False, str(kind), [("MALFORMED", exc.message)])
    return ProofVerdict(
        False,
        "unknown",
        [("MALFORMED", f"{p} is not a gradient-attest ledger proof (format {kind!r})")],
    )
