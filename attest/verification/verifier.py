"""The deployment-side verifier: offline, fail-closed, and free of torch and numpy.

:func:`verify` checks a certificate in exactly this order (docs/threat-model.md):

1. size limit (16 MiB) and strict JSON (duplicate keys, NaN/Infinity, depth, non-UTF-8);
2. envelope shape (``payload``, ``payloadType``, ``signatures``; canonical base64);
3. signatures against the trust store over ``PAE(payloadType, payload)``: the key id in the
   envelope is only a hint, each trusted key counts once toward the threshold, revoked keys and
   keys outside their validity window do not count;
4. only then the payload: ``payloadType``, strict JSON, ``_type``, ``predicateType``, the
   statement schema (shipped inside the package, checked by code generated from it);
5. validity window at one reference time (``at``, default now) with a small clock skew;
6. each artifact given matches a subject by name and sha256 (directories: exactly the
   subjects recorded under them); an ONNX model's external data files must be subjects too
   (:mod:`attest.verification.artifact_check`);
7. the verdict, and whether the policy it was certified under is one this server accepts
   (``accepted_policies``, the trust store's ``accepted_policies:``;
   :mod:`attest.verification.policy_accept`);
8. rollback: the highest version verified per model name, kept in a state file;
9. with ``probe``: the behavioural probe (:mod:`attest.verification.probe`, imported only then),
   on the bytes hashed in step 6, never on whatever the paths hold by then;
10. with ``check_environment``: the local runtime against the deployment envelope;

and, given revocation statements, whether one withdraws this certificate (CERTIFICATE_REVOKED,
:mod:`attest.verification.revocations`). Step 3 (:mod:`attest.verification.signatures`) also
checks each signature's signer attestation, RFC 3161 token and the trust store's role
requirements.

Steps 1-4 are gates: a failure stops there and nothing after it is looked at. Steps 5-10
report every problem they find. A rejection is a :class:`VerificationReport` with
``verified=False`` and ``(code, message)`` reasons; only problems with the caller's own inputs
(an unreadable certificate or trust store, no artifacts) raise :class:`AttestError`.
Nothing is recorded (the rollback state) before the verdict is final.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attest.certificate.artifacts import ArtifactSpec, artifact_name_and_path
from attest.certificate.format import PAYLOAD_TYPE, PREDICATE_TYPE, STATEMENT_TYPE
from attest.core.io import StrictJSONError, loads_strict
from attest.core.text import safe_text
from attest.core.times import bounded_time, format_timestamp, parse_timestamp
from attest.errors import AttestError, InputError
from attest.verification.artifact_check import (
    ArtifactMatch,
    is_onnx,
    match_artifacts,
    read_external_data,
)
from attest.verification.envelope import Envelope, Rejected, parse_envelope, read_certificate
from attest.verification.outcome import REASON_CODES, VerificationReport
from attest.verification.policy_accept import AcceptedPolicy, policy_refusal, verdict_counts
from attest.verification.rollback import is_rollback, record_verified
from attest.verification.signatures import check_signatures
from attest.verification.trust import TrustStore, load_trust_store

if TYPE_CHECKING:  # imported when a certificate binds a folder, not at every start
    from attest.certificate.folder_manifest import FolderManifest

__all__ = [
    "DEFAULT_CLOCK_SKEW",
    "REASON_CODES",
    "ArtifactSpec",
    "VerificationReport",
    "record_rollback",
    "verify",
]

DEFAULT_CLOCK_SKEW = timedelta(seconds=60)
MAX_CLOCK_SKEW = timedelta(days=1)

# Extension points, imported lazily and only when asked for (they need numpy/onnxruntime):
#   attest.verification.probe.run_probe(onnx_bytes, probe_bytes, *, certified_env, onnx_sha256,
#       external_data: {location: bytes}) -> object with .passed: bool, .message: str (and optionally .to_dict())
#   attest.deployment.environment.match_deployment(deployment) -> object with .target (the
#       matched target's name or None), .refusal (why none matched), .differences (objects
#       with .message and .to_dict())
# A missing extension fails closed (PROBE_MISMATCH / ENVIRONMENT_MISMATCH), never passes.
PROBE_MODULE = "attest.verification.probe"
ENVIRONMENT_MODULE = "attest.deployment.environment"


# ---------------------------------------------------------------------------- step 4


def _schema_problem(statement: dict[str, Any]) -> str | None:
    """Why ``statement`` fails statement.schema.json (None if it does not).

    The schema is checked by code generated from it at build time (:mod:`attest.certificate.schemas`,
    fastjsonschema), so that verifying never imports the jsonschema stack; tests hold that code
    against jsonschema. It stops at the first violation.
    """
    try:
        from fastjsonschema import JsonSchemaValueException

        from attest.certificate import statement_validator as _statement_validator
    except ImportError as exc:
        raise AttestError(
            f"this installation cannot validate statements ({exc}); cannot verify",
            hint="reinstall gradient-attest (it needs fastjsonschema)",
        ) from None
    validate: Callable[[Any], object] = _statement_validator.validate
    try:
        validate(statement)
    except JsonSchemaValueException as error:
        name = error.name or "data"
        where = "/".join(error.path[1:]) or "<root>"  # path[0] is "data", the statement itself
        what = error.message.removeprefix(name).strip()[:300]
        if error.rule == "pattern":  # the regex itself helps nobody
            what = f"{str(error.value)[:100]!r} is not of the required form"
        return f"the statement breaks its schema at {where}: {what}"
    except Exception as exc:  # fail closed: a validator that broke did not accept
        return (
            f"the statement could not be checked against its schema ({type(exc).__name__}: {exc})"
        )
    return None


def _collector_signed(envelope: Envelope, everyone: TrustStore, store: TrustStore) -> list[str]:
    """Notes naming a key that signed but holds only evidence roles (it cannot count)."""
    from attest.certificate.signing import pae, verify_signature

    message = pae(envelope.payload_type, envelope.payload)
    left_out = [k for k in everyone.keys if store.key(k.keyid) is None]
    return [
        f"signature {i} is by {key.label()}, which the trust store gives only the "
        f"{', '.join(key.roles)} role: a collector signs evidence, never a certificate"
        for i, sig in enumerate(envelope.signatures)
        for key in left_out
        if verify_signature(key.public_key, sig.sig, message)
    ]


def _check_payload(env: Envelope) -> dict[str, Any]:
    if env.payload_type != PAYLOAD_TYPE:
        raise Rejected(
            "MALFORMED",
            f"payloadType is {safe_text(env.payload_type, 100)!r}, expected {PAYLOAD_TYPE!r}",
        )
    try:
        statement = loads_strict(env.payload)
    except StrictJSONError as exc:
        raise Rejected("MALFORMED", f"the signed payload is not strict JSON: {exc}") from None
    if not isinstance(statement, dict):
        raise Rejected("MALFORMED", "the signed payload is not a JSON object")
    if statement.get("_type") != STATEMENT_TYPE:
        raise Rejected(
            "MALFORMED",
            f"_type is {safe_text(statement.get('_type'), 100)!r}, expected {STATEMENT_TYPE!r}",
        )
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise Rejected(
            "MALFORMED",
            f"predicateType is {safe_text(statement.get('predicateType'), 100)!r}, expected {PREDICATE_TYPE!r}",
        )
    problem = _schema_problem(statement)
    if problem is not None:
        raise Rejected("MALFORMED", problem)
    # What the schema cannot say (the pydantic model's validators say the same):
    names = [s["name"] for s in statement["subject"]]
    if len(set(names)) != len(names):
        raise Rejected("MALFORMED", "the statement names a subject twice")
    folder_manifests(statement)  # Rejected when a folder manifest does not hold
    predicate = statement["predicate"]
    try:
        issued = parse_timestamp(predicate["issued_at"])
        expires = parse_timestamp(predicate["expires_at"])
    except ValueError as exc:
        raise Rejected("MALFORMED", f"the statement has an invalid timestamp: {exc}") from None
    if expires <= issued:
        raise Rejected("MALFORMED", "the statement expires before it is issued")
    return statement


def folder_manifests(statement: dict[str, Any]) -> dict[str, FolderManifest]:
    """The statement's folder manifests (``predicate.folders``), each read and held against
    its subject's digest; a manifest that does not hold rejects the statement (MALFORMED)."""
    folders = statement["predicate"].get("folders", {})
    if not folders:
        return {}
    from attest.certificate.folder_manifest import parse_binding

    digests = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    out: dict[str, FolderManifest] = {}
    for name, binding in folders.items():
        if name not in digests:
            raise Rejected("MALFORMED", f"folder {safe_text(name, 200)!r} is not a subject")
        try:
            out[name] = parse_binding(name, binding, digests[name])
        except ValueError as exc:
            raise Rejected(
                "MALFORMED", f"the manifest of folder {safe_text(name, 200)!r} is invalid: {exc}"
            ) from None
    return out


