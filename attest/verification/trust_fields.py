"""Strict readers of the trust store's fields and sections (:mod:`attest.verification.trust`):
each takes the parsed YAML value and where it sits in the file, and returns it typed or raises a
:class:`ConfigError` naming the file and the entry. Imports neither pydantic nor torch."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

from attest.certificate.note_keys import SIGNATURE_TYPE_COSIGNATURE, NoteKey, parse_note_key
from attest.certificate.signers import MEANINGS
from attest.core.strict_yaml import cut, excerpt
from attest.core.times import bounded_time, parse_timestamp
from attest.errors import ConfigError, KeyError_

__all__ = [
    "Requirement",
    "TimestampAuthority",
    "TrustedWitness",
    "authorities_field",
    "entry_fields",
    "requirements_field",
    "roles_field",
    "targets_field",
    "text_field",
    "time_field",
    "witness_quorum_field",
    "witnesses_field",
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


@dataclass(frozen=True)
class TrustedWitness:
    """A witness whose cosignatures (C2SP tlog-cosignature/v1) count toward the quorum: its
    name in the trust store and its cosigner verifier key."""

    name: str
    key: NoteKey


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


def roles_field(value: Any, where: str, what: str = "role") -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of {what} names")
    roles = tuple(text_field(v, f"{where}[{i}]").strip() for i, v in enumerate(value))
    if len(set(roles)) != len(roles):
        raise ConfigError(f"{where} names a {what} twice")
    return roles


def targets_field(value: Any, where: str) -> tuple[str, ...]:
    """A key's ``targets:``: absent, any target; present, a non-empty list of target names (an
    empty list would read as "any" to the loader and as "none" to a person: refused)."""
    if isinstance(value, list) and not value:
        raise ConfigError(
            f"{where} is empty: list the hardware targets the key may sign evidence for, "
            "or remove the field to allow any target"
        )
    return roles_field(value, where, "target")


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


def witnesses_field(value: Any, where: str) -> tuple[TrustedWitness, ...]:
    """``witnesses: [{name, key}]``: key a cosigner vkey (``name+keyid+base64(0x04 || key)``,
    printed by ``attest ledger witness key``); names and keys each listed once."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list")
    found: list[TrustedWitness] = []
    for index, raw in enumerate(value):
        here = f"{where}[{index}]"
        entry = entry_fields(raw, {"name", "key"}, {"name", "key"}, here)
        name = text_field(entry["name"], f"{here}.name").strip()
        try:
            key = parse_note_key(
                text_field(entry["key"], f"{here}.key"), SIGNATURE_TYPE_COSIGNATURE
            )
        except KeyError_ as exc:
            raise ConfigError(
                f"{here}.key: {exc.message}",
                hint="print a witness's key with: attest ledger witness key --key K --name NAME",
            ) from None
        if any(w.name == name for w in found):
            raise ConfigError(f"{here}: witness name {cut(name)} is listed twice")
        if any(w.key.public_key == key.public_key for w in found):
            raise ConfigError(f"{here}: the key of witness {cut(name)} is listed twice")
        found.append(TrustedWitness(name, key))
    return tuple(found)


def witness_quorum_field(value: Any, witnesses: int, where: str) -> int | None:
    """``witness_quorum``: how many listed witnesses must have cosigned a log's checkpoint
    (required with witnesses; at most as many as are listed)."""
    if value is None:
        if witnesses:
            raise ConfigError(
                f"{where} is missing: the trust store lists witnesses but no quorum",
                hint="add witness_quorum: N (how many of them must cosign a checkpoint)",
            )
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where} must be a whole number >= 1, got {excerpt(value)}")
    if value > witnesses:
        raise ConfigError(
            f"{where} {value} can never be met with {witnesses} witness(es)",
            hint="list the witnesses under witnesses: [{name, key}]",
        )
    return value
