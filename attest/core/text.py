"""Making untrusted text safe to print, to write as JSON and to record.

Certificates carry unsigned fields (signature key-id hints, the payload type before it is
checked), signed fields written by whoever held a key, and file names found on disk. None of
them may steer the terminal (escape sequences that erase a "NOT VERIFIED" line, a carriage
return, bidirectional overrides that reorder what is shown), forge a line of piped output (a
newline in a file name), or crash the output (a lone UTF-16 surrogate cannot be encoded as
UTF-8). Every such string goes through :func:`safe_text` before it is printed and through
:func:`printable_json` / :func:`json_safe` before it is written as JSON.

The escaping is visible and unambiguous enough to read: ``\\x1b``, ``\\n``, ``\\u202e``,
``\\udcff``. Plain Python, no imports beyond the standard library: the verifier loads it.

JSON written for a person or a program (every ``--json``) is always valid JSON: a figure that
is not finite (NaN, an infinity) is written as ``null`` (:func:`finite_json` says where, so
the caller can note it), never as the ``NaN``/``Infinity`` that :mod:`json` would print.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

__all__ = [
    "check_path_text",
    "finite_json",
    "json_safe",
    "printable_json",
    "safe_lines",
    "safe_text",
]

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Anything outside printable ASCII is a candidate; unicodedata decides (fast path for ASCII).
_CANDIDATE = re.compile(r"[^\x20-\x7e]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _unsafe(char: str) -> bool:
    # Cc control, Cf format (bidi overrides, zero-width, BOM), Cs surrogate, Co private use,
    # Cn unassigned; Zl/Zp line and paragraph separators break lines too.
    category = unicodedata.category(char)
    return category[0] == "C" or category in ("Zl", "Zp")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if not _unsafe(char):
        return char
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def safe_text(value: object, limit: int | None = None) -> str:
    """``value`` as text that prints as one line, visibly escaping every control, format,
    surrogate, private-use, unassigned and line-separator character; cut to ``limit``
    characters (before escaping) with a marker when longer."""
    text = value if isinstance(value, str) else str(value)
    cut = limit is not None and len(text) > limit
    if cut:
        text = text[:limit]
    text = _CANDIDATE.sub(_escape, text)
    return text + "...(cut)" if cut else text


def safe_lines(text: str) -> str:
    """Multi-line text with each line made safe by :func:`safe_text` (the newlines that
    separate lines are kept; everything else that could steer a terminal is escaped)."""
    return "\n".join(safe_text(line) for line in text.split("\n"))


def _json_escape(match: re.Match[str]) -> str:
    char = match.group()
    # json.dumps escapes control characters inside strings, so a newline here is indentation.
    if char == "\n" or not _unsafe(char):
        return char
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON spells characters beyond the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def finite_json(data: Any, where: str = "") -> tuple[Any, list[str]]:
    """A copy of JSON data with every non-finite float (NaN, +-inf) replaced by ``None``, and
    the JSON pointers (RFC 6901) of the figures replaced."""
    if isinstance(data, float) and not math.isfinite(data):
        return None, [where or "/"]
    found: list[str] = []
    if isinstance(data, dict):
        out: dict[Any, Any] = {}
        for key, value in data.items():
            token = str(key).replace("~", "~0").replace("/", "~1")
            out[key], paths = finite_json(value, f"{where}/{token}")
            found += paths
        return out, found
    if isinstance(data, list | tuple):
        items = []
        for index, value in enumerate(data):
            item, paths = finite_json(value, f"{where}/{index}")
            items.append(item)
            found += paths
        return items, found
    return data, found


def printable_json(data: Any, *, indent: int | None = 2) -> str:
    """JSON text of ``data`` that is safe on a terminal and encodes as UTF-8: readable letters
    stay as they are, every character :func:`safe_text` would escape is a ``\\uXXXX`` escape
    (json.dumps already escapes control characters inside strings; the rest can only stand
    inside strings too, since JSON's structure is ASCII). Non-finite figures are ``null``
    (:func:`finite_json`)."""
    text = json.dumps(finite_json(data)[0], indent=indent, ensure_ascii=False, allow_nan=False)
    return _CANDIDATE.sub(_json_escape, text)


def json_safe(data: Any) -> Any:
    """A copy of JSON data whose strings (keys too) are valid Unicode: each lone surrogate
    becomes the visible text ``\\udXXX``. For records that must canonicalize (the ledger)."""
    if isinstance(data, str):
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", data)
    if isinstance(data, dict):
        return {json_safe(k): json_safe(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [json_safe(v) for v in data]
    return data


def check_path_text(text: str, what: str) -> str | None:
    """Why ``text`` cannot name a file on this system (a NUL, text the file system encoding
    cannot represent), or ``None`` when it can."""
    import os

    if "\x00" in text:
        return f"{what} {safe_text(text, 200)} contains a NUL character"
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return f"{what} {safe_text(text, 200)} cannot be encoded as a file name here"
    return None
