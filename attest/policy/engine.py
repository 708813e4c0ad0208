"""Evaluating evidence against a policy: :func:`evaluate` and the engine behind it.

Reads each rule's observations out of the evidence (items, summary, operator rows, model
metrics or the check itself), compares them with the rule's threshold for the evidence's
precision, and applies policy waivers and accepted ``@attest.unstable_grad`` annotations.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from attest.core.validation import validation_problems
from attest.errors import EvidenceError
from attest.evidence.consistency import require_consistent
from attest.evidence.model import CheckItem, Evidence, Metric, Subject
from attest.policy.model import (
    _ORDERED,
    AppliedWaiver,
    Finding,
    Findings,
    Policy,
    PolicySummary,
    Rule,
    Threshold,
    Verdict,
    load_evidence,
    load_policy,
    policy_digest,
)
from attest.policy.training_log import training_log_findings

__all__ = ["Evaluator", "evaluate", "precision_of"]


def precision_of(evidence: Evidence) -> str | None:
    for section in (evidence.model, evidence.environment):
        value = section.get("precision")
        if isinstance(value, str):
            return value
    return None


def _matches(patterns: list[str], value: str | None) -> bool:
    return value is not None and any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _subject_selected(rule: Rule, subject: Subject) -> bool:
    if rule.operators and not _matches(rule.operators, subject.op):
        return False
    return not (rule.modules and not _matches(rule.modules, subject.module))


def _compare(observed: Metric, comparator: str, threshold: Threshold) -> bool | None:
    """True/False, or None if ``observed`` cannot be compared (wrong type, not finite)."""
    if comparator == "==":
        if isinstance(threshold, bool) or isinstance(observed, bool):
            return (
                isinstance(observed, bool) and isinstance(threshold, bool) and observed == threshold
            )
        if isinstance(threshold, str) or isinstance(observed, str):
            return observed == threshold
        if isinstance(observed, (int, float)) and isinstance(threshold, (int, float)):
            return bool(observed == threshold)
        return None
    if isinstance(observed, bool) or not isinstance(observed, (int, float)):
        return None
    if isinstance(observed, float) and math.isnan(observed):
        return None
    return bool(_ORDERED[comparator](observed, threshold))


_MODEL = Subject(kind="model")


def _operator_subject(row: Any) -> Subject:  # an OperatorRow (reads like a mapping)
    op_id = row.get("id")
    return Subject(
        kind="operator",
        operator_id=op_id if isinstance(op_id, int) and not isinstance(op_id, bool) else None,
        op=str(row["op"]) if row.get("op") is not None else None,
        module=str(row["module"]) if row.get("module") is not None else None,
    )


class _Observation:
    """One value a rule reads: from an item, a summary, an operator row or model metrics."""

    __slots__ = ("item_message", "item_status", "present", "reason", "skipped", "subject", "value")

    def __init__(
        self,
        subject: Subject,
        value: Metric,
        *,
        present: bool,
        item_status: str | None = None,
        reason: str | None = None,
        item: CheckItem | None = None,
    ) -> None:
        self.subject = subject
        self.item_message = item.message if item is not None else ""
        # a check marks an item it has nothing to do for (an allocation op for gradcheck)
        self.skipped = item is not None and item.metrics.get("skipped") is True
        self.value = value
        self.present = present
        self.item_status = item_status
        self.reason = reason  # why an operator row's figure was not measured


def _observations(rule: Rule, evidence: Evidence) -> Iterator[_Observation]:
    result = evidence.checks[rule.check]
    metric = rule.metric
    if rule.source == "check":
        yield _Observation(_MODEL, result.status, present=True, item_status="pass")
    elif rule.source == "items":
        for item in result.items:
            if metric is None:
                yield _Observation(
                    item.subject, item.status, present=True, item_status=item.status, item=item
                )
            else:
                yield _item_observation(item, metric)
    elif rule.source == "summary":
        assert metric is not None
        yield _Observation(_MODEL, result.summary.get(metric), present=metric in result.summary)
    elif rule.source == "model":
        assert metric is not None
        metrics = evidence.model_metrics
        yield _Observation(_MODEL, metrics.get(metric), present=metric in metrics)
    else:
        assert metric is not None
        for row in evidence.operators:
            value = row.get(metric)
            if isinstance(value, (dict, list)):
                value = None
            reasons = row.get("not_computed")
            reason = (
                reasons.get(metric) or reasons.get(metric.removesuffix("_pct"))
                if isinstance(reasons, Mapping)
                else None
            )
            yield _Observation(
                _operator_subject(row),
                value,
                present=value is not None,
                reason=str(reason) if reason else None,
            )


def _item_observation(item: CheckItem, metric: str) -> _Observation:
    return _Observation(
        item.subject,
        item.metrics.get(metric),
        present=metric in item.metrics,
        item_status=item.status,
        item=item,
    )


def _finding(rule: Rule, subject: Subject, verdict: Verdict, **fields: Any) -> Finding:
    """A finding about ``subject`` under ``rule``: the one place that copies the rule's id,
    check and severity into it."""
    return Finding(
        rule=rule.id,
        check=rule.check,
        subject=subject,
        verdict=verdict,
        severity=rule.severity,
        **fields,
    )


class Evaluator:
    """Evaluates one evidence file against one policy at one reference time."""

    def __init__(self, evidence: Evidence, policy: Policy, at: datetime) -> None:
        self.evidence = evidence
        self.policy = policy
        self.at = at
        self.precision = precision_of(evidence)
        self.active_waivers = [w for w in policy.waivers if w.expires >= at.date()]
        self.expired = [w for w in policy.waivers if w.expires < at.date()]
        self.annotations = [a for a in evidence.annotations if isinstance(a, Mapping)]

    # -- waivers
    def _policy_waiver(self, rule: Rule, subject: Subject) -> AppliedWaiver | None:
        for waiver in self.active_waivers:
            if waiver.rule is not None and waiver.rule != rule.id:
                continue
            if waiver.check is not None and waiver.check != rule.check:
                continue
            names = [subject.module, subject.op, subject.name, subject.label()]
            if waiver.subject != "*" and not any(_matches([waiver.subject], n) for n in names):
                continue
            return AppliedWaiver(
                kind="policy",
                label=waiver.label(),
                approved_by=waiver.approved_by,
                justification=waiver.justification,
                reference=waiver.reference,
                expires=waiver.expires,
            )
        return None

    def _annotation_waiver(self, rule: Rule, subject: Subject) -> AppliedWaiver | None:
        accept = rule.accept_annotations
        if accept is None:
            accept = self.policy.accept_annotations
        if not accept or subject.module is None:
            return None
        for note in self.annotations:
            module = note.get("module", note.get("path"))
            if not isinstance(module, str):
                continue
            checks = note.get("checks")
            if isinstance(checks, list) and checks and rule.check not in checks:
                continue
            inside = (
                module == "" or subject.module == module or subject.module.startswith(module + ".")
            )
            if inside:
                return AppliedWaiver(
                    kind="annotation",
                    label=f"@unstable_grad:{module or '<root>'}",
                    justification=str(note.get("reason", "")) or "annotated @attest.unstable_grad",
                    module=module,
                )
        return None

    def _negative(self, rule: Rule, subject: Subject, verdict: Verdict, **fields: Any) -> Finding:
        """A failing (or warning) finding, waived if a waiver or accepted annotation covers it."""
        waiver = self._policy_waiver(rule, subject) or self._annotation_waiver(rule, subject)
        message = fields.pop("message")
        if waiver is not None:
            message = f"{message} [waived by {waiver.label}: {waiver.justification}]"
            verdict = "waived"
        return _finding(
            rule,
            subject,
            verdict,
            message=message,
            waiver=waiver,
            **fields,
        )

    def _not_computed(self, rule: Rule, subject: Subject, why: str) -> Finding:
        if rule.required:
            return self._negative(
                rule, subject, rule.severity, message=f"required but not computed: {why}"
            )
        return _finding(
            rule,
            subject,
            "not_computed",
            message=f"not computed: {why}",
        )

    def _not_applicable(self, rule: Rule, why: str) -> Finding:
        """The spec did not ask for this check: the rule's ``when_not_applicable`` decides."""
        message = f"not applicable: {why}"
        verdict = rule.when_not_applicable or rule.severity
        if verdict == "accept":
            return _finding(
                rule,
                _MODEL,
                "not_computed",
                message=message,
            )
        return self._negative(rule, _MODEL, verdict, message=message)

    # -- rules
    def rule_findings(self, rule: Rule) -> list[Finding]:
        result = self.evidence.checks.get(rule.check)
        if result is None:
            return [
                self._not_computed(rule, _MODEL, f"check {rule.check!r} is not in the evidence")
            ]
        if result.status == "not_applicable":
            return [self._not_applicable(rule, result.reason or "the spec did not ask for it")]
        if result.status != "computed":
            why = f"check {rule.check!r} is {result.status}" + (
                f": {result.reason}" if result.reason else ""
            )
            return [self._not_computed(rule, _MODEL, why)]
        threshold = rule.threshold_for(self.precision)
        out: list[Finding] = []
        seen_metric = False
        considered = 0
        for obs in _observations(rule, self.evidence):
            if not _subject_selected(rule, obs.subject):
                continue
            considered += 1
            seen_metric = seen_metric or obs.present
            finding = self._observation_finding(rule, obs, threshold)
            if finding is not None:
                out.append(finding)
        if rule.metric is not None and not seen_metric and considered:
            where = {
                "items": "items of",
                "summary": "summary of",
                "operators": "operator rows for",
                "model": "model metrics for",
            }[rule.source]
            return [
                self._not_computed(
                    rule, _MODEL, f"no {where} check {rule.check!r} report metric {rule.metric!r}"
                )
            ]
        if considered < rule.min_subjects:
            return [
                self._not_computed(
                    rule,
                    _MODEL,
                    f"check {rule.check!r} reported {considered} subject(s) for this rule, "
                    f"fewer than the {rule.min_subjects} it requires",
                )
            ]
        if not considered:
            why = (
                "no subject matches the rule's operator/module patterns"
                if rule.operators or rule.modules
                else f"check {rule.check!r} ran and reported no subjects to hold against this rule"
            )
            return [
                _finding(
                    rule,
                    _MODEL,
                    "pass",
                    threshold=threshold,
                    comparator=rule.comparator if rule.metric else None,
                    message=why,
                )
            ]
        return out

    def _observation_finding(
        self, rule: Rule, obs: _Observation, threshold: Threshold | None
    ) -> Finding | None:
        subject = obs.subject
        if rule.source == "check":  # reached only for a computed check
            return _finding(
                rule,
                subject,
                "pass",
                observed=obs.value,
                message=f"check {rule.check!r} was computed",
            )
        if obs.skipped:  # listed, never a failure: the check says it does not apply here
            return _finding(
                rule,
                subject,
                "not_computed",
                message=f"not applicable: {obs.item_message or 'skipped by the check'}",
            )
        if rule.metric is None:  # the check's own reading of the item
            status = obs.item_status
            if status == "pass":
                return _finding(
                    rule,
                    subject,
                    "pass",
                    observed=status,
                    message="the check passed this subject",
                )
            if status in ("not_computed", "error"):
                detail = f": {obs.item_message}" if obs.item_message else ""
                return self._not_computed(
                    rule, subject, f"the check reports {status} for {subject.label()}{detail}"
                )
            verdict: Verdict = "warn" if status == "warn" else rule.severity
            return self._negative(
                rule,
                subject,
                verdict,
                observed=status,
                message=f"the check reports {status}: {obs.item_message}"
                if obs.item_message
                else f"the check reports {status} for {subject.label()}",
            )
        if obs.value is None:
            if obs.item_status in ("not_computed", "error"):
                return self._not_computed(
                    rule, subject, f"{rule.metric} of {subject.label()} is {obs.item_status}"
                )
            if obs.reason:  # an operator row says why this figure was not measured: listed
                return _finding(
                    rule,
                    subject,
                    "not_computed",
                    message=f"{rule.metric} not measured for {subject.label()}: {obs.reason}",
                )
            return None  # the metric does not apply to this subject (e.g. an integer-valued op)
        assert threshold is not None
        ok = _compare(obs.value, rule.comparator, threshold)
        text = f"{rule.metric} = {obs.value!r} (required {rule.comparator} {threshold!r})"
        common: dict[str, Any] = {
            "observed": obs.value,
            "threshold": threshold,
            "comparator": rule.comparator,
        }
        if ok:
            return _finding(
                rule,
                subject,
                "pass",
                message=text,
                **common,
            )
        if ok is None:
            text = (
                f"{rule.metric} = {obs.value!r} cannot be compared {rule.comparator} {threshold!r}"
            )
        return self._negative(
            rule, subject, rule.severity, message=f"{subject.label()}: {text}", **common
        )


