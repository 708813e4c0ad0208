"""Verdicts from figures, never from flags (issue 35): ``attest certify --evidence`` and
``attest evaluate`` refuse evidence whose claims (statuses, counts) disagree with its
figures, naming the check, the item, the figure and the claim.

One real failing evidence file (examples/unstable, collected once per session) is edited in
every way a hand could edit it; each edit is refused, and the unedited file is accepted and
still fails clinical-strict for its real defect.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from attest.certificate.signing import generate_keypair
from attest.cli import main
from attest.evidence.consistency import inconsistencies
from attest.evidence.model import Evidence

REPO = Path(__file__).resolve().parents[2]
STRICT = REPO / "policies" / "clinical-strict.yaml"

Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="session")
def unstable(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """examples/unstable collected for real (10 repeats instead of 100, to be quick): its
    spec and its evidence, which fails clinical-strict (float16 LayerNorm, IG completeness)."""
    folder = tmp_path_factory.mktemp("unstable") / "unstable"
    shutil.copytree(
        REPO / "examples" / "unstable", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    spec = folder / "attest.yaml"
    spec.write_text(spec.read_text().replace("repeats: 100", "repeats: 10"))
    out = folder / "evidence.json"
    with pytest.raises(SystemExit) as info:
        main(["collect", str(spec), "-o", str(out), "-q"])
    assert info.value.code in (0, None)
    return spec, json.loads(out.read_text())


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    private, _pub, _ = generate_keypair(
        tmp_path_factory.mktemp("keys") / "release", passphrase=None
    )
    return private


def _first(data: dict[str, Any], check: str, status: str) -> dict[str, Any]:
    return next(i for i in data["checks"][check]["items"] if i["status"] == status)


def _all_pass(data: dict[str, Any]) -> None:
    """The issue's reproduction: every status reads pass, the figures left in place."""
    for result in data["checks"].values():
        for item in result["items"]:
            if item["status"] in ("fail", "warn"):
                item["status"] = "pass"


