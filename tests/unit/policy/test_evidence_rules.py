"""The policy's ``evidence:`` block (issue 35): parsed strictly, shipped in clinical-strict."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from attest.errors import PolicyError
from attest.policy.model import load_policy, parse_policy

RULE = {"id": "r", "check": "gradcheck"}


def _policy(evidence: Any) -> dict[str, Any]:
    return {"id": "p", "version": "1", "rules": [RULE], "evidence": evidence}


def test_clinical_strict_requires_signed_evidence_from_collectors_and_research_does_not() -> None:
    strict = load_policy("clinical-strict").evidence
    assert strict is not None and strict.require_signed
    assert strict.collectors == ["collector"] and strict.max_age_delta == timedelta(days=30)
    assert load_policy("research").evidence is None


def test_defaults() -> None:
    rules = parse_policy(_policy({})).evidence
    assert rules is not None
    assert (rules.require_signed, rules.collectors, rules.max_age_delta) == (
        False,
        ["collector"],
        None,
    )


@pytest.mark.parametrize(
    ("evidence", "words"),
    [
        ({"max_age": "soon"}, "evidence.max_age"),
        ({"max_age": "0d"}, "evidence.max_age"),
        ({"min_attest_version": "latest"}, "release version"),
        ({"collectors": []}, "at least one collector"),
        ({"collectors": [" "]}, "none empty"),
        ({"require_signed": "yes please"}, "require_signed"),
        ({"signed": True}, "signed"),
    ],
)
def test_bad_evidence_rules_name_the_key(evidence: dict[str, Any], words: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(_policy(evidence))
    assert "evidence" in info.value.message and words in info.value.message
