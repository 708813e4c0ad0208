"""The report, diff and metrics on real evidence collected from the shipped examples.

Collecting is the expensive part, so each example is collected once per test session with few
repeats and no ONNX export; digits runs every check, the larger examples only the profiler
(which fills every operator row and the module roll-up the report draws).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from test_report_html import SECTIONS, parse

from attest.report.diff import diff_files
from attest.report.html import write_report
from attest.report.metrics import openmetrics_text

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(p.parent.name for p in (ROOT / "examples").glob("*/attest.yaml"))
PROFILER_ONLY = ["attest.collection.profile.topology:run", "attest.collection.profile.profiler:run"]

pytestmark = pytest.mark.slow


def _collect(example: str, folder: Path) -> tuple[Path, Path]:
    """Evidence and clinical-strict findings for a copy of the example (3 repeats, no export)."""
    from attest.collection import collect
    from attest.policy.engine import evaluate
    from attest.policy.model import load_policy

    work = folder / example
    shutil.copytree(ROOT / "examples" / example, work)
    spec = (work / "attest.yaml").read_text(encoding="utf-8")
    spec = re.sub(r"(?m)^repeats:.*$", "repeats: 3", spec)
    spec = re.sub(r"(?m)^export:.*$", "", spec)
    (work / "attest.yaml").write_text(spec, encoding="utf-8")
    torch.set_num_threads(2)
    runners = None if example == "digits" else PROFILER_ONLY
    evidence = collect(work / "attest.yaml", out=work / "evidence.json", runners=runners)
    findings = evaluate(evidence, load_policy(ROOT / "policies" / "clinical-strict.yaml"))
    (work / "findings.json").write_text(
        json.dumps(findings.model_dump(mode="json")), encoding="utf-8"
    )
    return work / "evidence.json", work / "findings.json"


Collected = Callable[[str], tuple[Path, Path]]


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    """``collected(example)``: (evidence, findings), collected once per module."""
    cache: dict[str, tuple[Path, Path]] = {}

    def get(example: str) -> tuple[Path, Path]:
        if example not in cache:
            cache[example] = _collect(example, tmp_path_factory.mktemp("examples"))
        return cache[example]

    return get


@pytest.mark.parametrize("example", EXAMPLES)
def test_report_of_each_example_renders_every_section_and_operator(
    example: str,
    collected: Collected,
    tmp_path: Path,
) -> None:
    evidence_path, findings_path = collected(example)
    evidence = json.loads(evidence_path.read_text(encoding="utf-8"))
    assert evidence["operators"], "the profiler recorded no operators"
    result = write_report(evidence_path, tmp_path / "report.html", findings=findings_path)
    page, text = parse(result.path)
    for section in SECTIONS:
        assert section in page.ids, section
    for row in evidence["operators"]:
        assert f"op-{row['id']}" in page.ids
    for href in page.hrefs:
        assert href[1:] in page.ids, href
    assert page.fetching == []
    assert "NOT CERTIFIED" in text  # evidence, never a certificate
    if example == "digits":  # every check ran: the IG maps and the randomization curve
        assert 'aria-label="ig-heatmaps"' in text
        assert 'aria-label="ig-randomization"' in text


@pytest.mark.parametrize("example", EXAMPLES[:1])
def test_diff_and_metrics_on_real_evidence(
    example: str,
    collected: Collected,
    tmp_path: Path,
) -> None:
    evidence_path, _ = collected(example)
    assert diff_files(evidence_path, evidence_path).regressions == []
    doc = json.loads(evidence_path.read_text(encoding="utf-8"))
    target = next(r for r in doc["operators"] if r.get("local_fidelity_pct") is not None)
    target["local_fidelity_pct"] = target["fidelity_pct"] = 99.0
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps(doc), encoding="utf-8")
    result = diff_files(evidence_path, planted)
    assert {c.subject for c in result.regressions} == {
        next(c.subject for c in result.changes if f"(id {target['id']})" in c.subject)
    }
    parser = pytest.importorskip("prometheus_client.openmetrics.parser")
    families = list(parser.text_string_to_metric_families(openmetrics_text(evidence_path)))
    assert any(f.name == "attest_operator_fidelity_percent" for f in families)