# ---------------------------------------------------------------------------- steps 9 and 10


def _extension(module_name: str) -> Any | None:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            return None  # this installation does not have it
        raise


def _run_probe(
    probe_name: str,
    found: ArtifactMatch,
    subjects: dict[str, str],
    predicate: dict[str, Any],
    report: VerificationReport,
) -> tuple[str, str] | None:
    """Run the certified ONNX model on the certified probe bundle, both as the bytes hashed in
    step 6 (never re-read from their paths); external data likewise (re-read once and held
    against the certificate again)."""
    module = _extension(PROBE_MODULE)
    if module is None:
        return (
            "PROBE_MISMATCH",
            f"this installation has no behavioural probe ({PROBE_MODULE}); --probe cannot pass",
        )
    models = sorted(n for n in found.checked if is_onnx(n))
    if len(models) != 1:
        return (
            "ARTIFACT_MISSING",
            "--probe needs exactly one certified ONNX file among the artifacts "
            f"(got {len(models)}); pass it with --artifact",
        )
    model = models[0]
    external, problem = read_external_data(found, model, subjects)
    if problem is not None:
        return problem
    try:
        outcome = module.run_probe(
            found.contents[model],
            found.contents[probe_name],
            certified_env=dict(predicate["deployment"].get("runtime", {})),
            onnx_sha256=subjects.get(model),  # the bytes above matched it in step 6
            external_data=external,
        )
    except AttestError as exc:
        return ("PROBE_MISMATCH", f"the probe could not run: {exc.message}")
    except Exception as exc:  # fail closed: a probe that crashed did not pass
        return ("PROBE_MISMATCH", f"the probe failed: {type(exc).__name__}: {exc}")
    if hasattr(outcome, "to_dict"):
        report.probe = outcome.to_dict()
    return None if outcome.passed is True else ("PROBE_MISMATCH", str(outcome.message))


