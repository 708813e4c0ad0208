"""Holding the evidence of several hardware targets against one policy (``certify --evidence``).

Each target's evidence is evaluated on its own (:func:`attest.policy.engine.evaluate`), so a
target is judged only by what was measured on it; the combined :class:`Findings` lists every
finding with its ``target`` and one :class:`TargetVerdict` per target. The verdict is pass only
if every required target (the policy's ``required_targets``, names or fnmatch patterns; every
target given when it names none) has evidence and passes it. A target that is not required may
fail: the certificate records it as failed, and a server matched to it is refused
(``attest verify --check-environment``).

Evidence files are accepted together only when they are about one release: the same model
identity and weights digest, and the same spec, weights and probe files (their sha256 in
``artifacts``). Anything else is refused naming the first difference.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from attest.errors import EvidenceError
from attest.evidence.model import Evidence
from attest.policy.engine import evaluate
from attest.policy.model import Findings, Policy, TargetVerdict

__all__ = ["TargetEvidence", "check_same_release", "evaluate_targets", "target_name"]

# The artefacts every target's evidence must agree on (roles of Evidence.artifacts).
_RELEASE_ROLES = ("spec", "weights", "probe")
_TARGET_NAME_MAX = 128


@dataclass(frozen=True)
class TargetEvidence:
    """One target's evidence: its name, where it came from (a label for messages), its digest."""

    name: str
    evidence: Evidence
    source: str
    sha256: str | None = None


def target_name(evidence: Evidence) -> str:
    """The hardware target a single collect measured (``cpu:x86_64:avx2``, ``cuda:sm_90``)."""
    if evidence.targets:
        return "+".join(evidence.targets)
    target = evidence.environment.get("target")
    return str(target) if target else "unknown"


def _artifact_digest(evidence: Evidence, role: str) -> Any:
    entry = evidence.artifacts.get(role)
    return entry.get("sha256") if isinstance(entry, dict) else None


def _release_facts(evidence: Evidence) -> list[tuple[str, Any]]:
    facts: list[tuple[str, Any]] = [
        (f"model {key}", evidence.model.get(key)) for key in ("name", "version", "digest")
    ]
    facts += [(f"{role} file sha256", _artifact_digest(evidence, role)) for role in _RELEASE_ROLES]
    return facts


def check_same_release(targets: Sequence[TargetEvidence]) -> None:
    """Refuse evidence files that are not about the same release, or name a target twice."""
    if not targets:
        raise EvidenceError("no evidence given", hint="pass --evidence FILE once per target")
    first = targets[0]
    reference = _release_facts(first.evidence)
    for role in _RELEASE_ROLES:
        if _artifact_digest(first.evidence, role) is None:
            raise EvidenceError(
                f"{first.source} does not record the sha256 of its {role} file",
                hint="collect it again with this version of attest collect",
            )
    seen: dict[str, str] = {}
    for target in targets:
        if (
            not target.name
            or len(target.name) > _TARGET_NAME_MAX
            or target.name != target.name.strip()
        ):
            raise EvidenceError(f"{target.source}: target name {target.name!r} is not usable")
        for (what, want), (_, have) in zip(reference, _release_facts(target.evidence), strict=True):
            if have != want:
                raise EvidenceError(
                    f"{target.source} (target {target.name}) is for another release: its {what} "
                    f"is {have!r}, {first.source}'s is {want!r}",
                    hint="certify together only evidence of the same model artefacts and spec, "
                    "collected on different hardware",
                )
        if target.name in seen:
            raise EvidenceError(
                f"{target.source} and {seen[target.name]} are both for target {target.name!r}",
                hint="give one evidence file per target, or name them: --evidence NAME=FILE",
            )
        seen[target.name] = target.source


def _required(policy: Policy, names: list[str]) -> tuple[set[str], list[str]]:
    """The required target names among ``names``, and the policy's patterns no target matched."""
    patterns = policy.required_targets
    if not patterns:
        return set(names), []
    required = {n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)}
    missing = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    return required, missing


def evaluate_targets(
    targets: Sequence[TargetEvidence], policy: Policy, *, at: datetime | None = None
) -> Findings:
    """Evaluate each target's evidence against ``policy`` and combine (module docstring)."""
    check_same_release(targets)
    required, missing = _required(policy, [t.name for t in targets])
    per_target = [(t, evaluate(t.evidence, policy, at=at)) for t in targets]
    findings = []
    verdicts: list[TargetVerdict] = []
    counts = {v: 0 for v in ("pass", "fail", "warn", "waived", "not_computed")}
    expired: list[str] = []
    for target, result in per_target:
        findings += [f.model_copy(update={"target": target.name}) for f in result.findings]
        for key, value in result.counts.items():
            counts[key] = counts.get(key, 0) + value
        expired += [w for w in result.expired_waivers if w not in expired]
        verdicts.append(
            TargetVerdict(
                name=target.name,
                verdict=result.verdict,
                required=target.name in required,
                counts=result.counts,
                evidence=target.source,
                evidence_sha256=target.sha256,
            )
        )
    verdicts += [TargetVerdict(name=p, verdict="missing", required=True) for p in missing]
    passed = all(v.verdict == "pass" for v in verdicts if v.required)
    first = per_target[0][1]
    return first.model_copy(
        update={
            "verdict": "pass" if passed else "fail",
            "counts": counts,
            "findings": findings,
            "expired_waivers": expired,
            "targets": verdicts,
        }
    )
