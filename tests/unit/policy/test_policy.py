"""Policy files and their evaluation: tables of evidence fragments and policies."""

from __future__ import annotations

import copy
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from attest.errors import PolicyError
from attest.evidence.model import CHECK_IDS, Evidence
from attest.policy.engine import evaluate
from attest.policy.model import Policy, load_policy, parse_policy, policy_digest

AT = datetime(2026, 6, 1, tzinfo=timezone.utc)
REPO = Path(__file__).resolve().parents[3]


def op_item(
    op_id: int, op: str, module: str, status: str = "pass", **metrics: Any
) -> dict[str, Any]:
    return {
        "subject": {"kind": "operator", "operator_id": op_id, "op": op, "module": module},
        "status": status,
        "metrics": metrics,
    }


def evidence(**overrides: Any) -> Evidence:
    """A small evidence file: two operators, fidelity and determinism checks."""
    data: dict[str, Any] = {
        "tool_version": "0.1.0",
        "created_at": "2026-05-01T00:00:00Z",
        "model": {"name": "toy", "version": "1.0.0", "precision": "float32"},
        "model_metrics": {"bit_exact_reproducibility": 1.0},
        "operators": [
            {
                "id": 0,
                "op": "aten.convolution.default",
                "module": "features.0",
                "stability_score": 100.0,
            },
            {"id": 1, "op": "aten.relu.default", "module": "features.1", "stability_score": 95.0},
        ],
        "checks": {
            "fidelity": {
                "check": "fidelity",
                "status": "computed",
                "summary": {"min_fidelity_pct": 99.95},
                "items": [
                    op_item(0, "aten.convolution.default", "features.0", fidelity_pct=99.99),
                    op_item(1, "aten.relu.default", "features.1", fidelity_pct=99.95),
                ],
            },
            "determinism": {
                "check": "determinism",
                "status": "computed",
                "items": [
                    op_item(0, "aten.convolution.default", "features.0"),
                    op_item(1, "aten.relu.default", "features.1"),
                ],
            },
        },
    }
    for key, value in overrides.items():
        data[key] = value
    return Evidence.model_validate(data)


def policy(rules: list[dict[str, Any]], **extra: Any) -> Policy:
    return parse_policy({"id": "test", "version": "1", "rules": rules, **extra})


FIDELITY = {"id": "fid", "check": "fidelity", "metric": "fidelity_pct", "threshold": 99.9}


def verdicts(findings: Any) -> list[tuple[str, str, str | None]]:
    return [(f.rule, f.verdict, f.subject.module) for f in findings.findings]


# ---------------------------------------------------------------- verdicts

