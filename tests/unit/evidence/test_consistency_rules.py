"""Every check id has its consistency rule (attest.evidence.consistency_rules), and the
shared comparisons behave as the rules need."""

from __future__ import annotations

import math

from attest.evidence.claims import number, same
from attest.evidence.consistency_rules import CHECK_RULES
from attest.evidence.model import CHECK_IDS


def test_every_check_id_has_a_rule() -> None:
    assert set(CHECK_RULES) == set(CHECK_IDS)


def test_numbers_and_equal_figures() -> None:
    assert number(True) is None and number("1") is None and number(math.nan) is None
    assert number(3) == 3.0
    assert same(0.1 + 0.2, 0.3) and same(1, 1.0)
    assert not same(True, 1) and not same(None, 0) and not same(99.9, 100.0)
    assert same(None, None) and same("a", "a")
