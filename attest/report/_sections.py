"""The report's sections below the summary: findings, checks, operators and module roll-up,
integrated gradients, gradient checks and every other check (the training checks have their
own module, ``_training``). Each takes the loaded source and the page's
:class:`~attest.report._rows.Anchors` and returns HTML; none raises on a missing section (it
says "not available in this evidence")."""

from __future__ import annotations

from typing import Any

from attest.evidence.model import IG_CHECKS, TRAINING_CHECKS, CheckId
from attest.report import _ig
from attest.report._page import (
    NA,
    Cell,
    badge,
    cell,
    esc,
    flatten,
    fmt_bytes,
    fmt_for_key,
    fmt_ns,
    fmt_number,
    fmt_pct,
    kv,
    na,
    table,
)
from attest.report._rows import (
    Anchors,
    finding_anchor,
    module_anchor,
    module_rows,
    operator_anchor,
    operator_series,
    policy_threshold,
    sorted_findings,
)
from attest.report._source import ReportSource

# The gradient checks shown in their own section (finite differences and second order; the
# others are under "Other checks"); the IG checks come from the evidence model.
GRADIENT_CHECKS: tuple[CheckId, ...] = ("gradcheck", "custom_ops", "second_order")
PASSING = {"pass", "passed", "certified"}
_ITEM_CAP = 400


def subject_html(subject: Any, check: Any, anchors: Anchors) -> str:
    """A finding's or item's subject, linked to its operator, module or check."""
    text = esc(_subject_label(subject))
    anchor = finding_anchor(subject, check, anchors)
    return f'<a href="#{esc(anchor)}">{text}</a>' if anchor else text


def _check_link(check: Any, anchors: Anchors) -> str:
    anchor = anchors.check(check)
    return f'<a href="#{esc(anchor)}">{esc(check)}</a>' if anchor else esc(check)


def _subject_label(subject: Any) -> str:
    if not isinstance(subject, dict):
        return str(subject) if subject is not None else "model"
    kind = str(subject.get("kind", ""))
    parts = [] if kind == "input" and subject.get("input_index") is not None else [kind]
    for key in ("operator_id", "op", "name"):
        if subject.get(key) is not None:
            parts.append(str(subject[key]))
    if subject.get("input_index") is not None:
        parts.append(f"input {subject['input_index']}")
    if subject.get("module") is not None:
        parts.append(f"@ {subject['module'] or '<root>'}")
    return " ".join(p for p in parts if p)


def _finding_message(finding: dict[str, Any]) -> str:
    """The finding's message, and for a waived one who waived it, why, and until when."""
    text = str(finding.get("message", ""))
    waiver = finding.get("waiver")
    if isinstance(waiver, dict):
        who = waiver.get("approved_by") or waiver.get("module") or waiver.get("kind")
        parts = [f"waived by {waiver.get('label', 'a waiver')}"]
        parts += [f"approved by {who}"] if who else []
        parts += [f"ref {waiver['reference']}"] if waiver.get("reference") else []
        parts += [f"until {waiver['expires']}"] if waiver.get("expires") else []
        text += f" [{', '.join(parts)}: {waiver.get('justification', '')}]"
    return text