CASES: list[tuple[str, dict[str, Any], dict[str, Any], str, list[str]]] = [
    # name, rule, evidence overrides (checks patch), overall verdict, finding verdicts
    ("pass", FIDELITY, {}, "pass", ["pass", "pass"]),
    ("fail", {**FIDELITY, "threshold": 99.97}, {}, "fail", ["pass", "fail"]),
    ("warn", {**FIDELITY, "threshold": 99.97, "severity": "warn"}, {}, "pass", ["pass", "warn"]),
    ("strict >", {**FIDELITY, "comparator": ">", "threshold": 99.95}, {}, "fail", ["pass", "fail"]),
    (
        "<= on a count",
        {
            "id": "c",
            "check": "fidelity",
            "metric": "fidelity_pct",
            "comparator": "<=",
            "threshold": 99.96,
        },
        {},
        "fail",
        ["fail", "pass"],
    ),
    (
        "summary",
        {
            "id": "s",
            "check": "fidelity",
            "source": "summary",
            "metric": "min_fidelity_pct",
            "threshold": 99.96,
        },
        {},
        "fail",
        ["fail"],
    ),
    (
        "operators",
        {
            "id": "o",
            "check": "determinism",
            "source": "operators",
            "metric": "stability_score",
            "threshold": 92,
        },
        {},
        "pass",
        ["pass", "pass"],
    ),
    (
        "operators fail",
        {
            "id": "o",
            "check": "determinism",
            "source": "operators",
            "metric": "stability_score",
            "threshold": 96,
        },
        {},
        "fail",
        ["pass", "fail"],
    ),
    (
        "model",
        {
            "id": "m",
            "check": "determinism",
            "source": "model",
            "metric": "bit_exact_reproducibility",
            "threshold": 0.9999,
        },
        {},
        "pass",
        ["pass"],
    ),
    ("status only", {"id": "st", "check": "determinism"}, {}, "pass", ["pass", "pass"]),
    (
        "== string",
        {
            "id": "eq",
            "check": "fidelity",
            "metric": "fidelity_pct",
            "comparator": "==",
            "threshold": "x",
        },
        {},
        "fail",
        ["fail", "fail"],
    ),
    (
        "op pattern",
        {**FIDELITY, "threshold": 99.97, "operators": ["aten.conv*"]},
        {},
        "pass",
        ["pass"],
    ),
    (
        "module pattern",
        {**FIDELITY, "threshold": 99.97, "modules": ["features.1"]},
        {},
        "fail",
        ["fail"],
    ),
    ("pattern matches nothing", {**FIDELITY, "operators": ["aten.softmax*"]}, {}, "pass", ["pass"]),
]


