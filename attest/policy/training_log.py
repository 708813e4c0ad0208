"""The policy's ``training_log:`` thresholds held against a training log's summary.

Only evaluated when the evidence carries a training log (``attest certify --training-log``);
without one these rules give no finding. Three rules, each one finding about the model:

- ``training_log.fidelity-half-life``: the fidelity half-life (``min_fidelity_half_life_epochs``)
  must be at least the threshold. A half-life reached within the log is compared; one not
  reached but projected by a significant decay is compared as projected; no significant
  decay passes. Too few points for the fit is not computed.
- ``training_log.memory-consistency``: the relative standard deviation of the per-epoch
  memory delta at most ``max_memory_delta_rsd_pct`` (needs two epochs).
- ``training_log.finite-gradients`` (``finite_gradients: true``): no sample with a NaN or Inf
  gradient.
"""

from __future__ import annotations

from typing import Any

from attest.evidence.model import Evidence, Subject
from attest.policy.model import Finding, Policy, TrainingLogRules, Verdict

__all__ = ["TRAINING_LOG_RULES", "training_log_findings"]

TRAINING_LOG_RULES = (
    "training_log.fidelity-half-life",
    "training_log.memory-consistency",
    "training_log.finite-gradients",
)
_MODEL = Subject(kind="model")


def _finding(
    rules: TrainingLogRules, rule: str, verdict: Verdict, message: str, **kw: Any
) -> Finding:
    return Finding(
        rule=rule,
        check="training_log",
        subject=_MODEL,
        verdict=verdict,
        severity=rules.severity,
        message=message,
        **kw,
    )


def _not_computed(rules: TrainingLogRules, rule: str, why: str) -> Finding:
    if rules.required:
        return _finding(rules, rule, rules.severity, f"required but not computed: {why}")
    return _finding(rules, rule, "not_computed", f"not computed: {why}")


def _at_least(
    rules: TrainingLogRules, rule: str, name: str, observed: float, threshold: float, note: str = ""
) -> Finding:
    ok = observed >= threshold
    return _finding(
        rules,
        rule,
        "pass" if ok else rules.severity,
        f"{name} = {observed:.4g}{note} (required >= {threshold:g})",
        observed=observed,
        threshold=threshold,
        comparator=">=",
    )


def _half_life(rules: TrainingLogRules, evidence: Evidence) -> Finding | None:
    threshold = rules.min_fidelity_half_life_epochs
    if threshold is None or evidence.training_log is None:
        return None
    rule = TRAINING_LOG_RULES[0]
    fid = evidence.training_log.summary.fidelity
    name = "fidelity_half_life_epochs"
    if fid.status == "reached" and fid.half_life_epochs is not None:
        return _at_least(rules, rule, name, fid.half_life_epochs, threshold)
    if fid.status == "not reached" and fid.projected_half_life_epochs is not None:
        projected = fid.projected_half_life_epochs
        return _at_least(rules, rule, name, projected, threshold, " (projected by the fit)")
    if fid.status == "not reached":
        return _finding(
            rules,
            rule,
            "pass",
            f"fidelity half-life not reached: no significant decay over {fid.epochs_covered:g} "
            f"epoch(s) ({fid.points} points; slope {fid.slope_per_epoch:.3g} per epoch)",
            threshold=threshold,
            comparator=">=",
        )
    return _not_computed(
        rules, rule, f"the log has too few fidelity points for the fit ({fid.points})"
    )


def _memory(rules: TrainingLogRules, evidence: Evidence) -> Finding | None:
    limit = rules.max_memory_delta_rsd_pct
    if limit is None or evidence.training_log is None:
        return None
    rule = TRAINING_LOG_RULES[1]
    rsd = evidence.training_log.summary.memory.rsd_pct
    if rsd is None:
        return _not_computed(rules, rule, "the log covers fewer than two epochs")
    return _finding(
        rules,
        rule,
        "pass" if rsd <= limit else rules.severity,
        f"memory_delta_rsd_pct = {rsd:.4g} (required <= {limit:g})",
        observed=rsd,
        threshold=limit,
        comparator="<=",
    )


def _finite(rules: TrainingLogRules, evidence: Evidence) -> Finding | None:
    if not rules.finite_gradients or evidence.training_log is None:
        return None
    first = evidence.training_log.summary.first_nonfinite_step
    if first is None:
        return _finding(rules, TRAINING_LOG_RULES[2], "pass", "no sample had a NaN or Inf gradient")
    return _finding(
        rules,
        TRAINING_LOG_RULES[2],
        rules.severity,
        f"gradients were not finite from step {first} on (first_nonfinite_step = {first})",
        observed=first,
    )


def training_log_findings(evidence: Evidence, policy: Policy) -> list[Finding]:
    """The findings of the policy's ``training_log:`` rules (none without a log or rules)."""
    rules = policy.training_log
    if rules is None or evidence.training_log is None:
        return []
    found = (_half_life(rules, evidence), _memory(rules, evidence), _finite(rules, evidence))
    return [f for f in found if f is not None]
