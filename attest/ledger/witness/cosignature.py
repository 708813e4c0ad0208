"""C2SP tlog-cosignature/v1 (Ed25519): a witness's timestamped signature over a checkpoint,
and a client's check that enough known witnesses cosigned one (a k-of-n quorum, C2SP
tlog-policy's simplest rule).

A cosignature is a signed-note signature line ``— <witness name> base64(key ID || timestamp ||
signature)``: the key ID is ``SHA-256(name || 0x0A || 0x04 || public key)[:4]``, the timestamp a
big-endian u64 of POSIX seconds, and the Ed25519 signature is over::

    cosignature/v1
    time <timestamp>
    <the checkpoint's note text>

Hand-written for the reason :mod:`attest.ledger.checkpoint` gives (no maintained Python
implementation of signed notes exists).
"""

from __future__ import annotations

import base64
import struct
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from attest.certificate.note_keys import SIGNATURE_TYPE_COSIGNATURE, NoteKey
from attest.certificate.signing import PrivateKey, verify_signature
from attest.errors import LedgerError
from attest.ledger.checkpoint import CheckpointError, split_note

__all__ = [
    "WITNESS_QUORUM_NOT_MET",
    "CosignatureCheck",
    "QuorumNotMet",
    "WitnessPolicy",
    "check_cosignatures",
    "cosign",
    "cosigned_message",
    "merge_signatures",
    "quorum_problem",
    "witness_key",
]

WITNESS_QUORUM_NOT_MET = "WITNESS_QUORUM_NOT_MET"
_EM_DASH = "\u2014"
_MAX_TIMESTAMP = (1 << 63) - 1
_FUTURE_SKEW_S = 300  # cosignatures dated later than this are refused (tlog-cosignature MAY)


def witness_key(name: str, private_key: PrivateKey) -> NoteKey:
    """The cosigner verifier key of a witness named ``name`` holding ``private_key``."""
    return NoteKey(name, private_key.public_key, SIGNATURE_TYPE_COSIGNATURE)


def cosigned_message(note_text: str, timestamp: int) -> bytes:
    """What a cosignature/v1 signs: the header line, the time line, the checkpoint text."""
    if not 0 < timestamp <= _MAX_TIMESTAMP:
        raise LedgerError(f"cosignature timestamp {timestamp} is outside 1..2^63-1")
    return f"cosignature/v1\ntime {timestamp}\n{note_text}".encode()


def cosign(note_text: str, private_key: PrivateKey, name: str, timestamp: int | None = None) -> str:
    """The cosignature line (ending in a newline) of witness ``name`` over checkpoint text."""
    stamp = int(time.time()) if timestamp is None else timestamp
    signature = private_key.sign(cosigned_message(note_text, stamp))
    blob = witness_key(name, private_key).key_id + struct.pack(">Q", stamp) + signature
    return f"{_EM_DASH} {name} {base64.b64encode(blob).decode('ascii')}\n"


@dataclass
class CosignatureCheck:
    """Which known witnesses validly cosigned a note (by their trust-store names), which lines
    from a known witness failed to verify, and the verified cosignatures' timestamps."""

    verified: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    timestamps: dict[str, int] = field(default_factory=dict)


def check_cosignatures(
    note: str, witnesses: Sequence[tuple[str, NoteKey]], *, now: float | None = None
) -> CosignatureCheck:
    """Verify every cosignature line of ``note`` from a witness in ``witnesses`` (``(name in
    the policy, cosigner key)`` pairs); other lines are ignored, as signed-note requires. A
    witness counts when its lines all verify (a failing line of a known key makes the note
    malformed for that key, as signed-note says)."""
    text, signatures = split_note(note)
    result = CosignatureCheck()
    limit = (time.time() if now is None else now) + _FUTURE_SKEW_S
    for label, key in witnesses:
        expected = key.key_id
        lines = [blob[4:] for name, blob in signatures if name == key.name and blob[:4] == expected]
        stamps = [_verified_stamp(body, key, text, limit) for body in lines]
        if not lines:
            continue
        if None in stamps:  # a known key's signature that fails makes the note malformed
            result.invalid.append(label)
        elif label not in result.verified:
            result.verified.append(label)
            result.timestamps[label] = max(s for s in stamps if s is not None)
    return result