def evaluate(
    evidence: Evidence | Mapping[str, Any] | str | Path,
    policy: Policy | str | Path,
    *,
    at: datetime | None = None,
) -> Findings:
    """Hold evidence against a policy and return the findings (a pure function of its inputs).

    ``evidence`` and ``policy`` may be loaded objects or file paths. ``at`` is the reference
    time for waiver expiry (default: now, UTC); pass it for reproducible audits.

    Every status in the evidence is only the collector's claim: before any rule reads one,
    :func:`attest.evidence.consistency.require_consistent` re-derives each claim it can from
    the figures and the check's recorded thresholds, and evidence whose claims disagree with
    them is refused (:class:`~attest.evidence.consistency.InconsistentEvidence`), so every
    verdict follows from the figures.
    """
    source = ""
    if isinstance(evidence, (str, Path)):
        source = str(evidence)
        evidence = load_evidence(evidence)
    elif not isinstance(evidence, Evidence):
        try:
            evidence = Evidence.model_validate(evidence)
        except ValidationError as exc:
            raise EvidenceError(f"evidence is not valid: {validation_problems(exc)}") from None
    require_consistent(evidence, source)
    if not isinstance(policy, Policy):
        policy = load_policy(policy)
    moment = at or datetime.now(timezone.utc)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    evaluator = Evaluator(evidence, policy, moment)
    findings = [f for rule in policy.rules for f in evaluator.rule_findings(rule)]
    findings += training_log_findings(evidence, policy)
    counts = {v: 0 for v in ("pass", "fail", "warn", "waived", "not_computed")}
    for f in findings:
        counts[f.verdict] += 1
    return Findings(
        evaluated_at=moment.replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        policy=PolicySummary(
            id=policy.id, version=policy.version, digest={"sha256": policy_digest(policy)}
        ),
        model={k: evidence.model[k] for k in ("name", "version") if k in evidence.model},
        precision=evaluator.precision,
        verdict="fail" if counts["fail"] else "pass",
        counts=counts,
        findings=findings,
        expired_waivers=[w.label() for w in evaluator.expired],
    )