def _compare_environment(
    deployment: dict[str, Any], report: VerificationReport
) -> list[tuple[str, str]]:
    module = _extension(ENVIRONMENT_MODULE)
    if module is None:
        return [
            (
                "ENVIRONMENT_MISMATCH",
                f"this installation cannot check the environment ({ENVIRONMENT_MODULE} is missing)",
            )
        ]
    try:
        match = module.match_deployment(deployment)
    except Exception as exc:  # fail closed
        return [
            ("ENVIRONMENT_MISMATCH", f"the environment check failed: {type(exc).__name__}: {exc}")
        ]
    report.environment_target = match.target
    report.environment_differences = [d.to_dict() for d in match.differences]
    if match.target is None:
        return [("ENVIRONMENT_MISMATCH", str(match.refusal))]
    report.notes += [f"environment: {d.message}" for d in match.differences]
    return []


def _after_gates(
    statement: dict[str, Any],
    report: VerificationReport,
    revoked: list[tuple[str, str]],
    *,
    specs: list[tuple[str, Path]],
    probe: str | Path | None,
    now: datetime,
    clock_skew: timedelta,
    state_file: str | Path | None,
    check_environment: bool,
    accepted: list[tuple[str, Sequence[AcceptedPolicy]]],
) -> list[tuple[str, str]]:
    """Steps 5-10 on a statement that passed the gates: every problem found, as reasons
    (validity, artifacts, verdict, rollback, probe, environment); fills ``report`` as it goes."""
    predicate = statement["predicate"]
    model = {"name": predicate["model"]["name"], "version": predicate["model"]["version"]}
    report.model = model
    report.certificate_id = predicate["certificate_id"]
    report.certificate_subjects = statement["subject"]
    report.policy = predicate["policy"]
    report.verdict_counts = verdict_counts(predicate)
    report.evidence_provenance = predicate.get("evidence_provenance") or {}
    reasons: list[tuple[str, str]] = list(revoked)  # CERTIFICATE_REVOKED, found by the caller
    # 5. validity window
    if parse_timestamp(predicate["issued_at"]) > now + clock_skew:
        reasons.append(
            ("NOT_YET_VALID", f"issued at {predicate['issued_at']}, after {format_timestamp(now)}")
        )
    if parse_timestamp(predicate["expires_at"]) <= now - clock_skew:
        reasons.append(
            ("EXPIRED", f"expired at {predicate['expires_at']}, before {format_timestamp(now)}")
        )
    # 6. artifacts (the probe bundle's bytes are kept: the probe reads those, not the path)
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    probe_name = artifact_name_and_path(probe)[0] if probe is not None else None
    keep = frozenset() if probe_name is None else frozenset({probe_name})
    found = match_artifacts(specs, subjects, keep=keep, folders=folder_manifests(statement))
    reasons += found.problems
    report.subjects_checked = sorted(set(found.checked) - set(found.members))
    for manifest, _root, rel in found.members.values():
        report.folder_files.setdefault(manifest.name, []).append(rel)
    report.subjects_not_checked = sorted(set(subjects) - set(found.checked))
    # 7. verdict
    if predicate["verdict"] != "pass":
        reasons.append(
            ("POLICY_FAILED", f"the certificate's verdict is {safe_text(predicate['verdict'])!r}")
        )
    refusal = policy_refusal(predicate["policy"], accepted)
    if refusal is not None:
        reasons.append(("POLICY_NOT_ACCEPTED", refusal))
    # 8. rollback
    if state_file is not None:
        higher = is_rollback(state_file, model["name"], model["version"])
        if higher is not None:
            reasons.append(
                (
                    "ROLLBACK",
                    f"{model['name']} {model['version']} is lower than version "
                    f"{higher}, already verified here (state file {state_file})",
                )
            )
    else:
        report.notes.append("rollback not checked (no state file)")
    # 9. behavioural probe: runs the model, so only once everything above holds
    if probe_name is not None:
        if reasons:
            report.notes.append("probe not run: the certificate is already rejected")
        elif probe_name not in found.contents:
            reasons.append(("ARTIFACT_MISSING", f"--probe {probe_name} is not a certified file"))
        else:
            problem = _run_probe(probe_name, found, subjects, predicate, report)
            if problem is not None:
                reasons.append(problem)
    # 10. environment
    if check_environment:
        reasons += _compare_environment(predicate["deployment"], report)
    return reasons


