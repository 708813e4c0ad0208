"""Training-check results and operator timing spreads for the report, diff and metrics tests,
shaped as attest/collection/training/ writes them (the summary and item metric names of
mixed_precision.py, recompute.py, batch_invariance.py and resume.py), with values worked out
here so each test knows the answer it expects."""

from __future__ import annotations

from attest.evidence.model import CheckItem, CheckResult, Evidence, Subject

MiB = 1 << 20
# recompute's two regions: bytes freed by checkpointing and seconds of recomputing them
REGIONS = {"features.0": (3 * MiB, 0.004), "features.4": (1 * MiB, 0.002)}


def mixed_precision(*, failed: int = 1, error: float = 1.25e-3) -> CheckResult:
    items = [
        CheckItem(
            subject=Subject(kind="model"),
            status="pass",
            metrics={"loss_scale": 65536.0, "loss_scale_in_safe_range": True},
        ),
        CheckItem(
            subject=Subject(kind="parameter", name="features.4.weight"),
            status="pass",
            metrics={"grad_rel_error": 2e-4},
        ),
    ]
    items += [
        CheckItem(
            subject=Subject(kind="parameter", name="classifier.1.weight"),
            status="fail",
            metrics={"grad_rel_error": error, "rtol_fail": 1e-3},
            message="planted: the float16 gradient of classifier.1.weight underflows",
        )
        for _ in range(failed)
    ]
    return CheckResult(
        check="mixed_precision",
        status="computed",
        parameters={"autocast": "float16", "grad_scaler": True},
        summary={
            "loss_scale": 65536.0,
            "max_grad_rel_error": error,
            "max_underflow_error_share": 0.0,
            "failed": failed,
            "warned": 0,
            "passes": 3,
        },
        items=items,
    )


def _region(module: str) -> CheckItem:
    freed, seconds = REGIONS[module]
    return CheckItem(
        subject=Subject(kind="module", module=module, name="forward"),
        status="pass",
        metrics={
            "calls": 1,
            "reentrant": False,
            "preserve_rng_state": True,
            "declared": True,
            "recomputed": True,
            "random_ops_not_restored": 0,
            "state_writes_during_recompute": 0,
            "saved_bytes_without": freed + 4096,
            "saved_bytes_with": 4096,
            "saved_bytes_freed": freed,
            "recompute_forward_s": seconds,
            "bytes_freed_per_recompute_s": freed / seconds,
        },
        message=f"region forward @ {module} (non-reentrant) recomputes the same operations",
    )


def recompute(*, extra_forward_s: float = 0.006) -> CheckResult:
    freed = sum(b for b, _ in REGIONS.values())
    plan = [
        {
            "module": "features",
            "checkpointed": False,
            "saved_bytes_without": 5 * MiB,
            "saved_bytes_with": MiB,
            "saved_bytes_freed": 4 * MiB,
            "recompute_forward_s": 0.008,
            "bytes_freed_per_recompute_s": 4 * MiB / 0.008,
            "cumulative_bytes_freed": 4 * MiB,
            "cumulative_recompute_s": 0.008,
        }
    ]
    return CheckResult(
        check="recompute",
        status="computed",
        parameters={"checkpoint_patterns": ["features.*"], "adaptive_recompute": plan},
        summary={
            "regions": 2,
            "regions_failed": 0,
            "grad_bit_exact": True,
            "grad_max_relative_deviation": 0.0,
            "random_ops_not_restored": 0,
            "state_writes_during_recompute": 0,
            "saved_bytes_without": freed + 8192,
            "saved_bytes_with": 8192,
            "saved_bytes_freed": freed,
            "extra_forward_s": extra_forward_s,
            "failed": 0,
        },
        items=[
            CheckItem(
                subject=Subject(kind="model"),
                status="pass",
                metrics={"bit_exact": True, "max_relative_deviation": 0.0},
            ),
            *(_region(m) for m in REGIONS),
        ],
    )


def batch_invariance() -> CheckResult:
    return CheckResult(
        check="batch_invariance",
        status="not_applicable",
        reason="the spec's training: mapping declares no batch_sizes",
    )


def resume(*, losses_equal: bool = True) -> CheckResult:
    return CheckResult(
        check="resume",
        status="computed",
        parameters={"steps": 2, "optimizer": "adamw"},
        summary={
            "params_bit_exact": True,
            "params_max_relative_deviation": 0.0,
            "grads_bit_exact": True,
            "grads_max_relative_deviation": 0.0,
            "losses_equal": losses_equal,
            "unrestored_state": 0,
            "failed": 0,
        },
        items=[
            CheckItem(subject=Subject(kind="model", name="parameters"), status="pass"),
            CheckItem(subject=Subject(kind="model", name="gradients"), status="pass"),
        ],
    )


def with_training(evidence: Evidence, **checks: CheckResult) -> Evidence:
    """``evidence`` with the four training checks (the defaults above, or those given) and a
    timing spread on every operator: IQR 10,000 + id ns forward and 20,000 + id ns backward,
    p95 twice the median."""
    defaults = {
        "mixed_precision": mixed_precision(),
        "recompute": recompute(),
        "batch_invariance": batch_invariance(),
        "resume": resume(),
    }
    evidence.checks.update({**defaults, **checks})
    for row in evidence.operators:
        row.forward_ns_iqr = 10_000 + row.id
        row.forward_ns_p95 = 2 * (row.forward_ns or 0)
        row.backward_ns_iqr = 20_000 + row.id
        row.backward_ns_p95 = 2 * (row.backward_ns or 0)
    return evidence
