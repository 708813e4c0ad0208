"""Row-level helpers shared by the report, the diff and the metrics export: anchors,
finding order, per-module roll-up and the series the operator charts draw."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attest.report._source import VERDICT_ORDER, ReportSource


@dataclass
class OperatorSeries:
    """Per-point data of the operator profile: one point per operator (or per module)."""

    labels: list[str]  # x tick text: "12 conv" or a module path
    groups: list[str]  # module of each point, for background bands
    fidelity: list[float | None]
    local_fidelity: list[float | None]
    stability: list[float | None]
    memory_bytes: list[float | None]
    forward_ns: list[float | None]
    backward_ns: list[float | None]
    flagged: list[bool]  # a failing finding names this point


# Above this many operators, charts show one point per module (the table still lists all).
AGGREGATE_ABOVE = 200
_FAILING = {"fail", "failed", "error"}


def operator_anchor(op_id: Any) -> str:
    """The HTML id of an operator's table row."""
    return f"op-{op_id}"


def module_anchor(module: Any) -> str:
    """The HTML id of a module's roll-up row ("" is the root module)."""
    return f"mod-{module}" if module else "mod--root"


def short_op(op: Any) -> str:
    """``aten.convolution.default`` -> ``convolution``; ``aten.add.Tensor`` -> ``add.Tensor``."""
    text = str(op or "?")
    text = text.removeprefix("aten.")
    return text.removesuffix(".default")


