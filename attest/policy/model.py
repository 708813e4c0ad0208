"""Policies (``policies/*.yaml``) and their evaluation of evidence into findings.

A :class:`Policy` is a list of :class:`Rule` objects, each holding one measured quantity of one
check against a threshold, plus :class:`Waiver` objects that accept named failures for a
documented reason until an expiry date. :func:`evaluate` is a pure function of the evidence,
the policy and the reference time ``at``: the same inputs give the same findings.

Where a rule reads its numbers (``source``):

- ``items`` (default): each :class:`attest.evidence.model.CheckItem` of the rule's check, metric
  ``item.metrics[metric]``; one finding per item. Without a ``metric`` the rule takes each
  item's own status (the check's reading at the tolerances it records in its parameters).
- ``summary``: ``evidence.checks[check].summary[metric]``; one finding about the model.
- ``operators``: each per-operator row of ``evidence.operators`` (docs/metrics.md),
  field ``metric``; one finding per operator.
- ``model``: ``evidence.model_metrics[metric]``; one finding about the model.
- ``check``: the check itself: it passes when the check was computed (no metric); for a check
  whose items are informational, such as ``thread_sensitivity`` on a CPU.

A check that is missing from the evidence, or whose status is not ``computed``, or a metric
that no subject reports, gives a ``not_computed`` finding; when the rule is ``required`` that
finding counts as the rule's severity (a required check that was not measured never passes
silently). Waived findings keep their place in the list with verdict ``waived`` and the
waiver that covered them; expired waivers waive nothing.

Example::

    policy = load_policy("policies/clinical-strict.yaml")
    findings = evaluate(evidence, policy, at=datetime(2026, 1, 1, tzinfo=timezone.utc))
    print(findings.verdict, [f.rule for f in findings.failed])
"""

from __future__ import annotations

import importlib.resources
import operator
import re
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from attest._version import __version__
from attest.certificate.signing import canonical_json
from attest.core.strict_yaml import load_yaml_mapping
from attest.core.validation import validation_problems
from attest.errors import PolicyError
from attest.evidence.model import CHECK_IDS, CheckId, Metric, Subject, load_evidence
from attest.policy.evidence_rules import EvidenceRules

__all__ = [
    "FINDINGS_SCHEMA_VERSION",
    "AppliedWaiver",
    "Comparator",
    "Finding",
    "Findings",
    "Policy",
    "PolicySummary",
    "Rule",
    "TargetVerdict",
    "TrainingLogRules",
    "Verdict",
    "Waiver",
    "load_evidence",
    "load_policy",
    "policy_digest",
]

FINDINGS_SCHEMA_VERSION = "1"

Comparator = Literal[">=", ">", "<=", "<", "=="]
Severity = Literal["fail", "warn"]
NotApplicable = Literal["fail", "warn", "accept"]
Source = Literal["items", "summary", "operators", "model", "check"]
Precision = Literal["float32", "bfloat16", "float16"]
Verdict = Literal["pass", "fail", "warn", "waived", "not_computed"]
Threshold = float | int | bool | str

