"""Facts about the certificate format shared by the builder and the verifier, in plain Python.

:mod:`attest.certificate` (pydantic models, release side) and :mod:`attest.verify` (deployment
side, kept free of pydantic model building for a fast start) both read these constants, so
each fact has one source. Also: RFC 3339 timestamps and release-version ordering.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Final

__all__ = [
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "SHA256_PATTERN",
    "STATEMENT_TYPE",
    "SUBJECT_NAME_PATTERN",
    "TIMESTAMP_PATTERN",
    "TIME_MAX",
    "TIME_MIN",
    "VERSION_PATTERN",
    "bounded_time",
    "compare_versions",
    "format_timestamp",
    "parse_timestamp",
    "parse_version",
]

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
# Versioned: a change that old verifiers cannot read gets a new URI (.../certificate/v2).
PREDICATE_TYPE: Final = "https://gradient-attest.dev/certificate/v1"
PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"

SHA256_PATTERN = r"^[0-9a-f]{64}$"

# A relative POSIX path of one or more components; no leading "/", no "." or ".." component,
# no backslash or control character. Directory members are named "dir/file". Written without
# look-around so that pydantic's Rust regex engine, Python's re and ECMA-262 all accept it.
_C = r"[^/\\\u0000-\u001f\u007f]"  # a character allowed in a component
_D = r"[^/\\\u0000-\u001f\u007f.]"  # the same, but not a dot
_COMPONENT = rf"(?:{_D}{_C}*|\.{_D}{_C}*|\.\.{_C}+)"
SUBJECT_NAME_PATTERN = rf"^{_COMPONENT}(?:/{_COMPONENT})*$"

# RFC 3339 in UTC with a "Z" suffix, as format_timestamp writes it.
TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z$"

# Release versions: numeric components, optional -prerelease and +build (SemVer 2.0.0 order).
_IDENT = r"[0-9A-Za-z-]+"
VERSION_PATTERN = rf"^\d+(?:\.\d+)*(?:-{_IDENT}(?:\.{_IDENT})*)?(?:\+{_IDENT}(?:\.{_IDENT})*)?$"
_VERSION_RE = re.compile(VERSION_PATTERN)


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 UTC text to the second (``2026-01-31T12:00:00Z``) of an aware datetime."""
    if moment.tzinfo is None:
        raise ValueError("timestamp has no time zone")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> datetime:
    """Parse RFC 3339 / ISO 8601 text with a time zone into an aware UTC datetime.

    A bare date (``2026-01-31``) means midnight UTC; a date-time without a zone is refused.
    Raises ``ValueError``.
    """
    if not isinstance(text, str):
        raise ValueError("timestamp is not a string")
    value = text.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        value += "T00:00:00Z"
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {text[:64]!r} has no time zone (add Z for UTC)")
    return bounded_time(moment)


# Every time the tools compare is kept inside this range, so that adding a clock skew or a
# validity period (at most a few years) to it can never overflow ``datetime`` (years 1-9999).
TIME_MIN: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
TIME_MAX: Final = datetime(9000, 1, 1, tzinfo=timezone.utc)


def bounded_time(moment: datetime) -> datetime:
    """``moment`` (aware) in UTC, or ``ValueError`` when it lies outside
    ``TIME_MIN..TIME_MAX`` (1970-01-01 to 9000-01-01), which also covers times whose
    conversion to UTC would overflow (``0001-01-01T00:30:00+01:00``)."""
    if moment.tzinfo is None:
        raise ValueError("timestamp has no time zone (add Z for UTC)")
    try:
        utc = moment.astimezone(timezone.utc)
    except OverflowError:
        utc = None
    if utc is None or not TIME_MIN <= utc <= TIME_MAX:
        raise ValueError(
            f"{moment.isoformat()} is outside the supported range "
            f"{format_timestamp(TIME_MIN)} .. {format_timestamp(TIME_MAX)}"
        )
    return utc


_Key = tuple[tuple[int, ...], int, tuple[tuple[int, int, str], ...]]


def parse_version(text: str) -> _Key:
    """A sort key for a release version: ``1.10.0 > 1.9.0``, ``1.2 == 1.2.0``,
    ``1.0.0-rc.1 < 1.0.0``; build metadata (``+...``) is ignored, as in SemVer 2.0.0.

    Raises ``ValueError`` for text that is not a version.
    """
    if not isinstance(text, str) or not _VERSION_RE.fullmatch(text):
        raise ValueError(f"{text!r} is not a release version like 1.2.0")
    core, _, _build = text.partition("+")
    release_text, dash, prerelease_text = core.partition("-")
    release = [int(part) for part in release_text.split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()  # 1.2.0 == 1.2
    if not dash:
        return (tuple(release), 1, ())  # a release sorts after all its pre-releases
    identifiers: list[tuple[int, int, str]] = []
    for ident in prerelease_text.split("."):
        if ident.isdigit():
            identifiers.append((0, int(ident), ""))  # numeric identifiers sort first
        else:
            identifiers.append((1, 0, ident))
    return (tuple(release), 0, tuple(identifiers))


def compare_versions(left: str, right: str) -> int:
    """-1, 0 or 1 as ``left`` is lower than, equal to or higher than ``right``."""
    a, b = parse_version(left), parse_version(right)
    return (a > b) - (a < b)
