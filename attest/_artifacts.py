"""Hashing artifacts the way both the certifier and the verifier see them.

One walk for both sides, so a directory certified on the release machine is read the same way
on the server: regular files only, named by their relative POSIX path, symbolic links and
special files refused, never followed below the directory given, each file opened once
(no check-then-open race) and hashed at disk speed (``hashlib.file_digest`` releases the GIL;
no Python-level per-byte work).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from attest._certificate_format import SUBJECT_NAME_PATTERN
from attest.errors import InputError

__all__ = [
    "ArtifactSpec",
    "DirectoryListing",
    "artifact_name_and_path",
    "hash_directory",
    "hash_regular_file",
]

ArtifactSpec = str | os.PathLike[str] | tuple[str, str | os.PathLike[str]]
_SUBJECT_NAME = re.compile(SUBJECT_NAME_PATTERN)


def artifact_name_and_path(spec: ArtifactSpec) -> tuple[str, Path]:
    """The subject name and path of an artifact argument.

    ``NAME=PATH`` (when no file of that literal name exists) binds a file to a subject name;
    a bare path is named by its file name; a ``(name, path)`` pair is taken as is.
    """
    if isinstance(spec, tuple):
        name, path = spec[0], Path(spec[1])
    else:
        text = os.fspath(spec)
        if "=" in text and not os.path.lexists(text):
            name, _, raw = text.partition("=")
            path = Path(raw)
        else:
            path = Path(text)
            name = path.name or path.resolve().name
    if not _SUBJECT_NAME.fullmatch(name):
        raise InputError(
            f"artifact name {name!r} is not a valid subject name",
            hint="name it explicitly: --artifact NAME=PATH (a relative path, no '..')",
        )
    return name, path


def _digest_fd(fd: int) -> str:
    with os.fdopen(fd, "rb", closefd=True) as fh:
        if hasattr(hashlib, "file_digest"):  # Python >= 3.11
            return hashlib.file_digest(fh, "sha256").hexdigest()
        digest = hashlib.sha256()
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
        return digest.hexdigest()


def hash_regular_file(
    path: str | Path, *, dir_fd: int | None = None, follow: bool = True
) -> str | None:
    """sha256 hex of a regular file, or ``None`` when ``path`` is not one (a FIFO, a device:
    opened non-blocking and never read). Raises ``OSError`` when it cannot be opened."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return _digest_fd(fd)


@dataclass
class DirectoryListing:
    """What :func:`hash_directory` found under a directory (relative POSIX names)."""

    digests: dict[str, str] = field(default_factory=dict)  # hashed files
    unexpected: list[str] = field(default_factory=list)  # regular files not wanted
    refused: list[tuple[str, str]] = field(default_factory=list)  # (name, why): links, specials


def hash_directory(root: str | Path, *, wanted: set[str] | None = None) -> DirectoryListing:
    """Hash the regular files under ``root`` (all of them, or only the ``wanted`` names).

    ``root`` itself may be a symbolic link the operator chose; nothing below it is followed.
    """
    listing = DirectoryListing()
    top = Path(root).resolve()
    for dirpath, dirnames, filenames, dirfd in os.fwalk(top, follow_symlinks=False):
        rel_dir = Path(dirpath).relative_to(top).as_posix()
        for entry in sorted(dirnames + filenames):
            rel = entry if rel_dir == "." else f"{rel_dir}/{entry}"
            mode = os.stat(entry, dir_fd=dirfd, follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                continue
            if stat.S_ISLNK(mode):
                listing.refused.append((rel, "a symbolic link"))
            elif not stat.S_ISREG(mode):
                listing.refused.append((rel, "not a regular file"))
            elif wanted is not None and rel not in wanted:
                listing.unexpected.append(rel)
            else:
                digest = hash_regular_file(entry, dir_fd=dirfd, follow=False)
                if digest is None:  # replaced between the stat and the open
                    listing.refused.append((rel, "not a regular file"))
                else:
                    listing.digests[rel] = digest
    return listing
