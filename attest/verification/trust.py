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
        targets: [gpu-a100]                  # optional, collector keys: the only hardware
                                             # targets whose evidence it may sign
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
    accepted_policies: [clinical-strict@>=1]  # optional: the policies certificates must be
                              # under (ID or ID@>=VERSION; attest.verification.policy_accept)
    witnesses:                # optional: witnesses of the ledger log (C2SP tlog-cosignature)
      - {name: w1, key: "witness.example/w1+30d819de+BD4m..."}   # attest ledger witness key
    witness_quorum: 1         # required with witnesses: how many must cosign a log checkpoint

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
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

from attest.certificate.signing import (
    PublicKey,
    algorithm_of,
    key_id,
    load_public_key_pem,
    public_key_pem,
)
from attest.core.files import read_text_checked
from attest.core.io import atomic_write_text
from attest.core.strict_yaml import excerpt, parse_yaml
from attest.core.times import format_timestamp
from attest.errors import ConfigError, InputError
from attest.verification.policy_accept import AcceptedPolicy, accepted_policies_field
from attest.verification.trust_fields import (
    Requirement,
    TimestampAuthority,
    TrustedWitness,
    authorities_field,
    entry_fields,
    requirements_field,
    roles_field,
    targets_field,
    text_field,
    time_field,
    witness_quorum_field,
    witnesses_field,
)

__all__ = [
    "LEDGER_ROLE",
    "TRUST_FORMAT_VERSION",
    "Requirement",
    "RevokedKey",
    "TimestampAuthority",
    "TrustStore",
    "TrustedKey",
    "TrustedWitness",
    "add_key",
    "empty_trust_store",
    "load_trust_store",
    "resolve_keyid",
    "revoke_key",
    "save_trust_store",
]

TRUST_FORMAT_VERSION = 1
LEDGER_ROLE = "ledger"  # the role of ledger checkpoint (log) keys: archives, offline proofs
_MAX_TRUST_BYTES = 1024 * 1024


# Roles whose keys sign collected evidence only (attest collect --key; the release side's
# certify --evidence --trust reads them): never counted for certificates or revocations.
EVIDENCE_ONLY_ROLES: frozenset[str] = frozenset({"collector"})


@dataclass(frozen=True)
class TrustedKey:
    """A public key the verifier accepts signatures from, within its validity window."""

    keyid: str
    name: str
    public_key: PublicKey
    not_before: datetime | None = None
    not_after: datetime | None = None
    roles: tuple[str, ...] = ()
    # The hardware targets whose evidence statements this key may sign (certify --evidence
    # refuses any other: EVIDENCE_TARGET_NOT_ALLOWED); empty: any target, as before.
    targets: tuple[str, ...] = ()

    def may_vouch_for(self, target: str) -> bool:
        """Whether this key's evidence statement for ``target`` counts."""
        return not self.targets or target in self.targets

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
    accepted_policies: tuple[AcceptedPolicy, ...] | None = None  # None: any policy
    witnesses: tuple[TrustedWitness, ...] = ()
    witness_quorum: int | None = None  # None: a log checkpoint needs no cosignature

    def certificate_signers(self) -> TrustStore:
        """The store without the keys it gives only evidence roles (:data:`EVIDENCE_ONLY_ROLES`):
        a collector key signs evidence statements for certify, never a certificate or a
        revocation, so a stolen one cannot issue either on a server that trusts it."""
        keys = tuple(k for k in self.keys if not (k.roles and set(k.roles) <= EVIDENCE_ONLY_ROLES))
        return replace(self, keys=keys)

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
            if k.targets:
                entry["targets"] = list(k.targets)
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
        if self.accepted_policies is not None:
            data["accepted_policies"] = [p.label() for p in self.accepted_policies]
        if self.witnesses:
            data["witnesses"] = [{"name": w.name, "key": w.key.text} for w in self.witnesses]
        if self.witness_quorum is not None:
            data["witness_quorum"] = self.witness_quorum
        return data


_PLAIN_HINT = (
    "write plain YAML as attest trust add does: no anchors (&), aliases (*), "
    "merge keys (<<), lists or mappings as keys, or repeated keys"
)


_TOP_FIELDS = {
    "version",
    "threshold",
    "keys",
    "revoked",
    "requirements",
    "revocation_roles",
    "timestamp_authorities",
    "accepted_policies",
    "witnesses",
    "witness_quorum",
}


def _parse(data: Any, source: str) -> TrustStore:
    top = entry_fields(data, _TOP_FIELDS, {"keys"}, source)
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
        entry = entry_fields(
            raw,
            {"keyid", "name", "algorithm", "not_before", "not_after", "pem", "roles", "targets"},
            {"name", "pem"},
            where,
        )
        public = load_public_key_pem(
            text_field(entry["pem"], f"{where}.pem"), source=f"{where}.pem"
        )
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
            name=text_field(entry["name"], f"{where}.name"),
            public_key=public,
            not_before=time_field(entry.get("not_before"), f"{where}.not_before"),
            not_after=time_field(entry.get("not_after"), f"{where}.not_after"),
            roles=roles_field(entry.get("roles"), f"{where}.roles"),
            targets=targets_field(entry.get("targets"), f"{where}.targets"),
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
        entry = entry_fields(raw, {"keyid", "revoked_at", "reason"}, {"keyid"}, where)
        keyid = text_field(entry["keyid"], f"{where}.keyid").lower()
        if len(keyid) != 64 or any(c not in "0123456789abcdef" for c in keyid):
            raise ConfigError(f"{where}.keyid must be 64 hex digits")
        reason = entry.get("reason") or ""
        revoked.append(
            RevokedKey(
                keyid, time_field(entry.get("revoked_at"), f"{where}.revoked_at"), str(reason)
            )
        )
    if threshold > len(keys):
        raise ConfigError(
            f"{source}: threshold {threshold} can never be met with {len(keys)} key(s)",
            hint="add keys with: attest trust add PUBKEY --trust FILE, or lower the threshold",
        )
    raw_roles = top.get("revocation_roles")
    witnesses = witnesses_field(top.get("witnesses"), f"{source}: witnesses")
    return TrustStore(
        tuple(keys),
        tuple(revoked),
        threshold,
        source,
        requirements=requirements_field(top.get("requirements"), f"{source}: requirements"),
        timestamp_authorities=authorities_field(
            top.get("timestamp_authorities"), f"{source}: timestamp_authorities"
        ),
        revocation_roles=None if raw_roles is None else roles_field(raw_roles, f"{source}: roles"),
        accepted_policies=accepted_policies_field(
            top.get("accepted_policies"), f"{source}: accepted_policies"
        ),
        witnesses=witnesses,
        witness_quorum=witness_quorum_field(
            top.get("witness_quorum"), len(witnesses), f"{source}: witness_quorum"
        ),
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
    targets: tuple[str, ...] = (),
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
    key = TrustedKey(keyid, name, public, not_before, not_after, roles, targets)
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
