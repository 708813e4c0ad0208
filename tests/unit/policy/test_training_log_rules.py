"""The policy's training_log: thresholds, evaluated only when the evidence carries a log."""

from __future__ import annotations

from typing import Any

import pytest

from attest.evidence.model import Evidence, TrainingLogRecord
from attest.evidence.training_summary import (
    FidelityHalfLife,
    MemoryConsistency,
    NormTrend,
    TrainingSummary,
)
from attest.policy.engine import evaluate
from attest.policy.model import parse_policy

RULES = [{"id": "r", "check": "numerics", "required": False}]


def _evidence(
    fidelity: FidelityHalfLife | None = None, rsd: float | None = 0.5, nonfinite: int | None = None
) -> Evidence:
    summary = TrainingSummary(
        run_id="r",
        samples=10,
        attempts=1,
        first_step=0,
        last_step=90,
        first_epoch=0,
        last_epoch=9,
        duplicates_dropped=0,
        truncated_tail_bytes=0,
        fidelity=fidelity
        or FidelityHalfLife(
            status="not reached", points=10, epochs_covered=9.0, slope_per_epoch=0.0
        ),
        memory=MemoryConsistency(series="saved_tensor_bytes", rsd_pct=rsd),
        first_nonfinite_step=nonfinite,
        min_bit_exact_rate=1.0,
        grad_norm_trend=NormTrend(first=1.0, last=1.0, growth_per_epoch=1.0),
    )
    record = TrainingLogRecord(log="run.jsonl", sha256="0" * 64, summary=summary)
    return Evidence(tool_version="0", created_at="2026-01-01T00:00:00Z", training_log=record)


def _verdicts(evidence: Evidence, **rules: Any) -> dict[str, str]:
    policy = parse_policy({"id": "p", "version": "1", "rules": RULES, "training_log": rules})
    return {
        f.rule: f.verdict for f in evaluate(evidence, policy).findings if f.check == "training_log"
    }


STRICT = {
    "min_fidelity_half_life_epochs": 20,
    "max_memory_delta_rsd_pct": 1.2,
    "finite_gradients": True,
}


def test_a_stable_log_passes() -> None:
    assert _verdicts(_evidence(), **STRICT) == {
        "training_log.fidelity-half-life": "pass",
        "training_log.memory-consistency": "pass",
        "training_log.finite-gradients": "pass",
    }


@pytest.mark.parametrize(
    ("fidelity", "verdict"),
    [
        (FidelityHalfLife(status="reached", half_life_epochs=5.0, uncertainty_epochs=0.5), "fail"),
        (FidelityHalfLife(status="reached", half_life_epochs=25.0, uncertainty_epochs=0.5), "pass"),
        (FidelityHalfLife(status="not reached", projected_half_life_epochs=12.0), "fail"),
        (FidelityHalfLife(status="insufficient data", points=2), "fail"),
    ],
)
def test_half_life(fidelity: FidelityHalfLife, verdict: str) -> None:
    rules = {"min_fidelity_half_life_epochs": 20}
    assert _verdicts(_evidence(fidelity), **rules) == {"training_log.fidelity-half-life": verdict}


def test_memory_nonfinite_and_not_required() -> None:
    got = _verdicts(_evidence(rsd=3.0, nonfinite=40), **STRICT)
    assert got["training_log.memory-consistency"] == "fail"
    assert got["training_log.finite-gradients"] == "fail"
    one_epoch = _evidence(rsd=None)
    assert _verdicts(one_epoch, **STRICT)["training_log.memory-consistency"] == "fail"
    relaxed = {**STRICT, "required": False}
    assert _verdicts(one_epoch, **relaxed)["training_log.memory-consistency"] == "not_computed"
    assert (
        _verdicts(_evidence(rsd=3.0), **{**STRICT, "severity": "warn"})[
            "training_log.memory-consistency"
        ]
        == "warn"
    )


def test_no_log_no_findings() -> None:
    policy = parse_policy({"id": "p", "version": "1", "rules": RULES, "training_log": STRICT})
    evidence = Evidence(tool_version="0", created_at="2026-01-01T00:00:00Z")
    assert not [f for f in evaluate(evidence, policy).findings if f.check == "training_log"]
