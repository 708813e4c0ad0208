"""Per check id, the rule by which the collector derives its claims from its figures.

Each rule restates the line of the runner that sets an item's status or a summary count (the
runner is named), reading only the evidence: :mod:`attest.evidence.consistency` runs them.
Where a status depends on something the evidence does not record (a near-miss judged on an
error curve kept only in ``details``, a fix-up applied by another check), the rule says so
and checks the direction the figures can decide. Every check id in
:data:`attest.evidence.model.CHECK_IDS` is covered here or by the generic rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from attest.evidence.consistency import ClaimChecker, Inconsistency, number, same
from attest.evidence.model import CheckItem, Evidence

__all__ = ["CHECK_RULES", "evidence_rules"]

Rule = Callable[[ClaimChecker, Evidence], None]

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


def _minimum(items: list[CheckItem], name: str) -> float | None:
    values = [v for i in items if (v := number(i.metrics.get(name))) is not None]
    return min(values) if values else None


def _maximum(items: list[CheckItem], name: str) -> float | None:
    values = [v for i in items if (v := number(i.metrics.get(name))) is not None]
    return max(values) if values else None


def _stability(deviation: float | None, unit: float) -> float:
    """op_metrics.stability_score of an operator that is not bit-exact."""
    if deviation is None:
        return 0.0
    score = 100.0 * (
        1.0 - min(1.0, math.log10(1.0 + deviation / unit) / math.log10(1.0 + 1.0 / unit))
    )
    return min(score, _JUST_BELOW_100)


def _determinism(c: ClaimChecker, evidence: Evidence) -> None:
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
        c.summary("min_bit_exact_rate", _minimum(ops, "bit_exact_rate"), "the lowest item rate")
        c.summary("min_stability_score", _minimum(ops, "stability_score"), "the lowest score")
    _rows_agree(c, evidence, ("bit_exact_rate", "stability_score"))
    for name in ("bit_exact_reproducibility", "min_bit_exact_rate", "min_stability_score"):
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
    rows = {r.id: r for r in evidence.operators if not r.per_target}
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


def _fidelity(c: ClaimChecker, evidence: Evidence) -> None:
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
    c.summary("min_fidelity_pct", _minimum(ops, "fidelity_pct"), "the lowest item figure")
    c.summary("min_local_fidelity_pct", _minimum(ops, "local_fidelity_pct"), "the lowest figure")
    _rows_agree(c, evidence, ("fidelity_pct", "local_fidelity_pct"))
    for name in ("min_fidelity_pct", "min_local_fidelity_pct"):
        if name in evidence.model_metrics and name in c.result.summary:
            c.equal(
                "model_metrics",
                name,
                evidence.model_metrics[name],
                c.result.summary[name],
                "the check's summary",
            )


def _recorded_tolerance(c: ClaimChecker, item: CheckItem, name: str = "rtol") -> float | None:
    """The item's own tolerance, which must be the check's recorded one."""
    own, recorded = item.metrics.get(name), c.result.parameters.get(name)
    if name in item.metrics and recorded is not None:
        c.equal(item.subject.label(), name, own, recorded, f"the check's recorded {name}")
    return number(recorded if recorded is not None else own)


def _gradcheck(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/gradcheck_items.py: pass iff every case's relative error is within
    rtol (a case also fails on non-finite values or a bad Jacobian slice, in details only: a
    fail is accepted); an identical call takes its operator's verdict."""
    items = c.result.items
    by_id = {i.subject.operator_id: i for i in items}
    for item in items:
        first = item.metrics.get("identical_to_operator")
        if first is not None and first in by_id:
            c.item(
                item, (by_id[first].status,), f"an identical call takes operator {first}'s verdict"
            )
            continue
        if item.status == "pass":
            rtol = _recorded_tolerance(c, item)
            error = number(item.metrics.get("max_rel_error"))
            ok = error is not None and rtol is not None and error <= rtol
            c.item(
                item,
                ("pass",) if ok else ("fail",),
                "pass needs max_rel_error <= rtol",
                max_rel_error=item.metrics.get("max_rel_error"),
                rtol=rtol,
            )
    own = [i for i in items if "identical_to_operator" not in i.metrics]
    checked = [i for i in own if i.status in ("pass", "fail")]
    c.summary("operators", len(items), "the items")
    c.summary("checked", len(checked), "the items judged pass or fail")
    c.count("failed", "fail")
    c.summary("max_rel_error", _maximum(checked, "max_rel_error"), "the largest item error")


