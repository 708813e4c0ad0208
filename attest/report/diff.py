"""What changed between two releases of one model line (``attest diff OLD NEW``).

Inputs are certificates or evidence files (any mix). Operators are aligned by
``(module, op, occurrence)`` -- the n-th call of that ATen op inside that module -- never by
raw id, so inserting one operator early in the graph does not misalign everything after it.

Reported: operators added and removed; accumulated and local fidelity, stability and
bit-exact-rate drops beyond tolerance (regressions); saved-memory changes; check status and
item failures that appeared; the training checks' summary figures (``_diff_training``);
verdict, policy, version and environment changes. A regression
makes the command exit 1, so it can gate a release pipeline.

Tolerances are the documented defaults of :class:`DiffTolerances`, or the ``diff:`` section
of a policy file given with ``--policy``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from attest.errors import ConfigError
from attest.report._diff_training import training_changes
from attest.report._page import flatten, fmt_pct
from attest.report._rows import short_op
from attest.report._source import ReportSource, load_findings, load_source

__all__ = [
    "Change",
    "DiffResult",
    "DiffTolerances",
    "diff_files",
    "diff_sources",
    "load_tolerances",
]

OperatorKey = tuple[str, str, int]
_PASSING = {"pass", "passed", "certified"}
# Environment keys that differ on every run and say nothing about the model.
_VOLATILE_ENV = ("hostname", "pid", "time", "date", "created", "duration")


class DiffTolerances(BaseModel):
    """How much a figure may move between releases before it counts. Documented defaults."""

    model_config = ConfigDict(extra="forbid")

    fidelity_drop_pct: float = Field(
        default=0.01, ge=0, description="drop in accumulated or local fidelity, percentage points"
    )
    stability_drop: float = Field(
        default=1.0, ge=0, description="drop in stability score, points of 0-100"
    )
    bit_exact_rate_drop: float = Field(
        default=0.0, ge=0, description="drop in bit-exact rate (0..1)"
    )
    memory_change_pct: float = Field(
        default=10.0,
        ge=0,
        description="relative change of saved-for-backward bytes that is reported",
    )
    memory_regression_pct: float | None = Field(
        default=None,
        ge=0,
        description="relative increase of saved bytes that counts as a regression",
    )


@dataclass
class Change:
    """One difference. ``regression`` marks the ones that fail the diff."""

    kind: str  # operator_added, fidelity, stability, memory, check, verdict, policy, environment...
    subject: str
    old: Any
    new: Any
    message: str
    regression: bool = False


@dataclass
class DiffResult:
    """The whole comparison; :attr:`regressions` decides the exit code."""

    old: str
    new: str
    old_model: str
    new_model: str
    tolerances: DiffTolerances
    operators_compared: int = 0
    changes: list[Change] = field(default_factory=list)

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.regression]

    def to_json(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "old_model": self.old_model,
            "new_model": self.new_model,
            "tolerances": self.tolerances.model_dump(),
            "operators_compared": self.operators_compared,
            "regression": bool(self.regressions),
            "regressions": [asdict(c) for c in self.regressions],
            "changes": [asdict(c) for c in self.changes],
        }

    def to_text(self) -> str:
        lines = [
            f"attest diff {self.old_model} -> {self.new_model}",
            f"  {self.operators_compared} operators aligned by (module, op, occurrence)",
        ]
        if not self.changes:
            lines.append("  no changes beyond tolerance")
        for c in sorted(self.changes, key=lambda c: not c.regression):
            mark = "REGRESSION" if c.regression else "change    "
            lines.append(f"  {mark} {c.kind:<14} {c.subject}: {c.message}")
        lines.append(f"{len(self.regressions)} regression(s), {len(self.changes)} change(s)")
        return "\n".join(lines)


def load_tolerances(policy: str | Path | None) -> DiffTolerances:
    """Defaults, or the ``diff:`` mapping of a policy file (validated as a whole policy)."""
    if policy is None:
        return DiffTolerances()
    from attest.policy.model import load_policy

    section = load_policy(policy).diff
    if not section:
        return DiffTolerances()
    try:
        return DiffTolerances.model_validate(section)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(
            f"policy file {policy}: diff.{'.'.join(str(x) for x in err['loc'])}: {err['msg']}",
            hint=f"allowed keys: {', '.join(DiffTolerances.model_fields)}",
        ) from None


def operator_keys(operators: list[dict[str, Any]]) -> dict[OperatorKey, dict[str, Any]]:
    """Rows keyed by (module, op, occurrence index within that module and op)."""
    seen: dict[tuple[str, str], int] = {}
    out: dict[OperatorKey, dict[str, Any]] = {}
    for row in operators:
        base = (str(row.get("module") or ""), str(row.get("op") or "?"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out[(*base, n)] = row
    return out


def _label(key: OperatorKey, row: dict[str, Any]) -> str:
    module, op, n = key
    return f"{short_op(op)}#{n} @ {module or '<root>'} (id {row.get('id')})"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass
class _Culprits:
    """The first operator (execution order) whose own figures regressed, per kind.

    Error propagates: a culprit's drop in accumulated fidelity (or its nondeterminism) shows
    up in every operator after it. Those later drops are reported as inherited changes, not as
    regressions, when the operator's own measure (local fidelity; ``nondeterminism_origin``)
    shows it is not itself a source; without that measure every drop is a regression.
    """

    fidelity: str | None = None
    reproducibility: str | None = None


def _compare_fidelity(
    label: str,
    ra: dict[str, Any],
    rb: dict[str, Any],
    tol: DiffTolerances,
    out: DiffResult,
    culprits: _Culprits,
) -> None:
    local_a, local_b = _num(ra.get("local_fidelity_pct")), _num(rb.get("local_fidelity_pct"))
    local_held = (
        local_a is not None and local_b is not None and local_a - local_b <= tol.fidelity_drop_pct
    )
    for fld, what in (
        ("local_fidelity_pct", "local fidelity"),
        ("fidelity_pct", "accumulated fidelity"),
    ):
        va, vb = _num(ra.get(fld)), _num(rb.get(fld))
        if va is not None and vb is None:
            out.changes.append(
                Change("fidelity", label, va, None, f"{what} no longer measured", True)
            )
            continue
        if va is None or vb is None or va - vb <= tol.fidelity_drop_pct:
            continue
        text = f"{what} fell {fmt_pct(va)} -> {fmt_pct(vb)} % (tolerance {tol.fidelity_drop_pct:g} points)"
        inherited = fld == "fidelity_pct" and local_held and culprits.fidelity is not None
        if inherited:
            text += f"; inherited from {culprits.fidelity} (its own local fidelity held)"
        out.changes.append(Change("fidelity", label, va, vb, text, not inherited))
        if not inherited and culprits.fidelity is None:
            culprits.fidelity = label


def _compare_reproducibility(
    label: str,
    ra: dict[str, Any],
    rb: dict[str, Any],
    tol: DiffTolerances,
    out: DiffResult,
    culprits: _Culprits,
) -> None:
    not_origin = rb.get("nondeterminism_origin") is False
    checks = (
        ("stability_score", "stability", "stability score", tol.stability_drop),
        ("bit_exact_rate", "bit_exact_rate", "bit-exact rate", tol.bit_exact_rate_drop),
    )
    for fld, kind, what, allowed in checks:
        va, vb = _num(ra.get(fld)), _num(rb.get(fld))
        if va is None or vb is None or va - vb <= allowed:
            continue
        inherited = not_origin and culprits.reproducibility is not None
        text = f"{what} fell {va:.6g} -> {vb:.6g} (tolerance {allowed:g})"
        if inherited:
            text += f"; inherited from {culprits.reproducibility} (not a nondeterminism origin)"
        out.changes.append(Change(kind, label, va, vb, text, not inherited))
        if not inherited and culprits.reproducibility is None:
            culprits.reproducibility = label


def _compare_operators(
    old: ReportSource, new: ReportSource, tol: DiffTolerances, out: DiffResult
) -> None:
    a, b = operator_keys(old.operators), operator_keys(new.operators)
    for key in a.keys() - b.keys():
        out.changes.append(
            Change(
                "operator_removed", _label(key, a[key]), a[key].get("id"), None, "operator removed"
            )
        )
    for key in b.keys() - a.keys():
        out.changes.append(
            Change("operator_added", _label(key, b[key]), None, b[key].get("id"), "operator added")
        )
    common = [k for k in b if k in a]  # new execution order
    out.operators_compared = len(common)
    culprits = _Culprits()
    for key in common:
        ra, rb = a[key], b[key]
        label = _label(key, rb)
        _compare_fidelity(label, ra, rb, tol, out, culprits)
        _compare_reproducibility(label, ra, rb, tol, out, culprits)
        _compare_memory(
            label, _num(ra.get("memory_delta_bytes")), _num(rb.get("memory_delta_bytes")), tol, out
        )
    total_a = sum(
        v for v in (_num(r.get("memory_delta_bytes")) for r in old.operators) if v is not None
    )
    total_b = sum(
        v for v in (_num(r.get("memory_delta_bytes")) for r in new.operators) if v is not None
    )
    _compare_memory("whole model", total_a or None, total_b or None, tol, out)


def _compare_memory(
    label: str, va: float | None, vb: float | None, tol: DiffTolerances, out: DiffResult
) -> None:
    if va is None or vb is None or va == vb:
        return
    pct = 100.0 * (vb - va) / va if va else float("inf")
    if abs(pct) <= tol.memory_change_pct:
        return
    regression = tol.memory_regression_pct is not None and pct > tol.memory_regression_pct
    out.changes.append(
        Change(
            "memory",
            label,
            va,
            vb,
            f"bytes saved for backward {va:,.0f} -> {vb:,.0f} ({pct:+.1f} %)",
            regression,
        )
    )


def _item_key(item: Any, ids: dict[int, OperatorKey]) -> str:
    s = item.subject
    if s.operator_id is not None and s.operator_id in ids:
        module, op, n = ids[s.operator_id]
        return f"operator {short_op(op)}#{n} @ {module or '<root>'}"
    return (
        s.label() if s.operator_id is None else f"{s.kind} {s.op or ''} {s.name or ''} @ {s.module}"
    )


def _compare_checks(old: ReportSource, new: ReportSource, out: DiffResult) -> None:
    ids_a = {r.get("id"): k for k, r in operator_keys(old.operators).items()}
    ids_b = {r.get("id"): k for k, r in operator_keys(new.operators).items()}
    for cid in dict.fromkeys([*old.checks, *new.checks]):
        ca, cb = old.checks.get(cid), new.checks.get(cid)
        if ca is not None and cb is None:
            out.changes.append(
                Change(
                    "check",
                    cid,
                    ca.status,
                    None,
                    "check missing from the new release",
                    ca.status == "computed",
                )
            )
            continue
        if cb is None:
            continue
        if ca is None:
            out.changes.append(
                Change(
                    "check",
                    cid,
                    None,
                    cb.status,
                    f"check new in this release ({cb.status})",
                    cb.status == "error",
                )
            )
            continue
        if ca.status != cb.status:
            worse = ca.status == "computed" and cb.status != "computed"
            out.changes.append(
                Change(
                    "check", cid, ca.status, cb.status, f"status {ca.status} -> {cb.status}", worse
                )
            )
        failing_a = {_item_key(i, ids_a) for i in ca.items if i.status in ("fail", "error")}  # type: ignore[arg-type]
        for item in cb.items:
            if item.status in ("fail", "error"):
                key = _item_key(item, ids_b)  # type: ignore[arg-type]
                if key not in failing_a:
                    out.changes.append(
                        Change(
                            "check",
                            f"{cid}: {key}",
                            None,
                            item.status,
                            f"newly {item.status}: {item.message or 'see evidence'}",
                            True,
                        )
                    )


def _compare_top(
    old: ReportSource, new: ReportSource, tol: DiffTolerances, out: DiffResult
) -> None:
    if old.model.get("name") != new.model.get("name"):
        out.changes.append(
            Change(
                "model",
                "name",
                old.model.get("name"),
                new.model.get("name"),
                "different model lines: the comparison may be meaningless",
            )
        )
    if old.model.get("version") != new.model.get("version"):
        out.changes.append(
            Change(
                "version",
                "model",
                old.model.get("version"),
                new.model.get("version"),
                f"version {old.model.get('version')} -> {new.model.get('version')}",
            )
        )
    va, vb = (str(s.verdict).lower() if s.verdict is not None else None for s in (old, new))
    if va != vb:
        out.changes.append(
            Change(
                "verdict",
                "model",
                old.verdict,
                new.verdict,
                f"verdict {old.verdict} -> {new.verdict}",
                va in _PASSING and vb not in _PASSING,
            )
        )
    pa, pb = old.policy or {}, new.policy or {}
    for key in ("id", "name", "version", "digest"):
        if pa.get(key) != pb.get(key) and (pa or pb):
            out.changes.append(
                Change(
                    "policy",
                    key,
                    pa.get(key),
                    pb.get(key),
                    f"policy {key} {pa.get(key)} -> {pb.get(key)}",
                )
            )
    ea, eb = dict(flatten(old.environment)), dict(flatten(new.environment))
    for key in sorted(ea.keys() | eb.keys()):
        if any(v in key.lower() for v in _VOLATILE_ENV):
            continue
        if ea.get(key) != eb.get(key):
            out.changes.append(
                Change(
                    "environment",
                    key,
                    ea.get(key),
                    eb.get(key),
                    f"{ea.get(key)!r} -> {eb.get(key)!r}",
                )
            )
    for key in sorted(old.model_metrics.keys() & new.model_metrics.keys()):
        va_, vb_ = _num(old.model_metrics[key]), _num(new.model_metrics[key])
        if va_ is None or vb_ is None or va_ == vb_:
            continue
        bad = "bit_exact" in key and va_ - vb_ > tol.bit_exact_rate_drop
        out.changes.append(Change("model_metric", key, va_, vb_, f"{va_:.6g} -> {vb_:.6g}", bad))


def diff_sources(
    old: ReportSource, new: ReportSource, tolerances: DiffTolerances | None = None
) -> DiffResult:
    """Compare two loaded sources; see the module docstring for what counts."""
    tol = tolerances or DiffTolerances()
    out = DiffResult(
        old=str(old.path),
        new=str(new.path),
        old_model=old.model_label,
        new_model=new.model_label,
        tolerances=tol,
    )
    _compare_top(old, new, tol, out)
    _compare_operators(old, new, tol, out)
    _compare_checks(old, new, out)
    for subject, va, vb, text, bad in training_changes(old.checks, new.checks):
        out.changes.append(Change("training", subject, va, vb, text, bad))
    return out


def diff_files(
    old: str | Path,
    new: str | Path,
    *,
    policy: str | Path | None = None,
    old_findings: str | Path | None = None,
    new_findings: str | Path | None = None,
) -> DiffResult:
    """Load two certificates or evidence files and compare them (signatures are not checked)."""
    a, b = load_source(old), load_source(new)
    if old_findings is not None:
        load_findings(old_findings, a)
    if new_findings is not None:
        load_findings(new_findings, b)
    return diff_sources(a, b, load_tolerances(policy))


def dumps(result: DiffResult) -> str:
    """The ``--json`` output."""
    return json.dumps(result.to_json(), indent=2, allow_nan=False, default=str) + "\n"
