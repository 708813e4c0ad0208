"""certify end to end on a tiny exported model: the spec is read once and handed on, and the
export record of the evidence is what the certificate binds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _collect_models import make_spec

from attest import pipeline
from attest.certificate.signing import generate_keypair
from attest.core.io import sha256_file
from attest.pipeline import subjects as pipeline_subjects
from attest.policy.model import parse_policy
from attest.spec import load as spec_load
from attest.spec import load_spec


def test_certify_reads_the_spec_once_and_binds_the_export_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_spec(tmp_path / "model", spec_extra="repeats: 3\nthreads: 1\nexport: onnx\n")
    policy = parse_policy({"id": "p", "version": "1", "rules": [{"id": "e", "check": "export"}]})
    key, _, _ = generate_keypair(tmp_path / "keys" / "release", passphrase=None)
    reads: list[Path] = []

    def counted(real: Any) -> Any:
        def parse(path: Any) -> Any:
            reads.append(Path(path))
            return real(path)

        return parse

    monkeypatch.setattr(spec_load, "parse_spec_file", counted(spec_load.parse_spec_file))
    monkeypatch.setattr(
        pipeline_subjects, "parse_spec_file", counted(pipeline_subjects.parse_spec_file)
    )
    out = tmp_path / "out"
    result = pipeline.certify(spec, policy=policy, key=key, out=out / "gradient_certificate.json")
    assert reads == [spec.resolve()], "certify reads attest.yaml once and hands the spec on"
    assert result.passed, [f.message for f in result.findings.failed]

    record = result.evidence.export
    assert record is not None
    assert (record.onnx.name, record.probe_bundle.name) == ("model.onnx", "probe.npz")
    assert Path(record.onnx.path).parent == out.resolve()  # written next to the certificate
    written = json.loads(result.evidence_path.read_text())
    assert written["export"]["onnx"]["sha256"] == sha256_file(out / "model.onnx")
    assert written["export"]["probe_bundle"]["sha256"] == sha256_file(out / "probe.npz")

    assert result.statement is not None
    predicate = result.statement.predicate
    assert predicate.onnx_mapping == record.onnx_mapping.model_dump(mode="json")
    assert predicate.deployment.runtime == record.deployment.runtime
    subjects = {s.name: s.digest.sha256 for s in result.statement.subject}
    assert subjects["model.onnx"] == record.onnx.sha256
    assert subjects["probe.npz"] == record.probe_bundle.sha256
    assert pipeline.certificate_subjects(
        result.evidence, load_spec(spec), out
    ) == pipeline.certificate_subjects(result.evidence, spec, out)
