"""The rules of the profiler's checks (topology, determinism, fidelity, numerics,
thread_sensitivity): how each item status and summary count follows from the figures, as the
runners in attest/collection/profile/ derive them; and the model metrics copied from them."""

from __future__ import annotations

import math

from attest.evidence.claims import ClaimChecker, Inconsistency, minimum, number, same
from attest.evidence.model import CheckItem, Evidence, OperatorRow

__all__ = [
    "determinism",
    "evidence_rules",
    "fidelity",
    "numerics",
    "thread_sensitivity",
    "topology",
]

# attest/collection/profile/op_metrics.py: the unit roundoff per precision and the score an
# operator that is not bit-exact gets at most
_UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "bfloat16": 2.0**-8,
    "float16": 2.0**-11,
}
_JUST_BELOW_100 = math.nextafter(100.0, 0.0)


def _judged(items: list[CheckItem], kind: str = "operator") -> list[CheckItem]:
    """The items of ``kind`` the check judged (not skipped, not marked not computed)."""
    return [
        i
        for i in items
        if i.subject.kind == kind
        and i.status in ("pass", "fail", "warn")
        and i.metrics.get("skipped") is not True
    ]


def _stability(deviation: float | None, unit: float) -> float:
    """op_metrics.stability_score of an operator that is not bit-exact."""
    if deviation is None:
        return 0.0
    score = 100.0 * (
        1.0 - min(1.0, math.log10(1.0 + deviation / unit) / math.log10(1.0 + 1.0 / unit))
    )
    return min(score, _JUST_BELOW_100)