@pytest.mark.parametrize(
    ("rule", "patch", "overall", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rule_verdicts(
    rule: dict[str, Any], patch: dict[str, Any], overall: str, expected: list[str]
) -> None:
    findings = evaluate(evidence(**patch), policy([rule]), at=AT)
    assert [f.verdict for f in findings.findings] == expected
    assert findings.verdict == overall
    assert sum(findings.counts.values()) == len(expected)


def test_observed_and_threshold_are_recorded() -> None:
    findings = evaluate(evidence(), policy([{**FIDELITY, "threshold": 99.97}]), at=AT)
    failed = findings.failed[0]
    assert failed.observed == 99.95
    assert failed.threshold == 99.97
    assert failed.comparator == ">="
    assert failed.subject.operator_id == 1
    assert "fidelity_pct" in failed.message and "features.1" in failed.message


def test_check_item_status_fail_and_warn() -> None:
    ev = evidence()
    ev.checks["determinism"].items[0].status = "fail"
    ev.checks["determinism"].items[1].status = "warn"
    findings = evaluate(ev, policy([{"id": "st", "check": "determinism"}]), at=AT)
    assert [f.verdict for f in findings.findings] == ["fail", "warn"]


# ---------------------------------------------------------------- not computed / required


@pytest.mark.parametrize("required", [True, False])
@pytest.mark.parametrize(
    "mutation",
    ["missing", "not_implemented", "not_computed", "error", "metric absent", "item not computed"],
)
def test_missing_check_fails_only_when_required(mutation: str, required: bool) -> None:
    ev = evidence()
    if mutation == "missing":
        del ev.checks["fidelity"]
    elif mutation == "metric absent":
        for item in ev.checks["fidelity"].items:
            item.metrics = {"other": 1.0}
    elif mutation == "item not computed":
        ev.checks["fidelity"].items[1].status = "not_computed"
        ev.checks["fidelity"].items[1].metrics["fidelity_pct"] = None
    else:
        ev.checks["fidelity"].status = mutation  # type: ignore[assignment]
        ev.checks["fidelity"].reason = "topology failed"
    findings = evaluate(ev, policy([{**FIDELITY, "required": required}]), at=AT)
    last = findings.findings[-1]
    assert last.verdict == ("fail" if required else "not_computed")
    assert findings.verdict == ("fail" if required else "pass")
    assert "not computed" in last.message
    if mutation in ("not_implemented", "not_computed", "error"):
        assert mutation in last.message and "topology failed" in last.message


def test_metric_none_on_a_passing_item_does_not_apply() -> None:
    ev = evidence()
    ev.checks["fidelity"].items[1].metrics["fidelity_pct"] = None  # e.g. an integer-valued op
    findings = evaluate(ev, policy([FIDELITY]), at=AT)
    assert [f.verdict for f in findings.findings] == ["pass"]


def test_required_missing_check_with_warn_severity_warns() -> None:
    ev = evidence()
    del ev.checks["fidelity"]
    findings = evaluate(ev, policy([{**FIDELITY, "severity": "warn"}]), at=AT)
    assert findings.findings[0].verdict == "warn"
    assert findings.verdict == "pass"


# ---------------------------------------------------------------- per-precision thresholds


@pytest.mark.parametrize(
    ("precision", "expected"),
    [("float32", "fail"), ("float16", "pass"), ("bfloat16", "fail")],
)
def test_per_precision_threshold(precision: str, expected: str) -> None:
    ev = evidence(model={"name": "toy", "version": "1.0.0", "precision": precision})
    rule = {**FIDELITY, "threshold": 99.97, "thresholds": {"float16": 99.5, "bfloat16": 99.99}}
    findings = evaluate(ev, policy([rule]), at=AT)
    assert findings.verdict == expected
    assert findings.precision == precision
    assert (
        findings.findings[1].threshold
        == {"float32": 99.97, "float16": 99.5, "bfloat16": 99.99}[precision]
    )


# ---------------------------------------------------------------- waivers

WAIVER = {
    "rule": "fid",
    "subject": "features.1",
    "approved_by": "Dr. A. Reviewer",
    "justification": "relu gradient error within clinical tolerance (validation study VS-7)",
    "reference": "HAZ-12",
    "expires": "2026-12-31",
}


@pytest.mark.parametrize(
    ("waiver", "at", "expected"),
    [
        (WAIVER, AT, ["pass", "waived"]),
        (
            {**WAIVER, "expires": "2026-06-01"},
            AT,
            ["pass", "waived"],
        ),  # valid through its expiry day
        ({**WAIVER, "expires": "2026-05-31"}, AT, ["pass", "fail"]),  # expired: waives nothing
        ({**WAIVER, "subject": "aten.relu*"}, AT, ["pass", "waived"]),  # operator glob
        ({**WAIVER, "subject": "features.0"}, AT, ["pass", "fail"]),  # another subject
        ({**WAIVER, "rule": None, "check": "fidelity"}, AT, ["pass", "waived"]),  # whole check
        ({**WAIVER, "rule": None, "check": "determinism"}, AT, ["pass", "fail"]),  # other check
    ],
)
def test_waivers(waiver: dict[str, Any], at: datetime, expected: list[str]) -> None:
    pol = policy([{**FIDELITY, "threshold": 99.97}], waivers=[waiver])
    findings = evaluate(evidence(), pol, at=at)
    assert [f.verdict for f in findings.findings] == expected
    assert findings.verdict == ("fail" if "fail" in expected else "pass")
    waived = findings.waived
    if waived:
        assert waived[0].waiver is not None
        assert waived[0].waiver.approved_by == "Dr. A. Reviewer"
        assert waived[0].waiver.reference == "HAZ-12"
        assert waived[0].observed == 99.95  # the waived measurement stays visible
        assert findings.waivers_used()[0]["reference"] == "HAZ-12"
    if waiver["expires"] == "2026-05-31":
        assert findings.expired_waivers == ["fid:features.1"]


def test_waiver_covers_required_but_missing_check() -> None:
    ev = evidence()
    del ev.checks["fidelity"]
    pol = policy([FIDELITY], waivers=[{**WAIVER, "subject": "*"}])
    findings = evaluate(ev, pol, at=AT)
    assert findings.findings[0].verdict == "waived"
    assert findings.verdict == "pass"


ANNOTATION = {"module": "features", "reason": "known fp16 instability", "checks": ["fidelity"]}


@pytest.mark.parametrize(
    ("policy_accepts", "rule_accepts", "annotation", "expected"),
    [
        (True, None, ANNOTATION, "waived"),
        (False, None, ANNOTATION, "fail"),
        (False, True, ANNOTATION, "waived"),
        (True, False, ANNOTATION, "fail"),
        (True, None, {**ANNOTATION, "checks": ["determinism"]}, "fail"),
        (True, None, {**ANNOTATION, "checks": None}, "waived"),
        (True, None, {**ANNOTATION, "module": "features.1"}, "waived"),
        (True, None, {**ANNOTATION, "module": "feat"}, "fail"),  # a prefix is not a parent
        (True, None, {**ANNOTATION, "module": "classifier"}, "fail"),
    ],
)
def test_annotation_waivers(
    policy_accepts: bool, rule_accepts: bool | None, annotation: dict[str, Any], expected: str
) -> None:
    ev = evidence(annotations=[annotation])
    rule = {**FIDELITY, "threshold": 99.97, "accept_annotations": rule_accepts}
    findings = evaluate(ev, policy([rule], accept_annotations=policy_accepts), at=AT)
    assert findings.findings[1].verdict == expected
    if expected == "waived":
        assert findings.findings[1].waiver is not None
        assert findings.findings[1].waiver.kind == "annotation"
        assert "known fp16 instability" in findings.findings[1].message


# ---------------------------------------------------------------- purity and digests


def test_evaluation_is_pure_and_deterministic() -> None:
    ev = evidence()
    pol = policy([{**FIDELITY, "threshold": 99.97}], waivers=[WAIVER])
    before = copy.deepcopy(ev.model_dump())
    first = evaluate(ev, pol, at=AT).model_dump(mode="json")
    second = evaluate(ev, pol, at=AT).model_dump(mode="json")
    assert first == second
    assert ev.model_dump() == before


def test_policy_digest_ignores_formatting_but_not_content(tmp_path: Path) -> None:
    data = {"id": "p", "version": "1", "rules": [FIDELITY]}
    a = tmp_path / "a.yaml"
    a.write_text(yaml.safe_dump(data))
    b = tmp_path / "b.yaml"
    b.write_text("# a comment\n" + yaml.safe_dump(data, default_flow_style=True))
    assert policy_digest(load_policy(a)) == policy_digest(load_policy(b))
    changed = {**data, "rules": [{**FIDELITY, "threshold": 99.8}]}
    assert policy_digest(parse_policy(changed)) != policy_digest(load_policy(a))


# ---------------------------------------------------------------- bad policies


BAD_POLICIES: list[tuple[str, str, str]] = [
    ("unknown top key", "id: p\nversion: '1'\nrulez: []\n", "rulez: unknown key"),
    ("missing rules", "id: p\nversion: '1'\n", "rules: required key is missing"),
    (
        "missing id",
        "version: '1'\nrules: [{id: r, check: fidelity}]\n",
        "id: required key is missing",
    ),
    ("bad check", "id: p\nversion: '1'\nrules: [{id: r, check: fidelty}]\n", "rules[0].check"),
    (
        "bad comparator",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity, metric: m, comparator: '=>', threshold: 1}]\n",
        "rules[0].comparator",
    ),
    (
        "unknown rule key",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity, treshold: 1}]\n",
        "rules[0].treshold: unknown key",
    ),
    (
        "metric without threshold",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity, metric: m}]\n",
        "needs a threshold",
    ),
    (
        "string threshold with >=",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity, metric: m, threshold: high}]\n",
        "numeric threshold",
    ),
    (
        "bad severity",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity, severity: fatal}]\n",
        "rules[0].severity",
    ),
    (
        "bad precision",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity, metric: m, threshold: 1, thresholds: {float8: 2}}]\n",
        "rules[0].thresholds.float8",
    ),
    (
        "duplicate rule id",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity}, {id: r, check: kinks}]\n",
        "repeated: r",
    ),
    (
        "duplicate key",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity, metric: m, threshold: 1, threshold: 2}]\n",
        "duplicate key 'threshold'",
    ),
    (
        "waiver names no rule",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity}]\nwaivers: [{rule: q, approved_by: a, justification: j, reference: H-1, expires: 2027-01-01}]\n",
        "waivers[0].rule 'q'",
    ),
    (
        "waiver without approver",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity}]\nwaivers: [{rule: r, justification: j, reference: H-1, expires: 2027-01-01}]\n",
        "waivers[0].approved_by: required key is missing",
    ),
    (
        "waiver bad date",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity}]\nwaivers: [{rule: r, approved_by: a, justification: j, reference: H-1, expires: someday}]\n",
        "waivers[0].expires",
    ),
    (
        "waiver without target",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity}]\nwaivers: [{approved_by: a, justification: j, reference: H-1, expires: 2027-01-01}]\n",
        "names the rule or the check",
    ),
    (
        "require_every_check",
        "id: p\nversion: '1'\nrequire_every_check: true\nrules: [{id: r, check: fidelity}]\n",
        "no required rule: topology, determinism",
    ),
    ("not a mapping", "- a\n- b\n", "mapping at the top level"),
    ("bad yaml", "id: [p\n", "not valid YAML"),
    (
        "patterns on model source",
        "id: p\nversion: '1'\nrules: [{id: r, check: fidelity, source: model, metric: m, threshold: 1, modules: ['a.*']}]\n",
        "patterns do not apply",
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in BAD_POLICIES], ids=[c[0] for c in BAD_POLICIES]
)
def test_bad_policy_files_name_the_problem(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert expected in info.value.message
    assert str(path) in info.value.message


def test_missing_policy_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="does not exist"):
        load_policy(tmp_path / "nope.yaml")


