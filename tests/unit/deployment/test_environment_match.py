"""Matching a server to one of a certificate's targets (``verify --check-environment``)."""

from __future__ import annotations

from typing import Any

from attest.deployment.environment import local_environment, match_deployment

HERE = local_environment()
RUNTIME = {k: HERE[k] for k in ("cpu_arch", "execution_provider", "cpu_isa")}


def target(verdict: str = "pass", **runtime: Any) -> dict[str, Any]:
    return {
        "verdict": verdict,
        "required": True,
        "runtime": {**RUNTIME, **runtime},
        "fatal_differences": ["cpu_arch", "execution_provider"],
    }


def test_a_single_target_certificate_is_its_own_target() -> None:
    match = match_deployment({"targets": ["cpu:x"], "runtime": RUNTIME, "fatal_differences": []})
    assert match.target == "cpu:x" and match.refusal is None


def test_the_matching_target_is_chosen_and_its_non_fatal_differences_kept() -> None:
    deployment = {
        "per_target": {
            "arm": target(cpu_arch="aarch64"),
            "here-other-isa": target(cpu_isa="not-this-isa"),
            "here": target(),
        }
    }
    match = match_deployment(deployment)
    assert match.target == "here"  # no difference beats one non-fatal difference
    assert match.differences == []
    del deployment["per_target"]["here"]
    match = match_deployment(deployment)
    assert match.target == "here-other-isa"
    assert [d.key for d in match.differences] == ["cpu_isa"]


def test_no_matching_target_names_the_nearest_and_its_differences() -> None:
    deployment = {
        "per_target": {
            "far": target(cpu_arch="riscv64", execution_provider="CUDAExecutionProvider"),
            "near": target(cpu_arch="riscv64"),
        }
    }
    match = match_deployment(deployment)
    assert match.target is None and match.nearest == "near"
    assert "no certified target matches" in str(match.refusal)
    assert "cpu_arch" in str(match.refusal) and "riscv64" in str(match.refusal)


def test_matching_only_a_failed_target_is_refused() -> None:
    deployment = {"per_target": {"here": target("fail"), "arm": target(cpu_arch="aarch64")}}
    match = match_deployment(deployment)
    assert match.target is None
    assert "matches target here, which failed" in str(match.refusal)
