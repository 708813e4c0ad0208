"""Strict readers of the trust store's fields and sections (:mod:`attest.verification.trust`):
each takes the parsed YAML value and where it sits in the file, and returns it typed or raises a
:class:`ConfigError` naming the file and the entry. Imports neither pydantic nor torch."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

from attest.certificate.signers import MEANINGS
from attest.core.strict_yaml import cut, excerpt
from attest.core.times import bounded_time, parse_timestamp
from attest.errors import ConfigError

__all__ = [
    "Requirement",
    "TimestampAuthority",
    "authorities_field",
    "entry_fields",
    "requirements_field",
    "roles_field",
    "text_field",
    "time_field",
]


@dataclass(frozen=True)
class Requirement:
    """``count`` distinct keys holding ``role`` must have signed with ``meaning``."""

    role: str
    meaning: str
    count: int = 1

    def label(self) -> str:
        return f"{self.count} {self.role} {self.meaning}"


@dataclass(frozen=True)
class TimestampAuthority:
    """A root certificate under which RFC 3161 tokens are trusted (kept as PEM text; the
    verifier parses it only when a token is there to check)."""

    name: str
    pem: str


def entry_fields(entry: Any, allowed: set[str], required: set[str], where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a mapping")
    unknown = sorted(set(map(str, entry)) - allowed)
    if unknown:
        listed = ", ".join(cut(name) for name in unknown[:5])
        raise ConfigError(
            f"{where} has unknown field(s) {cut(listed)}"
            + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""),
            hint=f"allowed fields: {', '.join(sorted(allowed))}",
        )
    missing = sorted(required - set(entry))
    if missing:
        raise ConfigError(f"{where} is missing {', '.join(missing)}")
    return entry


def time_field(value: Any, where: str) -> datetime | None:
    """A time inside 1970..9000 in UTC, from text or from YAML's own unquoted timestamps."""
    if value is None:
        return None
    try:
        if isinstance(value, datetime):  # YAML's own timestamp type, if left unquoted
            return bounded_time(
                value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
            )
        if isinstance(value, date):  # an unquoted date: midnight UTC, like the quoted text
            return parse_timestamp(value.isoformat())
        if not isinstance(value, str):
            raise ValueError(f"expected text like 2027-01-31T00:00:00Z, got {excerpt(value)}")
        return parse_timestamp(value)
    except ValueError as exc:
        raise ConfigError(
            f"{where} is not a timestamp: {cut(str(exc))}",
            hint='write RFC 3339 UTC text between 1970 and 9000, e.g. "2027-01-31T00:00:00Z"',
        ) from None


def text_field(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be a non-empty string")
    return value


def roles_field(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of role names")
    roles = tuple(text_field(v, f"{where}[{i}]").strip() for i, v in enumerate(value))
    if len(set(roles)) != len(roles):
        raise ConfigError(f"{where} names a role twice")
    return roles


def requirements_field(value: Any, where: str) -> tuple[Requirement, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list")
    found: list[Requirement] = []
    for index, raw in enumerate(value):
        here = f"{where}[{index}]"
        entry = entry_fields(raw, {"role", "meaning", "count"}, {"role", "meaning"}, here)
        meaning = entry["meaning"]
        if meaning not in MEANINGS:
            raise ConfigError(
                f"{here}.meaning {excerpt(meaning)} is not one of {', '.join(MEANINGS)}"
            )
        count = entry.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"{here}.count must be a whole number >= 1, got {excerpt(count)}")
        item = Requirement(text_field(entry["role"], f"{here}.role").strip(), meaning, count)
        if any((r.role, r.meaning) == (item.role, item.meaning) for r in found):
            raise ConfigError(f"{here}: {item.role} {item.meaning} is required twice")
        found.append(item)
    return tuple(found)


def authorities_field(value: Any, where: str) -> tuple[TimestampAuthority, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list")
    from cryptography import x509  # parsed here once, so a bad root fails at load time

    found: list[TimestampAuthority] = []
    for index, raw in enumerate(value):
        here = f"{where}[{index}]"
        entry = entry_fields(raw, {"name", "pem"}, {"name", "pem"}, here)
        pem = text_field(entry["pem"], f"{here}.pem")
        try:
            x509.load_pem_x509_certificate(pem.encode("ascii", "replace"))
        except ValueError:
            raise ConfigError(
                f"{here}.pem is not a PEM X.509 certificate",
                hint="add the TSA's root with: attest trust tsa CERT.pem --name NAME",
            ) from None
        found.append(TimestampAuthority(text_field(entry["name"], f"{here}.name"), pem))
    return tuple(found)