# ---------------------------------------------------------------- shipped policies


def test_clinical_strict_requires_every_check() -> None:
    strict = load_policy(REPO / "policies" / "clinical-strict.yaml")
    assert strict.require_every_check
    assert {r.check for r in strict.rules if r.required and r.severity == "fail"} == set(CHECK_IDS)
    assert not strict.accept_annotations
    for check in CHECK_IDS:  # evidence without that check fails clinical-strict
        ev = evidence()
        ev.checks.pop(check, None)
        findings = evaluate(ev, strict, at=AT)
        assert any(f.check == check and f.verdict == "fail" for f in findings.findings), check


def test_clinical_strict_headline_thresholds() -> None:
    strict = load_policy(REPO / "policies" / "clinical-strict.yaml")
    by_metric = {(r.check, r.metric): r for r in strict.rules}
    assert by_metric[("determinism", "stability_score")].threshold == 92
    assert by_metric[("fidelity", "fidelity_pct")].threshold == 99.9
    assert by_metric[("determinism", "bit_exact_reproducibility")].threshold == 0.9999


def test_research_policy_only_warns() -> None:
    research = load_policy(REPO / "policies" / "research.yaml")
    assert all(r.severity == "warn" for r in research.rules)
    findings = evaluate(evidence(model_metrics={}, checks={}), research, at=AT)
    assert findings.verdict == "pass"
    assert findings.counts["warn"] > 0 and findings.counts["fail"] == 0


