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

from collections.abc import Iterator

from attest.errors import EvidenceError
from attest.evidence.claims import ClaimChecker, Inconsistency
from attest.evidence.consistency_rules import CHECK_RULES, evidence_rules
from attest.evidence.model import CheckResult, Evidence

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
_ONE_ITEM_PER_OPERATOR = ("determinism", "fidelity", "gradcheck", "kinks", "thread_sensitivity")
# How many disagreements the error message lists before it says "and N more".
_LISTED = 12


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
        # the checks with one item per operator (numerics lists each non-finite tensor)
        for item in result.items if result.check in _ONE_ITEM_PER_OPERATOR else ():
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
        parts = _target_parts(result)
        if len(parts) > 1 and result.status != "computed" and all(p.items for p in parts):
            # the merge takes the worst status of its targets, and a target that did not
            # compute lists no items: every target listing items means every one computed
            found.append(
                Inconsistency(
                    check_id,
                    "check",
                    "every target lists judged items",
                    f"status = {result.status!r}",
                    "merged evidence takes the worst status of its targets",
                )
            )
        for part in parts:
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
