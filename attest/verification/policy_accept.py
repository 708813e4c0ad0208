"""Which policies a server accepts a certificate under (``attest verify --require-policy``
and the trust store's ``accepted_policies:``), and the certificate's verdict counts.

An entry is ``ID`` or ``ID@>=VERSION`` (``clinical-strict``, ``clinical-strict@>=2``,
``site-policy@>=1.3``): a certificate is accepted when the policy it records (``predicate.policy``,
signed) has that id and, with ``@>=``, a version at least ``VERSION`` (dotted whole numbers,
compared number by number; ``1`` equals ``1.0``). Only the policy's own id counts: a site policy
that ``extends:`` clinical-strict records its own id, and is accepted only when that id is
listed (the certificate does not say what a policy extends, and the verifier never infers it).

The verifier needs no policy file and imports neither torch nor numpy (nor pydantic).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from attest.core.strict_yaml import excerpt
from attest.core.text import safe_text
from attest.errors import ConfigError

__all__ = [
    "AcceptedPolicy",
    "accepted_policies_field",
    "parse_accepted_policy",
    "policy_refusal",
    "verdict_counts",
]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_VERSION = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9}){0,7}")
_SYNTAX_HINT = "write ID or ID@>=VERSION, e.g. clinical-strict or clinical-strict@>=2"
# The finding verdicts a certificate records (attest.policy.model.Verdict), in display order.
VERDICTS = ("pass", "warn", "fail", "waived", "not_computed")


def _numbers(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split(".")]
    while len(parts) > 1 and parts[-1] == 0:  # 1.0 == 1
        parts.pop()
    return tuple(parts)


@dataclass(frozen=True)
class AcceptedPolicy:
    """A policy id a server accepts, optionally from a minimum version on."""

    id: str
    min_version: str | None = None

    def label(self) -> str:
        return self.id if self.min_version is None else f"{self.id}@>={self.min_version}"

    def refusal(self, policy_id: str, version: str) -> str | None:
        """Why a certificate under ``policy_id`` ``version`` does not meet this entry."""
        if policy_id != self.id:
            return f"policy {self.id!r} is required"
        if self.min_version is None:
            return None
        if not _VERSION.fullmatch(version):
            return (
                f"version {self.min_version} or later of {self.id} is required, and the "
                f"recorded version {safe_text(version, 64)!r} is not dotted whole numbers"
            )
        if _numbers(version) < _numbers(self.min_version):
            return f"version {self.min_version} or later of {self.id} is required"
        return None


def parse_accepted_policy(text: Any, where: str) -> AcceptedPolicy:
    """Parse ``ID`` or ``ID@>=VERSION``; a :class:`ConfigError` (exit 2) naming ``where``."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where} must be a policy id, got {excerpt(text)}", hint=_SYNTAX_HINT)
    policy_id, at, condition = text.strip().partition("@")
    if not _ID.fullmatch(policy_id):
        raise ConfigError(
            f"{where}: {excerpt(policy_id)} is not a policy id (letters, digits, '.', '_', '-')",
            hint=_SYNTAX_HINT,
        )
    if not at:
        return AcceptedPolicy(policy_id)
    if not condition.startswith(">="):
        raise ConfigError(
            f"{where}: {excerpt(text)} has an unsupported version condition "
            f"{excerpt('@' + condition)}; only @>=VERSION is supported",
            hint=_SYNTAX_HINT,
        )
    version = condition[2:].strip()
    if not _VERSION.fullmatch(version):
        raise ConfigError(
            f"{where}: {excerpt(version)} in {excerpt(text)} is not a version "
            "(dotted whole numbers, e.g. 2 or 1.3)",
            hint=_SYNTAX_HINT,
        )
    return AcceptedPolicy(policy_id, version)


def accepted_policies_field(value: Any, where: str) -> tuple[AcceptedPolicy, ...] | None:
    """The trust store's ``accepted_policies:`` list (``None`` when absent: any policy)."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ConfigError(
            f"{where} must be a non-empty list of policy ids",
            hint="e.g. accepted_policies: [clinical-strict@>=1]; leave it out to accept any",
        )
    found = tuple(parse_accepted_policy(v, f"{where}[{i}]") for i, v in enumerate(value))
    if len({p.id for p in found}) != len(found):
        raise ConfigError(f"{where} names a policy twice")
    return found


def policy_refusal(
    policy: Mapping[str, Any], lists: Sequence[tuple[str, Sequence[AcceptedPolicy]]]
) -> str | None:
    """Why the recorded ``policy`` is not accepted (``None`` if it is). ``lists`` are
    ``(source, entries)``: the policy must meet one entry of every non-empty list."""
    policy_id, version = str(policy.get("id")), str(policy.get("version"))
    for source, entries in lists:
        if not entries:
            continue
        why = [w for e in entries if (w := e.refusal(policy_id, version)) is not None]
        if len(why) == len(entries):
            same = [w for e, w in zip(entries, why, strict=True) if e.id == policy_id]
            listed = ", ".join(e.label() for e in entries)
            return (
                f"certified under {safe_text(policy_id, 128)} {safe_text(version, 64)}; "
                f"{source} accepts only {listed}" + (f" ({same[0]})" if same else "")
            )
    return None


def verdict_counts(predicate: Mapping[str, Any]) -> dict[str, int]:
    """How many recorded findings have each verdict (``pass``, ``warn``, ``fail``, ...)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for finding in predicate.get("findings") or []:
        verdict = finding.get("verdict") if isinstance(finding, Mapping) else None
        key = verdict if verdict in VERDICTS else "other"
        counts[key] = counts.get(key, 0) + 1
    return counts