def findings_section(src: ReportSource, anchors: Anchors) -> str:
    """Findings, failures and waivers first, then warnings; passing ones folded away."""
    out = ['<h2 id="findings">Findings</h2>']
    if not src.findings:
        out.append(
            na(
                "no findings: this input was not evaluated against a policy (give --findings)"
                if src.findings_source is None
                else "the evaluation produced no findings"
            )
        )
    else:
        ordered = sorted_findings(src.findings)
        counts: dict[str, int] = {}
        for f in ordered:
            counts[str(f.get("verdict"))] = counts.get(str(f.get("verdict")), 0) + 1
        out.append("<p>" + " ".join(f"{badge(k)} {v}" for k, v in counts.items()) + "</p>")

        def rows(items: list[dict[str, Any]]) -> Any:
            for f in items:
                yield (
                    [
                        Cell(badge(f.get("verdict"))),
                        str(f.get("rule", "")),
                        Cell(_check_link(f.get("check"), anchors)),
                        Cell(subject_html(f.get("subject"), f.get("check"), anchors)),
                        cell(f.get("observed")),
                        cell(f.get("threshold")),
                        _finding_message(f),
                    ],
                    {"class": "flag"}
                    if str(f.get("verdict")).lower() in ("fail", "failed", "error")
                    else {},
                )

        heads = ["verdict", "rule", "check", "subject", "observed", "threshold", "message"]
        important = [f for f in ordered if str(f.get("verdict")).lower() not in PASSING]
        passing = [f for f in ordered if str(f.get("verdict")).lower() in PASSING]
        out.append(
            table(heads, rows(important), numeric_cols=(4, 5))
            if important
            else na("no failures, waivers or warnings")
        )
        if passing:
            out.append(
                f"<details><summary>{len(passing)} passing findings</summary>"
                + table(heads, rows(passing), numeric_cols=(4, 5))
                + "</details>"
            )
    if src.waivers:
        keys = sorted({k for w in src.waivers for k in w})
        out.append(
            "<h3>Waivers</h3>"
            + table(keys, (([cell(w.get(k)) for k in keys], {}) for w in src.waivers))
        )
    return "".join(out)


