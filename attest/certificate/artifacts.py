"""Hashing artifacts the way both the certifier and the verifier see them.

One walk for both sides, so a directory certified on the release machine is read the same way
on the server: regular files only, named by their relative POSIX path, symbolic links and
special files refused, never followed below the directory given (each file opened with
``O_NOFOLLOW`` below its folder's descriptor and checked to be the regular file of the size
listed), and hashed at disk speed, a directory's files in parallel
(:mod:`attest.certificate.folder_hash`; ``hashlib`` releases the GIL; no Python-level per-byte
work). A file whose contents the caller will use is read into memory once and hashed from
there (``keep``), so what is used is what was hashed.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from attest.certificate.format import SUBJECT_NAME_PATTERN
from attest.errors import InputError

__all__ = [
    "ArtifactSpec",
    "DirectoryListing",
    "artifact_name_and_path",
    "hash_directory",
    "hash_regular_file",
    "read_regular_file",
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


def _digest_fd(fd: int, keep: bool) -> tuple[str, bytes | None]:
    with os.fdopen(fd, "rb", closefd=True) as fh:
        if keep:  # the caller will use these bytes: hash exactly what it gets
            data = fh.read()
            return hashlib.sha256(data).hexdigest(), data
        if hasattr(hashlib, "file_digest"):  # Python >= 3.11
            return hashlib.file_digest(fh, "sha256").hexdigest(), None
        digest = hashlib.sha256()
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
        return digest.hexdigest(), None


def read_regular_file(
    path: str | Path, *, dir_fd: int | None = None, follow: bool = True, keep: bool = False
) -> tuple[str, bytes | None] | None:
    """(sha256 hex, the bytes hashed when ``keep``) of a regular file, or ``None`` when ``path``
    is not one (a FIFO, a device: opened non-blocking and never read).

    With ``keep`` the file is read once into memory and the digest is of those bytes, so a
    caller that goes on to use the file (the probe runs the model) uses exactly what was
    hashed, whatever happens to the path afterwards. Raises ``OSError`` when it cannot be
    opened, ``ValueError`` for a path the OS cannot represent (NUL, unencodable text).
    """
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return _digest_fd(fd, keep)


def hash_regular_file(
    path: str | Path, *, dir_fd: int | None = None, follow: bool = True
) -> str | None:
    """sha256 hex of a regular file, or ``None`` when ``path`` is not one (see
    :func:`read_regular_file`)."""
    found = read_regular_file(path, dir_fd=dir_fd, follow=follow)
    return None if found is None else found[0]


@dataclass
class DirectoryListing:
    """What :func:`hash_directory` found under a directory (relative POSIX names)."""

    digests: dict[str, str] = field(default_factory=dict)  # hashed files
    unexpected: list[str] = field(default_factory=list)  # regular files not wanted
    refused: list[tuple[str, str]] = field(default_factory=list)  # (name, why): links, specials
    contents: dict[str, bytes] = field(default_factory=dict)  # bytes hashed, for names kept


def hash_directory(
    root: str | Path,
    *,
    wanted: set[str] | None = None,
    keep: Callable[[str], bool] | None = None,
) -> DirectoryListing:
    """Hash the regular files under ``root`` (all of them, or only the ``wanted`` names);
    the bytes of the names for which ``keep(name)`` is true are kept in ``contents``.

    The walk and the hashing are :mod:`attest.certificate.folder_hash`'s (the folder manifests'
    too): ``root`` itself may be a symbolic link the operator chose, nothing below it is
    followed, the walk is bounded (``folder_hash.MAX_DEPTH`` levels, ``MAX_ENTRIES`` names), and
    the files are hashed in parallel on every core, each whole (its sha256 is its subject's
    digest). A file that changed size or kind between the walk and its hashing is refused.
    """
    from attest.certificate.folder_hash import hash_ranges, list_folder, read_kept

    found = list_folder(root)
    listing = DirectoryListing(refused=list(found.refused))
    names = [rel for rel in sorted(found.sizes) if wanted is None or rel in wanted]
    listing.unexpected = [
        rel for rel in sorted(found.sizes) if wanted is not None and rel not in wanted
    ]
    kept, failed = read_kept(root, names, keep or (lambda _rel: False))
    ranges = [(rel, 0, found.sizes[rel]) for rel in names if rel not in kept]
    digests = hash_ranges(root, ranges, sizes=found.sizes)
    for rel in names:
        data = kept.get(rel)
        if data is not None and len(data) == found.sizes[rel]:
            listing.digests[rel] = hashlib.sha256(data).hexdigest()
            listing.contents[rel] = data
            continue
        digest = None if rel in failed or data is not None else digests[(rel, 0, found.sizes[rel])]
        if digest is None:  # replaced, grown or shrunk between the walk and the read
            listing.refused.append((rel, "not the regular file listed (it changed)"))
        else:
            listing.digests[rel] = digest
    return listing