def topology(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/profile/topology.py: an input passes iff it has no first_divergence, or both
    fixed-input swaps took the expected paths (its path is set by the fixed inputs alone)."""
    items = c.result.items
    for item in items:
        if item.status == "error":
            continue
        # a passing input records first_divergence: None (missing: nothing was compared)
        k = item.metrics.get("first_divergence", "missing")
        # a path that both fixed-input swaps follow is set by the fixed inputs alone
        swaps = [
            item.metrics.get(m, "missing") for m in ("swap_to_reference", "swap_from_reference")
        ]
        c.item(
            item,
            ("pass",) if k is None or swaps == [None, None] else ("fail",),
            "fail iff the operator path diverges and does not follow the fixed inputs alone",
            first_divergence=k,
            swaps=swaps,
        )
    c.summary("inputs", len(items), "one item per probe input")
    c.count("diverging_inputs", "fail")
    c.count("failed_inputs", "error")


def determinism(c: ClaimChecker, evidence: Evidence) -> None:
    """collection/profile/results.py determinism_result."""
    items = c.result.items
    unit = _UNIT_ROUNDOFF.get(str(c.result.parameters.get("precision")))
    if unit is None or not same(c.result.parameters.get("unit_roundoff"), unit):
        c.equal(
            "parameters",
            "unit_roundoff",
            c.result.parameters.get("unit_roundoff"),
            unit,
            "the unit roundoff of the recorded precision",
        )
        unit = None
    ops = _judged(items)
    for item in ops:
        rate, random = item.metrics.get("bit_exact_rate"), item.metrics.get("random_op")
        exact = same(rate, 1.0) and random is False
        c.item(
            item,
            ("pass",) if exact else ("fail",),
            "pass iff every repeated run was bit-exact and the operator is not random",
            bit_exact_rate=rate,
            random_op=random,
        )
        score, deviation = (
            item.metrics.get("stability_score"),
            item.metrics.get("max_relative_deviation"),
        )
        if same(rate, 1.0):
            c.equal(item.subject.label(), "stability_score", score, 100.0, "100 iff bit-exact")
            c.equal(item.subject.label(), "max_relative_deviation", deviation, 0.0, "bit-exact")
        elif unit is not None:
            c.equal(
                item.subject.label(),
                "stability_score",
                score,
                _stability(number(deviation), unit),
                f"stability from max_relative_deviation = {deviation!r} at unit roundoff {unit:g}",
            )
    models = [i for i in items if i.subject.kind == "model"]
    randoms = sum(1 for i in ops if i.metrics.get("random_op") is True)
    for model in models:
        rate = model.metrics.get("bit_exact_rate")
        random_count = model.metrics.get("random_operators")
        c.item(
            model,
            ("pass",) if same(rate, 1.0) and same(random_count, 0) else ("fail",),
            "pass iff every repeated run of the model was bit-exact with no random operator",
            bit_exact_rate=rate,
            random_operators=random_count,
        )
        c.summary("bit_exact_reproducibility", rate, "the model item's bit_exact_rate")
        c.summary("runs", model.metrics.get("runs"), "the model item's runs")
        c.equal(model.subject.label(), "random_operators", random_count, randoms, "random items")
    c.summary("random_operators", randoms, "the operators marked random_op")
    if not c.result.reason:  # aligned: every operator is listed
        c.summary("operators", len([i for i in items if i.subject.kind == "operator"]), "items")
        c.summary(
            "nondeterministic_operators",
            sum(
                1
                for i in ops
                if (r := number(i.metrics.get("bit_exact_rate"))) is not None and r < 1
            ),
            "the operators whose bit_exact_rate is below 1",
        )
        c.summary("min_bit_exact_rate", minimum(ops, "bit_exact_rate"), "the lowest item rate")
        c.summary("min_stability_score", minimum(ops, "stability_score"), "the lowest score")
    _rows_agree(c, evidence, ("bit_exact_rate", "stability_score"))
    _model_metrics_agree(
        c, evidence, ("bit_exact_reproducibility", "min_bit_exact_rate", "min_stability_score")
    )


def _model_metrics_agree(c: ClaimChecker, evidence: Evidence, names: tuple[str, ...]) -> None:
    """The model-level copies of the check's summary figures (``model_metrics``) equal them."""
    for name in names:
        if name in evidence.model_metrics and name in c.result.summary:
            c.equal(
                "model_metrics",
                name,
                evidence.model_metrics[name],
                c.result.summary[name],
                "the check's summary",
            )


def _rows_agree(c: ClaimChecker, evidence: Evidence, names: tuple[str, ...]) -> None:
    """The operator rows (which the operator rules read) hold the check's item figures.
    Rows of merged evidence carry the worst figure over targets (``per_target``): skipped."""
    rows: dict[int | None, OperatorRow] = {r.id: r for r in evidence.operators if not r.per_target}
    for item in c.result.items:
        row = rows.get(item.subject.operator_id) if item.subject.kind == "operator" else None
        if row is None or item.status not in ("pass", "fail", "warn"):
            continue
        for name in names:
            if name in item.metrics:
                c.equal(
                    f"operator row {row.id}",
                    name,
                    row[name],
                    item.metrics[name],
                    f"the {c.check} item of operator {row.id}",
                )


def fidelity(c: ClaimChecker, evidence: Evidence) -> None:
    """collection/profile/results.py fidelity_result: pass iff the worst of the accumulated
    and local fidelity reaches pass_threshold_pct, warn below; fail when the deployed and
    float64 runs disagree on where values are finite (said only in the message: a fail is
    accepted whatever the figures, it is never more favourable than they are)."""
    threshold = c.parameter("pass_threshold_pct")
    ops = [i for i in c.result.items if i.subject.kind == "operator"]
    for item in ops:
        f, lf = item.metrics.get("fidelity_pct"), item.metrics.get("local_fidelity_pct")
        values = [v for v in (number(f), number(lf)) if v is not None]
        if item.status == "fail":
            continue
        if not values:
            if item.status != "not_computed" or item.metrics:
                c.item(
                    item,
                    ("not_computed",),
                    "no fidelity measured",
                    fidelity_pct=f,
                    local_fidelity_pct=lf,
                )
            continue
        if threshold is not None:
            worst = min(values)
            c.item(
                item,
                ("pass",) if worst >= threshold else ("warn", "fail"),
                f"pass iff min(fidelity_pct, local_fidelity_pct) >= {threshold:g}",
                fidelity_pct=f,
                local_fidelity_pct=lf,
            )
    measured = [i for i in ops if number(i.metrics.get("fidelity_pct")) is not None]
    c.summary("operators_measured", len(measured), "the items with a fidelity_pct")
    c.summary("min_fidelity_pct", minimum(ops, "fidelity_pct"), "the lowest item figure")
    c.summary("min_local_fidelity_pct", minimum(ops, "local_fidelity_pct"), "the lowest figure")
    _rows_agree(c, evidence, ("fidelity_pct", "local_fidelity_pct"))
    _model_metrics_agree(c, evidence, ("min_fidelity_pct", "min_local_fidelity_pct"))


def numerics(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/profile/numerics.py: every non-finite finding is an item (fail or warn);
    the model item passes iff there is none, fails iff one fails."""
    items = c.result.items
    findings = [i for i in items if not (i.subject.kind == "model" and i.subject.name is None)]
    for item in findings:
        c.item(item, ("fail", "warn"), "an item is a non-finite finding")
    for model in (i for i in items if i.subject.kind == "model" and i.subject.name is None):
        failing = any(i.status == "fail" for i in findings)
        want = "fail" if failing else ("warn" if findings else "pass")
        c.item(
            model,
            (want,),
            "the model item is the worst finding",
            findings=len(findings),
            nonfinite_operators=model.metrics.get("nonfinite_operators"),
        )
    ops = {i.subject.operator_id for i in findings if i.subject.kind == "operator"}
    c.summary("nonfinite_operators", len(ops), "the operators with non-finite findings")


def thread_sensitivity(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/profile/results.py: warn iff the outputs or gradients changed."""
    items = c.result.items
    for item in items:
        if item.status in ("not_computed", "error"):
            continue
        changed = item.metrics.get("changed")
        allowed = (
            ("warn",) if changed is True else ("pass",) if changed is False else ("not_computed",)
        )
        c.item(item, allowed, "warn iff changed, pass iff measured unchanged", changed=changed)
    ops = [i for i in items if i.subject.kind == "operator" and i.metrics.get("changed") is True]
    if not c.result.reason:
        c.summary("changed_operators", len(ops), "the operator items that changed")
    for model in (i for i in items if i.subject.kind == "model"):
        c.summary("model_changed", model.metrics.get("changed"), "the model item's changed")


def evidence_rules(evidence: Evidence) -> list[Inconsistency]:
    """Claims across checks: the model's random operators and non-finite operators."""
    out: list[Inconsistency] = []
    metrics = evidence.model_metrics
    numerics = evidence.checks.get("numerics")
    if numerics is not None and numerics.status == "computed" and "nonfinite_operators" in metrics:
        claims = ClaimChecker(numerics)
        claims.equal(
            "model_metrics",
            "nonfinite_operators",
            metrics["nonfinite_operators"],
            numerics.summary.get("nonfinite_operators"),
            "the numerics summary",
        )
        out += claims.found
    return out