def _seconds(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else fmt_number(value)


def checks_section(src: ReportSource, anchors: Anchors) -> str:
    """One row per check: status, item tally, reason."""
    out = ['<h2 id="checks">Checks</h2>']
    if not src.checks and not src.unreadable_checks:
        return out[0] + na()

    def rows() -> Any:
        for cid, res in src.checks.items():
            tally: dict[str, int] = {}
            for item in res.items:
                tally[item.status] = tally.get(item.status, 0) + 1
            yield (
                [
                    Cell(_check_link(cid, anchors)),
                    Cell(badge(res.status)),
                    Cell(" ".join(f"{badge(k)} {v}" for k, v in sorted(tally.items())) or NA),
                    str(res.reason or ""),
                    cell(res.duration_s, _seconds),
                ],
                {"class": "flag"} if res.status == "error" or tally.get("fail") else {},
            )
        for cid, why in src.unreadable_checks.items():
            yield (
                [cid, Cell(badge("error")), "", f"unreadable in this input: {why}", cell(None)],
                {"class": "flag"},
            )

    out.append(table(["check", "status", "items", "reason", "seconds"], rows(), numeric_cols=(4,)))
    return "".join(out)


_OP_COLUMNS: list[tuple[str, str, Any]] = [
    ("fidelity_pct", "fidelity %", fmt_pct),
    ("local_fidelity_pct", "local fidelity %", fmt_pct),
    ("stability_score", "stability", fmt_number),
    ("bit_exact_rate", "bit-exact rate", fmt_number),
    ("max_relative_deviation", "max rel. deviation", fmt_number),
    ("memory_delta_bytes", "saved for backward", fmt_bytes),
    ("forward_ns", "forward", fmt_ns),
    ("forward_ns_iqr", "forward IQR", fmt_ns),
    ("forward_ns_p95", "forward p95", fmt_ns),
    ("backward_ns", "backward", fmt_ns),
    ("backward_ns_iqr", "backward IQR", fmt_ns),
    ("backward_ns_p95", "backward p95", fmt_ns),
]
_MODULE_ORDER = (
    "module",
    "operators",
    "fidelity_pct",
    "min_fidelity_pct",
    "local_fidelity_pct",
    "min_local_fidelity_pct",
    "stability_score",
    "min_stability_score",
    "bit_exact_rate",
    "min_bit_exact_rate",
    "memory_delta_bytes",
    "forward_ns",
    "backward_ns",
)
# Operator flags worth a word in the notes column (field -> text when true).
_OP_FLAGS = {
    "random": "random op",
    "thread_sensitive": "thread-sensitive",
    "nonfinite": "non-finite values",
}


def _op_notes(row: dict[str, Any]) -> str:
    notes = [text for key, text in _OP_FLAGS.items() if row.get(key) is True]
    not_computed = row.get("not_computed")
    if isinstance(not_computed, dict):
        notes += [f"{k} not computed: {v}" for k, v in not_computed.items()]
    return "; ".join(notes)


def operators_section(src: ReportSource, flagged: set[int]) -> str:
    """The operator charts, the sortable/filterable operator table and the module roll-up."""
    out = ['<h2 id="operators">Operators</h2>']
    if src.operators:
        out.append(_operator_charts(src, flagged))
        out.append(_operator_table(src, flagged))
    else:
        out.append(na("no per-operator rows in this input"))
    out.append('<h3 id="modules">Module roll-up</h3>')
    mods, computed = module_rows(src)
    if not mods:
        out.append(na())
        return "".join(out)
    if computed:
        out.append(
            '<p class="sub">rolled up by this report from the operator rows '
            "(the input has no module table)</p>"
        )
    hidden = {"operator_ids"}  # a long list; the operator table has the module of each row
    present = [k for k in dict.fromkeys(k for r in mods for k in r) if k not in hidden]
    # a certificate's rows come back with sorted keys: put the figures people read first
    keys = [k for k in _MODULE_ORDER if k in present] + [
        k for k in present if k not in _MODULE_ORDER
    ]

    def module_cell(r: dict[str, Any], key: str) -> Cell:
        if key == "module":
            return Cell(esc(r.get("module") or "<root>"))
        return cell(r.get(key), fmt_for_key(key))

    rows = (
        ([module_cell(r, k) for k in keys], {"id": module_anchor(r.get("module"))}) for r in mods
    )
    heads = [k.replace("_", " ") for k in keys]
    out.append(
        '<div class="scroll">'
        + table(heads, rows, table_id="module-table", sortable=True)
        + "</div>"
    )
    return "".join(out)


def _operator_charts(src: ReportSource, flagged: set[int]) -> str:
    from attest.report import plots  # matplotlib only when a chart is drawn

    series, grouping = operator_series(src.operators, flagged)
    note = (
        f"<p>{len(src.operators):,} operators: charts show one point per {esc(grouping)} "
        "(worst fidelity and stability, summed memory and time); the table lists every "
        "operator.</p>"
        if grouping
        else ""
    )
    svg = plots.operator_profile(
        series,
        fidelity_threshold=policy_threshold(src.findings, "fidelity"),
        stability_threshold=policy_threshold(src.findings, "stability"),
        x_title="group of operators (execution order)"
        if grouping
        else "operator id and ATen op (execution order)",
    )
    return f'{note}<div class="chart">{svg}</div>'


def _operator_table(src: ReportSource, flagged: set[int]) -> str:
    heads = ["id", "op", "module", *(h for _, h, _ in _OP_COLUMNS), "verified on", "notes"]

    def rows() -> Any:
        for r in src.operators:
            oid, mod, mask = r.get("id"), r.get("module"), r.get("hardware_affinity_mask")
            mod_link = (
                Cell(f'<a href="#{esc(module_anchor(mod))}">{esc(mod or "<root>")}</a>')
                if mod is not None
                else Cell(NA)
            )
            yield (
                [
                    cell(oid),
                    Cell(f"<code>{esc(r.get('op'))}</code>"),
                    mod_link,
                    *(cell(r.get(k), f) for k, _, f in _OP_COLUMNS),
                    ", ".join(str(m) for m in mask) if isinstance(mask, list) else fmt_number(mask),
                    _op_notes(r),
                ],
                {"id": operator_anchor(oid), **({"class": "flag"} if oid in flagged else {})},
            )

    numeric = (0, *range(3, 3 + len(_OP_COLUMNS)))
    return (
        '<input class="filter" type="search" placeholder="filter operators (op, module, value)…" '
        'data-table="op-table" aria-label="filter operators">'
        '<div class="scroll">'
        + table(heads, rows(), table_id="op-table", sortable=True, numeric_cols=numeric)
        + "</div>"
    )


def check_detail(
    cid: str, src: ReportSource, anchors: Anchors, *, hide_parameters: tuple[str, ...] = ()
) -> str:
    """One check: its scope (parameters), summary and items, failures first.
    ``hide_parameters``: parameters the caller shows in a table of their own."""
    res = src.checks.get(cid)
    head = f'<h3 id="check-{esc(cid)}">{esc(cid)} {badge(res.status) if res else ""}</h3>'
    if res is None:
        why = src.unreadable_checks.get(cid)
        return head + na(
            f"unreadable in this input: {why}" if why else "not available in this evidence"
        )
    parts = [head]
    if res.reason:
        parts.append(f"<p>{esc(res.reason)}</p>")
    parameters = {k: v for k, v in res.parameters.items() if k not in hide_parameters}
    scope = (
        kv((k, esc(fmt_for_key(k)(v))) for k, v in flatten(parameters))
        if parameters
        else na("no parameters recorded")
    )
    summ = (
        kv((k, esc(fmt_for_key(k)(v))) for k, v in res.summary.items())
        if res.summary
        else na("no summary recorded")
    )
    parts.append(
        f'<div class="grid"><div class="card"><h3>Scope (parameters)</h3>{scope}</div>'
        f'<div class="card"><h3>Summary</h3>{summ}</div></div>'
    )
    if not res.items:
        return "".join(parts)
    order = {"fail": 0, "error": 1, "warn": 2, "not_computed": 3, "pass": 4}
    items = sorted(res.items, key=lambda i: order.get(i.status, 5))
    shown = items[:_ITEM_CAP]
    metric_keys = list(dict.fromkeys(k for i in shown for k in i.metrics))[:10]

    def rows() -> Any:
        for item in shown:
            subj = item.subject.model_dump(exclude_none=True)
            yield (
                [
                    Cell(badge(item.status)),
                    Cell(subject_html(subj, cid, anchors)),
                    *(cell(item.metrics.get(k), fmt_for_key(k)) for k in metric_keys),
                    item.message,
                ],
                {"class": "flag"} if item.status in ("fail", "error") else {},
            )

    parts.append(
        '<div class="scroll">'
        + table(
            ["status", "subject", *metric_keys, "message"],
            rows(),
            numeric_cols=tuple(range(2, 2 + len(metric_keys))),
        )
        + "</div>"
    )
    if len(items) > len(shown):
        parts.append(
            f'<p class="na">{len(items) - len(shown):,} more items (all passing or lower '
            "severity than those shown) are in the input file.</p>"
        )
    return "".join(parts)


def gradient_checks_section(src: ReportSource, anchors: Anchors) -> str:
    """gradcheck, custom_ops and second_order with the scope each pass holds for."""
    return (
        '<h2 id="gradient-checks">Gradient checks (finite differences, second order)</h2>'
        '<p class="sub">A pass is a verdict on the cases and directions listed in the scope only.</p>'
        + "".join(check_detail(c, src, anchors) for c in GRADIENT_CHECKS)
    )


def ig_section(src: ReportSource, anchors: Anchors) -> str:
    """Heat maps beside the probe inputs, the randomization curve, every IG check."""
    out = ['<h2 id="ig">Integrated gradients</h2>']
    maps = _ig.heatmaps_svg(src)
    out.append("<h3>Attributions of the probe inputs</h3>")
    out.append(f'<div class="chart">{maps}</div>' if maps.startswith("<svg") else na(maps))
    out.append("<h3>Randomization curve</h3>")
    curve = _ig.randomization_svg(src)
    out.append(f'<div class="chart">{curve}</div>' if curve.startswith("<svg") else na(curve))
    out.extend(check_detail(c, src, anchors) for c in IG_CHECKS)
    return "".join(out)


def other_checks_section(src: ReportSource, anchors: Anchors) -> str:
    """Every check not shown above, in evidence order."""
    shown = {*GRADIENT_CHECKS, *IG_CHECKS, *TRAINING_CHECKS}
    rest = [c for c in [*src.checks, *src.unreadable_checks] if c not in shown]
    body = "".join(check_detail(c, src, anchors) for c in dict.fromkeys(rest))
    return '<h2 id="other-checks">Other checks</h2>' + (body or na())
