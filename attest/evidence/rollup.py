"""Operator rows rolled up per module path: the figures humans read first (docs/metrics.md).

Pure data over :class:`~attest.evidence.model.OperatorRow`, so that merging evidence of several
targets (:mod:`attest.evidence.merge`) and the collector share one rollup without torch.
"""

from __future__ import annotations

from typing import Any

from attest.evidence.model import ModuleRow, OperatorRow

__all__ = ["module_rows"]


def _worst(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _total(values: list[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def module_rows(
    operators: list[OperatorRow], annotations_: list[dict[str, Any]]
) -> list[ModuleRow]:
    """Operator rows rolled up per module path (worst figure, or the sum), in first-seen order."""
    groups: dict[str, list[OperatorRow]] = {}
    for row in operators:
        groups.setdefault(row.module, []).append(row)
    notes = {str(a.get("module")): str(a.get("reason")) for a in annotations_}
    out: list[ModuleRow] = []
    for module, rows in groups.items():
        out.append(
            ModuleRow(
                module=module,
                operators=len(rows),
                operator_ids=[r.id for r in rows],
                bit_exact_rate=_worst([r.bit_exact_rate for r in rows]),
                stability_score=_worst([r.stability_score for r in rows]),
                fidelity_pct=_worst([r.fidelity_pct for r in rows]),
                local_fidelity_pct=_worst([r.local_fidelity_pct for r in rows]),
                memory_delta_bytes=_total([r.memory_delta_bytes for r in rows]),
                forward_ns=_total([r.forward_ns for r in rows]),
                backward_ns=_total([r.backward_ns for r in rows]),
                thread_sensitive_operators=sum(1 for r in rows if r.thread_sensitive),
                nonfinite_operators=sum(1 for r in rows if r.nonfinite),
                random_operators=sum(1 for r in rows if r.random),
                annotation=_annotation_for(module, notes),
            )
        )
    return out


def _annotation_for(module: str, notes: dict[str, str]) -> str | None:
    # An annotation on a module covers its submodules too.
    probe = module
    while True:
        if probe in notes:
            return notes[probe]
        if not probe:
            return None
        probe = probe.rpartition(".")[0]
