"""The report's "Training" section: the training checks (``mixed_precision``, ``recompute``,
``batch_invariance``, ``resume``; docs/training.md).

They answer a question the other checks do not (do the gradients hold under the ``training:``
configuration the spec declares: autocast, activation checkpointing, other batch sizes, a
restart from a checkpoint), so they get a section of their own: an overview first (each
check's status, its summary figures and its failing items, one row per check), then each
check in full. ``recompute`` also gets its regions as a table of what each saves and what
recomputing it costs (saved-tensor bytes freed per second of recompute), and the greedy
checkpointing plan it advises, rather than those figures buried in generic item columns.
"""

from __future__ import annotations

from typing import Any

from attest.evidence.model import TRAINING_CHECKS, CheckItem, CheckResult
from attest.report._page import (
    NA,
    Cell,
    badge,
    cell,
    esc,
    fmt_bytes,
    fmt_for_key,
    fmt_number,
    na,
    table,
)
from attest.report._rows import Anchors
from attest.report._sections import check_detail, subject_html
from attest.report._source import ReportSource

__all__ = ["training_section"]

_FAILING = ("fail", "error")
_FAILURES_SHOWN = 5  # failing items named per check in the overview (all are in the check)
# recompute's advice (a list of candidate modules) is shown as a table, not in the scope
_RECOMPUTE_PLAN = "adaptive_recompute"


def training_section(src: ReportSource, anchors: Anchors) -> str:
    """The overview of the training checks, then each one (parameters, summary, items)."""
    out = [
        '<h2 id="training">Training</h2>',
        '<p class="sub">How the gradients behave under the <code>training:</code> '
        "configuration the spec declares (docs/training.md); without one these checks are "
        "not applicable.</p>",
        _overview(src, anchors),
    ]
    for cid in TRAINING_CHECKS:
        hide = (_RECOMPUTE_PLAN,) if cid == "recompute" else ()
        out.append(check_detail(cid, src, anchors, hide_parameters=hide))
        res = src.checks.get(cid)
        if cid == "recompute" and res is not None:
            out.append(recompute_tables(res, anchors))
    return "".join(out)


def _fmt(key: str) -> Any:
    """A training figure's formatter: bytes (``saved_bytes_freed``), bytes per second,
    seconds (``extra_forward_s``), else by the name as elsewhere in the report."""
    if key.endswith("_per_recompute_s"):
        return _per_second
    if "bytes" in key:
        return fmt_bytes
    if key.endswith("_s"):
        return _seconds
    return fmt_for_key(key)


def _summary_text(summary: dict[str, Any]) -> str:
    parts = [
        f"{esc(k)} <b>{esc(_fmt(k)(v))}</b>"
        for k, v in summary.items()
        if v is not None and not isinstance(v, dict | list)
    ]
    return " · ".join(parts) if parts else NA


def _failures_html(res: CheckResult, cid: str, anchors: Anchors) -> str:
    failing = [i for i in res.items if i.status in _FAILING]
    if not failing:
        return NA
    lines = [
        f"{badge(i.status)} {subject_html(i.subject.model_dump(exclude_none=True), cid, anchors)}"
        + (f": {esc(i.message)}" if i.message else "")
        for i in failing[:_FAILURES_SHOWN]
    ]
    if len(failing) > _FAILURES_SHOWN:
        lines.append(f"and {len(failing) - _FAILURES_SHOWN:,} more (below)")
    return "<br>".join(lines)


def _overview(src: ReportSource, anchors: Anchors) -> str:
    def rows() -> Any:
        for cid in TRAINING_CHECKS:
            link = f'<a href="#check-{esc(cid)}">{esc(cid)}</a>'
            res = src.checks.get(cid)
            if res is None:
                why = src.unreadable_checks.get(cid)
                yield (
                    [
                        Cell(link),
                        Cell(badge("error") if why else NA),
                        Cell(NA),
                        Cell(NA),
                        f"unreadable in this input: {why}" if why else "not in this evidence",
                    ],
                    {"class": "flag"} if why else {},
                )
                continue
            failing = any(i.status in _FAILING for i in res.items)
            yield (
                [
                    Cell(link),
                    Cell(badge(res.status)),
                    Cell(_summary_text(res.summary)),
                    Cell(_failures_html(res, cid, anchors)),
                    str(res.reason or ""),
                ],
                {"class": "flag"} if res.status == "error" or failing else {},
            )

    return table(
        ["check", "status", "summary", "failing items", "reason"],
        rows(),
        table_id="training-table",
    )


