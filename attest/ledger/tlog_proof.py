"""Offline proofs that a certificate is in the ledger: C2SP tlog-proof@v1 files
(``attest ledger proof CERT -o cert.tlog-proof``), checked with no network by
``attest verify CERT --ledger-proof cert.tlog-proof``::

    c2sp.org/tlog-proof@v1
    extra <base64 of the entry's leaf data>
    index <the entry's index>
    <inclusion proof, one base64 hash per line>

    <the log's checkpoint, verbatim, with its witnesses' cosignatures>

The leaf hash is application specific (tlog-proof, "Verifying"): ours is the hash of the
ledger leaf, whose bytes ride in ``extra``. Nothing in ``extra`` is trusted: the verifier hashes
it, requires it to be a canonical ledger record of an ``issued`` event naming the certificate
file's sha256, and walks the inclusion proof from that hash to the root of a checkpoint signed
by a ledger key of the trust store and cosigned by its witness quorum.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass

from attest.certificate.signing import PublicKey
from attest.errors import LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from attest.ledger.merkle import HASH_SIZE, leaf_hash, verify_inclusion
from attest.ledger.witness.cosignature import WitnessPolicy
from attest.ledger.writers import read_leaf

__all__ = [
    "LEDGER_PROOF_INVALID",
    "TLOG_PROOF_HEADER",
    "TlogProof",
    "entry_problem",
    "format_tlog_proof",
    "parse_tlog_proof",
    "verify_tlog_proof",
]

TLOG_PROOF_HEADER = "c2sp.org/tlog-proof@v1"
LEDGER_PROOF_INVALID = "LEDGER_PROOF_INVALID"
MAX_PROOF_BYTES = 2 << 20
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}")


@dataclass(frozen=True)
class TlogProof:
    """A parsed tlog-proof: extra data, entry index, inclusion proof and checkpoint note."""

    index: int
    proof: tuple[bytes, ...]
    note: str
    extra: bytes | None = None


def format_tlog_proof(
    index: int, proof: Sequence[bytes], note: str, extra: bytes | None = None
) -> str:
    """The tlog-proof@v1 text."""
    lines = [TLOG_PROOF_HEADER]
    if extra is not None:
        lines.append("extra " + base64.b64encode(extra).decode("ascii"))
    lines.append(f"index {index}")
    lines += [base64.b64encode(h).decode("ascii") for h in proof]
    return "".join(line + "\n" for line in lines) + "\n" + note


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise LedgerError(f"tlog-proof: {what} is not base64") from None


def parse_tlog_proof(text: str) -> TlogProof:
    """Parse a tlog-proof@v1 strictly (:class:`LedgerError` saying what is wrong)."""
    if len(text) > MAX_PROOF_BYTES:
        raise LedgerError(f"tlog-proof: over {MAX_PROOF_BYTES} bytes")
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise LedgerError("tlog-proof: no empty line before the checkpoint")
    lines = head.split("\n")
    if lines[0] != TLOG_PROOF_HEADER:
        raise LedgerError(f"tlog-proof: the first line is not {TLOG_PROOF_HEADER}")
    at = 1
    extra = None
    if len(lines) > at and lines[at].startswith("extra "):
        extra = _b64(lines[at][6:], "the extra line")
        at += 1
    if len(lines) <= at or not lines[at].startswith("index "):
        raise LedgerError("tlog-proof: no 'index N' line")
    if not _DECIMAL.fullmatch(lines[at][6:]):
        raise LedgerError("tlog-proof: the index is not a decimal number")
    index = int(lines[at][6:])
    proof = tuple(_b64(line, "an inclusion proof line") for line in lines[at + 1 :])
    if any(len(h) != HASH_SIZE for h in proof) or len(proof) > 64:
        raise LedgerError(
            "tlog-proof: the inclusion proof lines are not (at most 64) SHA-256 hashes"
        )
    return TlogProof(index, proof, note, extra)


def verify_tlog_proof(
    text: str,
    certificate_sha256: str,
    log_keys: Sequence[PublicKey],
    policy: WitnessPolicy,
) -> list[tuple[str, str]]:
    """Why the proof does not show the certificate's ``issued`` entry in a checkpoint of one of
    ``log_keys`` that ``policy``'s quorum cosigned; empty when it does."""
    try:
        parsed = parse_tlog_proof(text)
    except LedgerError as exc:
        return [(LEDGER_PROOF_INVALID, exc.message)]
    if not log_keys:
        return [
            (
                LEDGER_PROOF_INVALID,
                "the trust store holds no ledger key to check the proof's checkpoint with: "
                "attest trust add LEDGER.pub --role ledger",
            )
        ]
    checkpoint = None
    failures = []
    for key in log_keys:
        try:
            checkpoint = open_checkpoint(parsed.note, key)
            break
        except CheckpointError as exc:
            failures.append(exc.message)
    if checkpoint is None:
        return [(LEDGER_PROOF_INVALID, f"the proof's checkpoint: {'; '.join(failures)[:1000]}")]
    witnessed = policy.problem(parsed.note)
    if witnessed is not None:
        return [witnessed]
    problem = entry_problem(parsed, checkpoint, certificate_sha256)
    return [] if problem is None else [problem]


def entry_problem(
    parsed: TlogProof, checkpoint: Checkpoint, certificate_sha256: str
) -> tuple[str, str] | None:
    """Why the proof's entry is not the certificate's ``issued`` entry under ``checkpoint``'s
    root (the checkpoint's signature is the caller's to check); None when it is."""
    if parsed.extra is None:
        return (LEDGER_PROOF_INVALID, "the proof carries no entry (its extra line)")
    try:
        entry = read_leaf(parsed.extra).entry
    except LedgerError as exc:
        return (LEDGER_PROOF_INVALID, f"the proof's entry is not a ledger record: {exc.message}")
    if entry.event != "issued" or entry.certificate.sha256 != certificate_sha256:
        return (
            LEDGER_PROOF_INVALID,
            f"the proof's entry ({entry.event} of a certificate with sha256"
            f" {str(entry.certificate.sha256)[:16]}...) is not the issue of this certificate file",
        )
    if not verify_inclusion(
        parsed.index, checkpoint.size, leaf_hash(parsed.extra), list(parsed.proof), checkpoint.root
    ):
        return (
            LEDGER_PROOF_INVALID,
            f"the inclusion proof does not lead from entry {parsed.index} to the root of the"
            f" checkpoint of {checkpoint.size} entries",
        )
    return None