def test_waiver_expiry_is_a_date() -> None:
    pol = policy([FIDELITY], waivers=[WAIVER])
    assert pol.waivers[0].expires == date(2026, 12, 31)


# ---------------------------------------------------------------- extends


def test_extends_adds_waivers_to_a_base_policy(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(
        yaml.safe_dump({"id": "base", "version": "1", "rules": [{**FIDELITY, "threshold": 99.97}]})
    )
    site = tmp_path / "site" / "site.yaml"
    site.parent.mkdir()
    site.write_text(
        yaml.safe_dump(
            {"id": "site", "version": "2", "extends": "../base.yaml", "waivers": [WAIVER]}
        )
    )
    pol = load_policy(site)
    assert (pol.id, pol.version, [r.id for r in pol.rules]) == ("site", "2", ["fid"])
    assert evaluate(evidence(), load_policy(base), at=AT).verdict == "fail"
    assert evaluate(evidence(), pol, at=AT).verdict == "pass"
    assert policy_digest(pol) != policy_digest(load_policy(base))


@pytest.mark.parametrize(
    ("extends", "expected"),
    [
        ("nope.yaml", "does not exist"),
        ("p.yaml", "cycle"),
        ("", "path to another policy"),
        ("clinical-lax", "neither a file next to it .* nor a shipped policy"),
    ],
)
def test_bad_extends(tmp_path: Path, extends: str, expected: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        yaml.safe_dump({"id": "p", "version": "1", "extends": extends, "rules": [FIDELITY]})
    )
    with pytest.raises(PolicyError, match=expected):
        load_policy(path)


def test_extends_a_shipped_policy_by_name(tmp_path: Path) -> None:
    """A pip-installed user has no policies/ folder: ``extends: clinical-strict`` names the
    policy shipped in the package."""
    site = tmp_path / "site.yaml"
    site.write_text(
        yaml.safe_dump(
            {
                "id": "site",
                "version": "1",
                "extends": "clinical-strict",
                "waivers": [{**WAIVER, "rule": "fidelity.local"}],
            }
        )
    )
    pol = load_policy(site)
    strict = load_policy("clinical-strict")
    assert [r.id for r in pol.rules] == [r.id for r in strict.rules] and pol.rules
    assert pol.id == "site" and len(pol.waivers) == len(strict.waivers) + 1


def test_an_unknown_name_lists_the_shipped_policies(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({"id": "site", "version": "1", "extends": "clinical"}))
    with pytest.raises(PolicyError) as info:
        load_policy(site)
    assert info.value.hint is not None
    assert "one of the shipped policies: clinical-strict, research" in info.value.hint
    with pytest.raises(PolicyError, match="no shipped policy of that name") as by_option:
        load_policy("clinical")
    assert by_option.value.hint is not None and "clinical-strict, research" in by_option.value.hint


def test_a_file_of_that_name_next_to_the_policy_comes_first(tmp_path: Path) -> None:
    (tmp_path / "clinical-strict").write_text(
        yaml.safe_dump({"id": "local", "version": "1", "rules": [FIDELITY]})
    )
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({"id": "site", "version": "1", "extends": "clinical-strict"}))
    assert [r.id for r in load_policy(site).rules] == ["fid"]


