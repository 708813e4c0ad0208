"""The evidence floors a policy sets on a ``--budget`` plan (:mod:`attest.collection.budget`).

A budget may lower the collect's settings, but never below what the policy will accept:
clinical-strict's ``min_repeats`` (the determinism summary's ``runs`` at least 100) makes 100
the floor of ``repeats``, and its ``ig_completeness.error`` (``completeness_rel_error`` at most
1 %) makes 1 % the loosest ``ig_tolerance`` a plan may choose (a looser search would stop at
errors the rule then fails). Only rules that fail a certificate set floors; a ``warn`` rule
does not. A budget that cannot meet the floors is refused at the start, naming the smallest
one that can.
"""

from __future__ import annotations

from typing import Any

from attest.policy.model import Policy, Rule

__all__ = ["budget_floors"]


def budget_floors(policy: Policy, precision: str | None = None) -> dict[str, Any]:
    """The least work per plannable setting that ``policy`` requires of evidence collected at
    ``precision``: ``repeats`` (a count) and ``ig_tolerance`` (the loosest tolerance)."""
    floors: dict[str, Any] = {}
    for rule in policy.rules:
        if rule.severity != "fail":
            continue
        threshold = rule.threshold_for(precision)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            continue
        if _reads(rule, "determinism", "summary", "runs") and rule.comparator in (">=", ">"):
            runs = int(threshold) + (1 if rule.comparator == ">" else 0)
            floors["repeats"] = max(floors.get("repeats", 0), runs)
        elif _reads(rule, "ig_completeness", "items", "completeness_rel_error") and (
            rule.comparator in ("<=", "<")
        ):
            loosest = float(threshold)
            floors["ig_tolerance"] = min(floors.get("ig_tolerance", loosest), loosest)
    return floors


def _reads(rule: Rule, check: str, source: str, metric: str) -> bool:
    return rule.check == check and rule.source == source and rule.metric == metric
