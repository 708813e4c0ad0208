"""One list of check ids: ``CheckId`` in attest.evidence.model, grouped there by the stage
that produces them; the collector, the IG checks and the report take their lists from it."""

from __future__ import annotations

from attest.evidence.model import (
    CHECK_IDS,
    EXPORT_CHECKS,
    GRADIENT_CHECKS,
    IG_CHECKS,
    PROFILE_CHECKS,
    TOPOLOGY_CHECKS,
    TRAINING_CHECKS,
)

GROUPS = (
    TOPOLOGY_CHECKS,
    PROFILE_CHECKS,
    GRADIENT_CHECKS,
    IG_CHECKS,
    EXPORT_CHECKS,
    TRAINING_CHECKS,
)


def test_the_groups_are_the_check_ids_each_once_in_their_order() -> None:
    grouped = [check for group in GROUPS for check in group]
    assert sorted(grouped) == sorted(CHECK_IDS) and len(set(grouped)) == len(grouped)
    for group in GROUPS:
        assert list(group) == [c for c in CHECK_IDS if c in group]


def test_every_place_takes_its_list_from_the_model() -> None:
    from attest.collection import CHECK_RUNNERS, RUNNER_CHECKS
    from attest.collection.ig import checks
    from attest.report import _sections, html

    assert checks.IG_CHECKS is IG_CHECKS and html.IG_CHECKS is IG_CHECKS
    assert [RUNNER_CHECKS[r] for r in CHECK_RUNNERS if isinstance(r, str)] == list(GROUPS)
    assert set(_sections.GRADIENT_CHECKS) <= set(GRADIENT_CHECKS)