def _set(check: str, status: str, metric: str, value: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        _first(data, check, status)["metrics"][metric] = value

    return edit


def _status(check: str, old: str, new: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        _first(data, check, old)["status"] = new

    return edit


def _parameter(check: str, name: str, value: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        data["checks"][check]["parameters"][name] = value

    return edit


def _summary(check: str, name: str, value: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        data["checks"][check]["summary"][name] = value

    return edit


def _delete_failing(check: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        result = data["checks"][check]
        result["items"] = [i for i in result["items"] if i["status"] not in ("fail", "warn")]

    return edit


def _check_status(check: str, status: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        data["checks"][check]["status"] = status

    return edit


def _errored_marked_computed(data: dict[str, Any]) -> None:
    # what an errored check records (collection/ig/checks.py), then its status edited
    data["checks"]["ig_completeness"] = {
        "check": "ig_completeness",
        "status": "computed",
        "reason": "ig_completeness raised RuntimeError: out of memory",
    }


def _move(source: str, target: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        item = _first(data, source, "fail" if source.startswith("ig_") else "warn")
        data["checks"][source]["items"].remove(item)
        data["checks"][target]["items"].append(item)

    return edit


def _gradient_error(data: dict[str, Any]) -> None:
    """A gradient error of 0.5 beside the pass."""
    _first(data, "gradcheck", "pass")["metrics"]["max_rel_error"] = 0.5


def _operator_row(data: dict[str, Any]) -> None:
    row = data["operators"][1]
    row["fidelity_pct"] = row["local_fidelity_pct"] = 100.0


def _model_metric(data: dict[str, Any]) -> None:
    data["model_metrics"]["min_fidelity_pct"] = 99.99


def _not_applicable_with_summary(data: dict[str, Any]) -> None:
    data["checks"]["mixed_precision"]["summary"] = {"max_grad_rel_error": 0.0}


# edit, then the words the refusal must name: check, item, figure, claim
CASES: list[tuple[str, Edit, tuple[str, ...]]] = [
    ("every status reads pass", _all_pass, ("'fidelity'", "operator", "fidelity_pct", "'pass'")),
    (
        "status pass with a failing figure",
        _status("ig_completeness", "fail", "pass"),
        ("'ig_completeness'", "input 0", "completeness_rel_error", "status = 'pass'"),
    ),
    (
        "a gradient error of 0.5 beside the pass",
        _gradient_error,
        ("'gradcheck'", "operator 0", "max_rel_error = 0.5", "status = 'pass'"),
    ),
    (
        "figure edited to pass while the status fails",
        _set("ig_completeness", "fail", "completeness_rel_error", 1e-5),
        ("'ig_completeness'", "input 0", "completeness_rel_error = 1e-05", "status = 'fail'"),
    ),
    (
        "fidelity figure edited above the threshold, status left warn",
        _set("fidelity", "warn", "fidelity_pct", 100.0),
        ("'fidelity'", "operator 0", "local_fidelity_pct", "status = 'warn'"),
    ),
    (
        "the check's tolerance raised",
        # above any error the search can record (it stops early on this model: 14-260 relative)
        _parameter("ig_completeness", "tolerance", 1e6),
        ("'ig_completeness'", "input", "completeness_rel_error", "status = 'fail'"),
    ),
    (
        "the fidelity threshold lowered",
        _parameter("fidelity", "pass_threshold_pct", 90.0),
        ("'fidelity'", "operator", "fidelity_pct", "status = 'warn'"),
    ),
    (
        "an item's own rtol raised",
        _set("export", "pass", "rtol", 1.0),
        ("'export'", "output", "0.01", "rtol = 1.0"),
    ),
    (
        "the baseline's entropy floor lowered",
        _parameter("ig_baseline", "min_entropy_ratio", 0.0),
        ("'ig_baseline'", "input", "baseline_entropy_ratio", "status = 'warn'"),
    ),
    (
        "failing items deleted",
        _delete_failing("ig_completeness"),
        ("'ig_completeness'", "summary", "the figures give 0", "items_fail = 8"),
    ),
    (
        "warning fidelity items deleted",
        _delete_failing("fidelity"),
        ("'fidelity'", "summary", "the figures give 0", "operators_measured = 17"),
    ),
    (
        "a summary count changed",
        _summary("ig_completeness", "items_fail", 0),
        ("'ig_completeness'", "summary", "the figures give 8", "items_fail = 0"),
    ),
    (
        "the worst figure in a summary changed",
        _summary("fidelity", "min_fidelity_pct", 99.95),
        ("'fidelity'", "summary", "the figures give 97.", "min_fidelity_pct = 99.95"),
    ),
    (
        "the operator row the policy reads edited",
        _operator_row,
        ("'fidelity'", "operator row 1", "the figures give 9", "fidelity_pct = 100.0"),
    ),
    (
        "a model metric edited",
        _model_metric,
        ("'fidelity'", "model_metrics", "the figures give 97.", "min_fidelity_pct = 99.99"),
    ),
    (
        "computed changed to not_applicable",
        _check_status("ig_completeness", "not_applicable"),
        ("'ig_completeness'", "input 0", "not_applicable", "status = 'fail'"),
    ),
    (
        "an errored check marked computed",
        _errored_marked_computed,
        ("'ig_completeness'", "check", "a summary", "summary = {}"),
    ),
    (
        "a not_applicable check with figures",
        _not_applicable_with_summary,
        ("'mixed_precision'", "check", "computed", "status = 'not_applicable'"),
    ),
    (
        "a failing item moved to another check",
        _move("ig_completeness", "ig_convergence"),
        ("'ig_convergence'", "summary", "the figures give 9", "items_fail = 8"),
    ),
    (
        "a warning item moved to another check",
        _move("fidelity", "gradcheck"),
        ("'gradcheck'", "summary", "the figures give 18", "operators = 17"),
    ),
    (
        "a Hessian-vector error of 0.5 beside the pass",
        _set("second_order", "pass", "max_rel_error", 0.5),
        ("'second_order'", "hessian-vector", "max_rel_error = 0.5", "status = 'pass'"),
    ),
    (
        "gradcheck's rtol raised on one operator",
        _set("gradcheck", "pass", "rtol", 1.0),
        ("'gradcheck'", "operator 0", "the figures give 0.001", "rtol = 1.0"),
    ),
    (
        "a determinism rate below 1 beside a pass",
        _set("determinism", "pass", "bit_exact_rate", 0.5),
        ("'determinism'", "bit_exact_rate = 0.5", "status = 'pass'"),
    ),
    (
        "a thread-count change beside a pass",
        _set("thread_sensitivity", "pass", "changed", True),
        ("'thread_sensitivity'", "changed = True", "status = 'pass'"),
    ),
]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    code = info.value.code
    return (code if isinstance(code, int) else 0), out, err


def _certify(
    spec: Path, evidence: Path, key: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    out = evidence.parent / "out"
    # clinical-strict's rules on unsigned evidence, as a site that accepts unsigned files has
    # them: the figures still decide (signed evidence: tests/cli/test_certify_provenance.py)
    unsigned = evidence.parent / "unsigned-strict.yaml"
    unsigned.write_text(
        f"extends: {STRICT}\nid: clinical-strict-unsigned\nversion: '1'\n"
        "evidence: {require_signed: false}\n"
    )
    code, _, err = _run(
        [
            "certify",
            str(spec),
            "--evidence",
            str(evidence),
            "--policy",
            str(unsigned),
            "--key",
            str(key),
            "-o",
            str(out / "gradient_certificate.json"),
        ],
        capsys,
    )
    return code, err


def test_unedited_evidence_is_consistent_and_fails_the_policy(
    unstable: tuple[Path, dict[str, Any]],
    key: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec, data = unstable
    assert inconsistencies(Evidence.model_validate(data)) == []
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps(data))
    code, err = _certify(spec, evidence, key, capsys)
    assert code == 1, err  # refused by the policy for its real defect, not as inconsistent
    assert "INCONSISTENT" not in err
    assert not (tmp_path / "out" / "gradient_certificate.json").exists()


@pytest.mark.parametrize(("edit", "named"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_edited_evidence_is_refused_naming_check_item_figure_and_claim(
    unstable: tuple[Path, dict[str, Any]],
    key: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Edit,
    named: tuple[str, ...],
) -> None:
    spec, original = unstable
    data = copy.deepcopy(original)
    edit(data)
    assert data != original
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps(data))
    code, err = _certify(spec, evidence, key, capsys)
    assert code == 2, err
    assert "INCONSISTENT" in err
    described = [f.describe() for f in inconsistencies(Evidence.model_validate(data))]
    for word in named:
        assert any(word in line for line in described), (word, described)
    assert not (tmp_path / "out" / "gradient_certificate.json").exists()


def test_evaluate_reports_inconsistent(
    unstable: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _spec, original = unstable
    data = copy.deepcopy(original)
    _all_pass(data)
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps(data))
    code, out, err = _run(["evaluate", str(evidence), "--policy", str(STRICT)], capsys)
    assert code == 2
    assert out.startswith("verdict: INCONSISTENT")
    assert "check 'ig_completeness', input 0" in out
    assert "INCONSISTENT" in err
    code, out, _ = _run(["evaluate", str(evidence), "--policy", str(STRICT), "--json"], capsys)
    assert code == 2
    report = json.loads(out)
    assert report["verdict"] == "INCONSISTENT"
    assert {"check", "item", "figure", "claim", "rule"} <= set(report["inconsistencies"][0])


# A run-dependent perturbation (not bit-exact across repeats, with a deviation the stability
# score is computed from) and a random operator that a fixed seed hides: real determinism
# failures, which the unstable example does not have.
_PERTURBED_FORWARD = """        global _RUNS
        _RUNS = globals().get("_RUNS", 0) + 1
        h = self.features(x)
        h = h * (1 + 1e-5 * (_RUNS % 3)) + 0 * torch.rand_like(h)
        return self.classifier(h)"""


@pytest.fixture(scope="session")
def nondeterministic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """examples/digits with a forward that differs between runs and a random operator."""
    folder = tmp_path_factory.mktemp("nondeterministic") / "digits"
    shutil.copytree(
        REPO / "examples" / "digits", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    model = folder / "model.py"
    original = "        return self.classifier(self.features(x))"
    assert original in model.read_text()
    model.write_text(model.read_text().replace(original, _PERTURBED_FORWARD))
    spec = folder / "attest.yaml"
    spec.write_text(spec.read_text().replace("repeats: 100", "repeats: 10"))
    out = folder / "evidence.json"
    with pytest.raises(SystemExit) as info:
        main(["collect", str(spec), "-o", str(out), "-q"])
    assert info.value.code in (0, None)
    return json.loads(out.read_text())


def _failing_operator(data: dict[str, Any]) -> dict[str, Any]:
    return next(
        i
        for i in data["checks"]["determinism"]["items"]
        if i["status"] == "fail" and i["subject"]["kind"] == "operator"
    )


def _stability_raised(data: dict[str, Any]) -> None:
    _failing_operator(data)["metrics"]["stability_score"] = 99.0


def _random_hidden(data: dict[str, Any]) -> None:
    for item in data["checks"]["determinism"]["items"]:
        item["metrics"]["random_op"] = False


def _reproducibility_raised(data: dict[str, Any]) -> None:
    data["model_metrics"]["bit_exact_reproducibility"] = 1.0


def _rate_raised(data: dict[str, Any]) -> None:
    _failing_operator(data)["metrics"]["bit_exact_rate"] = 1.0


NONDETERMINISTIC_CASES: list[tuple[str, Edit, tuple[str, ...]]] = [
    ("stability score raised", _stability_raised, ("'determinism'", "stability_score = 99.0")),
    ("random operator hidden", _random_hidden, ("'determinism'", "random_operators")),
    (
        "reproducibility raised",
        _reproducibility_raised,
        ("'determinism'", "model_metrics", "bit_exact_reproducibility = 1.0"),
    ),
    ("an operator's rate raised", _rate_raised, ("'determinism'", "bit_exact_rate = 1.0")),
    (
        "nondeterministic count lowered",
        _summary("determinism", "nondeterministic_operators", 0),
        ("'determinism'", "summary", "nondeterministic_operators = 0"),
    ),
    (
        "thread change hidden",
        _status("thread_sensitivity", "warn", "pass"),
        ("'thread_sensitivity'", "changed = True", "status = 'pass'"),
    ),
]


def test_a_nondeterministic_model_with_a_random_op_is_consistent(
    nondeterministic: dict[str, Any],
) -> None:
    evidence = Evidence.model_validate(nondeterministic)
    determinism = evidence.checks["determinism"]
    assert determinism.summary["nondeterministic_operators"]
    assert determinism.summary["random_operators"] == 1
    assert inconsistencies(evidence) == []


@pytest.mark.parametrize(
    ("edit", "named"),
    [c[1:] for c in NONDETERMINISTIC_CASES],
    ids=[c[0] for c in NONDETERMINISTIC_CASES],
)
def test_edited_determinism_figures_are_refused(
    nondeterministic: dict[str, Any], edit: Edit, named: tuple[str, ...]
) -> None:
    data = copy.deepcopy(nondeterministic)
    edit(data)
    assert data != nondeterministic
    described = [f.describe() for f in inconsistencies(Evidence.model_validate(data))]
    assert described
    for word in named:
        assert any(word in line for line in described), (word, described)


def test_merged_evidence_is_judged_per_target(unstable: tuple[Path, dict[str, Any]]) -> None:
    """Evidence merged over two targets (attest collect --merge) is consistent, and an edit
    inside one target's items is still refused."""
    from attest.evidence.merge import merge_evidence

    _spec, data = unstable
    here = Evidence.model_validate(data)
    there = Evidence.model_validate({**copy.deepcopy(data), "targets": ["cuda:sm_90"]})
    merged = merge_evidence([here, there])
    assert inconsistencies(merged) == []
    edited = merged.model_copy(deep=True)
    item = next(i for i in edited.checks["ig_completeness"].items if i.status == "fail")
    item.status = "pass"
    described = [f.describe() for f in inconsistencies(edited)]
    assert any("'ig_completeness'" in d and "status = 'pass'" in d for d in described)
    relabelled = merged.model_copy(deep=True)
    relabelled.checks["export"].status = "not_applicable"
    described = [f.describe() for f in inconsistencies(relabelled)]
    assert any("'export'" in d and "status = 'not_applicable'" in d for d in described)
