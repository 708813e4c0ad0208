"""Reading an audit archive's members with bounded memory (``attest verify-archive``).

A zip says how large each member unpacks to, but nothing holds a hostile zip to what it says:
a member declaring 10 bytes can inflate to gigabytes, and :meth:`zipfile.ZipFile.read` asks
zlib for up to 1 GiB of output in one call before cutting it to the declared size. So every
member is streamed (:meth:`zipfile.ZipFile.open` read in :data:`CHUNK` pieces) and the bytes it
actually produces are counted against a per-member and a total cap; the declared sizes are
only a first, cheap refusal. Compression methods other than stored and deflate (bzip2, LZMA:
zipfile decompresses those without an output limit), encrypted members, repeated names and
names that could escape a folder (zip slip) are refused before anything is decompressed.
Nested archives are never opened: a member is bytes.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import IO, Final

from attest.core.files import read_bytes_checked
from attest.errors import InputError

__all__ = [
    "CHUNK",
    "MAX_ARCHIVE_BYTES",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_UNPACKED_BYTES",
    "ArchiveFrameError",
    "read_capped",
    "read_members",
]

MAX_ARCHIVE_BYTES: Final = 512 * 1024 * 1024  # the zip file itself
MAX_MEMBER_BYTES = 256 * 1024 * 1024  # one member, unpacked (module attributes: tests lower them)
MAX_UNPACKED_BYTES = 512 * 1024 * 1024  # all members together, unpacked
MAX_MEMBERS: Final = 1024
CHUNK: Final = 64 * 1024
_METHODS: Final = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_HINT = "this is not an archive attest archive wrote; get the original from its custodian"


class ArchiveFrameError(Exception):
    """The zip itself is broken or not one attest writes (ARCHIVE_INVALID)."""


def read_capped(stream: IO[bytes], limit: int, what: str) -> bytes:
    """All of ``stream``, read in :data:`CHUNK` pieces; :class:`InputError` as soon as it has
    produced more than ``limit`` bytes (at most one chunk over the limit is ever held)."""
    parts: list[bytes] = []
    produced = 0
    while True:
        piece = stream.read(CHUNK)
        if not piece:
            return b"".join(parts)
        produced += len(piece)
        if produced > limit:
            raise InputError(
                f"{what} unpacks to more than {limit} bytes; refusing it (a zip bomb?)",
                hint=_HINT,
            )
        parts.append(piece)


def _check_infos(path: Path, infos: list[zipfile.ZipInfo]) -> None:
    if len(infos) > MAX_MEMBERS:
        raise InputError(f"{path} holds {len(infos)} files, over {MAX_MEMBERS}", hint=_HINT)
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        raise ArchiveFrameError("a file name appears twice")
    declared = 0
    for info in infos:
        name = info.filename
        if info.is_dir() or name.startswith("/") or "\\" in name or ".." in name.split("/"):
            raise ArchiveFrameError(f"member {name!r} is not a plain relative file name")
        if info.compress_type not in _METHODS:
            raise ArchiveFrameError(
                f"member {name!r} uses compression method {info.compress_type}; "
                f"only {' and '.join(_METHODS.values())} are read"
            )
        if info.flag_bits & 0x1:
            raise ArchiveFrameError(f"member {name!r} is encrypted")
        if info.file_size > MAX_MEMBER_BYTES:
            raise InputError(
                f"{path}: {name!r} declares {info.file_size} bytes, over the "
                f"{MAX_MEMBER_BYTES}-byte limit of one member",
                hint=_HINT,
            )
        declared += info.file_size
    if declared > MAX_UNPACKED_BYTES:
        raise InputError(
            f"{path} declares {declared} unpacked bytes, over the {MAX_UNPACKED_BYTES}-byte limit",
            hint=_HINT,
        )


def read_members(path: Path) -> dict[str, bytes]:
    """Every member of the zip at ``path`` by name, each read within the caps.

    :class:`InputError` (exit 2) for a zip over a cap, :class:`ArchiveFrameError` for one that is
    broken or holds what attest never writes."""
    data = read_bytes_checked(path, what="archive", max_bytes=MAX_ARCHIVE_BYTES)
    members: dict[str, bytes] = {}
    total = 0
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            _check_infos(path, infos)
            for info in infos:
                limit = min(MAX_MEMBER_BYTES, MAX_UNPACKED_BYTES - total)
                cap = "one member's" if limit == MAX_MEMBER_BYTES else "what is left of the total"
                with archive.open(info) as stream:
                    content = read_capped(stream, limit, f"{path}: {info.filename!r} ({cap} cap)")
                if len(content) != info.file_size:
                    raise ArchiveFrameError(
                        f"{info.filename!r} unpacks to {len(content)} bytes, "
                        f"not the {info.file_size} it declares"
                    )
                total += len(content)
                members[info.filename] = content
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError) as exc:
        raise ArchiveFrameError(f"{path} is not a readable zip archive: {exc}") from None
    except (NotImplementedError, RuntimeError) as exc:  # zipfile: unsupported feature, password
        raise ArchiveFrameError(f"{path} uses a zip feature attest never writes: {exc}") from None
    return members
