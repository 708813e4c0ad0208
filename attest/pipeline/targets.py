"""Certifying evidence collected elsewhere, one file per hardware target (``certify --evidence``).

No collection happens here (no torch): each target's evidence is held against the policy on its
own (:mod:`attest.policy.targets`), the evidence files are merged for the certificate's
operator and check sections (:mod:`attest.evidence.merge`), and the statement lists every
target with its verdict and runtime in ``predicate.deployment.per_target``, which
``attest verify --check-environment`` matches a server against (docs/scale.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from attest.certificate.signers import SignerIdentity
from attest.certificate.signing import PrivateKey
from attest.certificate.statement import (
    DeploymentEnvelope,
    DigestSet,
    EvidenceProvenance,
    TargetEnvelope,
)
from attest.core.io import atomic_write_text, dumps_pretty, sha256_file
from attest.errors import InputError
from attest.evidence.consistency import require_consistent
from attest.evidence.merge import merge_evidence
from attest.evidence.model import load_evidence
from attest.pipeline import (
    _inputs,
    _output_paths,
)
from attest.pipeline.measured import require_measured
from attest.pipeline.provenance import ReleaseFiles, check_provenance, require_trust_store
from attest.pipeline.signing import CertifyResult, Progress, _deployment, sign_and_report
from attest.pipeline.subjects import ExtraArtifacts, _recorded_digest, _spec_files, release_subjects
from attest.policy.model import Findings, Policy
from attest.policy.targets import TargetEvidence, evaluate_targets, target_name
from attest.spec import parse_spec_file
from attest.verification.outcome import provenance_line
from attest.verification.trust import TrustStore, load_trust_store

__all__ = ["certify_evidence"]


def certify_evidence(
    spec: str | Path,
    evidence: Sequence[str | Path | tuple[str, str | Path]],
    *,
    policy: str | Path | Policy,
    key: str | Path | PrivateKey,
    out: str | Path,
    evidence_out: str | Path | None = None,
    findings_out: str | Path | None = None,
    report: str | Path | None = None,
    expires_in: str | timedelta = "365d",
    progress: Progress | None = None,
    at: datetime | None = None,
    signer: SignerIdentity | None = None,
    tsa: str | None = None,
    model_signing: bool = False,
    trust: str | Path | TrustStore | None = None,
    artifacts: ExtraArtifacts | None = None,
) -> CertifyResult:
    """Certify evidence collected elsewhere, one file per hardware target: no re-collection.

    ``evidence`` items are paths, or ``(target name, path)`` to name a target (by default the
    hardware target the evidence records). Every file must be about the spec at ``spec`` and
    its weights and probe (:func:`attest.policy.targets.check_same_release`). Each target is
    evaluated on its own evidence; the certificate lists every target with its verdict
    (``predicate.deployment.per_target``) and is signed only when every required target
    passes. The evidence written next to the certificate merges the targets' evidence (worst
    figure over targets, :mod:`attest.evidence.merge`); the findings name their target.

    ``trust`` (a trust store or its path) checks each file's collector statement
    (:mod:`attest.pipeline.provenance`): needed when the policy's ``evidence.require_signed``
    is set. The certificate records each target's provenance (``evidence_provenance``).
    """
    out_path, evidence_path, findings_path = _output_paths(out, evidence_out, findings_out)
    lifetime, loaded_policy, signing_key, report_writer = _inputs(
        expires_in, policy, key, report, model_signing
    )
    say = progress or (lambda _message: None)
    targets = _read_targets(evidence, (evidence_path, findings_path, out_path), say)
    store = load_trust_store(trust) if isinstance(trust, (str, Path)) else trust
    require_trust_store(loaded_policy, store)
    release = _release_files(Path(spec))
    provenance: dict[str, EvidenceProvenance] = {}
    for target in targets:
        path = Path(target.source)
        provenance[target.name] = check_provenance(
            path, target.evidence, target.sha256 or "", target=target.name, release=release,
            policy=loaded_policy, trust=store, at=at,
        )  # fmt: skip
        say(f"  {provenance_line(target.name, provenance[target.name].model_dump(mode='json'))}")
        # its statuses are the collector's claim: refused before anything reads them when
        # they disagree with its figures (docs/policy-reference.md); a signed file was held
        # to its signature first, so an edit of it is refused by the signature
        require_consistent(target.evidence, str(path))
    _check_spec_files(Path(spec), targets[0] if targets else None)
    say(f"evaluating {len(targets)} target(s) against policy {loaded_policy.id}")
    findings = evaluate_targets(targets, loaded_policy, at=at)
    if len(targets) == 1:
        merged = targets[0].evidence
    else:
        merged = merge_evidence([t.evidence for t in targets], [t.source for t in targets])
    passing = [
        t for t in targets if t.name in {v.name for v in findings.targets if v.verdict == "pass"}
    ]
    # The deployment files (ONNX, probe bundle) of the first passing target with an export:
    # the ones the certificate binds, and the ones the written evidence names.
    exporter = next((t for t in passing if t.evidence.export is not None), None)
    bound = exporter.evidence if exporter is not None else merged
    evidence_dir = Path(exporter.source).parent if exporter is not None else None
    merged = merged.model_copy(update={"export": bound.export})
    atomic_write_text(evidence_path, dumps_pretty(merged.model_dump(mode="json")))
    atomic_write_text(findings_path, dumps_pretty(findings.model_dump(mode="json")))
    if findings.passed:  # each target's own evidence, not only the merge, measured something
        for target in targets:
            require_measured(target.evidence, f"--evidence {target.source}")

    return sign_and_report(
        merged,
        findings,
        subjects=lambda: release_subjects(
            bound,
            Path(spec),
            out_path.parent,
            signing_key,
            model_signing,
            evidence_dir=evidence_dir,
        ),
        paths=(out_path, evidence_path, findings_path),
        key=signing_key,
        lifetime=lifetime,
        at=at,
        report=report,
        report_writer=report_writer,
        say=say,
        deployment=_targets_deployment(targets, findings) if findings.passed else None,
        signer=signer,
        tsa=tsa,
        provenance=provenance,
        artifacts=artifacts,
        model_signing=model_signing,
    )


def _read_targets(
    evidence: Sequence[str | Path | tuple[str, str | Path]],
    outputs: tuple[Path, ...],
    say: Progress,
) -> list[TargetEvidence]:
    """Each ``--evidence [NAME=]FILE`` read and named (not yet checked)."""
    targets: list[TargetEvidence] = []
    for item in evidence:
        name, raw = item if isinstance(item, tuple) else (None, item)
        path = Path(raw)
        if path.resolve() in {p.resolve() for p in outputs}:
            raise InputError(
                f"--evidence {path} is also an output of this run; it would be overwritten",
                hint="write the merged evidence elsewhere with --evidence-out",
            )
        loaded = load_evidence(path)
        say(f"read evidence {path} ({target_name(loaded)})")
        targets.append(
            TargetEvidence(
                name=name or target_name(loaded),
                evidence=loaded,
                source=str(path),
                sha256=sha256_file(path),
            )
        )
    return targets


def _release_files(spec: Path) -> ReleaseFiles:
    """The spec, weights and probe being certified, with their digests, and the model."""
    files: dict[str, tuple[Path, str]] = {}
    for role, path in _spec_files(spec).items():
        if not path.is_file():
            raise InputError(f"the spec's {role} file {path} does not exist", hint="check the path")
        files[role] = (path, sha256_file(path))
    parsed = parse_spec_file(spec)
    if parsed.model is None:  # refused earlier (a bundle is certified in one run); kept exact
        raise InputError(f"{spec} names no model", hint="certify a MONAI bundle in one run")
    return ReleaseFiles(files, (parsed.model.name, parsed.model.version))


def _check_spec_files(spec: Path, first: TargetEvidence | None) -> None:
    """The spec, weights and probe at hand are the files the evidence was collected from."""
    if first is None:
        return
    for role, path in _spec_files(spec).items():
        if not path.is_file():
            raise InputError(f"the spec's {role} file {path} does not exist", hint="check the path")
        recorded = _recorded_digest(first.evidence, role)
        if recorded is not None and sha256_file(path) != recorded:
            raise InputError(
                f"{path} is not the {role} file {first.source} was collected from (sha256 differs)",
                hint="certify with the spec, weights and probe the evidence was collected from",
            )


def _targets_deployment(
    targets: Sequence[TargetEvidence], findings: Findings
) -> DeploymentEnvelope:
    """The deployment envelope over several targets: each target's own envelope by name, and
    at the top level the first required passing target's (what a single-target reader sees)."""
    verdicts = {v.name: v for v in findings.targets}
    per_target: dict[str, TargetEnvelope] = {}
    for target in targets:
        own = _deployment(target.evidence)
        verdict = verdicts[target.name]
        per_target[target.name] = TargetEnvelope(
            verdict="pass" if verdict.verdict == "pass" else "fail",
            required=verdict.required,
            hardware=list(target.evidence.targets),
            runtime=own.runtime,
            fatal_differences=own.fatal_differences,
            evidence_digest=DigestSet(sha256=target.sha256) if target.sha256 else None,
        )
    lead = next(n for n, t in per_target.items() if t.required and t.verdict == "pass")
    return DeploymentEnvelope(
        targets=[n for n, t in per_target.items() if t.verdict == "pass"],
        runtime=per_target[lead].runtime,
        fatal_differences=per_target[lead].fatal_differences,
        per_target=per_target,
    )
