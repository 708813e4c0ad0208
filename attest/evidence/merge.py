"""Merging evidence of one model collected on several hardware targets (CPU here, CUDA there).

Inputs must certify the same weights (``model.digest``) and have the same operator sequence.
The merged file unions the hardware affinity masks, keeps each target's figures (per row in
``per_target``, per check item in ``details["target"]``, per environment in
``environment["targets"]``) and puts the worst figure over targets at the top level, so a
policy holding the merged file to a threshold holds every target to it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from attest._version import __version__
from attest.errors import EvidenceError
from attest.evidence.model import CheckResult, Evidence, Metric, OperatorRow, load_evidence
from attest.evidence.rollup import module_rows

__all__ = ["load_evidence", "merge_evidence"]

_MIN_FIELDS = (
    "bit_exact_rate",
    "stability_score",
    "fidelity_pct",
    "output_fidelity_pct",
    "grad_fidelity_pct",
    "local_fidelity_pct",
    "local_output_fidelity_pct",
    "local_grad_fidelity_pct",
)
_MAX_FIELDS = (
    "max_relative_deviation",
    "memory_delta_bytes",
    "allocator_delta_bytes",
    "forward_ns",
    "backward_ns",
    "forward_ns_iqr",  # the widest timing spread over targets
    "forward_ns_p95",
    "backward_ns_iqr",
    "backward_ns_p95",
)
_ANY_FIELDS = ("thread_sensitive", "nonfinite", "random")
_TARGET_FIGURES = (
    *_MIN_FIELDS,
    *_MAX_FIELDS,
    "thread_sensitive",
    "nonfinite",
    "output_sha256",
    "grad_sha256",
)
_STATUS_RANK = {
    "computed": 0,
    "not_applicable": 1,
    "not_computed": 2,
    "not_implemented": 3,
    "error": 4,
}


def _targets_of(ev: Evidence) -> list[str]:
    if ev.targets:
        return list(ev.targets)
    target = ev.environment.get("target")
    return [str(target)] if target else ["unknown"]


def _row_figures(row: OperatorRow) -> dict[str, Metric]:
    return {name: getattr(row, name) for name in _TARGET_FIGURES}


def _merge_rows(parts: list[tuple[list[str], Evidence]]) -> list[OperatorRow]:
    first = parts[0][1]
    merged: list[OperatorRow] = []
    for i, base in enumerate(first.operators):
        rows = [(targets, ev.operators[i]) for targets, ev in parts]
        per_target: dict[str, dict[str, Metric]] = {}
        mask: list[str] = []
        for targets, row in rows:
            if row.per_target:
                per_target.update(row.per_target)
            else:
                for t in targets:
                    per_target[t] = _row_figures(row)
            for tag in row.hardware_affinity_mask:
                if tag not in mask:
                    mask.append(tag)
        update: dict[str, Any] = {"hardware_affinity_mask": mask, "per_target": per_target}
        for name in _MIN_FIELDS:
            values = [getattr(r, name) for _, r in rows if getattr(r, name) is not None]
            update[name] = min(values) if values else None
        for name in _MAX_FIELDS:
            values = [getattr(r, name) for _, r in rows if getattr(r, name) is not None]
            update[name] = max(values) if values else None
        for name in _ANY_FIELDS:
            values = [getattr(r, name) for _, r in rows if getattr(r, name) is not None]
            update[name] = any(values) if values else None
        if update["random"] is None:
            update["random"] = False
        not_computed: dict[str, str] = {}
        for targets, row in rows:
            for key, why in row.not_computed.items():
                not_computed[key] = f"{'/'.join(targets)}: {why}"
        update["not_computed"] = not_computed
        merged.append(base.model_copy(update=update))
    return merged


def _merge_checks(parts: list[tuple[list[str], Evidence]]) -> dict[str, CheckResult]:
    out: dict[str, CheckResult] = {}
    check_ids = list(parts[0][1].checks)
    for _, ev in parts[1:]:
        check_ids += [c for c in ev.checks if c not in check_ids]
    for check_id in check_ids:
        results = [(targets, ev.checks[check_id]) for targets, ev in parts if check_id in ev.checks]
        worst = max(results, key=lambda p: _STATUS_RANK[p[1].status])[1]
        items = []
        for targets, result in results:
            for item in result.items:
                details = dict(item.details)
                details.setdefault("target", "/".join(targets))
                items.append(item.model_copy(update={"details": details}))
        base = results[0][1]
        reasons = [f"{'/'.join(t)}: {r.reason}" for t, r in results if r.reason]
        out[check_id] = CheckResult(
            check=base.check,
            status=worst.status,
            reason="; ".join(reasons) or None,
            parameters={
                **base.parameters,
                "per_target": {"/".join(t): r.parameters for t, r in results},
            },
            summary=_merge_metrics([r.summary for _, r in results]),
            items=items,
            duration_s=sum(r.duration_s or 0.0 for _, r in results) or None,
        )
    return out


def _merge_metrics(dicts: list[dict[str, Metric]]) -> dict[str, Metric]:
    """Worst over targets: min of rates/scores/fidelity, max of counts/bytes/deviations."""
    out: dict[str, Metric] = {}
    keys: list[str] = []
    for d in dicts:
        keys += [k for k in d if k not in keys]
    for key in keys:
        values = [d.get(key) for d in dicts if d.get(key) is not None]
        if not values:
            out[key] = None
        elif all(isinstance(v, bool) for v in values):
            out[key] = any(values)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            lower_is_worse = (
                key.startswith("min_")
                or "rate" in key
                or "reproducibility" in key
                or key.endswith("_pct")
            )
            out[key] = min(values) if lower_is_worse else max(values)  # type: ignore[type-var]
        else:
            out[key] = values[0]
    return out


def merge_evidence(evidences: list[Evidence], names: list[str] | None = None) -> Evidence:
    """One evidence for several targets of the same model (see the module docstring)."""
    if len(evidences) < 2:
        raise EvidenceError("merging needs at least two evidence files")
    labels = names or [f"evidence {i + 1}" for i in range(len(evidences))]
    first = evidences[0]
    digest = first.model.get("digest")
    for label, ev in zip(labels[1:], evidences[1:], strict=True):
        if ev.model.get("digest") != digest or ev.model.get("name") != first.model.get("name"):
            raise EvidenceError(
                f"{label} is about model {ev.model.get('name')!r} with weights digest "
                f"{ev.model.get('digest')}, not {first.model.get('name')!r} {digest}",
                hint="merge only evidence of the same weights collected on different targets",
            )
        if [(r.op, r.module) for r in ev.operators] != [(r.op, r.module) for r in first.operators]:
            raise EvidenceError(
                f"{label} has a different operator sequence from {labels[0]}",
                hint="the targets ran different operators (another torch version or device path); "
                "keep their evidence separate",
            )
    parts = [(_targets_of(ev), ev) for ev in evidences]
    targets: list[str] = []
    for t, _ in parts:
        targets += [x for x in t if x not in targets]
    annotations: list[dict[str, Any]] = []
    for ev in evidences:
        annotations += [a for a in ev.annotations if a not in annotations]
    environments: dict[str, Any] = {}
    for t, ev in parts:
        if "targets" in ev.environment and isinstance(ev.environment["targets"], dict):
            environments.update(ev.environment["targets"])
        else:
            environments["/".join(t)] = {k: v for k, v in ev.environment.items() if k != "targets"}
    operators = _merge_rows(parts)
    failures = [ev.model_failure for ev in evidences if ev.model_failure is not None]
    merged = Evidence(
        tool_version=__version__,
        created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        model=first.model,
        artifacts=first.artifacts,
        environment={**first.environment, "targets": environments},
        model_metrics=_merge_metrics([ev.model_metrics for ev in evidences]),
        operators=operators,
        checks=_merge_checks(parts),
        annotations=annotations,
        attributions=first.attributions,
        model_failure=failures[0] if failures else None,
        targets=targets,
        export=next((ev.export for ev in evidences if ev.export is not None), None),
        dispatch=[record for ev in evidences for record in ev.dispatch],
        compile=first.compile,  # one model: built (and compiled) by the same factory
    )
    merged.modules = module_rows(merged.operators, merged.annotations)
    return merged