def sorted_findings(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Failures first, then waivers, warnings, the rest; stable within a verdict."""
    return sorted(findings, key=lambda f: VERDICT_ORDER.get(str(f.get("verdict", "")).lower(), 5))


@dataclass
class Anchors:
    """The row ids the page has, so a link is only made to something that exists."""

    op_ids: set[Any]
    modules: set[str]
    checks: set[str]

    def check(self, check: Any) -> str | None:
        """The anchor of a check's section, if the page has one."""
        return f"check-{check}" if check is not None and str(check) in self.checks else None


def finding_anchor(subject: Any, check: Any, anchors: Anchors) -> str | None:
    """Where a finding links to: its operator row, else its module row, else its check."""
    if isinstance(subject, dict):
        oid = subject.get("operator_id")
        if oid is not None and oid in anchors.op_ids:
            return operator_anchor(oid)
        module = subject.get("module")
        if module is not None and str(module) in anchors.modules:
            return module_anchor(module)
        name = subject.get("name")
        if subject.get("kind") == "parameter" and isinstance(name, str) and "." in name:
            owner = name.rsplit(".", 1)[0]
            if owner in anchors.modules:
                return module_anchor(owner)
    return anchors.check(check)


def flagged_operator_ids(src: ReportSource) -> set[int]:
    """Operators named by a failing finding or a failing check item."""
    flagged: set[int] = set()
    for f in src.findings:
        subj = f.get("subject")
        if str(f.get("verdict", "")).lower() in _FAILING and isinstance(subj, dict):
            oid = subj.get("operator_id")
            if isinstance(oid, int):
                flagged.add(oid)
    for res in src.checks.values():
        for item in res.items:
            if item.status in ("fail", "error") and item.subject.operator_id is not None:
                flagged.add(item.subject.operator_id)
    return flagged


def policy_threshold(findings: list[dict[str, Any]], keyword: str) -> float | None:
    """The threshold the findings hold a quantity to (most common one), for chart guide lines."""
    values = Counter(
        float(f["threshold"])
        for f in findings
        if isinstance(f.get("threshold"), int | float)
        and not isinstance(f.get("threshold"), bool)
        and keyword in f"{f.get('rule', '')} {f.get('check', '')} {f.get('metric', '')}".lower()
        and "local" not in str(f.get("rule", "")).lower()
    )
    return values.most_common(1)[0][0] if values else None


def numeric_metric(metrics: dict[str, Any], *fragments: str) -> float | None:
    """The metric named exactly like a fragment, else the first numeric metric whose name
    contains one of ``fragments`` (tolerant lookup across evidence versions)."""
    for name in fragments:
        if _num(metrics.get(name)) is not None:
            return float(metrics[name])
    for key, value in metrics.items():
        if any(f in key.lower() for f in fragments) and _num(value) is not None:
            return float(value)
    return None


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _reduce(values: list[Any], how: Callable[[list[float]], float]) -> float | None:
    nums = [v for v in (_num(x) for x in values) if v is not None]
    return how(nums) if nums else None


def _group_by_module(
    operators: list[dict[str, Any]], key: Callable[[str], str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in operators:
        module = str(row.get("module") or "")
        groups.setdefault(key(module) if key else module, []).append(row)
    return groups


def _prefix(depth: int) -> Callable[[str], str]:
    return lambda module: ".".join(module.split(".")[:depth])


def chart_groups(operators: list[dict[str, Any]], limit: int) -> dict[str, list[dict[str, Any]]]:
    """Operators grouped for a chart of at most ``limit`` points: by module, else by the
    deepest module-path prefix that gives few enough groups, else by consecutive runs."""
    groups = _group_by_module(operators)
    depth = max((m.count(".") + 1 for m in groups if m), default=1)
    while len(groups) > limit and depth > 1:
        depth -= 1
        groups = _group_by_module(operators, _prefix(depth))
    if len(groups) <= limit:
        return groups
    size = -(-len(operators) // limit)  # ceil: consecutive runs of operators
    return {
        f"ops {operators[i].get('id')}-{operators[min(i + size, len(operators)) - 1].get('id')}": operators[
            i : i + size
        ]
        for i in range(0, len(operators), size)
    }


def rollup(
    operators: list[dict[str, Any]], groups: dict[str, list[dict[str, Any]]] | None = None
) -> list[dict[str, Any]]:
    """Per-module figures from operator rows: worst fidelity/stability, summed memory and time."""
    out = []
    for module, rows in (groups or _group_by_module(operators)).items():
        out.append(
            {
                "module": module,
                "operators": len(rows),
                "min_fidelity_pct": _reduce([r.get("fidelity_pct") for r in rows], min),
                "min_local_fidelity_pct": _reduce([r.get("local_fidelity_pct") for r in rows], min),
                "min_stability_score": _reduce([r.get("stability_score") for r in rows], min),
                "min_bit_exact_rate": _reduce([r.get("bit_exact_rate") for r in rows], min),
                "memory_delta_bytes": _reduce([r.get("memory_delta_bytes") for r in rows], sum),
                "forward_ns": _reduce([r.get("forward_ns") for r in rows], sum),
                "backward_ns": _reduce([r.get("backward_ns") for r in rows], sum),
            }
        )
    return out


def module_rows(src: ReportSource) -> tuple[list[dict[str, Any]], bool]:
    """The module roll-up: the input's own table, or one computed here (second value True)."""
    if src.modules:
        return src.modules, False
    return rollup(src.operators), True


def _grouping(operators: list[dict[str, Any]], groups: dict[str, list[dict[str, Any]]]) -> str:
    """How chart points were grouped, in words."""
    if next(iter(groups), "").startswith("ops "):
        return f"runs of {len(next(iter(groups.values())))} consecutive operators"
    if len(groups) == len(_group_by_module(operators)):
        return "module"
    depth = max((k.count(".") + 1 for k in groups if k), default=1)
    return f"module-path prefix of depth {depth} (e.g. {next((k for k in groups if k), '<root>')})"


def operator_series(
    operators: list[dict[str, Any]], flagged: set[int]
) -> tuple[OperatorSeries, str | None]:
    """Chart data: one point per operator, or per module (or module prefix) above
    :data:`AGGREGATE_ABOVE` operators, so a chart never has more than that many points."""
    if len(operators) <= AGGREGATE_ABOVE:
        return OperatorSeries(
            labels=[f"{r.get('id')} {short_op(r.get('op'))}" for r in operators],
            groups=[str(r.get("module") or "") for r in operators],
            fidelity=[_num(r.get("fidelity_pct")) for r in operators],
            local_fidelity=[_num(r.get("local_fidelity_pct")) for r in operators],
            stability=[_num(r.get("stability_score")) for r in operators],
            memory_bytes=[_num(r.get("memory_delta_bytes")) for r in operators],
            forward_ns=[_num(r.get("forward_ns")) for r in operators],
            backward_ns=[_num(r.get("backward_ns")) for r in operators],
            flagged=[r.get("id") in flagged for r in operators],
        ), None
    groups = chart_groups(operators, AGGREGATE_ABOVE)
    rolled = rollup(operators, groups)
    return OperatorSeries(
        labels=[r["module"] or "<root>" for r in rolled],
        groups=[r["module"] for r in rolled],
        fidelity=[r["min_fidelity_pct"] for r in rolled],
        local_fidelity=[r["min_local_fidelity_pct"] for r in rolled],
        stability=[r["min_stability_score"] for r in rolled],
        memory_bytes=[r["memory_delta_bytes"] for r in rolled],
        forward_ns=[r["forward_ns"] for r in rolled],
        backward_ns=[r["backward_ns"] for r in rolled],
        flagged=[any(row.get("id") in flagged for row in groups[r["module"]]) for r in rolled],
    ), _grouping(operators, groups)
