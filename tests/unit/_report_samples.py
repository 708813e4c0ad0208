"""Synthetic evidence for the report, diff and metrics tests, built to the evidence contract
(attest.evidence.model) with values worked out here, so each test knows the answer it expects."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from attest.evidence.model import CheckItem, CheckResult, Evidence, Subject

# (module, op) of a small CNN's forward pass, in execution order.
CNN_OPS: list[tuple[str, str]] = [
    ("features.0", "aten.convolution.default"),
    ("features.1", "aten._native_batch_norm_legit_no_training.default"),
    ("features.2", "aten.relu.default"),
    ("features.3", "aten.max_pool2d_with_indices.default"),
    ("features.4", "aten.convolution.default"),
    ("features.5", "aten._native_batch_norm_legit_no_training.default"),
    ("features.6", "aten.relu.default"),
    ("features.7", "aten.max_pool2d_with_indices.default"),
    ("classifier.0", "aten.view.default"),
    ("classifier.1", "aten.addmm.default"),
    ("classifier.2", "aten.relu.default"),
    ("classifier.3", "aten.addmm.default"),
]


def operator_rows(
    ops: list[tuple[str, str]] | None = None, *, drop: dict[int, float] | None = None
) -> list[dict[str, Any]]:
    """Operator rows as docs/metrics.md defines them; ``drop`` sets fidelity_pct of some ids."""
    rows = []
    for i, (module, op) in enumerate(ops or CNN_OPS):
        fidelity = 100.0 - 1e-5 * (1 + i % 3)
        rows.append(
            {
                "id": i,
                "op": op,
                "module": module,
                "bit_exact_rate": 1.0,
                "stability_score": 100.0,
                "fidelity_pct": (drop or {}).get(i, fidelity),
                "local_fidelity_pct": 100.0 - 5e-6,
                "memory_delta_bytes": 4096 * (i + 1),
                "hardware_affinity_mask": ["cpu:x86_64:avx2"],
                "forward_ns": 1500 + 100 * i,
                "backward_ns": 3000 + 200 * i,
            }
        )
    return rows


def _op_subject(row: dict[str, Any]) -> Subject:
    return Subject(kind="operator", operator_id=row["id"], op=row["op"], module=row["module"])


def checks_for(rows: list[dict[str, Any]], *, n_inputs: int = 3) -> dict[str, CheckResult]:
    """A plausible full set of check results for ``rows``."""
    gradcheck = CheckResult(
        check="gradcheck",
        status="computed",
        parameters={
            "eps": 1e-6,
            "atol": 1e-5,
            "rtol": 1e-3,
            "seed": 0,
            "directions": 4,
            "full_jacobian_max_numel": 64,
        },
        summary={"operators_checked": len(rows)},
        items=[
            CheckItem(
                subject=_op_subject(r),
                status="pass",
                metrics={"max_abs_error": 1e-9 * (1 + r["id"]), "mode": "directions"},
            )
            for r in rows
        ],
    )
    second = CheckResult(
        check="second_order",
        status="computed",
        parameters={"eps": 1e-4, "directions": 2, "rtol": 1e-3, "seed": 0},
        items=[
            CheckItem(
                subject=Subject(kind="model"), status="pass", metrics={"max_relative_error": 2.5e-7}
            )
        ],
    )
    completeness = CheckResult(
        check="ig_completeness",
        status="computed",
        parameters={"method": "gausslegendre", "steps": 32, "tolerance": 1e-3},
        items=[
            CheckItem(
                subject=Subject(kind="input", input_index=i),
                status="pass",
                metrics={"completeness_rel_error": 1e-6 * (i + 1), "steps_used": 32},
            )
            for i in range(n_inputs)
        ],
    )
    # attest's layout: one item per input, the curve over the cascade in its details
    layers = ["classifier.3", "classifier.1", "features.4", "features.0"]
    randomization = CheckResult(
        check="ig_randomization",
        status="computed",
        parameters={"max_spearman": 0.5, "cascade": layers},
        items=[
            CheckItem(
                subject=Subject(kind="input", input_index=i),
                status="pass",
                metrics={"spearman_final": 0.8 * math.exp(-3) / (i + 1)},
                details={
                    "layers": layers,
                    "spearman": [0.8 * math.exp(-k) / (i + 1) for k in range(len(layers))],
                },
            )
            for i in range(2)
        ],
    )
    determinism = CheckResult(
        check="determinism",
        status="computed",
        parameters={"repeats": 5},
        items=[
            CheckItem(
                subject=_op_subject(r),
                status="pass",
                metrics={
                    "bit_exact_rate": r["bit_exact_rate"],
                    "stability_score": r["stability_score"],
                },
            )
            for r in rows
        ],
    )
    accumulation = CheckResult(
        check="accumulation", status="not_applicable", reason="no loss given in the spec"
    )
    export = CheckResult(
        check="export", status="not_implemented", reason="this build does not export"
    )
    return {
        c.check: c
        for c in (determinism, gradcheck, second, completeness, randomization, accumulation, export)
    }


def make_evidence(
    *,
    drop: dict[int, float] | None = None,
    ops: list[tuple[str, str]] | None = None,
    version: str = "1.0.0",
) -> Evidence:
    """A complete evidence object for the small CNN."""
    rows = operator_rows(ops, drop=drop)
    return Evidence(
        tool_version="0.1.0",
        created_at="2026-01-31T12:00:00Z",
        model={"name": "digits-cnn", "version": version},
        artifacts={
            "weights.safetensors": {"sha256": "ab" * 32},
            "attest.yaml": {"sha256": "cd" * 32},
        },
        environment={
            "torch": "2.13.0",
            "device": "cpu",
            "isa": "avx2",
            "threads": 2,
            "deterministic_algorithms": True,
            "env": {"CUBLAS_WORKSPACE_CONFIG": None},
        },
        model_metrics={
            "bit_exact_rate": 1.0,
            "peak_memory_bytes": 1 << 20,
            "thread_sensitive": True,
        },
        operators=rows,
        checks=checks_for(rows),
    )


def write_evidence(path: Path, evidence: Evidence) -> Path:
    """Write evidence as ``attest collect`` does (plain JSON)."""
    path.write_text(json.dumps(evidence.model_dump(mode="json"), indent=1), encoding="utf-8")
    return path


def findings_for(evidence: Evidence, *, fail_op: int | None = None) -> dict[str, Any]:
    """A findings document: one failing fidelity finding on ``fail_op``, a waiver, passes."""
    findings: list[dict[str, Any]] = []
    for row in evidence.operators:
        verdict = "fail" if row["id"] == fail_op else "pass"
        findings.append(
            {
                "rule": "fidelity_pct >= 99.9",
                "check": "fidelity",
                "subject": {
                    "kind": "operator",
                    "operator_id": row["id"],
                    "op": row["op"],
                    "module": row["module"],
                },
                "verdict": verdict,
                "observed": row["fidelity_pct"],
                "threshold": 99.9,
                "message": f"accumulated fidelity {row['fidelity_pct']}",
            }
        )
    findings.append(
        {
            "rule": "stability_score >= 92",
            "check": "determinism",
            "subject": {"kind": "module", "module": "features.1"},
            "verdict": "waived",
            "observed": 90.0,
            "threshold": 92.0,
            "message": "stability_score 90 is below 92",
            "waiver": {
                "kind": "policy",
                "label": "norm-waiver",
                "approved_by": "J. Doe",
                "justification": "batch-norm statistics recomputed per site",
                "reference": "HAZ-12",
                "expires": "2027-01-01",
            },
        }
    )
    verdict = "fail" if fail_op is not None else "pass"
    return {
        "verdict": verdict,
        "policy": {"id": "clinical-strict", "version": "1", "digest": {"sha256": "ef" * 32}},
        "findings": findings,
    }