_IDENT = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"
_ORDERED: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Rule(_Strict):
    """One requirement: ``metric`` of ``check`` compared with ``threshold`` (see the module doc).

    ``thresholds`` overrides ``threshold`` for the evidence's deployed precision (float16
    rounds at 2^-11, so a float16 model cannot meet a float32 fidelity bound). ``operators``
    and ``modules`` are glob patterns (``aten.convolution*``, ``encoder.*``) that restrict the
    rule to matching subjects. ``required``: a check or metric that was not measured counts as
    the rule's severity instead of ``not_computed``; so do fewer than ``min_subjects``
    subjects. A computed check with no subjects at all (no custom ops in the model, say)
    passes the rule with a finding that says so.
    """

    id: str = Field(pattern=_IDENT, max_length=128)
    check: CheckId
    description: str = ""
    source: Source = "items"
    metric: str | None = Field(default=None, min_length=1, max_length=128)
    comparator: Comparator = ">="
    threshold: Threshold | None = None
    thresholds: dict[Precision, float] = Field(default_factory=dict)
    severity: Severity = "fail"
    operators: list[str] = Field(default_factory=list)
    modules: list[str] = Field(default_factory=list)
    required: bool = True
    min_subjects: int = Field(default=0, ge=0)
    accept_annotations: bool | None = None
    when_not_applicable: NotApplicable | None = Field(
        default=None,
        description="verdict when the check reports not_applicable (the spec did not ask for "
        "it, e.g. no loss or no export): fail, warn, or accept (listed as not_computed); "
        "default: the rule's severity",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        if self.source == "check":
            if self.metric is not None or self.threshold is not None or self.thresholds:
                raise ValueError("source 'check' takes no metric or threshold")
            if self.operators or self.modules:
                raise ValueError("operator/module patterns do not apply to source 'check'")
            return self
        if self.metric is None:
            if self.source != "items":
                raise ValueError(f"source {self.source!r} needs a metric")
            if self.threshold is not None or self.thresholds:
                raise ValueError("a threshold needs a metric to compare")
            return self
        if self.threshold is None:
            raise ValueError(f"metric {self.metric!r} needs a threshold")
        if self.comparator in _ORDERED:
            for value in [self.threshold, *self.thresholds.values()]:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError(
                        f"comparator {self.comparator!r} needs a numeric threshold, got {value!r}"
                    )
        elif self.thresholds:
            raise ValueError("per-precision thresholds need an ordering comparator (>=, >, <=, <)")
        if (self.operators or self.modules) and self.source in ("summary", "model"):
            raise ValueError(f"operator/module patterns do not apply to source {self.source!r}")
        return self

    def threshold_for(self, precision: str | None) -> Threshold | None:
        """The threshold that applies to evidence collected at ``precision``."""
        if precision is not None and precision in self.thresholds:
            return self.thresholds[precision]
        return self.threshold


class Waiver(_Strict):
    """An approved exception: findings of ``rule`` (or of every rule on ``check``) whose subject
    matches ``subject`` (a glob over the module path, operator name, parameter name or full
    label) are listed as ``waived`` until ``expires`` (inclusive, UTC)."""

    id: str | None = Field(default=None, pattern=_IDENT, max_length=128)
    rule: str | None = Field(default=None, min_length=1)
    check: CheckId | None = None
    subject: str = Field(default="*", min_length=1)
    approved_by: str = Field(min_length=1)
    justification: str = Field(min_length=1)
    reference: str = Field(min_length=1)
    expires: date

    @model_validator(mode="after")
    def _names_a_target(self) -> Waiver:
        if self.rule is None and self.check is None:
            raise ValueError("a waiver names the rule or the check it waives")
        return self

    def label(self) -> str:
        """How findings refer to this waiver."""
        return self.id or f"{self.rule or self.check}:{self.subject}"


class TrainingLogRules(_Strict):
    """Thresholds on a training log's summary (``attest certify --training-log``; evaluated
    only when a log is given). ``required``: a figure the log does not allow to compute (one
    epoch only, too few points for the fit) counts as ``severity`` instead of not_computed."""

    min_fidelity_half_life_epochs: float | None = Field(default=None, gt=0)
    max_memory_delta_rsd_pct: float | None = Field(default=None, ge=0)
    finite_gradients: bool = False
    required: bool = True
    severity: Severity = "fail"


class Policy(_Strict):
    """A named, versioned set of rules and waivers (``schemas/policy.schema.json``)."""

    id: str = Field(pattern=_IDENT, max_length=128)
    version: str = Field(min_length=1, max_length=64)
    description: str = ""
    accept_annotations: bool = False
    require_every_check: bool = False
    extends: str | None = Field(
        default=None,
        description="the base policy: a file relative to this one, or a shipped policy by name "
        "(clinical-strict, research)",
    )
    settings: dict[str, float | int | bool | str | list[int]] = Field(
        default_factory=dict,
        description="check settings (attest.collection.context.CheckSettings fields) that certify "
        "collects with, e.g. ig_tolerance; the tolerances behind the checks' own item verdicts",
    )
    rules: list[Rule] = Field(min_length=1)
    waivers: list[Waiver] = Field(default_factory=list)
    diff: dict[str, float] | None = Field(
        default=None,
        description="tolerances of `attest diff` between releases (attest.report.diff.DiffTolerances)",
    )
    training_log: TrainingLogRules | None = Field(
        default=None,
        description="thresholds on a training log given to certify (docs/policy-reference.md)",
    )
    evidence: EvidenceRules | None = Field(
        default=None,
        description="what attest certify --evidence accepts: signed statements from trusted "
        "collectors, their age and attest version (docs/policy-reference.md)",
    )
    required_targets: list[str] = Field(
        default_factory=list,
        description="hardware targets (names such as cpu:x86_64:avx512, or fnmatch patterns such "
        "as cuda:*) that `attest certify --evidence` requires to be present and to pass; empty: "
        "every target whose evidence is given is required",
    )

    @model_validator(mode="after")
    def _cross_references(self) -> Policy:
        ids = [r.id for r in self.rules]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"rule ids must be unique; repeated: {', '.join(repeated)}")
        for index, waiver in enumerate(self.waivers):
            if waiver.rule is not None and waiver.rule not in ids:
                raise ValueError(
                    f"waivers[{index}].rule {waiver.rule!r} names no rule of this policy"
                )
        if self.require_every_check:
            covered = {r.check for r in self.rules if r.required}
            missing = [c for c in CHECK_IDS if c not in covered]
            if missing:
                raise ValueError(
                    "require_every_check is set but these checks have no required rule: "
                    + ", ".join(missing)
                )
        return self