def _custom_ops(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/custom_ops.py: a case passes on its first check or on a nearby
    point (recorded in details): the counts are checked, a pass needs its error within rtol
    when the item records both."""
    c.summary(
        "checked_cases",
        sum(1 for i in c.result.items if i.status in ("pass", "fail")),
        "the items judged pass or fail",
    )
    c.count("failed", "fail")


def _kinks(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/kinks.py _item: fail iff count, else warn iff parameter_hits."""
    items = c.result.items
    for item in items:
        count, hits = number(item.metrics.get("count")), number(item.metrics.get("parameter_hits"))
        want = "fail" if count else ("warn" if hits else "pass")
        c.item(
            item,
            (want,),
            "fail iff count > 0, warn iff only parameter_hits",
            count=count,
            parameter_hits=hits,
        )
    c.summary("operators_scanned", len(items), "the items")
    c.count("operators_with_kinks", "fail")
    for name, total in (("total_count", "count"), ("parameter_hits", "parameter_hits")):
        c.summary(
            name, sum(int(number(i.metrics.get(total)) or 0) for i in items), f"the items' {total}"
        )


def _gradient_flow(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/flow.py: a parameter passes when frozen, or with a finite gradient
    and no problem; a non-finite gradient fails (whether a missing gradient warns depends on
    a training-mode trace the evidence does not record: not derived)."""
    for item in c.result.items:
        if item.subject.kind != "parameter":
            continue
        m = item.metrics
        if m.get("frozen") is True:
            c.item(item, ("pass",), "a frozen parameter passes", frozen=True)
        elif m.get("finite") is False:
            c.item(item, ("fail",), "a non-finite gradient fails", finite=False)
        elif item.status == "pass":
            ok = m.get("has_grad") is True and m.get("finite") is True and "reason_kind" not in m
            c.item(
                item,
                ("pass",) if ok else ("fail", "warn"),
                "pass needs a finite gradient",
                has_grad=m.get("has_grad"),
                finite=m.get("finite"),
                reason_kind=m.get("reason_kind"),
            )
    frozen = sum(1 for i in c.result.items if i.metrics.get("frozen") is True)
    c.summary("frozen", frozen, "the frozen parameters")


def _numerics(c: ClaimChecker, _evidence: Evidence) -> None:
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


def _accumulation(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/accumulation.py: pass iff max_rel_error <= rtol (a non-finite
    error fails)."""
    for item in c.result.items:
        if item.status in ("not_computed", "error"):
            continue
        rtol = _recorded_tolerance(c, item)
        error = number(item.metrics.get("max_rel_error"))
        ok = error is not None and rtol is not None and error <= rtol
        c.item(
            item,
            ("pass",) if ok else ("fail",),
            "pass iff max_rel_error <= rtol",
            max_rel_error=item.metrics.get("max_rel_error"),
            rtol=rtol,
        )
    c.count("failed", "fail")
    c.summary("max_rel_error", _maximum(c.result.items, "max_rel_error"), "the largest item error")


def _second_order(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/gradients/second_order.py: a direction passes within rtol or within its
    rounding floor (up to a cap the floor's spread sets: only the flag is recorded); failures
    deferred to a root cause elsewhere change status (defer_to_root_causes): the counts are
    checked, and a passing model direction needs its error within rtol or within_floor."""
    items = c.result.items
    for item in items:
        if item.subject.kind == "model" and item.status == "pass":
            rtol = _recorded_tolerance(c, item)
            error = number(item.metrics.get("max_rel_error"))
            ok = item.metrics.get("within_floor") is True or (
                error is not None and rtol is not None and error <= rtol
            )
            c.item(
                item,
                ("pass",) if ok else ("fail", "warn"),
                "pass needs max_rel_error <= rtol or within_floor",
                max_rel_error=error,
                rtol=rtol,
            )
    c.summary("hvp_directions", sum(1 for i in items if i.subject.kind == "model"), "model items")
    c.count("failed", "fail")
    for flag in ("within_floor", "unresolved"):
        c.summary(flag, sum(1 for i in items if i.metrics.get(flag) is True), f"items with {flag}")


def _topology(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/profile/topology.py: an input passes iff it has no first_divergence."""
    items = c.result.items
    for item in items:
        if item.status == "error":
            continue
        k = item.metrics.get("first_divergence")
        c.item(
            item,
            ("pass",) if k is None else ("fail",),
            "fail iff the operator path diverges",
            first_divergence=k,
        )
    c.summary("inputs", len(items), "one item per probe input")
    c.count("diverging_inputs", "fail")
    c.count("failed_inputs", "error")


def _thread_sensitivity(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/profile/results.py: warn iff the outputs or gradients changed."""
    items = c.result.items
    for item in items:
        if item.status in ("not_computed", "error"):
            continue
        changed = item.metrics.get("changed")
        c.item(
            item, ("warn",) if changed is True else ("pass",), "warn iff changed", changed=changed
        )
    ops = [i for i in items if i.subject.kind == "operator" and i.metrics.get("changed") is True]
    if not c.result.reason:
        c.summary("changed_operators", len(ops), "the operator items that changed")
    for model in (i for i in items if i.subject.kind == "model"):
        c.summary("model_changed", model.metrics.get("changed"), "the model item's changed")


def _export(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/export/check.py: an output passes iff its error against eager is within
    rtol and (when float64 ran) against float64 within rtol plus eager's own error; the
    repeatability item passes iff the two runs were bit-exact."""
    for item in c.result.items:
        m = item.metrics
        if "onnxruntime_repeat_bit_exact" in m and item.subject.kind == "model":
            bit_exact = m["onnxruntime_repeat_bit_exact"]
            c.item(
                item,
                ("pass",) if bit_exact is True else ("fail",),
                "pass iff bit-exact",
                onnxruntime_repeat_bit_exact=bit_exact,
            )
            continue
        if item.subject.kind != "output" or m.get("shape_matches") is False:
            continue
        rtol = _recorded_tolerance(c, item)
        eager = number(m.get("max_rel_error_vs_eager"))
        exact, own = (
            number(m.get("max_rel_error_vs_float64")),
            number(m.get("eager_rel_error_vs_float64")),
        )
        ok = eager is not None and rtol is not None and eager <= rtol
        if m.get("max_rel_error_vs_float64") is not None:
            ok = (
                ok
                and exact is not None
                and own is not None
                and rtol is not None
                and exact <= rtol + own
            )
        c.item(
            item,
            ("pass",) if ok else ("fail",),
            "pass iff within rtol of eager and float64",
            max_rel_error_vs_eager=eager,
            max_rel_error_vs_float64=exact,
            rtol=rtol,
        )


def _ig_completeness(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/checks.py: pass iff the relative error is finite and within the recorded
    tolerance with finite sides; warn (a near miss judged on the error curve in details) and
    fail need the error above it (a non-finite side fails)."""
    tolerance = c.parameter("tolerance")
    for item in c.result.items:
        m = item.metrics
        rel = number(m.get("completeness_rel_error"))
        finite = (
            rel is not None
            and number(m.get("f_input")) is not None
            and number(m.get("f_baseline")) is not None
            and not m.get("nonfinite_attributions")
        )
        within = finite and tolerance is not None and rel is not None and rel <= tolerance
        allowed = ("pass",) if within else ("fail",) if not finite else ("warn", "fail")
        c.item(
            item,
            allowed,
            f"pass iff completeness_rel_error <= tolerance {tolerance}",
            completeness_rel_error=m.get("completeness_rel_error"),
        )


def _ig_convergence(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/checks.py: pass iff converged (warn/fail on the error curve otherwise)."""
    for item in c.result.items:
        converged = item.metrics.get("converged")
        c.item(
            item,
            ("pass",) if converged is True else ("warn", "fail"),
            "pass iff converged",
            converged=converged,
        )


def _ig_baseline(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/checks.py baseline: for a classifier, fail iff the baseline reads as the
    target (p >= limit), warn iff its entropy ratio is below min_entropy_ratio; otherwise fail
    iff |F(b)|/|F(x)| exceeds max_output_ratio. Non-finite readings fail."""
    min_entropy = c.parameter("min_entropy_ratio")
    max_ratio = c.parameter("max_output_ratio")
    for item in c.result.items:
        m = item.metrics
        if item.status in ("not_computed", "error"):
            continue
        if m.get("classifier") is True:
            p, limit, entropy = (
                number(m.get(k))
                for k in (
                    "baseline_target_probability",
                    "target_probability_limit",
                    "baseline_entropy_ratio",
                )
            )
            if p is None or limit is None or entropy is None or min_entropy is None:
                c.item(
                    item,
                    ("fail",),
                    "a non-finite reading fails",
                    baseline_target_probability=p,
                    baseline_entropy_ratio=entropy,
                )
                continue
            want = "fail" if p >= limit else "warn" if entropy < min_entropy else "pass"
            c.item(
                item,
                (want,),
                "the baseline's target probability and entropy",
                baseline_target_probability=p,
                target_probability_limit=limit,
                baseline_entropy_ratio=entropy,
            )
        else:
            ratio = number(m.get("baseline_output_ratio"))
            ok = ratio is not None and max_ratio is not None and ratio <= max_ratio
            c.item(
                item,
                ("pass",) if ok else ("fail",),
                "pass iff |F(b)|/|F(x)| <= max_output_ratio",
                baseline_output_ratio=m.get("baseline_output_ratio"),
            )


def _ig_monotonicity(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/path_checks.py monotonicity."""
    max_jump, max_share = c.parameter("max_jump"), c.parameter("max_spike_share")
    for item in c.result.items:
        m = item.metrics
        jump, share = number(m.get("max_jump_ratio")), number(m.get("max_spike_share"))
        flips = m.get("sign_flips_beyond_tolerance")
        if max_jump is None or max_share is None:
            continue
        bad = (
            bool(m.get("nonfinite_nodes"))
            or jump is None
            or share is None
            or jump > max_jump
            or share > max_share
        )
        want = "fail" if bad else ("warn" if flips else "pass")
        c.item(
            item,
            (want,),
            "jumps and spikes fail, sign flips beyond tolerance warn",
            nonfinite_nodes=m.get("nonfinite_nodes"),
            max_jump_ratio=jump,
            max_spike_share=share,
            sign_flips_beyond_tolerance=flips,
        )


def _ig_randomization(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/path_checks.py: fail iff the final Spearman stays >= max_spearman (or
    <= -max_spearman with the magnitudes' Spearman >= sign_flip_abs_spearman)."""
    top, flip = c.parameter("max_spearman"), c.parameter("sign_flip_abs_spearman")
    for item in c.result.items:
        if item.status in ("not_computed", "error") or top is None or flip is None:
            continue
        final, magnitude = (
            number(item.metrics.get("spearman_final")),
            number(item.metrics.get("spearman_abs_final")),
        )
        if final is None:
            if item.metrics.get("spearman_final") is None and item.status == "pass":
                continue  # constant attributions of the randomized model: a pass
            c.item(
                item,
                ("fail",),
                "a non-finite Spearman fails",
                spearman_final=item.metrics.get("spearman_final"),
            )
            continue
        bad = final >= top or (final <= -top and (magnitude or 0.0) >= flip)
        c.item(
            item,
            ("fail",) if bad else ("pass",),
            f"fail iff Spearman stays >= {top:g}",
            spearman_final=final,
            spearman_abs_final=magnitude,
        )


def _ig_determinism(c: ClaimChecker, _evidence: Evidence) -> None:
    """collection/ig/path_checks.py: pass iff bit_exact."""
    items = c.result.items
    for item in items:
        exact = item.metrics.get("bit_exact")
        c.item(
            item, ("pass",) if exact is True else ("fail",), "pass iff bit_exact", bit_exact=exact
        )
    c.summary(
        "bit_exact", all(i.metrics.get("bit_exact") is True for i in items), "every item bit_exact"
    )


# The four training checks (attest/collection/training/) judge items against tolerances that
# scale with the autocast dtype and recorded tensors the evidence keeps only in details: their
# claims are held by the generic rules (no verdict outside a computed check, a computed check
# has a summary, one item per operator, items_* counts) and the policy's metric rules.
CHECK_RULES: dict[str, Rule] = {
    "topology": _topology,
    "determinism": _determinism,
    "fidelity": _fidelity,
    "gradcheck": _gradcheck,
    "custom_ops": _custom_ops,
    "kinks": _kinks,
    "gradient_flow": _gradient_flow,
    "numerics": _numerics,
    "accumulation": _accumulation,
    "second_order": _second_order,
    "ig_completeness": _ig_completeness,
    "ig_convergence": _ig_convergence,
    "ig_baseline": _ig_baseline,
    "ig_monotonicity": _ig_monotonicity,
    "ig_randomization": _ig_randomization,
    "ig_determinism": _ig_determinism,
    "export": _export,
    "thread_sensitivity": _thread_sensitivity,
}


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
