"""Read what a report, diff or metrics export is made from, into one plain shape.

A report can start from a signed certificate (a DSSE envelope around an in-toto Statement),
a bare Statement, or an evidence file (with an optional findings file). Each is normalised
into a :class:`ReportSource`; a section that the input lacks is simply empty, so the report
says "not available in this evidence" instead of failing.

Nothing here trusts a certificate: :func:`verify_source` asks :mod:`attest.verification.verifier` (the one
verifier) and records which numbers are covered by a checked signature.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from attest.certificate.bundle import BundleError, envelope_of
from attest.certificate.signing import b64decode_strict
from attest.core.io import StrictJSONError, loads_strict, read_json_file, sha256_bytes, sha256_file
from attest.errors import AttestError, EvidenceError, InputError
from attest.evidence.model import CheckResult, Evidence

__all__ = [
    "ReportSource",
    "Verification",
    "load_findings",
    "load_source",
    "verify_source",
]

# Evidence of a model with many thousands of operators is larger than the verifier's 16 MiB
# certificate limit; the report reads it (the verifier still applies its own limit with --trust).
MAX_INPUT_BYTES = 256 * 1024 * 1024

SourceKind = Literal["certificate", "statement", "evidence"]
VerificationStatus = Literal["verified", "signature_valid", "failed", "not_checked", "unsigned"]

# Reason codes of the verifier that mean the signature itself cannot be relied on.
# Any other rejection (expired, subject mismatch...) leaves the signed bytes authentic.
_SIGNATURE_REASONS = frozenset(
    {
        "MALFORMED",
        "SIGNATURE_INVALID",
        "UNTRUSTED_KEY",
        "KEY_REVOKED",
        "SIGNATURES_INSUFFICIENT",
        "TIMESTAMP_INVALID",
    }
)

# Findings verdicts, worst first: the report lists findings in this order.
VERDICT_ORDER: dict[str, int] = {
    "fail": 0,
    "failed": 0,
    "error": 0,
    "waived": 1,
    "warn": 2,
    "warning": 2,
    "not_computed": 3,
    "pass": 4,
    "passed": 4,
}


@dataclass
class Verification:
    """What the report could establish about the signature of its input."""

    status: VerificationStatus
    detail: str
    trust_path: str | None = None
    reasons: list[tuple[str, str]] = field(default_factory=list)
    signatures: list[dict[str, Any]] = field(default_factory=list)  # as the verifier judged them

    @property
    def signature_ok(self) -> bool:
        """True when the signed statement's bytes are authentic under the trust store."""
        return self.status in ("verified", "signature_valid")


@dataclass
class ReportSource:
    """One certificate or evidence file, normalised. Missing sections are empty, never absent."""

    path: Path
    kind: SourceKind
    file_sha256: str
    model: dict[str, Any] = field(default_factory=dict)
    subjects: list[dict[str, Any]] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    deployment: dict[str, Any] = field(default_factory=dict)
    model_metrics: dict[str, Any] = field(default_factory=dict)
    operators: list[dict[str, Any]] = field(default_factory=list)
    modules: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, CheckResult] = field(default_factory=dict)
    unreadable_checks: dict[str, str] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    findings_source: str | None = None
    waivers: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    verdict: str | None = None
    policy: dict[str, Any] | None = None
    certificate_id: str | None = None
    issued_at: str | None = None
    expires_at: str | None = None
    created_at: str | None = None
    tool_version: str | None = None
    signatures: list[dict[str, Any]] = field(default_factory=list)
    payload_sha256: str | None = None
    attributions: dict[str, Any] | None = None
    attributions_source: str | None = None
    model_failure: dict[str, Any] | None = None
    compile_note: str | None = None  # evidence.compile's note: the model runs torch.compile'd
    targets: list[str] = field(default_factory=list)
    evidence_digest: str | None = None
    # predicate.evidence_provenance: each target's collector, host, time (None: not recorded)
    evidence_provenance: dict[str, Any] | None = None
    evidence_path: str | None = None  # --evidence given with a certificate
    training_log: dict[str, Any] | None = None  # the evidence's training log record
    notes: list[str] = field(default_factory=list)

    @property
    def signed(self) -> bool:
        return self.kind == "certificate"

    @property
    def model_label(self) -> str:
        name = str(self.model.get("name") or "unnamed model")
        version = self.model.get("version")
        return f"{name} {version}" if version else name