class PolicySummary(_Strict):
    """The policy a findings file was evaluated against (as the certificate records it)."""

    id: str
    version: str
    digest: dict[str, str]


class AppliedWaiver(_Strict):
    """What waived a finding: a policy waiver or an ``@attest.unstable_grad`` annotation."""

    kind: Literal["policy", "annotation"]
    label: str
    approved_by: str | None = None
    justification: str
    reference: str | None = None
    expires: date | None = None
    module: str | None = None


class Finding(_Strict):
    """One rule held against one subject."""

    rule: str
    check: CheckId | Literal["training_log"]
    subject: Subject
    verdict: Verdict
    observed: Metric = None
    threshold: Metric = None
    comparator: Comparator | None = None
    severity: Severity
    message: str
    waiver: AppliedWaiver | None = None
    # the hardware target whose evidence this finding holds (``attest certify --evidence``)
    target: str | None = None


class TargetVerdict(_Strict):
    """One hardware target's verdict in a certification over several targets
    (``attest certify --evidence``); its findings carry ``target`` = :attr:`name`."""

    name: str
    verdict: Literal["pass", "fail", "missing"]
    required: bool
    counts: dict[str, int] = Field(default_factory=dict)
    evidence: str | None = None  # the evidence file it was evaluated from
    evidence_sha256: str | None = None


class Findings(_Strict):
    """The findings file (``findings.json``): every finding and the overall verdict.

    Over several targets, :attr:`targets` lists each target's verdict and every finding names
    its target; the verdict is pass only if every required target is present and passes.
    """

    schema_version: str = FINDINGS_SCHEMA_VERSION
    tool_version: str = __version__
    evaluated_at: str
    policy: PolicySummary
    model: dict[str, Any] = Field(default_factory=dict)
    precision: str | None = None
    verdict: Literal["pass", "fail"]
    counts: dict[str, int]
    findings: list[Finding]
    expired_waivers: list[str] = Field(default_factory=list)
    targets: list[TargetVerdict] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def failed(self) -> list[Finding]:
        """Findings that fail the policy."""
        return [f for f in self.findings if f.verdict == "fail"]

    @property
    def waived(self) -> list[Finding]:
        return [f for f in self.findings if f.verdict == "waived"]

    def waivers_used(self) -> list[dict[str, Any]]:
        """Each distinct waiver that waived at least one finding (for the certificate)."""
        seen: dict[str, dict[str, Any]] = {}
        for f in self.findings:
            if f.waiver is not None and f.waiver.label not in seen:
                seen[f.waiver.label] = f.waiver.model_dump(mode="json")
        return list(seen.values())


# ---------------------------------------------------------------- loading


def parse_policy(data: Any, *, source: str = "policy") -> Policy:
    """Validate policy data; every problem names its key (``rules[2].comparator``) and ``source``."""
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        raise PolicyError(
            f"{source} is not a valid policy: {validation_problems(exc)}",
            hint="see docs/policy-reference.md and schemas/policy.schema.json",
        ) from None