def test_shipped_policies_match_the_schema() -> None:
    import json

    import jsonschema

    schema = json.loads((REPO / "schemas" / "policy.schema.json").read_text())
    for name in ("clinical-strict.yaml", "research.yaml"):
        jsonschema.validate(yaml.safe_load((REPO / "policies" / name).read_text()), schema)


def test_operator_row_not_measured_is_listed_not_failed() -> None:
    rows = [
        {
            "id": 0,
            "op": "aten.convolution.default",
            "module": "features.0",
            "stability_score": 100.0,
        },
        {
            "id": 1,
            "op": "aten.argmax.default",
            "module": "",
            "not_computed": {"stability_score": "integer output"},
        },
    ]
    rule = {
        "id": "o",
        "check": "determinism",
        "source": "operators",
        "metric": "stability_score",
        "threshold": 92,
    }
    findings = evaluate(evidence(operators=rows), policy([rule]), at=AT)
    assert [f.verdict for f in findings.findings] == ["pass", "not_computed"]
    assert "integer output" in findings.findings[1].message
    assert findings.verdict == "pass"


def test_operator_metric_nobody_reports_fails_when_required() -> None:
    rule = {
        "id": "o",
        "check": "determinism",
        "source": "operators",
        "metric": "stabilty_score",
        "threshold": 92,
    }
    findings = evaluate(evidence(), policy([rule]), at=AT)
    assert findings.verdict == "fail"
    assert "stabilty_score" in findings.findings[0].message


