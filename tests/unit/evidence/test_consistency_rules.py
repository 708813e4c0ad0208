"""Every check id has its consistency rule (attest.evidence.consistency_rules), and the
shared comparisons behave as the rules need."""

from __future__ import annotations

import math

from attest.evidence import claims_ig
from attest.evidence.claims import ClaimChecker, number, same
from attest.evidence.consistency_rules import CHECK_RULES
from attest.evidence.model import CHECK_IDS, CheckItem, CheckResult, Subject


def test_every_check_id_has_a_rule() -> None:
    assert set(CHECK_RULES) == set(CHECK_IDS)


def test_numbers_and_equal_figures() -> None:
    assert number(True) is None and number("1") is None and number(math.nan) is None
    assert number(3) == 3.0
    assert same(0.1 + 0.2, 0.3) and same(1, 1.0)
    assert not same(True, 1) and not same(None, 0) and not same(99.9, 100.0)
    assert same(None, None) and same("a", "a")


def _baseline_item(status: str, **metrics: object) -> CheckItem:
    return CheckItem(subject=Subject(kind="input", input_index=0), status=status, metrics=metrics)


def _baseline_result(*items: CheckItem) -> CheckResult:
    return CheckResult(
        check="ig_baseline",
        status="computed",
        parameters={"min_entropy_ratio": 0.5, "max_output_ratio": 0.5},
        summary={"classifier": False},
        items=list(items),
    )


def _heads(risk_ratio: float, p: float) -> dict[str, object]:
    return {
        "risk.classifier": False,
        "risk.baseline_output_ratio": risk_ratio,
        "grade.classifier": True,
        "grade.baseline_target_probability": p,
        "grade.target_probability_limit": 0.75,
        "grade.baseline_entropy_ratio": 0.9,
    }


def test_ig_baseline_with_heads_is_judged_per_head() -> None:
    """With ``heads:`` the metrics are prefixed by each head and the item's status is the worst
    head's: a regression head over its ratio fails the item even when the classifier head
    passes, and a claim of pass there is refused."""
    cases = [
        (_baseline_item("pass", **_heads(0.1, 0.4)), []),
        (_baseline_item("fail", **_heads(0.9, 0.4)), []),
        (_baseline_item("fail", **_heads(0.1, 0.8)), []),
        (_baseline_item("pass", **_heads(0.9, 0.4)), ["status = 'pass'"]),
        (_baseline_item("pass", **_heads(0.1, 0.8)), ["status = 'pass'"]),
    ]
    for item, expected in cases:
        checker = ClaimChecker(_baseline_result(item))
        claims_ig.ig_baseline(checker, None)  # type: ignore[arg-type]
        assert [f.claim for f in checker.found] == expected, item.metrics
