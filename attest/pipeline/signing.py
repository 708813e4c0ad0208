"""On a passing verdict, the statement built and signed; then the report; and what
:func:`attest.pipeline.certify` returns (:class:`CertifyResult`).

Shared by certify (collect here) and :mod:`attest.pipeline.targets` (evidence collected
elsewhere): the model block (with a MONAI bundle's or Hugging Face folder's card), the
deployment envelope and the findings as the certificate carries them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from attest.certificate.signers import SignerIdentity
from attest.certificate.signing import PrivateKey
from attest.certificate.statement import (
    DeploymentEnvelope,
    EvidenceProvenance,
    PolicyRef,
    Statement,
    build_statement,
    sign_statement,
    write_certificate,
)
from attest.certificate.timestamp import timestamper
from attest.core.io import sha256_file
from attest.evidence.model import Evidence
from attest.pipeline.measured import require_measured
from attest.pipeline.subjects import ExtraArtifacts, outputs_of
from attest.policy.model import Finding, Findings

__all__ = ["CertifyResult", "Progress", "sign_and_report"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CertifyResult:
    """What :func:`certify` did: the verdict and where each output is."""

    verdict: str
    findings: Findings
    evidence: Evidence
    evidence_path: Path
    findings_path: Path
    certificate_path: Path | None
    statement: Statement | None
    report_path: Path | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


def _deployment(evidence: Evidence) -> DeploymentEnvelope:
    if evidence.export is not None:  # the export check's envelope (onnxruntime settings)
        return DeploymentEnvelope.model_validate(evidence.export.deployment.model_dump())
    env = evidence.environment
    runtime: dict[str, Any] = {
        key: env[key]
        for key in (
            "device",
            "precision",
            "threads",
            "torch",
            "cpu_isa",
            "python",
            "machine",
            "system",
        )
        if key in env and isinstance(env[key], (str, int, float, bool))
    }
    return DeploymentEnvelope(targets=list(evidence.targets), runtime=runtime)


def _onnx_mapping(evidence: Evidence) -> dict[str, Any]:
    if evidence.export is None:
        return {}
    return evidence.export.onnx_mapping.model_dump(mode="json")


def sign_and_report(
    evidence: Evidence,
    findings: Findings,
    *,
    subjects: Callable[[], dict[str, str]],
    paths: tuple[Path, Path, Path],
    key: PrivateKey,
    lifetime: timedelta,
    at: datetime | None,
    report: str | Path | None,
    report_writer: Callable[..., Any] | None,
    say: Progress,
    deployment: DeploymentEnvelope | None = None,
    signer: SignerIdentity | None = None,
    tsa: str | None = None,
    provenance: Mapping[str, EvidenceProvenance] | None = None,
    artifacts: ExtraArtifacts | None = None,
    model_signing: bool = False,
) -> CertifyResult:
    """On pass, build the statement over ``subjects()`` and the ``artifacts`` (a folder, the
    model's own bundle among them, through its manifest, leaving out this run's outputs) and
    sign it (with the signer's stated identity and meaning, and a timestamp from ``tsa``);
    then the report; the result either way."""
    out_path, evidence_path, findings_path = paths
    statement: Statement | None = None
    certificate_path: Path | None = None
    if findings.passed:
        require_measured(evidence)  # under any policy: nothing measured is not a certificate
        say("signing the certificate")
        bound = subjects()
        written = [out_path, evidence_path, findings_path, Path(report) if report else None]
        outputs = outputs_of(evidence, written, model_signing)
        folders = (artifacts or ExtraArtifacts()).bind(bound, outputs)
        statement = build_statement(
            subjects=bound,
            folders=folders,
            model=_model_block(evidence),
            policy=PolicyRef.model_validate(findings.policy.model_dump()),
            verdict="pass",
            issued_at=at,
            expires_in=lifetime,
            environment=evidence.environment,
            deployment=deployment or _deployment(evidence),
            evidence_digest={"sha256": sha256_file(evidence_path)},
            model_metrics=evidence.model_metrics,
            operators=[row.model_dump(mode="json") for row in evidence.operators],
            modules=[row.model_dump(mode="json") for row in evidence.modules],
            checks={k: v.model_dump(mode="json") for k, v in evidence.checks.items()},
            findings=[_finding_json(f) for f in findings.findings],
            waivers=findings.waivers_used(),
            onnx_mapping=_onnx_mapping(evidence),
            evidence_provenance={
                name: record.model_dump(mode="json") for name, record in (provenance or {}).items()
            },
        )
        envelope = sign_statement(
            statement,
            [key],
            signers=None if signer is None else [signer],
            timestamper=timestamper(tsa),
        )
        certificate_path = write_certificate(out_path, envelope)
    report_path: Path | None = None
    if report_writer is not None and report is not None:
        say("writing the report")
        if certificate_path is not None:  # the signed certificate, with its evidence
            report_writer(certificate_path, report, findings=findings_path, evidence=evidence_path)
        else:  # no certificate: the evidence and why it failed
            report_writer(evidence_path, report, findings=findings_path)
        report_path = Path(report)
    return CertifyResult(
        verdict=findings.verdict,
        findings=findings,
        evidence=evidence,
        evidence_path=evidence_path,
        findings_path=findings_path,
        certificate_path=certificate_path,
        statement=statement,
        report_path=report_path,
    )


def _model_block(evidence: Evidence) -> dict[str, Any]:
    """The certificate's model block: name, version and, for a MONAI bundle or Hugging Face
    folder, its card (what its metadata says of it)."""
    block: dict[str, Any] = {
        "name": str(evidence.model.get("name")),
        "version": str(evidence.model.get("version")),
    }
    folder = evidence.model.get("folder")
    if isinstance(folder, Mapping) and isinstance(folder.get("card"), Mapping):
        block["card"] = dict(folder["card"])
    return block


def _finding_json(finding: Finding) -> dict[str, Any]:
    # ``target`` only over several targets: a single-target certificate's findings keep the
    # keys they always had.
    return finding.model_dump(mode="json", exclude={"target"} if finding.target is None else None)
