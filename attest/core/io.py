"""Small file helpers shared by every stage: atomic writes, strict JSON, file digests.

Strict JSON is hand-written on top of :mod:`json` because the standard parser accepts
duplicate keys (last one wins), ``NaN``/``Infinity``, numbers that overflow to infinity
(``1e999``) and unbounded nesting, all of which a verifier must refuse before looking at
anything else. A non-finite number is refused with its line and column.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from attest.core.files import read_bytes_checked
from attest.errors import InputError

MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_JSON_DEPTH = 64
_HASH_CHUNK = 1 << 20


class StrictJSONError(ValueError):
    """Raised by :func:`loads_strict`; the verifier maps it to ``MALFORMED``."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise StrictJSONError(f"duplicate key {key!r}")
        out[key] = value
    return out


class _NonFinite(ValueError):
    """Raised inside the parser's hooks; :func:`loads_strict` adds the position."""


def _no_constant(name: str) -> Any:
    raise _NonFinite(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 overflows to infinity: not a number JSON can carry
        raise _NonFinite(text)
    return value


# Number tokens and the constants the standard parser knows, outside strings (strings are
# blanked first, keeping every offset).
_NUMBER_TOKEN = re.compile(r"-?(?:Infinity|NaN|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)")


def _non_finite_error(text: str, literal: str) -> StrictJSONError:
    """The error for the first non-finite number of ``text`` (the one the parser met first),
    with its line and column (1-based, as editors count)."""
    blanked = _JSON_STRING.sub(lambda m: " " * len(m.group()), text)
    for match in _NUMBER_TOKEN.finditer(blanked):
        token = match.group()
        floating = any(c in token for c in ".eE")  # the parser reads only these as floats
        if token.lstrip("-") in ("Infinity", "NaN") or (floating and math.isinf(float(token))):
            line = text.count("\n", 0, match.start()) + 1
            column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
            shown = token if len(token) <= 40 else token[:37] + "..."
            return StrictJSONError(
                f"non-finite number {shown} at line {line} column {column} "
                "(JSON numbers must be finite; NaN, Infinity and overflowing numbers are refused)"
            )
    return StrictJSONError(f"non-finite number {literal[:40]} is not JSON")


# A JSON string as the parser reads it (escapes included), or an unterminated one running to
# the end of the text. Unrolled-loop form: every character has one way to match, so the scan
# is linear and never backtracks.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _check_depth_text(text: str, max_depth: int) -> None:
    # Count bracket depth outside strings before parsing, so that a 10,000-deep document
    # is refused without recursion in the parser. The strings and everything but brackets are
    # dropped by regular expressions (C speed), then the depth is a running sum: the same
    # answer as walking the text character by character, at a fraction of the cost.
    if text.count("[") + text.count("{") <= max_depth:
        return  # the opening brackets, inside strings or not, bound the depth: none too deep
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if len(brackets) <= max_depth:
        return
    if max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets))) > max_depth:
        raise StrictJSONError(f"nesting deeper than {max_depth} levels")


def loads_strict(
    data: bytes, *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """Parse JSON bytes strictly: UTF-8 only, no duplicate keys, only finite numbers (no NaN,
    Infinity or 1e999), bounded size and depth."""
    if len(data) > max_bytes:
        raise StrictJSONError(f"{len(data)} bytes is over the {max_bytes}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"not UTF-8 at byte {exc.start}") from None
    if text.startswith("\ufeff"):
        raise StrictJSONError("byte-order mark before JSON")
    _check_depth_text(text, max_depth)
    try:
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_float=_finite_float,
        )
    except StrictJSONError:
        raise
    except _NonFinite as exc:
        raise _non_finite_error(text, str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise StrictJSONError(f"invalid JSON: {exc}") from None


def read_json_file(
    path: str | Path, *, what: str = "JSON file", max_bytes: int = MAX_JSON_BYTES
) -> Any:
    """Read and strictly parse a JSON file; any problem is an :class:`InputError` naming the file."""
    p = Path(path)
    data = read_bytes_checked(p, what=what, max_bytes=max_bytes)
    try:
        return loads_strict(data, max_bytes=max_bytes)
    except StrictJSONError as exc:
        raise InputError(f"{what} {p} is not valid JSON: {exc}") from None


def default_file_mode(path: str | Path) -> int:
    """The mode a plain ``open(path, "w")`` gives: the file's own if it exists, else 0666 less the umask.

    For public outputs written through a temporary file (``mkstemp`` creates it 0600).
    """
    path = Path(path)
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write_bytes(path: str | Path, data: bytes, *, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` atomically: a temp file in the same folder, fsync, rename.

    A crash leaves either the old file or the new one, never half of either.
    """
    import tempfile  # here, not at the top: the verifier imports this module and seldom writes

    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise InputError(
            f"cannot write {p}: {exc.strerror}", hint="check the folder exists and is writable"
        ) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates the file 0600; give it the mode asked for, else the replaced file's
        # mode, else what a plain open() would give under the current umask.
        os.chmod(tmp, mode if mode is not None else default_file_mode(p))
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p


def atomic_write_text(path: str | Path, text: str, *, mode: int | None = None) -> Path:
    """Atomically write UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def dumps_pretty(obj: Any) -> str:
    """Human-readable JSON for files people read (evidence, findings); never for signed bytes."""
    return json.dumps(obj, indent=2, sort_keys=False, allow_nan=False, ensure_ascii=False) + "\n"


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Atomically write pretty JSON (NaN/Infinity refused)."""
    return atomic_write_text(path, dumps_pretty(obj))


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, hashed at disk speed (hashlib.file_digest releases the GIL)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            if hasattr(hashlib, "file_digest"):
                return hashlib.file_digest(fh, "sha256").hexdigest()
            h = hashlib.sha256()
            for chunk in iter(lambda: fh.read(_HASH_CHUNK), b""):
                h.update(chunk)
            return h.hexdigest()
    except FileNotFoundError:
        raise InputError(f"{p} does not exist", hint="check the path") from None
    except IsADirectoryError:
        raise InputError(f"{p} is a directory, expected a file") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror}") from None


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()
