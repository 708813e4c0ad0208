"""Facts about the certificate format shared by the builder and the verifier, in plain Python.

:mod:`attest.certificate.statement` (pydantic models, release side) and :mod:`attest.verification.verifier` (deployment
side, kept free of pydantic model building for a fast start) both read these constants, so
each fact has one source. Also: release-version ordering (times are in attest.core.times).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "SHA256_PATTERN",
    "STATEMENT_TYPE",
    "SUBJECT_NAME_PATTERN",
    "TIMESTAMP_PATTERN",
    "VERSION_PATTERN",
    "compare_versions",
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
# The certificate's default file name (attest certify; beside a certified folder, or inside it:
# every folder's manifest leaves it out).
CERTIFICATE_NAME = "gradient_certificate.json"

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
