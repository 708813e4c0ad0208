"""The witness: C2SP tlog-witness ``add-checkpoint`` without the HTTP layer.

A request is an old size line (``old N``), at most 63 consistency proof lines (base64 hashes),
an empty line and a checkpoint signed by a log the witness knows (``logs.yaml``). The witness
answers, in the spec's order: 400 for a malformed request or an old size above the
checkpoint's, 404 for an unknown origin, 403 when no signature of the log's key verifies, 409
(body: the size it last cosigned, ``text/x.tlog.size``) when the old size is not that size,
422 for a size-0 checkpoint without the empty root, a proof with old size 0, a consistency
proof that does not verify, or the same size with another root. Otherwise it stores the
checkpoint (:mod:`attest.ledger.witness.state`: a two-slot file written in place,
``fdatasync``-ed) and only then answers 200 with its
tlog-cosignature/v1 line. The check and the store happen under one lock (a thread lock and an
``flock`` on the state directory, so a one-shot ``cosign`` and a running witness never race).
Every refusal of a known log's validly signed checkpoint is logged: it may be evidence of a
split view.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from attest.certificate.signing import PrivateKey
from attest.errors import LedgerError
from attest.ledger.checkpoint import Checkpoint, CheckpointError, open_checkpoint, split_note
from attest.ledger.merkle import EMPTY_ROOT, HASH_SIZE, verify_consistency
from attest.ledger.witness.cosignature import cosign, merge_signatures, witness_key
from attest.ledger.witness.logs import KnownLog
from attest.ledger.witness.state import (
    StateUnreadable,
    fsync_directory,
    read_slots,
    write_slot,
)

__all__ = [
    "MAX_PROOF_LINES",
    "SIZE_CONTENT_TYPE",
    "Witness",
    "WitnessAnswer",
    "add_checkpoint_body",
    "origin_hash",
]

LOG = logging.getLogger("attest.ledger.witness")
MAX_PROOF_LINES = 63
MAX_REQUEST_BYTES = 1 << 20
SIZE_CONTENT_TYPE = "text/x.tlog.size"
TEXT = "text/plain; charset=utf-8"
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}")


@dataclass(frozen=True)
class WitnessAnswer:
    """An HTTP answer: status, body text and its content type."""

    status: int
    body: str
    content_type: str = TEXT


def origin_hash(origin: str) -> str:
    """The monitoring path's name of a log: lowercase hex SHA-256 of its origin."""
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()


def add_checkpoint_body(old_size: int, proof: Sequence[bytes], note: str) -> bytes:
    """An add-checkpoint request body (what a log sends)."""
    lines = [f"old {old_size}", *(base64.b64encode(h).decode("ascii") for h in proof)]
    return ("".join(line + "\n" for line in lines) + "\n" + note).encode("utf-8")


class _Refused(Exception):
    def __init__(self, answer: WitnessAnswer, logged: str | None = None) -> None:
        super().__init__(answer.body)
        self.answer, self.logged = answer, logged


def _parse(body: bytes) -> tuple[int, list[bytes], str]:
    def bad(why: str) -> _Refused:
        return _Refused(WitnessAnswer(400, f"malformed add-checkpoint request: {why}\n"))

    if len(body) > MAX_REQUEST_BYTES:
        raise bad(f"over {MAX_REQUEST_BYTES} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("not UTF-8") from None
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise bad("no empty line before the checkpoint")
    lines = head.split("\n")
    old_line, proof_lines = lines[0], lines[1:]
    if not old_line.startswith("old ") or not _DECIMAL.fullmatch(old_line[4:]):
        raise bad("the first line must be 'old <size>'")
    if len(proof_lines) > MAX_PROOF_LINES:
        raise bad(f"more than {MAX_PROOF_LINES} consistency proof lines")
    proof = []
    for line in proof_lines:
        try:
            value = base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError):
            value = b""
        if len(value) != HASH_SIZE:
            raise bad("a consistency proof line is not a base64 SHA-256 hash")
        proof.append(value)
    return int(old_line[4:]), proof, note


