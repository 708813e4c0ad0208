"""Walking a model folder and hashing its files in parallel, at disk speed.

Both sides use this module: certify lists and hashes the folder it binds
(:mod:`attest.certificate.folder_manifest`), the server's verifier hashes the folder it is
handed with the same walk and the same byte ranges, so the two agree by construction.

Why byte ranges (shards) and threads: SHA-256 is sequential, so one file's digest cannot be
computed on several cores; a folder holding one 4 GiB file would verify at one core's speed.
The manifest therefore binds per-shard digests (OpenSSF model-signing's ``shards``
serialization: ``path:start:end`` -> sha256 of those bytes), and every shard of every file is
hashed on its own. Threads suffice: ``hashlib`` releases the GIL while it hashes a buffer of
more than 2 KiB and ``os.preadv`` releases it while it reads, so N threads keep N cores busy
with no process start-up or pickling. Each thread reads its shard with large positional reads
into one reusable buffer (no allocation per read, no whole-file read) after
``posix_fadvise(SEQUENTIAL)``; memory is ``workers x CHUNK`` however large the files.

The walk never follows a symbolic link below the folder: directories are opened with
``O_NOFOLLOW`` one component at a time from the folder's own descriptor (each hashing thread
does the same for its file), so a link swapped in after the walk is refused, not followed out
of the folder.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CHUNK",
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "FolderListing",
    "Range",
    "default_workers",
    "hash_ranges",
    "is_ignored",
    "list_folder",
    "open_beneath",
    "read_kept",
    "shard_ranges",
]

CHUNK = 4 << 20  # bytes per read: large enough for full-speed reads, small enough per thread
MAX_WORKERS = 32  # threads; with CHUNK this bounds the buffers to 128 MiB on any machine
MAX_DEPTH = 64  # directory levels below the folder
MAX_ENTRIES = 100_000  # names looked at under one folder

Range = tuple[str, int, int]  # (relative POSIX path, start, end): bytes [start, end) of a file

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC | _NOFOLLOW
_FILE_FLAGS = os.O_RDONLY | _CLOEXEC | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0)


def default_workers() -> int:
    """Threads to hash with: every core this process may run on (at most 32)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def is_ignored(rel: str, ignore: Iterable[str]) -> bool:
    """Whether ``rel`` is an ignored path or lies below one (model-signing's rule:
    ``path.is_relative_to(ignored)``)."""
    return any(rel == p or rel.startswith(p + "/") for p in ignore)


@dataclass
class FolderListing:
    """What :func:`list_folder` found (relative POSIX names)."""

    sizes: dict[str, int] = field(default_factory=dict)  # regular files -> size in bytes
    refused: list[tuple[str, str]] = field(default_factory=list)  # (name, why): links, specials