# ---------------------------------------------------------------------------- verify


def verify(
    cert_path: str | Path,
    *,
    trust: TrustStore | str | Path,
    artifacts: list[ArtifactSpec] | tuple[ArtifactSpec, ...],
    at: datetime | None = None,
    clock_skew: timedelta = DEFAULT_CLOCK_SKEW,
    state_file: str | Path | None = None,
    probe: str | Path | None = None,
    check_environment: bool = False,
    require_artifacts: bool = True,
    record_state: bool = True,
    revocations: list[tuple[str, bytes]] | tuple[tuple[str, bytes], ...] = (),
    accepted_policies: Sequence[AcceptedPolicy] = (),
) -> VerificationReport:
    """Verify ``cert_path`` offline against ``trust`` and the ``artifacts`` at hand.

    ``artifacts`` are paths (named by their file name) or ``NAME=PATH`` strings or
    ``(name, path)`` pairs; at least one. ``at`` verifies as of a past time (audits);
    ``state_file`` turns on rollback protection (updated only on success, and not when ``at``
    is given); ``probe`` runs the behavioural probe on the certified ONNX artifact;
    ``check_environment`` compares this machine with the deployment envelope.
    ``require_artifacts=False`` (library only, for displaying a certificate's status in a
    report) allows no artifact at all: such a report vouches for the signatures, payload,
    validity, verdict and rollback only, and its ``subjects_checked`` is empty. The command
    line always requires ``--artifact``. ``record_state=False`` leaves the rollback state
    untouched even on success: the caller records it with :func:`record_rollback` once it has
    done what must come first (the command line renders its output first, so that nothing is
    recorded for a verdict that could not be shown). ``revocations`` are ``(source, bytes)``
    revocation envelopes (:mod:`attest.verification.revocations`): one that applies rejects
    the certificate with CERTIFICATE_REVOKED. ``accepted_policies`` (``--require-policy``) and
    the trust store's ``accepted_policies`` each, when given, must admit the certificate's
    policy, else POLICY_NOT_ACCEPTED.

    Returns a report; raises :class:`AttestError` only for unusable inputs of the caller.
    """
    path = Path(cert_path)
    live = at is None
    now = datetime.now(timezone.utc) if at is None else at
    try:
        now = bounded_time(now)
    except ValueError as exc:
        raise InputError(
            f"the verification time is unusable: {exc}", hint="e.g. 2026-01-31T12:00:00Z"
        ) from None
    if not timedelta(0) <= clock_skew <= MAX_CLOCK_SKEW:
        raise InputError(f"clock skew {clock_skew} is outside 0..{MAX_CLOCK_SKEW}")
    specs = [artifact_name_and_path(a) for a in artifacts]
    if probe is not None:
        specs.append(artifact_name_and_path(probe))
    if not specs and require_artifacts:  # False: signature/validity only (attest report)
        raise InputError("no artifact given", hint="pass the file(s) to check with --artifact PATH")
    everyone = trust if isinstance(trust, TrustStore) else load_trust_store(trust)
    store = everyone.certificate_signers()  # collector keys sign evidence, not certificates
    report = VerificationReport(
        verified=False, reasons=[], checked_at=now, certificate_path=str(path)
    )
    try:
        data = read_certificate(path)
        report.certificate_sha256 = hashlib.sha256(data).hexdigest()
        envelope = parse_envelope(data)
        check = check_signatures(envelope, store, now, clock_skew)
        report.notes += check.notes
        report.signatures = [s.to_dict() for s in check.signatures]
        if check.problems:
            report.reasons = check.problems
            report.notes += _collector_signed(envelope, everyone, store)
            return report
        report.signers = [{"keyid": k.keyid, "name": k.name} for k in check.counted]
        statement = _check_payload(envelope)
    except Rejected as rejected:
        report.reasons = [(rejected.code, rejected.message)]
        return report
    revoked: list[tuple[str, str]] = []
    if revocations:  # before the probe, which runs only on a certificate not yet rejected
        from attest.verification.revocations import check_revocations

        revoked = check_revocations(
            envelope.payload, list(revocations), store, now, clock_skew, report.notes
        )
    reasons = _after_gates(
        statement,
        report,
        revoked,
        specs=specs,
        probe=probe,
        now=now,
        clock_skew=clock_skew,
        state_file=state_file,
        check_environment=check_environment,
        accepted=[
            ("--require-policy", accepted_policies),
            (f"the trust store {store.source}", store.accepted_policies or ()),
        ],
    )
    report.reasons = reasons
    report.verified = not reasons
    if report.verified:
        report.statement = statement
        if state_file is not None and live and record_state:
            record_rollback(report, state_file)
    return report


def record_rollback(report: VerificationReport, state_file: str | Path) -> None:
    """Raise the rollback state to the version of a verified report (a no-op for a rejected
    one). :func:`verify` calls it itself unless asked not to (``record_state=False``)."""
    if not report.verified or report.model is None or report.certificate_id is None:
        return
    record_verified(
        state_file,
        report.model["name"],
        report.model["version"],
        report.certificate_id,
        report.checked_at,
    )
