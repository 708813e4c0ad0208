"""Whether an evidence file's claims follow from its figures (docs/policy-reference.md,
"Verdicts come from figures").

Every ``status`` in ``evidence.json`` (a check's, an item's) and every count in a summary is
the collector's *claim*; the figures (an item's ``metrics``, the check's recorded
``parameters``: ``rtol``, ``pass_threshold_pct``, ``tolerance``...) are what was measured. A
collector derives each claim from the figures by a fixed rule, which
:mod:`attest.evidence.consistency_rules` states once per check id. :func:`inconsistencies`
re-derives every claim it can and lists each one that disagrees with the figures;
:func:`require_consistent` refuses such evidence with an :class:`InconsistentEvidence` naming
the check, the item, the figure and the claim. The policy engine runs it before reading any
status, so a hand-edited status (a ``pass`` beside a gradient error of 0.5) can no longer turn
into a verdict.

A clean collect is always consistent: each rule mirrors the line of the runner that sets the
status (named in the rule), and where a status depends on something the evidence does not
record, the rule checks only what the evidence can show and says so in a comment.

Torch-free and numpy-free: the policy, certify and ``attest evaluate`` use it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from attest.errors import EvidenceError
from attest.evidence.model import CheckItem, CheckResult, Evidence, Metric

__all__ = [
    "ClaimChecker",
    "Inconsistency",
    "InconsistentEvidence",
    "inconsistencies",
    "require_consistent",
]

# A check that did not compute holds no verdict on any item: these item claims belong to a
# computed check only.
_VERDICT_CLAIMS = ("pass", "fail", "warn")
# How many disagreements the error message lists before it says "and N more".
_LISTED = 12


@dataclass(frozen=True)
class Inconsistency:
    """One claim of the evidence that its figures contradict."""

    check: str
    item: str  # the item's subject label, "summary", "check" or "operator row N"
    figure: str  # the figures the claim was derived from, as "name = value"
    claim: str  # what the evidence claims, as "name = value"
    why: str  # the rule the collector applies

    def describe(self) -> str:
        return (
            f"check {self.check!r}, {self.item}: claims {self.claim} but {self.figure} ({self.why})"
        )


class InconsistentEvidence(EvidenceError):
    """Evidence whose claims (statuses, counts) disagree with its own figures."""

    def __init__(self, source: str, found: list[Inconsistency]) -> None:
        self.inconsistencies = found
        listed = "; ".join(f.describe() for f in found[:_LISTED])
        more = f"; and {len(found) - _LISTED} more" if len(found) > _LISTED else ""
        super().__init__(
            f"evidence {source} is INCONSISTENT: {len(found)} claim(s) disagree with the "
            f"measured figures: {listed}{more}",
            hint="the status fields are the collector's claim and verdicts come from the "
            "figures: evidence edited after collection is refused; collect it again with "
            "attest collect SPEC -o evidence.json",
        )


def number(value: Metric | object) -> float | None:
    """A finite real number, or None (booleans, strings, NaN and infinities are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def same(a: object, b: object) -> bool:
    """Equal figures: numbers within rounding of a JSON round trip, anything else exactly."""
    x, y = number(a), number(b)
    if x is not None and y is not None:
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def figures(**values: object) -> str:
    return ", ".join(f"{k} = {v!r}" for k, v in values.items())


class ClaimChecker:
    """Collects the disagreements of one check's claims with its figures."""

    def __init__(self, result: CheckResult) -> None:
        self.result = result
        self.check = result.check
        self.found: list[Inconsistency] = []

    def item(self, item: CheckItem, allowed: Iterable[str], why: str, **shown: object) -> None:
        """``item``'s status must be one of ``allowed`` (what its figures give)."""
        allowed = tuple(allowed)
        if item.status not in allowed:
            want = " or ".join(allowed) if allowed else "nothing"
            self.found.append(
                Inconsistency(
                    self.check,
                    item.subject.label(),
                    figures(**shown) if shown else "its figures",
                    f"status = {item.status!r}",
                    f"{why}: the figures give status {want}",
                )
            )

    def equal(self, where: str, name: str, claimed: object, derived: object, why: str) -> None:
        """A recorded figure or count must equal what the other figures give."""
        if not same(claimed, derived):
            self.found.append(
                Inconsistency(
                    self.check, where, f"the figures give {derived!r}", f"{name} = {claimed!r}", why
                )
            )

    def summary(self, name: str, derived: object, why: str) -> None:
        """The summary's ``name``, when recorded, equals ``derived``. A count that is not
        recorded is no claim: the rules that read it find it missing and fail if required."""
        if name in self.result.summary:
            self.equal("summary", name, self.result.summary[name], derived, why)

    def parameter(self, name: str) -> float | None:
        """A numeric parameter the check's verdicts depend on; missing: an inconsistency."""
        value = number(self.result.parameters.get(name))
        if value is None:
            self.found.append(
                Inconsistency(
                    self.check,
                    "parameters",
                    f"{name} = {self.result.parameters.get(name)!r}",
                    "computed items with verdicts",
                    f"the verdicts depend on the recorded {name}, which must be a number",
                )
            )
        return value

    def count(self, name: str, status: str, why: str = "") -> None:
        """The summary's ``name`` counts the items with ``status``."""
        derived = sum(1 for i in self.result.items if i.status == status)
        self.summary(name, derived, why or f"the number of items with status {status!r}")


def _generic(result: CheckResult, *, merged: bool = False) -> Iterator[Inconsistency]:
    """What holds for every check id, whatever its runner (for one target's part of merged
    evidence, which keeps no summary per target, what holds of its items)."""
    claims = ClaimChecker(result)
    if result.status != "computed":
        # collection/runners.py, the runners' early returns: a check that did not compute
        # (not_applicable, not_computed, not_implemented, error) records no verdict on any
        # item, and the non-computed statuses other than not_computed no summary either
        for item in result.items:
            claims.item(
                item,
                ("not_computed", "error"),
                f"the check is {result.status}, so none of its items was judged",
            )
        if result.status != "not_computed" and result.summary and not merged:
            claims.equal(
                "check",
                "status",
                result.status,
                "computed",
                "a check that did not run records no summary",
            )
    else:
        # every runner records a summary with a computed result; an errored check records none
        if not result.summary and not merged:
            claims.equal(
                "check", "summary", {}, "a summary", "a computed check records its summary"
            )
        seen: set[int] = set()
        for item in result.items:
            op = item.subject.operator_id
            if item.subject.kind == "operator" and op is not None:
                if op in seen:
                    claims.equal(
                        item.subject.label(),
                        "operator_id",
                        op,
                        "one item per operator",
                        "a check lists each operator once",
                    )
                seen.add(op)
    # IG checks (collection/ig/path_checks.py status_counts) and any check that records them
    for status in _VERDICT_CLAIMS:
        if f"items_{status}" in result.summary:
            claims.count(f"items_{status}", status)
    yield from claims.found


def _target_parts(result: CheckResult) -> list[CheckResult]:
    """The result itself, or for evidence merged over several targets
    (:mod:`attest.evidence.merge`: every target's items, tagged ``details["target"]``, its
    parameters under ``parameters["per_target"]``, the worst status and merged summary) one
    result per target with that target's items and parameters. A target's own status and
    summary are not kept by the merge: its items are judged as computed when any were, and
    the counts are held on each target's own evidence (``certify --evidence``)."""
    per_target = result.parameters.get("per_target")
    if not isinstance(per_target, dict):
        return [result]
    parts: list[CheckResult] = []
    for name, parameters in per_target.items():
        items = [i for i in result.items if i.details.get("target") == name]
        parts.append(
            CheckResult(
                check=result.check,
                status="computed" if items else result.status,
                parameters=parameters if isinstance(parameters, dict) else {},
                items=items,
            )
        )
    return parts


def inconsistencies(evidence: Evidence) -> list[Inconsistency]:
    """Every claim of ``evidence`` that its figures contradict (empty: consistent)."""
    from attest.evidence.consistency_rules import CHECK_RULES, evidence_rules

    found: list[Inconsistency] = []
    for check_id, result in evidence.checks.items():
        if result.check != check_id:
            found.append(
                Inconsistency(
                    check_id,
                    "check",
                    f"check = {result.check!r}",
                    f"filed under {check_id!r}",
                    "a check's result is filed under its own id",
                )
            )
            continue
        rule = CHECK_RULES.get(check_id)
        for part in _target_parts(result):
            found += _generic(part, merged=part is not result)
            if rule is not None and part.status == "computed":
                claims = ClaimChecker(part)
                rule(claims, evidence)
                found += claims.found
    found += evidence_rules(evidence)
    return found


def require_consistent(evidence: Evidence, source: str = "") -> None:
    """Refuse ``evidence`` (:class:`InconsistentEvidence`) when a claim disagrees with its
    figures; ``source`` names it in the message (a path, a target)."""
    found = inconsistencies(evidence)
    if found:
        raise InconsistentEvidence(source or "(in memory)", found)
