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

import dataclasses
import importlib
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from attest.certificate import model_signing as openssf_model_signing
from attest.certificate.signers import SignerIdentity
from attest.certificate.signing import PrivateKey, load_private_key
from attest.core.io import atomic_write_text, dumps_pretty, sha256_file
from attest.core.times import parse_duration
from attest.errors import InputError, PolicyError
from attest.evidence.model import Evidence
from attest.pipeline.budget_floors import budget_floors
from attest.pipeline.provenance import local_provenance
from attest.pipeline.signing import CertifyResult, Progress, sign_and_report
from attest.pipeline.subjects import (
    ExtraArtifacts,
    _spec_files,
    certificate_subjects,
    release_subjects,
)
from attest.pipeline.training_log import training_log_record
from attest.policy.engine import evaluate
from attest.policy.model import Policy, load_policy
from attest.policy.targets import target_name
from attest.spec import LoadedSpec, load_spec
from attest.spec.model import parse_budget
from attest.spec.source import refuse_inside

__all__ = [
    "CertifyResult",
    "ExtraArtifacts",
    "Progress",
    "certificate_subjects",
    "certify",
    "check_settings",
    "parse_expiry",
    "training_log_record",
]


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
    spec_file: str | Path | None = None,
    artifacts: ExtraArtifacts | None = None,
    started: float | None = None,
) -> CertifyResult:
    """Collect, evaluate and, on pass, sign a gradient certificate.

    ``spec`` is the path of ``attest.yaml`` (loaded once, here), a MONAI bundle folder (with
    ``spec_file``, its attest.yaml: default the one beside it) or an already loaded spec. A
    bundle or Hugging Face folder is bound whole through its manifest, as one subject named
    as the folder (collection records the manifest; signing hashes it again and refuses a
    changed folder), and no output may be written inside it.
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
    ``artifacts`` are bound too (``--artifact``: a folder through its manifest; its
    ``ignore`` list is left out of the model folder as well).
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
    loaded_spec = spec if isinstance(spec, LoadedSpec) else load_spec(spec, spec=spec_file)
    outputs = {"certificate": out_path, "evidence": evidence_path, "findings": findings_path}
    refuse_inside(loaded_spec.folder, {**outputs, "report": Path(report) if report else None})
    if model_signing and loaded_spec.folder is not None:
        raise InputError(
            "--model-signing writes model.sig into the spec's folder; a MONAI bundle or "
            "Hugging Face folder is bound through a model-signing manifest by the certificate "
            "instead",
            hint="certify without --model-signing",
        )
    extra = artifacts or ExtraArtifacts()
    if extra.ignore and loaded_spec.folder is None and not any(p.is_dir() for _, p in extra.items):
        raise InputError(
            "--ignore leaves paths out of a folder; give the folder with --artifact, or certify "
            "a MONAI bundle or Hugging Face folder"
        )
    if loaded_spec.folder is not None:  # its manifest leaves out what the certificate's will
        ignore = extra.model_folder_ignore(out_path)
        folder = dataclasses.replace(loaded_spec.folder, ignore=ignore)
        loaded_spec = dataclasses.replace(loaded_spec, folder=folder)
    collect_started = datetime.now(timezone.utc)
    evidence = _collect(loaded_spec, loaded_policy, progress, out_path.parent, budget_s, started)
    collect_finished = datetime.now(timezone.utc)
    if loaded_spec.folder is not None:
        extra = extra.with_model_folder(loaded_spec.folder, evidence)
    if log_path is not None and log_record is not None:
        taken = {p.name for p in _spec_files(loaded_spec).values()}
        if log_record.log in taken:
            log_record = log_record.model_copy(update={"log": f"training-log-{log_record.log}"})
        evidence = evidence.model_copy(update={"training_log": log_record})
    atomic_write_text(evidence_path, dumps_pretty(evidence.model_dump(mode="json")))
    say(f"evaluating against policy {loaded_policy.id} {loaded_policy.version}")
    findings = evaluate(evidence, loaded_policy, at=at)
    atomic_write_text(findings_path, dumps_pretty(findings.model_dump(mode="json")))
    collected = local_provenance(sha256_file(evidence_path), collect_started, collect_finished)

    return sign_and_report(
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
        provenance={target_name(evidence): collected},
        artifacts=extra,
        model_signing=model_signing,
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
