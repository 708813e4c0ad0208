"""The verifier's trust store (``trust.yaml``): which public keys may sign certificates.

Format (written by ``attest trust add``; nobody needs to paste PEM into YAML by hand)::

    version: 1
    threshold: 1              # distinct trusted keys whose signatures a certificate needs
    keys:
      - keyid: 3f1c...        # sha256 of the DER SubjectPublicKeyInfo, hex (checked on load)
        name: release-2026
        algorithm: ed25519
        not_before: "2026-01-01T00:00:00Z"   # optional validity window of the key
        not_after: "2027-01-01T00:00:00Z"
        roles: [release-engineer]            # optional: what its signatures may stand for
        pem: |
          -----BEGIN PUBLIC KEY-----
          ...
    revoked:
      - keyid: 9ab0...
        revoked_at: "2026-06-01T09:00:00Z"
        reason: laptop lost
    requirements:             # optional: distinct keys of each role that must sign, by meaning
      - {role: release-engineer, meaning: authorship, count: 1}
      - {role: clinical-safety, meaning: approval, count: 1}
    revocation_roles: [clinical-safety]  # optional: who may revoke certificates (default: any key)
    timestamp_authorities:    # optional: roots of RFC 3161 TSAs: [{name, pem}]

A revoked key's signature counts only when a token of a trusted TSA proves it was made before
``revoked_at`` (docs/certificate-format.md, "Trusted time").

The file is parsed strictly (duplicate keys, unknown fields, a key id that does not match its
PEM, a threshold that can never be met, a weak public key, a time outside 1970..9000 are errors
naming the file and the entry; anchors, aliases, merge keys and lists or mappings as keys are
refused as they are read, so an alias bomb never expands; messages quote bounded excerpts) and
written atomically. This module imports neither pydantic nor torch: the verifier loads it on every run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

from attest.certificate.signers import MEANINGS
from attest.certificate.signing import (
    PublicKey,
    algorithm_of,
    key_id,
    load_public_key_pem,
    public_key_pem,
)
from attest.core.files import read_text_checked
from attest.core.io import atomic_write_text
from attest.core.strict_yaml import cut, excerpt, parse_yaml
from attest.core.times import bounded_time, format_timestamp, parse_timestamp
from attest.errors import ConfigError, InputError

__all__ = [
    "TRUST_FORMAT_VERSION",
    "Requirement",
    "RevokedKey",
    "TimestampAuthority",
    "TrustStore",
    "TrustedKey",
    "add_key",
    "empty_trust_store",
    "load_trust_store",
    "resolve_keyid",
    "revoke_key",
    "save_trust_store",
]

TRUST_FORMAT_VERSION = 1
_MAX_TRUST_BYTES = 1024 * 1024


@dataclass(frozen=True)
class TrustedKey:
    """A public key the verifier accepts signatures from, within its validity window."""

    keyid: str
    name: str
    public_key: PublicKey
    not_before: datetime | None = None
    not_after: datetime | None = None
    roles: tuple[str, ...] = ()

    @property
    def algorithm(self) -> str:
        return algorithm_of(self.public_key)

    def window_problem(self, at: datetime, skew: timedelta = timedelta(0)) -> str | None:
        """Why this key does not count at time ``at`` (``None`` if it is inside its window)."""
        if self.not_before is not None and at + skew < self.not_before:
            return f"is valid only from {format_timestamp(self.not_before)}"
        if self.not_after is not None and at - skew >= self.not_after:
            return f"was valid only until {format_timestamp(self.not_after)}"
        return None

    def label(self) -> str:
        return f"{self.name} ({self.keyid[:16]})"


@dataclass(frozen=True)
class RevokedKey:
    """A key id that never counts, whether or not its key is listed."""

    keyid: str
    revoked_at: datetime | None = None
    reason: str = ""


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
class TrustStore:
    """Keys, revocations and the signature threshold. Immutable; edit with :func:`add_key`,
    :func:`revoke_key` and save with :func:`save_trust_store`."""

    keys: tuple[TrustedKey, ...] = ()
    revoked: tuple[RevokedKey, ...] = ()
    threshold: int = 1
    source: str = "trust store"
    requirements: tuple[Requirement, ...] = ()
    timestamp_authorities: tuple[TimestampAuthority, ...] = ()
    revocation_roles: tuple[str, ...] | None = None  # None: any trusted key may revoke

    def may_revoke(self, key: TrustedKey) -> bool:
        """Whether ``key`` holds a role that may revoke certificates (whether the key itself was
        valid and unrevoked when it signed is the signature's judgement, not the role's)."""
        return self.revocation_roles is None or bool(set(key.roles) & set(self.revocation_roles))

    def is_revoked(self, keyid: str) -> bool:
        return any(r.keyid == keyid for r in self.revoked)

    def revocation(self, keyid: str) -> RevokedKey | None:
        return next((r for r in self.revoked if r.keyid == keyid), None)

    def key(self, keyid: str) -> TrustedKey | None:
        return next((k for k in self.keys if k.keyid == keyid), None)

    def to_data(self) -> dict[str, Any]:
        """Plain data as written to YAML."""
        keys = []
        for k in self.keys:
            entry: dict[str, Any] = {"keyid": k.keyid, "name": k.name, "algorithm": k.algorithm}
            if k.not_before is not None:
                entry["not_before"] = format_timestamp(k.not_before)
            if k.not_after is not None:
                entry["not_after"] = format_timestamp(k.not_after)
            if k.roles:
                entry["roles"] = list(k.roles)
            entry["pem"] = public_key_pem(k.public_key)
            keys.append(entry)
        revoked = []
        for r in self.revoked:
            item: dict[str, Any] = {"keyid": r.keyid}
            if r.revoked_at is not None:
                item["revoked_at"] = format_timestamp(r.revoked_at)
            if r.reason:
                item["reason"] = r.reason
            revoked.append(item)
        data: dict[str, Any] = {
            "version": TRUST_FORMAT_VERSION,
            "threshold": self.threshold,
            "keys": keys,
            "revoked": revoked,
        }
        if self.requirements:
            data["requirements"] = [
                {"role": r.role, "meaning": r.meaning, "count": r.count} for r in self.requirements
            ]
        if self.revocation_roles is not None:
            data["revocation_roles"] = list(self.revocation_roles)
        if self.timestamp_authorities:
            data["timestamp_authorities"] = [
                {"name": t.name, "pem": t.pem} for t in self.timestamp_authorities
            ]
        return data


_PLAIN_HINT = (
    "write plain YAML as attest trust add does: no anchors (&), aliases (*), "
    "merge keys (<<), lists or mappings as keys, or repeated keys"
)


def _fields(entry: Any, allowed: set[str], required: set[str], where: str) -> dict[str, Any]:
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


def _time(value: Any, where: str) -> datetime | None:
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


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be a non-empty string")
    return value


_TOP_FIELDS = {
    "version",
    "threshold",
    "keys",
    "revoked",
    "requirements",
    "revocation_roles",
    "timestamp_authorities",
}


def _roles(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of role names")
    roles = tuple(_text(v, f"{where}[{i}]").strip() for i, v in enumerate(value))
    if len(set(roles)) != len(roles):
        raise ConfigError(f"{where} names a role twice")
    return roles


def _requirements(value: Any, where: str) -> tuple[Requirement, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list")
    found: list[Requirement] = []
    for index, raw in enumerate(value):
        here = f"{where}[{index}]"
        entry = _fields(raw, {"role", "meaning", "count"}, {"role", "meaning"}, here)
        meaning = entry["meaning"]
        if meaning not in MEANINGS:
            raise ConfigError(
                f"{here}.meaning {excerpt(meaning)} is not one of {', '.join(MEANINGS)}"
            )
        count = entry.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"{here}.count must be a whole number >= 1, got {excerpt(count)}")
        item = Requirement(_text(entry["role"], f"{here}.role").strip(), meaning, count)
        if any((r.role, r.meaning) == (item.role, item.meaning) for r in found):
            raise ConfigError(f"{here}: {item.role} {item.meaning} is required twice")
        found.append(item)
    return tuple(found)


def _authorities(value: Any, where: str) -> tuple[TimestampAuthority, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list")
    from cryptography import x509  # parsed here once, so a bad root fails at load time

    found: list[TimestampAuthority] = []
    for index, raw in enumerate(value):
        here = f"{where}[{index}]"
        entry = _fields(raw, {"name", "pem"}, {"name", "pem"}, here)
        pem = _text(entry["pem"], f"{here}.pem")
        try:
            x509.load_pem_x509_certificate(pem.encode("ascii", "replace"))
        except ValueError:
            raise ConfigError(
                f"{here}.pem is not a PEM X.509 certificate",
                hint="add the TSA's root with: attest trust tsa CERT.pem --name NAME",
            ) from None
        found.append(TimestampAuthority(_text(entry["name"], f"{here}.name"), pem))
    return tuple(found)


def _parse(data: Any, source: str) -> TrustStore:
    top = _fields(data, _TOP_FIELDS, {"keys"}, source)
    if top.get("version", TRUST_FORMAT_VERSION) != TRUST_FORMAT_VERSION:
        raise ConfigError(
            f"{source}: version {excerpt(top.get('version'))} is not supported "
            f"(expected {TRUST_FORMAT_VERSION})"
        )
    threshold = top.get("threshold", 1)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise ConfigError(
            f"{source}: threshold must be a whole number >= 1, got {excerpt(threshold)}"
        )
    raw_keys = top.get("keys") or []
    if not isinstance(raw_keys, list):
        raise ConfigError(f"{source}: keys must be a list")
    keys: list[TrustedKey] = []
    for index, raw in enumerate(raw_keys):
        where = f"{source}: keys[{index}]"
        entry = _fields(
            raw,
            {"keyid", "name", "algorithm", "not_before", "not_after", "pem", "roles"},
            {"name", "pem"},
            where,
        )
        public = load_public_key_pem(_text(entry["pem"], f"{where}.pem"), source=f"{where}.pem")
        actual = key_id(public)
        if "keyid" in entry and entry["keyid"] != actual:
            raise ConfigError(
                f"{where}.keyid {excerpt(entry['keyid'])} does not match its PEM (key id {actual})",
                hint="remove the entry and add the key again with: attest trust add PUBKEY",
            )
        if "algorithm" in entry and entry["algorithm"] != algorithm_of(public):
            raise ConfigError(
                f"{where}.algorithm says {excerpt(entry['algorithm'])}, "
                f"the PEM is {algorithm_of(public)}"
            )
        if any(k.keyid == actual for k in keys):
            raise ConfigError(f"{where}: key {actual[:16]} is listed twice")
        key = TrustedKey(
            keyid=actual,
            name=_text(entry["name"], f"{where}.name"),
            public_key=public,
            not_before=_time(entry.get("not_before"), f"{where}.not_before"),
            not_after=_time(entry.get("not_after"), f"{where}.not_after"),
            roles=_roles(entry.get("roles"), f"{where}.roles"),
        )
        if key.not_before and key.not_after and key.not_after <= key.not_before:
            raise ConfigError(f"{where}: not_after is not later than not_before")
        keys.append(key)
    raw_revoked = top.get("revoked") or []
    if not isinstance(raw_revoked, list):
        raise ConfigError(f"{source}: revoked must be a list")
    revoked: list[RevokedKey] = []
    for index, raw in enumerate(raw_revoked):
        where = f"{source}: revoked[{index}]"
        entry = _fields(raw, {"keyid", "revoked_at", "reason"}, {"keyid"}, where)
        keyid = _text(entry["keyid"], f"{where}.keyid").lower()
        if len(keyid) != 64 or any(c not in "0123456789abcdef" for c in keyid):
            raise ConfigError(f"{where}.keyid must be 64 hex digits")
        reason = entry.get("reason") or ""
        revoked.append(
            RevokedKey(keyid, _time(entry.get("revoked_at"), f"{where}.revoked_at"), str(reason))
        )
    if threshold > len(keys):
        raise ConfigError(
            f"{source}: threshold {threshold} can never be met with {len(keys)} key(s)",
            hint="add keys with: attest trust add PUBKEY --trust FILE, or lower the threshold",
        )
    raw_roles = top.get("revocation_roles")
    return TrustStore(
        tuple(keys),
        tuple(revoked),
        threshold,
        source,
        requirements=_requirements(top.get("requirements"), f"{source}: requirements"),
        timestamp_authorities=_authorities(
            top.get("timestamp_authorities"), f"{source}: timestamp_authorities"
        ),
        revocation_roles=None if raw_roles is None else _roles(raw_roles, f"{source}: roles"),
    )


def load_trust_store(path: str | Path) -> TrustStore:
    """Load and validate ``trust.yaml``; any problem is a :class:`ConfigError` naming the file."""
    p = Path(path)
    text = read_text_checked(
        p,
        what="trust store",
        max_bytes=_MAX_TRUST_BYTES,
        error=ConfigError,
        missing_hint="create it with: attest trust add PUBKEY --trust FILE",
    )
    source = f"trust store {p}"
    return _parse(parse_yaml(text, source, hint=_PLAIN_HINT), source)


class _BlockDumper(yaml.SafeDumper):
    """Safe YAML that writes multi-line text (PEM) as a readable ``|`` block."""


def _represent_text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_BlockDumper.add_representer(str, _represent_text)


def save_trust_store(store: TrustStore, path: str | Path) -> Path:
    """Write the store atomically (a crash leaves the old file or the new one)."""
    header = "# gradient-attest trust store; manage with `attest trust add|revoke|list`\n"
    body = yaml.dump(
        store.to_data(), Dumper=_BlockDumper, sort_keys=False, default_flow_style=False
    )
    return atomic_write_text(path, header + body, mode=0o644)


def add_key(
    store: TrustStore,
    public_key_pem_text: str | bytes,
    *,
    name: str,
    not_before: datetime | None = None,
    not_after: datetime | None = None,
    source: str = "public key",
    roles: tuple[str, ...] = (),
) -> tuple[TrustStore, TrustedKey]:
    """A new store with one more key; a key already listed or revoked is refused."""
    public = load_public_key_pem(public_key_pem_text, source=source)
    keyid = key_id(public)
    if store.key(keyid) is not None:
        raise InputError(f"key {keyid[:16]} is already in {store.source}")
    if store.is_revoked(keyid):
        raise InputError(
            f"key {keyid[:16]} is revoked in {store.source}; a revoked key cannot be trusted again",
            hint="generate a new key with attest keygen",
        )
    if not name.strip():
        raise InputError("a key needs a non-empty --name")
    if not_before and not_after and not_after <= not_before:
        raise InputError("--not-after must be later than --not-before")
    key = TrustedKey(keyid, name, public, not_before, not_after, roles)
    return replace(store, keys=(*store.keys, key)), key


def resolve_keyid(store: TrustStore, text: str) -> str:
    """A full key id from a full id or a unique prefix (at least 8 hex digits) of a listed key."""
    wanted = text.strip().lower()
    if len(wanted) == 64 and all(c in "0123456789abcdef" for c in wanted):
        return wanted
    if len(wanted) < 8:
        raise InputError(
            f"key id {text!r} is too short", hint="give at least 8 hex digits or the full id"
        )
    matches = [k.keyid for k in store.keys if k.keyid.startswith(wanted)]
    if len(matches) != 1:
        what = "no key" if not matches else f"{len(matches)} keys"
        raise InputError(
            f"{what} in {store.source} match key id {text!r}", hint="attest trust list shows them"
        )
    return matches[0]


def revoke_key(
    store: TrustStore, keyid: str, *, reason: str = "", at: datetime | None = None
) -> TrustStore:
    """A new store in which ``keyid`` (full id or unique prefix) is revoked. The key stays
    listed, so that verifications explain why its signatures no longer count."""
    full = resolve_keyid(store, keyid)
    if store.is_revoked(full):
        raise InputError(f"key {full[:16]} is already revoked in {store.source}")
    entry = RevokedKey(full, (at or datetime.now(timezone.utc)).replace(microsecond=0), reason)
    return replace(store, revoked=(*store.revoked, entry))


def empty_trust_store(source: str) -> TrustStore:
    """A store with no keys, for ``attest trust add`` on a file that does not exist yet."""
    return TrustStore(source=f"trust store {source}")