_MAX_EXTENDS = 4


def _resolved_policy_data(path: Path, chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The file's mapping with ``extends`` resolved: the base policy's rules and waivers come
    first, then this file's; this file's other keys override the base's."""
    data = load_yaml_mapping(path, what="policy file", error=PolicyError)
    base_name = data.get("extends")
    if base_name is None:
        return data
    if not isinstance(base_name, str) or not base_name:
        raise PolicyError(
            f"policy file {path}: extends must be a path to another policy file or the name "
            "of a shipped policy",
            hint=f"shipped policies: {', '.join(shipped_policy_names())}",
        )
    base_path = _base_path(path, base_name)
    if base_path in chain or base_path == path.resolve() or len(chain) >= _MAX_EXTENDS:
        raise PolicyError(
            f"policy file {path}: extends {base_name!r} makes a cycle or a chain over {_MAX_EXTENDS} deep"
        )
    base = _resolved_policy_data(base_path, (*chain, path.resolve()))
    merged = {**base, **data}
    for key in ("rules", "waivers"):
        own, inherited = data.get(key) or [], base.get(key) or []
        if not isinstance(own, list) or not isinstance(inherited, list):
            raise PolicyError(f"policy file {path}: {key} must be a list")
        merged[key] = [*inherited, *own]
    return merged


def _base_path(path: Path, base_name: str) -> Path:
    """``extends``: a file relative to the policy that names it, else a shipped policy's name."""
    relative = (path.parent / base_name).resolve()
    if relative.exists() or not _BUILTIN_NAME.match(base_name):
        return relative
    shipped = _shipped_policy(base_name)
    if shipped is None:
        raise PolicyError(
            f"policy file {path}: extends {base_name!r}, which is neither a file next to it "
            f"({relative} does not exist) nor a shipped policy",
            hint=f"give a path relative to {path.name}, or one of the shipped policies: "
            f"{', '.join(shipped_policy_names())}",
        )
    return shipped


def _shipped_folder() -> Path:
    """The policies shipped in the package (``attest/policies``: a link to the repository's
    policies/ in a checkout, package data in an installed wheel), found the way
    importlib.resources finds package data."""
    return Path(str(importlib.resources.files("attest").joinpath("policies")))


def shipped_policy_names() -> list[str]:
    """The names of the shipped policies (``clinical-strict``, ``research``)."""
    return sorted(q.stem for q in _shipped_folder().glob("*.yaml"))


def _shipped_policy(name: str) -> Path | None:
    shipped = _shipped_folder() / f"{name}.yaml"
    return shipped.resolve() if shipped.is_file() else None


_BUILTIN_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def resolve_policy_path(path: str | Path) -> Path:
    """A policy file path; a bare name (``clinical-strict``) that is not a file here names one
    of the policies shipped with the package (``policies/NAME.yaml``)."""
    p = Path(path)
    if not p.exists() and _BUILTIN_NAME.match(str(path)):
        shipped = _shipped_policy(str(path))
        if shipped is not None:
            return shipped
        raise PolicyError(
            f"no policy file {str(path)!r} and no shipped policy of that name",
            hint=f"give a path, or one of the shipped policies: {', '.join(shipped_policy_names())}",
        )
    return p


def load_policy(path: str | Path) -> Policy:
    """Load and validate a policy YAML (or JSON) file, or a shipped policy by name
    (``clinical-strict``, ``research``).

    A policy may name a base with ``extends: RELATIVE/PATH.yaml`` or a shipped policy's name
    (``extends: clinical-strict``: a site policy adding its waivers, say): the base's rules and
    waivers come first; the digest covers the resolved whole.
    """
    p = resolve_policy_path(path)
    return parse_policy(_resolved_policy_data(p), source=f"policy file {p}")


def policy_digest(policy: Policy) -> str:
    """sha256 (hex) of the RFC 8785 canonical JSON of the parsed policy: formatting and comments
    of the file do not change it; any rule, threshold or waiver does."""
    import hashlib

    return hashlib.sha256(canonical_json(policy.model_dump(mode="json"))).hexdigest()