def _per_second(value: Any) -> str:
    return f"{fmt_bytes(value)}/s" if isinstance(value, int | float) else fmt_number(value)


def _seconds(value: Any) -> str:
    return f"{value:.4g} s" if isinstance(value, int | float) else fmt_number(value)


# (metric, column head, formatter) of a recompute region and of a plan entry
_MEMORY_COLUMNS: list[tuple[str, str, Any]] = [
    ("saved_bytes_without", "saved without", fmt_bytes),
    ("saved_bytes_with", "saved with", fmt_bytes),
    ("saved_bytes_freed", "freed", fmt_bytes),
    ("recompute_forward_s", "recompute time", _seconds),
    ("bytes_freed_per_recompute_s", "freed per second of recompute", _per_second),
]


def _regions_table(regions: list[CheckItem], anchors: Anchors) -> str:
    def rows() -> Any:
        for item in regions:
            subj = item.subject.model_dump(exclude_none=True)
            m = item.metrics
            yield (
                [
                    Cell(badge(item.status)),
                    Cell(subject_html(subj, "recompute", anchors)),
                    cell(m.get("calls")),
                    *(cell(m.get(k), f) for k, _, f in _MEMORY_COLUMNS),
                    cell(m.get("reentrant")),
                    cell(m.get("preserve_rng_state")),
                ],
                {"class": "flag"} if item.status in _FAILING else {},
            )

    heads = ["status", "region", "calls", *(h for _, h, _ in _MEMORY_COLUMNS)]
    return table(
        [*heads, "reentrant", "preserve RNG state"],
        rows(),
        table_id="recompute-regions",
        sortable=True,
        numeric_cols=tuple(range(2, 3 + len(_MEMORY_COLUMNS))),
    )


def _plan_table(plan: list[Any]) -> str:
    entries = [p for p in plan if isinstance(p, dict)]

    def rows() -> Any:
        for p in entries:
            yield (
                [
                    Cell(esc(p.get("module") or "<root>")),
                    cell(p.get("checkpointed")),
                    *(cell(p.get(k), f) for k, _, f in _MEMORY_COLUMNS),
                    cell(p.get("cumulative_bytes_freed"), fmt_bytes),
                    cell(p.get("cumulative_recompute_s"), _seconds),
                ],
                {},
            )

    heads = ["module", "checkpointed", *(h for _, h, _ in _MEMORY_COLUMNS)]
    return table(
        [*heads, "cumulative freed", "cumulative recompute time"],
        rows(),
        table_id="recompute-plan",
        numeric_cols=tuple(range(2, 4 + len(_MEMORY_COLUMNS))),
    )


def recompute_tables(res: CheckResult, anchors: Anchors) -> str:
    """The checkpointed regions (what each saves, what recomputing it costs) and the plan."""
    regions = [i for i in res.items if "calls" in i.metrics]
    out = ["<h4>Checkpointed regions: memory saved per second of recompute</h4>"]
    out.append(
        _regions_table(regions, anchors)
        if regions
        else na("no checkpointed region ran (or this evidence does not record them)")
    )
    plan = res.parameters.get(_RECOMPUTE_PLAN)
    if isinstance(plan, list):
        out.append(
            "<h4>Adaptive recompute plan (advice)</h4>"
            '<p class="sub">Modules ranked by saved-tensor bytes freed per second of '
            "recompute, best first, measured without checkpointing.</p>"
            + (_plan_table(plan) if plan else na("no module frees memory by recomputing"))
        )
    return "".join(out)
