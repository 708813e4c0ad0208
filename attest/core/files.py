"""Reading a file a user named: one place for every way that can fail, and one wording.

Every input file (a certificate, a trust store, a spec, a policy, a key, a probe bundle, a
JSON document) is read through :func:`read_bytes_checked` or :func:`read_text_checked`, so
that a missing file, a directory, an unreadable file, a file over its size limit or text that
is not UTF-8 is the same error everywhere: the class the caller names (an
:class:`~attest.errors.AttestError` subclass), a message naming what the file is for and its
path, and a hint where one helps. The read is bounded (``max_bytes + 1`` bytes at most, so a
huge file or an endless device is never read whole). Standard library only: the verifier
loads it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from attest.core.text import safe_text
from attest.errors import AttestError, InputError

__all__ = ["read_bytes_checked", "read_text_checked"]

_MISSING_HINT = "check the path"
# Regular files only: opened without blocking (a FIFO would wait for a writer), then refused.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BINARY = getattr(os, "O_BINARY", 0)


_PIECE = 1 << 20


def _read_at_most(fh: BinaryIO, limit: int, size: int | None) -> bytes:
    """Up to ``limit`` bytes of ``fh``. ``BufferedReader.read(n)`` allocates ``n`` bytes before
    it reads, so one read of the limit would cost the limit (512 MiB for an archive of 2 MB):
    a regular file is read as its size plus one byte (to see one that grew), then in pieces."""
    parts: list[bytes] = []
    left = limit
    step = min(left, size + 1) if size is not None else min(left, _PIECE)
    while left > 0:
        piece = fh.read(min(left, step))
        if not piece:
            break
        parts.append(piece)
        left -= len(piece)
        step = _PIECE
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_bytes_checked(
    path: str | Path,
    *,
    what: str,
    max_bytes: int,
    error: type[AttestError] = InputError,
    missing_hint: str | None = _MISSING_HINT,
    regular_only: bool = False,
    too_large: Callable[[], Exception] | None = None,
) -> bytes:
    """The bytes of ``path``, or an ``error`` naming the file as ``what`` (e.g. "trust store").

    ``missing_hint`` is the hint for a file that does not exist. ``regular_only`` refuses
    anything but a regular file (a FIFO, a device) before reading from it; otherwise a pipe
    such as ``/dev/stdin`` is read too, still bounded. ``too_large`` makes the exception for a
    file over ``max_bytes`` (default: ``error`` with the size and the limit).
    """
    p = Path(path)
    size: int | None = None  # a regular file's size, known before reading
    data = b""
    try:
        fd = os.open(p, os.O_RDONLY | _BINARY | (_NONBLOCK if regular_only else 0))
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError
            if stat.S_ISREG(info.st_mode):
                size = info.st_size
            elif regular_only:
                raise error(f"{what} {p} is not a regular file")
            if size is None or size <= max_bytes:
                data = _read_at_most(fh, max_bytes + 1, size)
    except FileNotFoundError:
        raise error(f"{what} {p} does not exist", hint=missing_hint) from None
    except IsADirectoryError:
        raise error(f"{what} {p} is a directory, expected a file") from None
    except PermissionError:
        raise error(f"{what} {p} is not readable (permission denied)") from None
    except OSError as exc:
        raise error(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    except ValueError:  # a NUL or a character the file system cannot encode in the name
        raise error(f"{what} {safe_text(p)} is not a usable file name") from None
    if (size is not None and size > max_bytes) or len(data) > max_bytes:
        if too_large is not None:
            raise too_large()
        shown = f"is {size} bytes," if size is not None and size > max_bytes else "is"
        raise error(f"{what} {p} {shown} over the {max_bytes}-byte limit")
    return data


def read_text_checked(
    path: str | Path,
    *,
    what: str,
    max_bytes: int,
    error: type[AttestError] = InputError,
    missing_hint: str | None = _MISSING_HINT,
) -> str:
    """The UTF-8 text of ``path`` (read as :func:`read_bytes_checked` reads it); text that is
    not UTF-8 is an ``error`` too."""
    data = read_bytes_checked(
        path, what=what, max_bytes=max_bytes, error=error, missing_hint=missing_hint
    )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {Path(path)} is not UTF-8 text (byte {exc.start})") from None