def _verified_stamp(body: bytes, key: NoteKey, text: str, limit: float) -> int | None:
    """The timestamp of one cosignature (timestamp || signature) that verifies, else None."""
    if len(body) != 8 + 64:
        return None
    (stamp,) = struct.unpack(">Q", body[:8])
    if not 0 < stamp <= _MAX_TIMESTAMP or stamp > limit:
        return None
    return (
        stamp if verify_signature(key.public_key, body[8:], cosigned_message(text, stamp)) else None
    )


def quorum_problem(
    note: str, witnesses: Sequence[tuple[str, NoteKey]], quorum: int | None
) -> tuple[str, str] | None:
    """``(WITNESS_QUORUM_NOT_MET, why)`` when fewer than ``quorum`` of ``witnesses`` validly
    cosigned ``note``; None when the quorum is met or none is configured."""
    if not quorum:
        return None
    try:
        check = check_cosignatures(note, witnesses)
    except CheckpointError as exc:
        return WITNESS_QUORUM_NOT_MET, f"the checkpoint cannot be read: {exc.message}"
    if len(check.verified) >= quorum:
        return None
    got = ", ".join(check.verified) or "none"
    bad = f"; cosignatures that do not verify: {', '.join(check.invalid)}" if check.invalid else ""
    size = note.split("\n", 2)[1] if note.count("\n") >= 2 else "?"
    return (
        WITNESS_QUORUM_NOT_MET,
        f"the log's checkpoint (size {size[:20]}) is cosigned by {len(check.verified)} of the"
        f" {quorum} witnesses the trust store requires (valid: {got}{bad}): no quorum of"
        " witnesses vouches that this is the tree everyone else sees",
    )


def merge_signatures(note: str, lines: str) -> str:
    """``note`` with the signature ``lines`` added (each once; tlog-witness: "the client MAY
    concatenate it to the checkpoint")."""
    present = set(note.rstrip("\n").split("\n"))
    extra = [
        line for line in lines.split("\n") if line.startswith(_EM_DASH) and line not in present
    ]
    return note + "".join(line + "\n" for line in dict.fromkeys(extra))


class _Named(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def key(self) -> NoteKey: ...


class QuorumNotMet(LedgerError):
    """A log checkpoint below the trust store's witness quorum: a negative result (exit 1)."""

    exit_code = 1
    code = WITNESS_QUORUM_NOT_MET


@dataclass(frozen=True)
class WitnessPolicy:
    """The witnesses a client trusts (``(name, cosigner key)``) and how many of them must have
    cosigned a checkpoint; ``quorum`` None: no cosignature is required (a log without
    witnesses is accepted as before)."""

    witnesses: tuple[tuple[str, NoteKey], ...] = ()
    quorum: int | None = None

    @classmethod
    def of(cls, witnesses: Iterable[_Named], quorum: int | None) -> WitnessPolicy:
        """From a trust store's ``witnesses`` (each with a ``name`` and a ``key``) and
        ``witness_quorum``."""
        return cls(tuple((w.name, w.key) for w in witnesses), quorum)

    def problem(self, note: str) -> tuple[str, str] | None:
        """``(WITNESS_QUORUM_NOT_MET, why)`` or None (:func:`quorum_problem`)."""
        return quorum_problem(note, self.witnesses, self.quorum)

    def require(self, note: str) -> None:
        """Raise :class:`QuorumNotMet` when ``note`` is below the quorum."""
        problem = self.problem(note)
        if problem is not None:
            raise QuorumNotMet(
                f"{problem[0]}: {problem[1]}",
                hint="the log may be showing you a tree its witnesses never saw (a split view);"
                " try again later, and tell the log's operator if it persists",
            )
