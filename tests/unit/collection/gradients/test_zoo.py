"""The planted-defect model zoo: each gradient check flags exactly its own defect.

A model "flags" a check when the check errors or one of its items fails. Clean models
(ReLU networks on continuous inputs included) flag nothing; each planted defect flags the one
check built for it and nothing else. Every check must also actually have run (``computed``),
except where the reason is stated (no loss: ``accumulation``; a backward that raises:
``accumulation`` and ``second_order``).
"""

from __future__ import annotations

import pytest
import torch
from _grad_models import ZOO

from attest.collection.gradients import runner as gradchecks
from attest.evidence.model import CheckResult

EXPECTED_FLAGS: dict[str, set[str]] = {
    "clean_mlp": set(),
    "clean_cnn": set(),
    "clean_custom_function": set(),
    "clean_no_loss": set(),
    "wrong_custom_backward": {"custom_ops"},
    "dead_parameter": {"gradient_flow"},
    "detached_branch": {"gradient_flow"},
    "integer_path": {"gradient_flow"},
    "inplace_on_saved": {"gradient_flow"},
    "kinks_on_input": {"kinks"},
    "per_microbatch_loss": {"accumulation"},
}

NOT_COMPUTED: dict[str, set[str]] = {
    "clean_no_loss": {"accumulation"},
    "inplace_on_saved": {"accumulation", "second_order"},
}


def _flags(results: list[CheckResult]) -> set[str]:
    return {r.check for r in results if r.status == "error" or r.failed_items}


@pytest.fixture(scope="module")
def zoo_results() -> dict[str, list[CheckResult]]:
    torch.set_num_threads(1)
    return {name: gradchecks.run(make()) for name, make in ZOO.items()}


def test_zoo_covers_every_expectation() -> None:
    assert set(EXPECTED_FLAGS) == set(ZOO)


@pytest.mark.parametrize("name", sorted(EXPECTED_FLAGS))
def test_each_check_flags_exactly_its_own_defect(
    name: str, zoo_results: dict[str, list[CheckResult]]
) -> None:
    results = zoo_results[name]
    assert [r.check for r in results] == [c for c, _ in gradchecks.CHECKS]
    details = {
        r.check: [(i.subject.label(), i.message) for i in r.failed_items] or r.reason
        for r in results
        if r.check in _flags(results)
    }
    assert _flags(results) == EXPECTED_FLAGS[name], details


@pytest.mark.parametrize("name", sorted(EXPECTED_FLAGS))
def test_every_check_ran(name: str, zoo_results: dict[str, list[CheckResult]]) -> None:
    statuses = {r.check: r.status for r in zoo_results[name]}
    expected_missing = NOT_COMPUTED.get(name, set())
    assert {c for c, s in statuses.items() if s != "computed"} == expected_missing, statuses


def test_defect_items_name_the_culprit(zoo_results: dict[str, list[CheckResult]]) -> None:
    def failed(name: str, check: str) -> list[str]:
        result = next(r for r in zoo_results[name] if r.check == check)
        return [f"{i.subject.label()}: {i.message}" for i in result.failed_items]

    assert any("TwoPercentOffTanh" in m for m in failed("wrong_custom_backward", "custom_ops"))
    assert any(
        "unused_scale" in m and "unused in forward" in m
        for m in failed("dead_parameter", "gradient_flow")
    )
    assert all("detach()" in m for m in failed("detached_branch", "gradient_flow"))
    assert any("side.weight" in m for m in failed("detached_branch", "gradient_flow"))
    assert all("integer" in m and "'quant'" in m for m in failed("integer_path", "gradient_flow"))
    inplace = failed("inplace_on_saved", "gradient_flow")
    assert any("'doubler'" in m and "'gate'" in m for m in inplace), inplace
    kinks = failed("kinks_on_input", "kinks")
    assert len(kinks) == 1 and "relu at 0" in kinks[0]
    accumulation = failed("per_microbatch_loss", "accumulation")
    assert accumulation and all("whole batch" in m for m in accumulation)


def test_kink_count_matches_the_planted_zeros(zoo_results: dict[str, list[CheckResult]]) -> None:
    result = next(r for r in zoo_results["kinks_on_input"] if r.check == "kinks")
    ctx = ZOO["kinks_on_input"]()
    zeros = int((ctx.spec.inputs == 0).sum())
    assert zeros > 0
    assert result.items[0].metrics["count"] == zeros


def test_clean_cnn_has_relu_zero_ties_that_are_not_counted(
    zoo_results: dict[str, list[CheckResult]],
) -> None:
    result = next(r for r in zoo_results["clean_cnn"] if r.check == "kinks")
    pool = next(i for i in result.items if "max_pool" in (i.subject.op or ""))
    assert pool.metrics["count"] == 0
    assert int(pool.metrics["locally_constant_hits"] or 0) > 0  # the rule was exercised
