"""Times and durations: the one place text becomes a ``datetime`` or a ``timedelta``.

- Timestamps are RFC 3339 / ISO 8601 with a time zone (a bare date means midnight UTC),
  always converted to UTC and kept within :data:`TIME_MIN` .. :data:`TIME_MAX`, so that adding
  a clock skew or a validity period can never overflow ``datetime``.
- Durations are ``<number><unit>`` with units ``s m h d w y`` (a year is 365 days), used by
  ``--expires-in``, ``--clock-skew`` and the spec's expiry.

Plain standard library: the verifier imports it.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Final

from attest.errors import InputError

__all__ = [
    "TIME_MAX",
    "TIME_MIN",
    "bounded_time",
    "format_timestamp",
    "parse_duration",
    "parse_moment",
    "parse_timestamp",
]


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


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w|y)?")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400, "y": 365 * 86_400}


def parse_duration(
    text: str,
    *,
    option: str = "duration",
    default_unit: str | None = None,
    minimum: timedelta | None = None,
    maximum: timedelta | None = None,
    whole: bool = False,
    example: str = "e.g. 60s, 12h, 365d, 26w, 1y",
) -> timedelta:
    """``text`` (``60s``, ``5m``, ``12h``, ``365d``, ``26w``, ``1y``) as a timedelta, within
    ``minimum`` (exclusive of zero unless 0) and ``maximum``; an :class:`InputError` naming
    ``option`` otherwise. A bare number takes ``default_unit`` (refused without one);
    ``whole`` refuses fractions (``1.5d``)."""
    shown = repr(text[:60]) if isinstance(text, str) else repr(text)
    what = "a positive duration" if minimum is not None and minimum > timedelta(0) else "a duration"
    match = _DURATION.fullmatch(text.strip()) if isinstance(text, str) else None
    unit = (match.group(2) or default_unit) if match else None
    if match is None or unit is None or (whole and "." in match.group(1)):
        raise InputError(f"{option} {shown} is not {what}", hint=example)
    seconds = float(match.group(1)) * _UNIT_SECONDS[unit]
    if maximum is not None and not seconds <= maximum.total_seconds():
        raise InputError(f"{option} {shown} is over the limit of {maximum}", hint=example)
    if not math.isfinite(seconds) or seconds > timedelta.max.total_seconds() / 2:
        raise InputError(f"{option} {shown} is too long", hint=example)
    value = timedelta(seconds=seconds)
    if minimum is not None and value < minimum:
        raise InputError(f"{option} {shown} is not {what} (at least {minimum})", hint=example)
    return value


def parse_moment(text: str, *, option: str = "--at", assume_utc: bool = False) -> datetime:
    """A command-line time (``--at``): RFC 3339 text or a date, as :func:`parse_timestamp`
    reads it (a date-time without a zone is UTC when ``assume_utc``, refused otherwise); an
    :class:`InputError` naming ``option`` when it is not a usable time."""
    value = text.strip() if isinstance(text, str) else text
    if assume_utc and isinstance(value, str) and re.fullmatch(r"[\d\-T:.]+", value):
        value += "Z" if "T" in value else ""
    try:
        return parse_timestamp(value)
    except (TypeError, ValueError) as exc:
        from attest.core.text import safe_text

        raise InputError(
            f"{option} {safe_text(text, 60)!r} is not a usable time: {safe_text(exc, 200)}",
            hint="e.g. 2026-06-30 or 2026-06-30T12:00:00Z",
        ) from None
