"""The certify pipeline: collect evidence, evaluate it against a policy, sign on pass.

:func:`certify` is what ``attest certify`` runs. It loads the policy and the signing key
first (so a typo costs nothing), collects the evidence (:func:`attest.collection.collect`),
writes ``evidence.json``, evaluates it (:func:`attest.policy.engine.evaluate`), writes
``findings.json`` and, only when the policy passes, builds the in-toto statement whose
subjects are the weights, the spec, the probe bundle (and the ONNX file when the spec exports
one) and signs it into ``gradient_certificate.json``. On a failed policy there is no
certificate: the evidence and findings are still written and the result says why.

Example::

    result = certify("examples/digits/attest.yaml", policy="policies/clinical-strict.yaml",
                     key="keys/release.key", out="gradient_certificate.json")
    if not result.passed:
        for finding in result.findings.failed:
            print(finding.rule, finding.subject.label(), finding.message)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from attest.certificate import model_signing as openssf_model_signing
from attest.certificate.signers import SignerIdentity
from attest.certificate.signing import PrivateKey, load_private_key
from attest.certificate.statement import (
    DeploymentEnvelope,
    PolicyRef,
    Statement,
    build_statement,
    sign_statement,
    subjects_from_paths,
    write_certificate,
)
from attest.certificate.timestamp import timestamper
from attest.core.io import (
    atomic_write_bytes,
    atomic_write_text,
    dumps_pretty,
    sha256_file,
)
from attest.core.times import parse_duration
from attest.errors import InputError, PolicyError
from attest.evidence.model import Evidence, ExportedFile
from attest.pipeline.budget_floors import budget_floors
from attest.pipeline.measured import require_measured
from attest.pipeline.training_log import training_log_record
from attest.policy.engine import evaluate
from attest.policy.model import Finding, Findings, Policy, load_policy
from attest.spec import LoadedSpec, load_spec, parse_spec_file
from attest.spec.model import parse_budget

__all__ = [
    "CertifyResult",
    "Progress",
    "certificate_subjects",
    "certify",
    "check_settings",
    "parse_expiry",
    "training_log_record",
]

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


def parse_expiry(value: str | timedelta) -> timedelta:
    """``365d``, ``26w``, ``1y`` (365 days) or ``12h``; or a timedelta as is."""
    if isinstance(value, timedelta):
        if value <= timedelta(0):
            raise InputError(f"expiry {value} is not positive", hint="e.g. 365d")
        return value
    return parse_duration(
        value,
        option="--expires-in",
        minimum=timedelta(seconds=1),
        whole=True,
        example="e.g. 365d, 26w, 1y",
    )


def _recorded_digest(evidence: Evidence, role: str) -> str | None:
    entry = evidence.artifacts.get(role)
    value = entry.get("sha256") if isinstance(entry, Mapping) else None
    return value if isinstance(value, str) else None


def _deployment_files(
    evidence: Evidence, out_dir: Path, evidence_dir: Path | None = None
) -> dict[str, Path]:
    """The ONNX file and probe bundle the export check wrote (:attr:`Evidence.export`), placed
    next to the certificate (copied there if the check wrote them elsewhere) and checked against
    their recorded digests. Evidence collected on another machine records paths of that
    machine: then the files are looked for by name next to the evidence file
    (``evidence_dir``)."""
    if evidence.export is None:
        return {}
    files: dict[str, Path] = {}
    exported: tuple[ExportedFile, ...] = (evidence.export.onnx, evidence.export.probe_bundle)
    for entry in exported:
        name, source, digest = entry.name, Path(entry.path), entry.sha256
        target = out_dir / name
        if not source.is_file() and evidence_dir is not None:
            source = evidence_dir / name
        if not source.is_file():
            raise InputError(
                f"the exported {name} ({source}) is gone",
                hint="rerun attest certify; for evidence collected elsewhere, copy the exported "
                "files next to the evidence file",
            )
        if source.resolve() != target.resolve():
            atomic_write_bytes(target, source.read_bytes())
        if sha256_file(target) != digest:
            raise InputError(
                f"{target} does not have the digest the export check recorded; rerun attest certify"
            )
        files[name] = target
    return files


def certificate_subjects(
    evidence: Evidence,
    spec: Path | LoadedSpec,
    out_dir: Path,
    training_log: Path | None = None,
    evidence_dir: Path | None = None,
) -> dict[str, str]:
    """``{subject name: sha256}``: the spec, its weights and probe inputs, and (when the spec
    exports) the ONNX file and the probe bundle, written next to the certificate; with a
    ``training_log``, that log too (its digest as the evidence recorded it).

    ``spec`` is the loaded spec the evidence was collected from, or the path of its
    ``attest.yaml`` (then read again, without loading the model). Names are base names (what
    the verifier's ``--artifact`` matches). A file whose digest differs from the one recorded
    in the evidence changed after collection and is refused.
    """
    spec_files = _spec_files(spec)
    chosen: dict[str, Path] = {}
    for role, path in spec_files.items():
        recorded = _recorded_digest(evidence, role)
        if recorded is not None and sha256_file(path) != recorded:
            raise InputError(
                f"{path} changed after its evidence was collected (sha256 differs)",
                hint="rerun attest certify so the evidence and the certificate cover the same file",
            )
        chosen[path.name if path.name not in chosen else f"{role}-{path.name}"] = path
    for name, path in _deployment_files(evidence, out_dir, evidence_dir).items():
        chosen[name if name not in chosen else f"deploy-{name}"] = path
    subjects = subjects_from_paths(chosen)
    record = evidence.training_log
    if training_log is not None and record is not None:
        if sha256_file(training_log) != record.sha256:
            raise InputError(
                f"training log {training_log} changed while certifying (sha256 differs)",
                hint="certify a log the training no longer appends to (a copy, or after training)",
            )
        subjects[record.log] = record.sha256
    return subjects


def _spec_files(spec: Path | LoadedSpec) -> dict[str, Path]:
    """The spec file, its weights and its probe inputs, by role."""
    if isinstance(spec, LoadedSpec):
        return {role: spec.artifacts[role] for role in ("spec", "weights", "probe")}
    parsed = parse_spec_file(spec)
    return {
        "spec": spec,
        "weights": spec.parent / parsed.model.weights,
        "probe": spec.parent / parsed.inputs.probe,
    }


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


def check_settings(policy: Policy) -> Any:
    """The :class:`~attest.collection.context.CheckSettings` a policy asks to collect with."""
    import dataclasses

    from attest.collection.context import CheckSettings

    known = {f.name: f for f in dataclasses.fields(CheckSettings) if f.name != "extra"}
    unknown = sorted(set(policy.settings) - set(known))
    if unknown:
        raise PolicyError(
            f"policy {policy.id}: settings.{unknown[0]} is not a check setting",
            hint="known settings: " + ", ".join(sorted(known)),
        )
    defaults = CheckSettings()
    values: dict[str, Any] = {}
    for name, raw in policy.settings.items():
        default = getattr(defaults, name)
        value: Any = raw
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif isinstance(default, tuple) and isinstance(value, list):
            value = tuple(value)
        wanted = type(default) if default is not None else int
        if not isinstance(value, wanted) or isinstance(value, bool) != isinstance(default, bool):
            raise PolicyError(
                f"policy {policy.id}: settings.{name} is {value!r}, expected a {wanted.__name__}"
            )
        values[name] = value
    return dataclasses.replace(defaults, **values)


def _collect(
    spec: LoadedSpec,
    policy: Policy,
    progress: Progress | None,
    out_dir: Path,
    budget_s: float | None = None,
    started: float | None = None,
) -> Evidence:
    from attest.collection import collect

    # The export check writes model.onnx and probe.npz into out_dir, next to the certificate
    # that binds them (not into a temporary folder left behind).
    return collect(
        spec,
        settings=check_settings(policy),
        progress=progress,
        output_dir=out_dir,
        budget_s=budget_s,
        budget_floors=budget_floors(policy, spec.precision),
        started=started,
    )


def certify(
    spec: str | Path | LoadedSpec,
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
    budget: str | float | None = None,
    training_log: str | Path | None = None,
    signer: SignerIdentity | None = None,
    tsa: str | None = None,
    model_signing: bool = False,
    started: float | None = None,
) -> CertifyResult:
    """Collect, evaluate and, on pass, sign a gradient certificate.

    ``spec`` is the path of ``attest.yaml`` (loaded once, here) or an already loaded spec.
    ``out`` is the certificate path; evidence and findings default to ``evidence.json`` and
    ``findings.json`` next to it. ``report`` (optional) also writes the HTML report where that
    stage is installed. ``at`` fixes the time used for waiver expiry and the certificate's
    ``issued_at`` (default: now). Raises :class:`attest.errors.AttestError` on bad input; a
    failed policy is a result (``passed`` False, no certificate), not an exception.
    ``budget`` (``"30m"`` or seconds; default: the spec's ``budget:``) plans the collect to fit
    that time, counted from ``started`` (a ``time.perf_counter()`` reading; default: when the
    collect starts), never below the policy's evidence floors
    (:mod:`attest.pipeline.budget_floors`; a budget too small for them is an
    :class:`~attest.errors.InputError` at the start). ``training_log``: a ``run.jsonl`` of
    :class:`attest.TrainingMonitor`, bound as a subject, its summary in the evidence and held
    against the policy's ``training_log:`` thresholds. ``signer`` is the identity and meaning the
    signature states (default: the account name, release-engineer, authorship); ``tsa`` an
    RFC 3161 timestamp authority URL whose token is embedded with the signature.
    """
    out_path, evidence_path, findings_path = _output_paths(out, evidence_out, findings_out)
    budget_s = parse_budget(budget)
    lifetime, loaded_policy, signing_key, report_writer = _inputs(
        expires_in, policy, key, report, model_signing
    )
    log_path = Path(training_log) if training_log is not None else None
    log_record = training_log_record(log_path) if log_path is not None else None  # fail early

    say = progress or (lambda _message: None)
    say(f"collecting evidence for {spec.path if isinstance(spec, LoadedSpec) else spec}")
    loaded_spec = spec if isinstance(spec, LoadedSpec) else load_spec(spec)
    evidence = _collect(loaded_spec, loaded_policy, progress, out_path.parent, budget_s, started)
    if log_path is not None and log_record is not None:
        taken = {p.name for p in _spec_files(loaded_spec).values()}
        if log_record.log in taken:
            log_record = log_record.model_copy(update={"log": f"training-log-{log_record.log}"})
        evidence = evidence.model_copy(update={"training_log": log_record})
    atomic_write_text(evidence_path, dumps_pretty(evidence.model_dump(mode="json")))
    say(f"evaluating against policy {loaded_policy.id} {loaded_policy.version}")
    findings = evaluate(evidence, loaded_policy, at=at)
    atomic_write_text(findings_path, dumps_pretty(findings.model_dump(mode="json")))

    return _sign_and_report(
        evidence,
        findings,
        subjects=lambda: release_subjects(
            evidence, loaded_spec, out_path.parent, signing_key, model_signing, log_path
        ),
        paths=(out_path, evidence_path, findings_path),
        key=signing_key,
        lifetime=lifetime,
        at=at,
        report=report,
        report_writer=report_writer,
        say=say,
        signer=signer,
        tsa=tsa,
    )


def _inputs(
    expires_in: str | timedelta,
    policy: str | Path | Policy,
    key: str | Path | PrivateKey,
    report: str | Path | None,
    model_signing: bool,
) -> tuple[timedelta, Policy, PrivateKey, Callable[..., Any] | None]:
    """The lifetime, policy, key and report writer, each checked before any work."""
    lifetime = parse_expiry(expires_in)
    loaded_policy = policy if isinstance(policy, Policy) else load_policy(policy)
    signing_key = key if isinstance(key, PrivateKey) else load_private_key(key)
    if model_signing:
        openssf_model_signing.require_model_signing_key(signing_key)
    report_writer = _report_writer() if report is not None else None
    return lifetime, loaded_policy, signing_key, report_writer


def _output_paths(
    out: str | Path, evidence_out: str | Path | None, findings_out: str | Path | None
) -> tuple[Path, Path, Path]:
    out_path = Path(out)
    evidence_path = Path(evidence_out) if evidence_out else out_path.with_name("evidence.json")
    findings_path = Path(findings_out) if findings_out else out_path.with_name("findings.json")
    clash = {out_path.resolve(), evidence_path.resolve(), findings_path.resolve()}
    if len(clash) != 3:
        raise InputError(
            "the certificate, evidence and findings outputs must be three different files"
        )
    return out_path, evidence_path, findings_path


def _sign_and_report(
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
) -> CertifyResult:
    """On pass, build the statement over ``subjects()`` and sign it (with the signer's stated
    identity and meaning, and a timestamp from ``tsa``); then the report; the result either
    way."""
    out_path, evidence_path, findings_path = paths
    statement: Statement | None = None
    certificate_path: Path | None = None
    if findings.passed:
        require_measured(evidence)  # under any policy: nothing measured is not a certificate
        say("signing the certificate")
        statement = build_statement(
            subjects=subjects(),
            model={
                "name": str(evidence.model.get("name")),
                "version": str(evidence.model.get("version")),
            },
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


def release_subjects(
    evidence: Evidence,
    spec: Path | LoadedSpec,
    out_dir: Path,
    key: PrivateKey,
    model_signing: bool,
    training_log: Path | None = None,
    evidence_dir: Path | None = None,
) -> dict[str, str]:
    """:func:`certificate_subjects`, and the spec folder's OpenSSF ``model.sig`` if asked."""
    found = certificate_subjects(evidence, spec, out_dir, training_log, evidence_dir)
    if model_signing:
        name = openssf_model_signing.SIGNATURE_NAME
        if name in found:
            raise InputError(f"a subject is already named {name}; rename that file")
        folder = spec.artifacts["spec"].parent if isinstance(spec, LoadedSpec) else spec.parent
        found[name] = sha256_file(openssf_model_signing.sign_model_directory(folder, key))
    return found


def _finding_json(finding: Finding) -> dict[str, Any]:
    # ``target`` only over several targets: a single-target certificate's findings keep the
    # keys they always had.
    return finding.model_dump(mode="json", exclude={"target"} if finding.target is None else None)


def _report_writer() -> Callable[..., Any]:
    """The report stage's writer, looked up before collecting so a missing stage fails early."""
    try:
        module = importlib.import_module("attest.report")
        writer = module.write_report
    except (ModuleNotFoundError, AttributeError):
        raise InputError(
            "--report: this installation has no report writer (attest.report.write_report)",
            hint="run without --report",
        ) from None
    return writer  # type: ignore[no-any-return]