def test_item_the_check_skipped_is_listed_not_failed() -> None:
    ev = evidence()
    item = ev.checks["determinism"].items[1]
    item.status = "not_computed"
    item.metrics = {"skipped": True}
    item.message = "skipped (not differentiable): no floating-point tensor input"
    findings = evaluate(ev, policy([{"id": "st", "check": "determinism"}]), at=AT)
    assert [f.verdict for f in findings.findings] == ["pass", "not_computed"]
    assert "no floating-point tensor input" in findings.findings[1].message
    assert findings.verdict == "pass"


def test_clinical_strict_fails_a_random_op_in_forward() -> None:
    strict = load_policy(REPO / "policies" / "clinical-strict.yaml")
    rule = next(r for r in strict.rules if r.id == "determinism.no-random-ops")
    ev = evidence()
    ev.checks["determinism"].items[0].metrics = {"random_op": False, "bit_exact_rate": 1.0}
    ev.checks["determinism"].items[1].metrics = {"random_op": True, "bit_exact_rate": 1.0}
    findings = evaluate(
        ev, parse_policy({"id": "p", "version": "1", "rules": [rule.model_dump()]}), at=AT
    )
    assert [f.verdict for f in findings.findings] == ["pass", "fail"]
    assert findings.findings[1].subject.module == "features.1"


def test_research_has_clinical_strict_rules_as_warnings() -> None:
    strict = load_policy(REPO / "policies" / "clinical-strict.yaml")
    research = load_policy(REPO / "policies" / "research.yaml")
    as_warnings = {"severity": "warn", "when_not_applicable": None}
    assert [r.model_copy(update=as_warnings) for r in strict.rules] == list(research.rules)
    assert research.settings == strict.settings
    assert research.accept_annotations
    assert strict.training_log is not None
    assert research.training_log == strict.training_log.model_copy(update={"severity": "warn"})


@pytest.mark.parametrize(
    ("when", "severity", "verdict"),
    [
        (None, "fail", "fail"),
        (None, "warn", "warn"),
        ("warn", "fail", "warn"),
        ("accept", "fail", "not_computed"),
        ("fail", "warn", "fail"),
    ],
)
def test_not_applicable_check_follows_the_rule(
    when: str | None, severity: str, verdict: str
) -> None:
    """A check the spec did not ask for (no loss, no export) is judged by when_not_applicable."""
    from attest.evidence.model import CheckResult, Evidence
    from attest.policy.engine import evaluate
    from attest.policy.model import parse_policy

    rule: dict[str, object] = {"id": "acc", "check": "accumulation", "severity": severity}
    if when is not None:
        rule["when_not_applicable"] = when
    policy = parse_policy({"id": "p", "version": "1", "rules": [rule]})
    evidence = Evidence(
        tool_version="0",
        created_at="2026-01-01T00:00:00Z",
        checks={
            "accumulation": CheckResult(
                check="accumulation", status="not_applicable", reason="the spec has no loss"
            )
        },
    )
    (finding,) = evaluate(evidence, policy).findings
    assert finding.verdict == verdict
    assert "not applicable: the spec has no loss" in finding.message


def test_shipped_policies_load_by_name_and_match_the_files() -> None:
    from attest.policy.model import load_policy, policy_digest

    by_name = load_policy("clinical-strict")
    by_path = load_policy(REPO / "policies" / "clinical-strict.yaml")
    assert policy_digest(by_name) == policy_digest(by_path)
    assert load_policy("research").id == "research"


def test_unknown_policy_name_is_a_clear_error() -> None:
    from attest.errors import PolicyError
    from attest.policy.model import load_policy

    with pytest.raises(PolicyError, match="no shipped policy") as info:
        load_policy("clinical-lenient")
    assert "clinical-strict" in (info.value.hint or "")