def _first(mapping: dict[str, Any], *keys: str) -> Any:
    """The value of the first key present (not None) in ``mapping``: tolerant field lookup."""
    for key in keys:
        value = mapping.get(key)
        if value is not None:
            return value
    return None


def _as_dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _as_list_of_dicts(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [dict(v) for v in value if isinstance(v, dict)]


def _parse_checks(raw: Any, source: ReportSource) -> None:
    """Checks as ``{id: CheckResult}``; accepts a dict keyed by id or a list of results."""
    entries: list[tuple[str, Any]] = []
    if isinstance(raw, dict):
        entries = [(str(k), v) for k, v in raw.items()]
    elif isinstance(raw, list):
        entries = [
            (str(v.get("check", f"#{i}")), v) for i, v in enumerate(raw) if isinstance(v, dict)
        ]
    for check_id, value in entries:
        if isinstance(value, CheckResult):
            source.checks[check_id] = value
            continue
        try:
            source.checks[check_id] = CheckResult.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {"msg": str(exc), "loc": ()}
            where = ".".join(str(p) for p in first.get("loc", ()))
            source.unreadable_checks[check_id] = f"{first.get('msg')} at {where or 'top level'}"


def _from_evidence(path: Path, digest: str, evidence: Evidence) -> ReportSource:
    src = ReportSource(path=path, kind="evidence", file_sha256=digest)
    src.model = dict(evidence.model)
    src.subjects = [
        {
            "name": role,
            "digest": {"sha256": info.get("sha256")},
            **{k: v for k, v in info.items() if k != "sha256"},
        }
        for role, info in evidence.artifacts.items()
        if isinstance(info, dict)
    ]
    src.environment = dict(evidence.environment)
    src.model_metrics = dict(evidence.model_metrics)
    src.operators = [dict(r) for r in evidence.operators]
    src.modules = [dict(r) for r in evidence.modules]
    src.checks = dict(evidence.checks)
    src.annotations = [dict(a) for a in evidence.annotations]
    src.created_at = evidence.created_at
    src.tool_version = evidence.tool_version
    src.targets = list(evidence.targets)
    if evidence.model_failure is not None:
        src.model_failure = evidence.model_failure.model_dump()
    if evidence.compile is not None:
        src.compile_note = evidence.compile.note
    if evidence.attributions:
        src.attributions = dict(evidence.attributions)
        src.attributions_source = str(path)
    if evidence.training_log is not None:
        src.training_log = evidence.training_log.model_dump(mode="json")
    return src


def _from_statement(
    path: Path, digest: str, statement: dict[str, Any], kind: SourceKind
) -> ReportSource:
    src = ReportSource(path=path, kind=kind, file_sha256=digest)
    predicate = _as_dict(statement.get("predicate"))
    if not predicate:
        src.notes.append("the statement has no predicate")
    src.subjects = _as_list_of_dicts(statement.get("subject"))
    model = _as_dict(predicate.get("model"))
    for key in ("name", "version"):
        if key not in model and predicate.get(key) is not None:
            model[key] = predicate[key]
    src.model = model
    validity = _as_dict(predicate.get("validity"))
    src.certificate_id = _first(predicate, "certificate_id", "id")
    src.issued_at = _first(predicate, "issued_at") or _first(validity, "not_before", "issued_at")
    src.expires_at = _first(predicate, "expires_at") or _first(validity, "not_after", "expires_at")
    tool = predicate.get("tool")
    src.tool_version = (
        _first(_as_dict(tool), "version")
        if isinstance(tool, dict)
        else _first(predicate, "tool_version")
    )
    src.environment = _as_dict(_first(predicate, "environment", "determinism_envelope"))
    src.deployment = _as_dict(_first(predicate, "deployment", "deployment_envelope"))
    src.model_metrics = _as_dict(predicate.get("model_metrics"))
    src.operators = _as_list_of_dicts(predicate.get("operators"))
    src.modules = _as_list_of_dicts(predicate.get("modules"))
    _parse_checks(predicate.get("checks"), src)
    src.findings = _as_list_of_dicts(predicate.get("findings"))
    src.findings_source = "certificate" if "findings" in predicate else None
    src.waivers = _as_list_of_dicts(predicate.get("waivers"))
    src.annotations = _as_list_of_dicts(predicate.get("annotations"))
    verdict = predicate.get("verdict")
    src.verdict = str(verdict.get("result", verdict)) if isinstance(verdict, dict) else verdict
    policy = predicate.get("policy")
    src.policy = dict(policy) if isinstance(policy, dict) else None
    src.created_at = src.issued_at
    src.evidence_digest = _as_dict(predicate.get("evidence_digest")).get("sha256")
    if "evidence_provenance" in predicate:
        src.evidence_provenance = _as_dict(predicate.get("evidence_provenance"))
    src.targets = [str(t) for t in _as_dict(src.deployment).get("targets", []) if t]
    return src


def _classify(doc: Any, path: Path) -> SourceKind:
    if isinstance(doc, dict):
        if {"payload", "payloadType", "signatures"} <= doc.keys():
            return "certificate"
        if "_type" in doc and "predicate" in doc:
            return "statement"
        if "tool_version" in doc and ("checks" in doc or "operators" in doc):
            return "evidence"
    raise InputError(
        f"{path} is neither a certificate (DSSE envelope), an in-toto statement nor an evidence file",
        hint="pass gradient_certificate.json or the evidence.json written by attest collect",
    )


def load_source(path: str | Path) -> ReportSource:
    """Load a certificate, statement or evidence file into a :class:`ReportSource` (unverified)."""
    p = Path(path)
    doc = read_json_file(p, what="input", max_bytes=MAX_INPUT_BYTES)
    try:  # a certificate in the Sigstore bundle form: its envelope
        doc = envelope_of(doc)
    except BundleError as exc:
        raise InputError(f"{p} is not a usable Sigstore bundle: {exc}") from None
    digest = sha256_file(p)
    kind = _classify(doc, p)
    if kind == "evidence":
        try:
            evidence = Evidence.model_validate(doc)
        except ValidationError as exc:
            raise EvidenceError(
                f"{p} is not a valid evidence file: {exc.error_count()} problem(s), first: "
                f"{exc.errors()[0]['msg']} at {'.'.join(str(x) for x in exc.errors()[0]['loc'])}",
                hint="regenerate it with attest collect",
            ) from None
        return _from_evidence(p, digest, evidence)
    if kind == "statement":
        return _from_statement(p, digest, doc, "statement")
    try:
        payload = b64decode_strict(doc["payload"])
        statement = loads_strict(payload, max_bytes=MAX_INPUT_BYTES)
    except (ValueError, StrictJSONError) as exc:
        raise InputError(
            f"certificate {p} has an unreadable payload: {exc}",
            hint="the file is damaged or not written by attest certify",
        ) from None
    if not isinstance(statement, dict):
        raise InputError(f"certificate {p}: payload is not a JSON object")
    src = _from_statement(p, digest, statement, "certificate")
    src.payload_sha256 = sha256_bytes(payload)
    src.signatures = _as_list_of_dicts(doc.get("signatures"))
    return src


def load_findings(path: str | Path, source: ReportSource) -> None:
    """Attach a findings file (``attest evaluate`` output) to ``source``.

    Accepts ``{"findings": [...], "verdict": ..., "policy": {...}, "waivers": [...]}`` or a
    bare list of findings.
    """
    p = Path(path)
    doc = read_json_file(p, what="findings file", max_bytes=MAX_INPUT_BYTES)
    if isinstance(doc, list):
        findings, extra = doc, {}
    elif isinstance(doc, dict) and isinstance(doc.get("findings"), list):
        findings, extra = doc["findings"], doc
    else:
        raise EvidenceError(
            f"{p} is not a findings file (expected a list or an object with 'findings')",
            hint="pass the findings.json written by attest evaluate",
        )
    source.findings = _as_list_of_dicts(findings)
    source.findings_source = str(p)
    verdict = extra.get("verdict")
    if verdict is not None:
        source.verdict = (
            str(verdict.get("result", verdict)) if isinstance(verdict, dict) else str(verdict)
        )
    elif source.verdict is None and isinstance(extra.get("passed"), bool):
        source.verdict = "pass" if extra["passed"] else "fail"
    if isinstance(extra.get("policy"), dict):
        source.policy = dict(extra["policy"])
    if isinstance(extra.get("waivers"), list):
        source.waivers = _as_list_of_dicts(extra["waivers"])


def attach_evidence(path: str | Path, source: ReportSource) -> None:
    """Add what only the evidence holds (IG attributions) to a certificate's source.

    Whether that evidence is bound to the certificate is recorded in ``source.notes``.
    """
    extra = load_source(path)
    if extra.kind != "evidence":
        raise InputError(f"--evidence {path} is not an evidence file")
    source.evidence_path = str(path)
    source.training_log = extra.training_log
    source.compile_note = source.compile_note or extra.compile_note
    if extra.attributions:
        source.attributions = extra.attributions
        source.attributions_source = str(path)
    if not source.operators and extra.operators:
        source.operators = extra.operators
        source.notes.append(f"operator rows come from {path}, not from the certificate")
    if not source.modules and extra.modules:
        source.modules = extra.modules
    for check_id, result in extra.checks.items():
        if check_id not in source.checks:
            source.checks[check_id] = result
            source.notes.append(f"check {check_id} comes from {path}, not from the certificate")


def evidence_bound(source: ReportSource, evidence_digest: str) -> bool:
    """Whether the certificate names this evidence digest (its evidence_digest or a subject)."""
    if source.evidence_digest == evidence_digest:
        return True
    for subject in source.subjects:
        if _as_dict(subject.get("digest")).get("sha256") == evidence_digest:
            return True
    return False


def verify_source(
    source: ReportSource, trust: str | Path | None, artifacts: list[str | Path] | None = None
) -> Verification:
    """Verify a certificate's signature with :mod:`attest.verification.verifier`; never raises for a bad one.

    ``artifacts`` (optional) are also matched against the certificate's subjects.
    """
    if source.kind == "evidence":
        return Verification("unsigned", "evidence is not signed: every number here is unverified")
    if source.kind == "statement":
        return Verification("unsigned", "a bare statement carries no signature: unverified")
    if trust is None:
        return Verification(
            "not_checked",
            "the signature was not checked (no --trust given): every number here is unverified",
        )
    try:
        from attest.verification.verifier import verify
    except ImportError as exc:  # the verifier is part of the package; fail closed if missing
        return Verification("failed", f"the verifier cannot be loaded ({exc})", str(trust))
    try:
        result = verify(
            str(source.path),
            trust=str(trust),
            artifacts=[str(a) for a in artifacts or []],
            require_artifacts=False,
        )
    except AttestError:
        raise  # the caller's own input (trust store, artifact) is unusable: exit 2, not a verdict
    outcome = _outcome(result, source, trust)
    outcome.signatures = [dict(s) for s in getattr(result, "signatures", []) or []]
    return outcome


def _outcome(result: Any, source: ReportSource, trust: str | Path) -> Verification:
    raw_reasons = getattr(result, "reasons", []) or []
    reasons: list[tuple[str, str]] = []
    for r in raw_reasons:
        if isinstance(r, tuple | list) and len(r) == 2:
            reasons.append((str(r[0]), str(r[1])))
        else:
            reasons.append((str(getattr(r, "code", r)), str(getattr(r, "message", ""))))
    verified_digest = getattr(result, "certificate_sha256", None)
    if verified_digest is not None and verified_digest != source.file_sha256:
        return Verification(
            "failed",
            f"{source.path} changed while the report read it: the verified bytes are not the "
            "ones shown",
            str(trust),
            reasons,
        )
    if bool(getattr(result, "verified", False)):
        checked = list(getattr(result, "subjects_checked", []) or [])
        what = (
            f"; artifacts checked against the subjects: {', '.join(checked)}"
            if checked
            else "; no artifact was checked against the subjects (give --artifact)"
        )
        return Verification(
            "verified", f"signature verified against trust store {trust}{what}", str(trust), reasons
        )
    if reasons and not any(code in _SIGNATURE_REASONS for code, _ in reasons):
        codes = ", ".join(code for code, _ in reasons)
        return Verification(
            "signature_valid",
            f"signature valid under {trust}, but the certificate was rejected ({codes})",
            str(trust),
            reasons,
        )
    return Verification(
        "failed", f"signature verification FAILED against {trust}", str(trust), reasons
    )
