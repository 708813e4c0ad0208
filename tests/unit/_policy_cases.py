"""Rows of the verify table (tests/unit/verification/test_verify_table.py) for the policies a
server accepts: each certificate is refused with POLICY_NOT_ACCEPTED."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from _certfactory import World

from attest.verification.policy_accept import parse_accepted_policy

Case = Callable[[World], tuple[Path, dict[str, Any]]]


def _under(w: World, policy_id: str, version: str = "1") -> Path:
    policy = {"id": policy_id, "version": version, "digest": {"sha256": "b" * 64}}
    return w.write(w.envelope(policy=policy))


def _accepting(w: World, *entries: str) -> Any:
    accepted = tuple(parse_accepted_policy(e, "test") for e in entries)
    return replace(w.trust, accepted_policies=accepted)


def research_under_strict_trust(w: World) -> tuple[Path, dict[str, Any]]:
    return _under(w, "research"), {"trust": _accepting(w, "clinical-strict")}


def research_under_required_strict(w: World) -> tuple[Path, dict[str, Any]]:
    return _under(w, "research"), {
        "accepted_policies": [parse_accepted_policy("clinical-strict", "t")]
    }


def strict_version_too_old(w: World) -> tuple[Path, dict[str, Any]]:
    required = [parse_accepted_policy("clinical-strict@>=2", "t")]
    return _under(w, "clinical-strict", "1"), {"accepted_policies": required}


def strict_minor_version_too_old(w: World) -> tuple[Path, dict[str, Any]]:
    return _under(w, "clinical-strict", "1.9"), {"trust": _accepting(w, "clinical-strict@>=1.10")}


def strict_version_not_numeric(w: World) -> tuple[Path, dict[str, Any]]:
    return _under(w, "clinical-strict", "2-beta"), {"trust": _accepting(w, "clinical-strict@>=1")}


def site_policy_extending_strict(w: World) -> tuple[Path, dict[str, Any]]:
    # site-clinical extends clinical-strict; the certificate records its own id only
    return _under(w, "site-clinical"), {"trust": _accepting(w, "clinical-strict")}


def trust_accepts_but_flag_requires_other(w: World) -> tuple[Path, dict[str, Any]]:
    required = [parse_accepted_policy("site-clinical", "t")]
    return _under(w, "clinical-strict"), {
        "trust": _accepting(w, "clinical-strict", "site-clinical"),
        "accepted_policies": required,
    }


def id_differs_only_in_case(w: World) -> tuple[Path, dict[str, Any]]:
    return _under(w, "Clinical-Strict"), {"trust": _accepting(w, "clinical-strict")}


POLICY_ROWS: list[tuple[Case, str]] = [
    (research_under_strict_trust, "POLICY_NOT_ACCEPTED"),
    (research_under_required_strict, "POLICY_NOT_ACCEPTED"),
    (strict_version_too_old, "POLICY_NOT_ACCEPTED"),
    (strict_minor_version_too_old, "POLICY_NOT_ACCEPTED"),
    (strict_version_not_numeric, "POLICY_NOT_ACCEPTED"),
    (site_policy_extending_strict, "POLICY_NOT_ACCEPTED"),
    (trust_accepts_but_flag_requires_other, "POLICY_NOT_ACCEPTED"),
    (id_differs_only_in_case, "POLICY_NOT_ACCEPTED"),
]