def list_folder(root: str | Path, ignore: Iterable[str] = ()) -> FolderListing:
    """The regular files under ``root`` and their sizes, leaving out ``ignore``d paths (not
    descended into); links and special files are listed as refused, never followed.

    ``root`` itself may be a symbolic link the operator chose. The walk is iterative and
    bounded: folders deeper than :data:`MAX_DEPTH` and names beyond :data:`MAX_ENTRIES` are
    refused, not read. Raises ``OSError`` when ``root`` cannot be opened.
    """
    ignored = tuple(ignore)
    listing = FolderListing()
    top_fd = os.open(Path(root).resolve(), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    stack: list[tuple[int, str, int]] = [(top_fd, "", 0)]  # (open folder, its name, depth)
    seen = 0
    try:
        while stack:
            dir_fd, rel_dir, depth = stack.pop()
            try:
                for entry in sorted(os.listdir(dir_fd)):
                    rel = f"{rel_dir}/{entry}" if rel_dir else entry
                    if is_ignored(rel, ignored):
                        continue
                    seen += 1
                    if seen > MAX_ENTRIES:
                        listing.refused.append((rel, f"beyond the first {MAX_ENTRIES} names"))
                        return listing
                    info = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
                    if stat.S_ISDIR(info.st_mode):
                        if depth + 1 > MAX_DEPTH:
                            listing.refused.append((rel, f"nested deeper than {MAX_DEPTH} levels"))
                        else:
                            stack.append(
                                (os.open(entry, _DIR_FLAGS, dir_fd=dir_fd), rel, depth + 1)
                            )
                    elif stat.S_ISLNK(info.st_mode):
                        listing.refused.append((rel, "a symbolic link"))
                    elif not stat.S_ISREG(info.st_mode):
                        listing.refused.append((rel, "not a regular file"))
                    else:
                        listing.sizes[rel] = info.st_size
            finally:
                os.close(dir_fd)
    finally:
        for dir_fd, _, _ in stack:
            os.close(dir_fd)
    return listing


def shard_ranges(rel: str, size: int, shard_size: int | None) -> list[Range]:
    """The byte ranges of a file of ``size`` bytes: shards of ``shard_size`` (the last one
    shorter; none for an empty file, as model-signing), or the whole file as one range when
    ``shard_size`` is None (model-signing's ``files`` serialization; an empty file included)."""
    if shard_size is None:
        return [(rel, 0, size)]
    return [(rel, start, min(start + shard_size, size)) for start in range(0, size, shard_size)]


def open_beneath(root_fd: int, rel: str) -> int:
    """Open the regular file ``rel`` below the folder ``root_fd`` without following any link
    (each component opened with ``O_NOFOLLOW``); raises ``OSError``, or ``IsADirectoryError``
    style ``OSError`` for something that is not a regular file."""
    parts = rel.split("/")
    dir_fd = root_fd
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            if dir_fd != root_fd:
                os.close(dir_fd)
            dir_fd = next_fd
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
    finally:
        if dir_fd != root_fd:
            os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{rel} is not a regular file")
    return fd


def _hash_fd_range(fd: int, start: int, end: int, buffer: bytearray) -> str | None:
    """sha256 hex of bytes [start, end) of ``fd``; None when the file is shorter (it changed)."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_SEQUENTIAL)
    digest = hashlib.sha256()
    view = memoryview(buffer)
    offset = start
    while offset < end:
        want = min(len(buffer), end - offset)
        got = os.preadv(fd, [view[:want]], offset)
        if got <= 0:
            return None
        digest.update(view[:got])  # > 2 KiB: hashed with the GIL released
        offset += got
    return digest.hexdigest()


def hash_ranges(
    root: str | Path,
    ranges: list[Range],
    *,
    workers: int | None = None,
    kept: dict[str, bytes] | None = None,
    sizes: dict[str, int] | None = None,
) -> dict[Range, str | None]:
    """sha256 hex of each byte range of the files under ``root``, hashed in parallel.

    A range whose file cannot be opened as a regular file below ``root``, or has become
    shorter, maps to None (the caller reports it). Ranges of a file in ``kept`` (name ->
    bytes already read) are hashed from those bytes, so what the caller uses is what was
    hashed. With ``sizes`` (name -> size when listed), a range whose file no longer has that
    size when it is hashed maps to None too: a file that grew after the walk is not passed on
    the strength of its first bytes. The largest ranges go first so the last ones to finish
    are short.
    """
    kept = kept or {}
    count = min(workers or default_workers(), max(1, len(ranges)))
    root_fd = os.open(Path(root).resolve(), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    buffers: list[bytearray] = []

    def one(item: Range) -> str | None:
        rel, start, end = item
        if rel in kept:
            data = kept[rel]
            return None if len(data) < end else hashlib.sha256(data[start:end]).hexdigest()
        buffer = buffers.pop() if buffers else bytearray(min(CHUNK, max(end - start, 1)))
        try:
            fd = open_beneath(root_fd, rel)
        except (OSError, ValueError):
            return None
        try:
            digest = _hash_fd_range(fd, start, end, buffer)
            if sizes is not None and os.fstat(fd).st_size != sizes.get(rel):
                return None
            return digest
        except OSError:
            return None
        finally:
            os.close(fd)
            if len(buffer) == CHUNK:
                buffers.append(buffer)  # list.append/pop are atomic: reused across ranges

    from concurrent.futures import ThreadPoolExecutor  # only when hashing: not at every start

    order = sorted(ranges, key=lambda r: r[2] - r[1], reverse=True)
    try:
        if count == 1:
            results = [one(r) for r in order]
        else:
            with ThreadPoolExecutor(max_workers=count, thread_name_prefix="attest-hash") as pool:
                results = list(pool.map(one, order))
    finally:
        os.close(root_fd)
    return dict(zip(order, results, strict=True))


def read_kept(
    root: str | Path, names: Iterable[str], wanted: Callable[[str], bool]
) -> tuple[dict[str, bytes], list[str]]:
    """The bytes of the files the caller will use (``wanted``), each read once, whole, from
    below ``root``; and the names that could not be read as regular files."""
    kept: dict[str, bytes] = {}
    failed: list[str] = []
    root_fd = os.open(Path(root).resolve(), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        for rel in names:
            if not wanted(rel):
                continue
            try:
                fd = open_beneath(root_fd, rel)
            except (OSError, ValueError):
                failed.append(rel)
                continue
            with os.fdopen(fd, "rb", closefd=True) as fh:
                kept[rel] = fh.read()
    finally:
        os.close(root_fd)
    return kept, failed
