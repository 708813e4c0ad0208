"""The witness's durable record of the latest checkpoint it cosigned of one log: a file of two
fixed-size slots, each new record written in place into the slot the previous one is not in,
then ``fdatasync`` before the witness answers.

Why not a temporary file renamed into place (as every other file here is written): a rename is
a metadata change, and making it durable takes an fsync of the file, the rename, and an fsync
of the directory, which commits the file system's journal. On the 2-vCPU VM that cost 0.5-9 ms
a cosignature (docs/benchmarks.md, ledger service, "CPU per write and the witness round"),
and every witnessed write waits for it. A write in place into blocks written once when the file
was made changes no metadata the data needs, so ``fdatasync`` flushes the data alone (0.1-4 ms
on the same disk, measured in the same minute). Hand-written: no library offers this record.

Layout: ``SLOTS`` slots of :data:`SLOT_BYTES`; slot ``seq % 2`` holds record ``seq``:
``MAGIC`` (8 bytes), ``seq`` (8 bytes, big-endian), the note's length (4 bytes), the SHA-256 of
those 20 bytes and the note (32 bytes), the note (UTF-8). The newest slot whose digest matches
is the state. A write torn by a crash or power loss damages only the slot being written, whose
digest then fails, and the previous record stands: the witness had not answered for the torn
one. No valid slot in an existing file is an unreadable state, never an empty one (the witness
would then cosign a rolled-back log).
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

from attest.core.io import atomic_write_bytes

__all__ = [
    "MAGIC",
    "SLOT_BYTES",
    "SlotRecord",
    "StateUnreadable",
    "fsync_directory",
    "read_slots",
    "write_slot",
]

MAGIC = b"atwslot1"
_HEAD = struct.Struct(">8sQI32s")  # magic, seq, length, digest
_DIGEST = slice(20, 52)  # where the digest sits in a packed record
SLOT_BYTES = (1 << 20) + 4096  # a note is at most an add-checkpoint request (1 MiB), + header
SLOTS = 2

SlotRecord = tuple[int, bytes, bytes]  # seq, digest, note


class StateUnreadable(Exception):
    """The file exists but holds no valid record (or cannot be read)."""


def _digest(seq: int, note: bytes) -> bytes:
    return hashlib.sha256(MAGIC + struct.pack(">QI", seq, len(note)) + note).digest()


def _record(seq: int, note: bytes) -> bytes:
    if _HEAD.size + len(note) > SLOT_BYTES:
        raise ValueError(f"a witness state record holds at most {SLOT_BYTES - _HEAD.size} bytes")
    return _HEAD.pack(MAGIC, seq, len(note), _digest(seq, note)) + note


def read_slots(path: Path) -> SlotRecord | None:
    """The newest valid record of ``path``; None when the file does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateUnreadable(str(exc)) from None
    try:
        best: SlotRecord | None = None
        for slot in range(SLOTS):
            head = os.pread(fd, _HEAD.size, slot * SLOT_BYTES)
            if len(head) != _HEAD.size:
                continue
            magic, seq, length, digest = _HEAD.unpack(head)
            if magic != MAGIC or seq % SLOTS != slot or length > SLOT_BYTES - _HEAD.size:
                continue
            if best is not None and seq <= best[0]:
                continue
            note = os.pread(fd, length, slot * SLOT_BYTES + _HEAD.size)
            if len(note) == length and _digest(seq, note) == digest:
                best = (seq, digest, note)
    except OSError as exc:
        raise StateUnreadable(str(exc)) from None
    finally:
        os.close(fd)
    if best is None:
        raise StateUnreadable("no intact record in either slot")
    return best


def write_slot(path: Path, seq: int, note: bytes) -> bytes:
    """Store record ``seq`` (the previous one plus one; 1 for a new file) durably before
    returning its digest: in place and ``fdatasync``-ed into an existing file; a new file is made whole
    (every slot's blocks written), fsynced and renamed into place, its folder fsynced."""
    record = _record(seq, note)
    slot = seq % SLOTS
    if seq == 1 or not path.exists():
        content = bytearray(SLOTS * SLOT_BYTES)
        content[slot * SLOT_BYTES : slot * SLOT_BYTES + len(record)] = record
        atomic_write_bytes(path, bytes(content), mode=0o600)
        fsync_directory(path.parent)
        return record[_DIGEST]
    fd = os.open(path, os.O_WRONLY)
    try:
        if os.fstat(fd).st_size < SLOTS * SLOT_BYTES:
            raise OSError(f"{path} is shorter than its {SLOTS} slots")
        os.pwrite(fd, record, slot * SLOT_BYTES)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    return record[_DIGEST]


def fsync_directory(folder: Path) -> None:
    """Make a rename (or unlink) in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
