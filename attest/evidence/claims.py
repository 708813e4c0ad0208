"""The claims of an evidence file and the figures they must follow from: one disagreement
(:class:`Inconsistency`), the checker a rule records them with (:class:`ClaimChecker`) and
the comparisons the rules share. Torch-free; :mod:`attest.evidence.consistency` runs the rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from attest.evidence.model import CheckItem, CheckResult, Evidence, Metric

__all__ = [
    "ClaimChecker",
    "Inconsistency",
    "Rule",
    "figures",
    "maximum",
    "minimum",
    "number",
    "recorded_tolerance",
    "same",
]


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


# A check's rule: records on the checker each claim of its result the figures contradict.
Rule = Callable[[ClaimChecker, Evidence], None]


def minimum(items: list[CheckItem], name: str) -> float | None:
    values = [v for i in items if (v := number(i.metrics.get(name))) is not None]
    return min(values) if values else None


def maximum(items: list[CheckItem], name: str) -> float | None:
    values = [v for i in items if (v := number(i.metrics.get(name))) is not None]
    return max(values) if values else None


def recorded_tolerance(c: ClaimChecker, item: CheckItem, name: str = "rtol") -> float | None:
    """The item's own tolerance, which must be the check's recorded one."""
    own, recorded = item.metrics.get(name), c.result.parameters.get(name)
    if name in item.metrics and recorded is not None:
        c.equal(item.subject.label(), name, own, recorded, f"the check's recorded {name}")
    return number(recorded if recorded is not None else own)
