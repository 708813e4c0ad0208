"""attest diff: operators aligned by (module, op, occurrence), regressions beyond tolerance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _report_samples import CNN_OPS, findings_for, make_evidence, write_evidence

from attest.errors import AttestError
from attest.report.diff import DiffTolerances, diff_files, dumps, operator_keys


def _pair(tmp_path: Path, **new_kwargs: object) -> tuple[Path, Path]:
    old = write_evidence(tmp_path / "old.json", make_evidence(version="1.0.0"))
    new = write_evidence(tmp_path / "new.json", make_evidence(version="1.1.0", **new_kwargs))  # type: ignore[arg-type]
    return old, new


def test_planted_fidelity_drop_reports_exactly_that_operator(tmp_path: Path) -> None:
    old, new = _pair(tmp_path, drop={9: 99.95})
    result = diff_files(old, new)
    assert [c.kind for c in result.regressions] == ["fidelity"]
    (regression,) = result.regressions
    assert regression.subject == "addmm#0 @ classifier.1 (id 9)"
    assert regression.old == pytest.approx(100 - 2e-5) and regression.new == 99.95
    assert result.operators_compared == len(CNN_OPS)


def test_identical_releases_have_no_regression(tmp_path: Path) -> None:
    old, new = _pair(tmp_path)
    result = diff_files(old, new)
    assert result.regressions == []
    assert [c.kind for c in result.changes] == ["version"]


def test_drop_within_tolerance_is_not_a_regression(tmp_path: Path) -> None:
    old, new = _pair(tmp_path, drop={9: 100 - 2e-5 - 0.005})  # 0.005 points < 0.01 default
    assert diff_files(old, new).regressions == []


def test_inserted_operator_does_not_misalign_the_rest(tmp_path: Path) -> None:
    ops = [*CNN_OPS[:2], ("features.1", "aten.mul.Tensor"), *CNN_OPS[2:]]
    old = write_evidence(tmp_path / "old.json", make_evidence())
    # ids shift by one after the insertion; the rows' values follow their ids in the sample,
    # so give every shifted operator its old fidelity back to model "nothing else changed"
    shifted = make_evidence(ops=ops)
    base = make_evidence()
    for row in shifted.operators[3:]:
        old_row = base.operators[row.id - 1]
        row.fidelity_pct = old_row.fidelity_pct
        row.memory_delta_bytes = old_row.memory_delta_bytes
    new = write_evidence(tmp_path / "new.json", shifted)
    result = diff_files(old, new)
    added = [c for c in result.changes if c.kind == "operator_added"]
    assert [c.subject for c in added] == ["mul.Tensor#0 @ features.1 (id 2)"]
    assert not [c for c in result.changes if c.kind in ("fidelity", "operator_removed")]
    assert result.regressions == []


def test_repeated_op_in_one_module_is_aligned_by_occurrence() -> None:
    rows = [
        {"id": 0, "module": "m", "op": "aten.add.Tensor"},
        {"id": 1, "module": "m", "op": "aten.add.Tensor"},
        {"id": 2, "module": "n", "op": "aten.add.Tensor"},
    ]
    assert list(operator_keys(rows)) == [
        ("m", "aten.add.Tensor", 0),
        ("m", "aten.add.Tensor", 1),
        ("n", "aten.add.Tensor", 0),
    ]


def test_stability_drop_and_new_check_failure_are_regressions(tmp_path: Path) -> None:
    new_ev = make_evidence(version="1.1.0")
    new_ev.operators[4].stability_score = 80.0
    item = new_ev.checks["gradcheck"].items[4]
    item.status = "fail"
    item.message = "backward disagrees with finite differences"
    old = write_evidence(tmp_path / "old.json", make_evidence())
    new = write_evidence(tmp_path / "new.json", new_ev)
    result = diff_files(old, new)
    kinds = sorted(c.kind for c in result.regressions)
    assert kinds == ["check", "stability"]
    assert any("convolution#0 @ features.4" in c.subject for c in result.regressions)


def test_verdict_policy_and_environment_changes(tmp_path: Path) -> None:
    old_ev, new_ev = make_evidence(), make_evidence(version="1.1.0", drop={9: 99.5})
    new_ev.environment["torch"] = "2.14.0"
    old, new = (
        write_evidence(tmp_path / "o.json", old_ev),
        write_evidence(tmp_path / "n.json", new_ev),
    )
    (tmp_path / "of.json").write_text(json.dumps(findings_for(old_ev)), encoding="utf-8")
    new_findings = findings_for(new_ev, fail_op=9)
    new_findings["policy"]["version"] = "2"
    (tmp_path / "nf.json").write_text(json.dumps(new_findings), encoding="utf-8")
    result = diff_files(
        old, new, old_findings=tmp_path / "of.json", new_findings=tmp_path / "nf.json"
    )
    by_kind = {c.kind: c for c in result.changes}
    assert by_kind["verdict"].regression and by_kind["verdict"].new == "fail"
    assert by_kind["policy"].subject == "version"
    assert by_kind["environment"].subject == "torch" and not by_kind["environment"].regression
    doc = json.loads(dumps(result))
    assert doc["regression"] is True and {r["kind"] for r in doc["regressions"]} == {
        "verdict",
        "fidelity",
    }


def test_memory_change_is_reported_and_gated_only_when_the_policy_says(tmp_path: Path) -> None:
    new_ev = make_evidence(version="1.1.0")
    new_ev.operators[0].memory_delta_bytes = 3 * 4096
    old = write_evidence(tmp_path / "o.json", make_evidence())
    new = write_evidence(tmp_path / "n.json", new_ev)
    result = diff_files(old, new)
    memory = [c for c in result.changes if c.kind == "memory"]
    assert memory and not any(c.regression for c in memory)
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "id: gate\nversion: '1'\nrules:\n  - id: r\n    check: fidelity\n"
        "diff:\n  memory_regression_pct: 50\n  fidelity_drop_pct: 0.001\n",
        encoding="utf-8",
    )
    gated = diff_files(old, new, policy=policy)
    assert gated.tolerances.fidelity_drop_pct == 0.001
    assert [c.subject for c in gated.regressions] == ["convolution#0 @ features.0 (id 0)"]


def test_bad_diff_tolerances_in_policy_are_config_errors(tmp_path: Path) -> None:
    old, new = _pair(tmp_path)
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "id: gate\nversion: '1'\nrules:\n  - id: r\n    check: fidelity\ndiff:\n  fidelity_drop: 1\n",
        encoding="utf-8",
    )
    with pytest.raises(AttestError, match="fidelity_drop"):
        diff_files(old, new, policy=policy)


def test_default_tolerances_are_documented() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "report.md").read_text(encoding="utf-8")
    for name, field in DiffTolerances.model_fields.items():
        assert name in doc, f"docs/report.md does not document {name}"
        assert f"{field.default}" in doc or field.default is None


def test_propagated_fidelity_loss_blames_only_the_culprit(tmp_path: Path) -> None:
    """A real defect (one op computed in low precision) lowers that op's local fidelity and the
    accumulated fidelity of every op after it; only the culprit is a regression."""
    new_ev = make_evidence(version="1.1.0")
    new_ev.operators[5].local_fidelity_pct = 99.9
    for row in new_ev.operators[5:]:
        row.fidelity_pct = 99.9
    old = write_evidence(tmp_path / "o.json", make_evidence())
    new = write_evidence(tmp_path / "n.json", new_ev)
    result = diff_files(old, new)
    culprit = "_native_batch_norm_legit_no_training#0 @ features.5 (id 5)"
    assert {c.subject for c in result.regressions} == {culprit}
    inherited = [c for c in result.changes if c.kind == "fidelity" and not c.regression]
    assert len(inherited) == len(new_ev.operators) - 6
    assert all(f"inherited from {culprit}" in c.message for c in inherited)


def test_without_local_fidelity_every_drop_is_a_regression(tmp_path: Path) -> None:
    old_ev, new_ev = make_evidence(), make_evidence(version="1.1.0")
    for ev in (old_ev, new_ev):
        for row in ev.operators:
            row.local_fidelity_pct = None
    for row in new_ev.operators[5:]:
        row.fidelity_pct = 99.9
    result = diff_files(
        write_evidence(tmp_path / "o.json", old_ev), write_evidence(tmp_path / "n.json", new_ev)
    )
    assert len(result.regressions) == len(new_ev.operators) - 5


def _training_pair(tmp_path: Path, **new_checks: Any) -> tuple[Path, Path]:
    from _training_samples import with_training

    old = write_evidence(tmp_path / "old.json", with_training(make_evidence()))
    new_ev = with_training(make_evidence(version="1.1.0"), **new_checks)
    return old, write_evidence(tmp_path / "new.json", new_ev)


def test_unchanged_training_checks_and_their_timings_are_not_changes(tmp_path: Path) -> None:
    from _training_samples import recompute

    old, new = _training_pair(tmp_path, recompute=recompute(extra_forward_s=0.5))
    result = diff_files(old, new)
    assert [c.kind for c in result.changes] == ["version"]  # extra_forward_s is a timing


def test_training_summary_changes_and_a_grown_failure_count_regresses(tmp_path: Path) -> None:
    from _training_samples import mixed_precision, resume

    old, new = _training_pair(
        tmp_path,
        mixed_precision=mixed_precision(failed=2, error=4e-3),
        resume=resume(losses_equal=False),
    )
    result = diff_files(old, new)
    training = {c.subject: c for c in result.changes if c.kind == "training"}
    assert set(training) == {
        "mixed_precision.failed",
        "mixed_precision.max_grad_rel_error",
        "resume.losses_equal",
    }
    failed = training["mixed_precision.failed"]
    assert (failed.old, failed.new, failed.regression) == (1, 2, True)
    error = training["mixed_precision.max_grad_rel_error"]
    assert error.message == "0.00125 -> 0.004" and not error.regression
    assert training["resume.losses_equal"].message == "yes -> no"
    assert not training["resume.losses_equal"].regression


def test_training_check_that_stops_running_is_a_check_regression(tmp_path: Path) -> None:
    from attest.evidence.model import CheckResult

    gone = CheckResult(check="resume", status="error", reason="planted")
    old, new = _training_pair(tmp_path, resume=gone)
    result = diff_files(old, new)
    assert [(c.kind, c.subject) for c in result.regressions] == [("check", "resume")]
    assert not [c for c in result.changes if c.kind == "training"]  # not computed: no figures