class Witness:
    """One witness key cosigning the logs of ``logs.yaml``, its state in ``state_dir``."""

    def __init__(
        self, key: PrivateKey, name: str, logs: dict[str, KnownLog], state_dir: Path
    ) -> None:
        self.key, self.name, self.logs = key, name, logs
        self.vkey = witness_key(name, key)
        self.state_dir = Path(state_dir)
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(
                f"cannot create the witness state folder {state_dir}: {exc}"
            ) from None
        self._lock = threading.Lock()
        # origin -> (the stored record's identity; its checkpoint and note): the stored
        # checkpoint opened once, not re-verified on every round. The record is read on every
        # request (two small reads): one written by anyone else (a one-shot cosign) has
        # another sequence number and digest, and is verified again.
        self._cache: dict[str, tuple[tuple[object, ...], Checkpoint, str]] = {}
        self._seq: dict[str, int] = {}  # origin -> the stored record's sequence number

    # -- state ---------------------------------------------------------------------------------

    def state_path(self, origin: str) -> Path:
        return self.state_dir / f"{origin_hash(origin)}.state"

    def legacy_path(self, origin: str) -> Path:
        """Where a witness before the slot file kept a log's state (a note, renamed into
        place); read when there is no slot file yet, removed once one is written."""
        return self.state_dir / f"{origin_hash(origin)}.checkpoint"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock, open(self.state_dir / ".lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def stored(self, log: KnownLog) -> tuple[Checkpoint | None, str | None]:
        """The latest checkpoint this witness cosigned of ``log`` and its note (None, None
        before the first)."""
        path = self.state_path(log.origin)
        try:
            record = read_slots(path)
        except StateUnreadable as exc:
            raise self._unreadable(log, path, exc) from None
        if record is None:
            self._seq[log.origin] = 0
            return self._stored_legacy(log)
        seq, digest, data = record
        self._seq[log.origin] = seq
        return self._opened(log, path, ("slots", seq, digest), lambda: data.decode("utf-8"))

    def _stored_legacy(self, log: KnownLog) -> tuple[Checkpoint | None, str | None]:
        path = self.legacy_path(log.origin)
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise self._unreadable(log, path, exc) from None
        identity = ("legacy", stat.st_ino, stat.st_mtime_ns, stat.st_size)
        return self._opened(log, path, identity, lambda: path.read_text(encoding="utf-8"))

    def _opened(
        self, log: KnownLog, path: Path, identity: tuple[object, ...], read: Callable[[], str]
    ) -> tuple[Checkpoint, str]:
        cached = self._cache.get(log.origin)
        if cached is not None and cached[0] == identity:
            return cached[1], cached[2]
        try:
            note = read()
            checkpoint = open_checkpoint(note, log.key.public_key, key_name=log.origin)
        except (OSError, UnicodeDecodeError, CheckpointError) as exc:
            raise self._unreadable(log, path, exc) from None
        self._cache[log.origin] = (identity, checkpoint, note)
        return checkpoint, note

    @staticmethod
    def _unreadable(log: KnownLog, path: Path, exc: Exception) -> LedgerError:
        return LedgerError(
            f"the witness's stored checkpoint of {log.origin!r} ({path}) cannot be read: {exc}",
            hint="restore the state folder from its backup; never delete it (the witness"
            " would then cosign a rolled-back log)",
        )

    def _persist(self, origin: str, note: str, checkpoint: Checkpoint) -> None:
        """Store ``note`` (of ``checkpoint``, verified by the caller) as the log's state,
        durably, before the answer goes out (called under the lock, after :meth:`stored` read
        the current record); it is kept opened for the next request."""
        seq = self._seq.get(origin, 0) + 1
        path = self.state_path(origin)
        try:
            digest = write_slot(path, seq, note.encode("utf-8"))
            legacy = self.legacy_path(origin)
            if seq == 1 and legacy.exists():  # superseded: the slot file is read from now on
                legacy.unlink()
                fsync_directory(legacy.parent)
        except (OSError, ValueError) as exc:
            raise LedgerError(f"cannot store the witness's state in {path}: {exc}") from None
        self._seq[origin] = seq
        self._cache[origin] = (("slots", seq, digest), checkpoint, note)

    def latest(self, hashed_origin: str) -> WitnessAnswer:
        """GET ``<origin hash>/checkpoint``: the latest cosigned checkpoint of a log."""
        for log in self.logs.values():
            if origin_hash(log.origin) == hashed_origin:
                _, note = self.stored(log)
                if note is not None:
                    return WitnessAnswer(200, note)
        return WitnessAnswer(404, "this witness has cosigned no checkpoint of that log\n")

    # -- add-checkpoint ------------------------------------------------------------------------

    def add_checkpoint(self, body: bytes) -> WitnessAnswer:
        """Answer one add-checkpoint request (module docstring)."""
        try:
            return self._add(body)
        except _Refused as refused:
            if refused.logged:
                LOG.warning("refused: %s", refused.logged)
            return refused.answer

    def _add(self, body: bytes) -> WitnessAnswer:
        old_size, proof, note = _parse(body)
        try:
            text, _ = split_note(note)
            checkpoint = Checkpoint.parse_body(text)
        except CheckpointError as exc:
            raise _Refused(WitnessAnswer(400, f"malformed checkpoint: {exc.message}\n")) from None
        log = self.logs.get(checkpoint.origin)
        if log is None:
            raise _Refused(WitnessAnswer(404, "this witness does not know that log's origin\n"))
        try:
            open_checkpoint(note, log.key.public_key, key_name=log.origin)
        except CheckpointError as exc:
            status = 400 if exc.code == "MALFORMED" else 403
            raise _Refused(WitnessAnswer(status, f"{exc.message}\n")) from None
        where = f"{log.origin} checkpoint of size {checkpoint.size}"
        if old_size > checkpoint.size:
            raise _Refused(
                WitnessAnswer(400, f"old size {old_size} is above the checkpoint's size\n"),
                f"{where}: old size {old_size} is above it",
            )
        with self._locked():
            stored, _ = self.stored(log)
            stored_size = stored.size if stored is not None else 0
            if old_size != stored_size:
                raise _Refused(
                    WitnessAnswer(409, f"{stored_size}\n", SIZE_CONTENT_TYPE),
                    f"{where}: the log says it last got a cosignature at size {old_size}, this"
                    f" witness cosigned size {stored_size}",
                )
            self._check_consistent(checkpoint, stored, old_size, proof, where)
            line = cosign(text, self.key, self.name)
            self._persist(log.origin, merge_signatures(note, line), checkpoint)
        LOG.info("cosigned %s", where)
        return WitnessAnswer(200, line)

    @staticmethod
    def _check_consistent(
        checkpoint: Checkpoint,
        stored: Checkpoint | None,
        old_size: int,
        proof: list[bytes],
        where: str,
    ) -> None:
        def unprocessable(why: str) -> _Refused:
            return _Refused(WitnessAnswer(422, why + "\n"), f"{where}: {why}")

        if checkpoint.size == 0 and checkpoint.root != EMPTY_ROOT:
            raise unprocessable("a checkpoint of size 0 must carry the empty tree's root")
        if old_size == 0:
            if proof:
                raise unprocessable("old size 0 takes no consistency proof")
            return
        assert stored is not None
        if old_size == checkpoint.size:
            if checkpoint.root != stored.root:
                raise unprocessable(
                    f"another root for size {old_size} than the checkpoint this witness"
                    " cosigned: the log shows two different trees of the same size (a split view)"
                )
            return
        if not verify_consistency(old_size, checkpoint.size, stored.root, checkpoint.root, proof):
            raise unprocessable(
                f"the consistency proof from size {old_size} (the tree this witness cosigned)"
                f" does not verify: the log was forked or rewritten"
            )
