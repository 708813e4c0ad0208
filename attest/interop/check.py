"""``attest export verify``: an export checked and tied back to its certificate.

- a Sigstore bundle: the offline verifier, as for the native certificate;
- a test-result attestation: a DSSE envelope whose signatures are judged by the very code that
  judges a certificate's (:func:`attest.verification.signatures.check_signatures`: the trust
  store's threshold, each key's validity window, revoked keys, the role requirements, RFC 3161
  trusted time), then an in-toto Statement v1 with the test-result predicate, held to
  :data:`~attest.interop.test_result.TEST_RESULT_SCHEMA` before any field is read;
- a CycloneDX BOM: valid against the CycloneDX 1.6 schema (the library's strict validator).
  A BOM is not signed: on its own it proves nothing; with ``--certificate`` it is tied to a
  certificate that verifies.

With ``--certificate``, the export must also restate that (verified) certificate: the same
subjects with the same digests (the BOM: every subject as a component hash), and the
certificate's own digest where the export names it. Every problem is a ``(code, message)``
reason with the verifier's reason codes; none is an exception, whatever the file holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from attest.certificate.bundle import is_bundle
from attest.core.files import read_bytes_checked
from attest.core.io import MAX_JSON_BYTES, StrictJSONError, loads_strict
from attest.core.text import safe_text
from attest.errors import InputError
from attest.interop.source import VerifiedCertificate
from attest.interop.test_result import PAYLOAD_TYPE, TEST_RESULT_SCHEMA
from attest.verification.envelope import Rejected, parse_envelope
from attest.verification.signatures import check_signatures
from attest.verification.trust import TrustStore

__all__ = ["ExportCheck", "check_export"]

Reason = tuple[str, str]


@dataclass
class ExportCheck:
    """What ``attest export verify`` found: the kind of file and why it does not hold (none:
    it holds), with each signature as judged and the notes (ignored signatures)."""

    kind: str
    reasons: list[Reason] = field(default_factory=list)
    signatures: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self, path: Path, tied: bool) -> dict[str, Any]:
        return {
            "file": str(path),
            "kind": self.kind,
            "holds": not self.reasons,
            "restates_certificate": tied and not self.reasons,
            "reasons": [{"code": c, "message": m} for c, m in self.reasons],
            "signatures": self.signatures,
            "notes": self.notes,
        }


def _schema_problem(statement: Any) -> str | None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    error = best_match(Draft202012Validator(TEST_RESULT_SCHEMA).iter_errors(statement))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "<root>"
    return f"the statement is not a test-result statement at {where}: {error.message[:300]}"


def _test_result(data: bytes, store: TrustStore, at: datetime, result: ExportCheck) -> Any:
    """The statement of a test-result envelope whose signatures meet the trust store (``None``
    with ``result.reasons`` filled otherwise). Like the verifier, nothing in the payload is
    looked at before the signatures hold."""
    from attest.verification.verifier import DEFAULT_CLOCK_SKEW

    try:
        env = parse_envelope(data, "the export")
    except Rejected as exc:
        result.reasons.append((exc.code, exc.message))
        return None
    check = check_signatures(env, store, at, DEFAULT_CLOCK_SKEW)
    result.signatures = [s.to_dict() for s in check.signatures]
    result.notes += check.notes
    if check.problems:
        result.reasons += check.problems
        return None
    if env.payload_type != PAYLOAD_TYPE:
        shown = safe_text(env.payload_type, 100)
        result.reasons.append(("MALFORMED", f"payloadType is {shown!r}, expected {PAYLOAD_TYPE}"))
        return None
    try:
        statement = loads_strict(env.payload)
    except StrictJSONError as exc:
        result.reasons.append(("MALFORMED", f"the signed payload is not strict JSON: {exc}"))
        return None
    problem = _schema_problem(statement)
    if problem is not None:
        result.reasons.append(("MALFORMED", problem))
        return None
    return statement


def _subject_problems(statement: dict[str, Any], cert: VerifiedCertificate) -> list[Reason]:
    """The tie to the certificate (``statement`` holds TEST_RESULT_SCHEMA)."""
    listed = statement["subject"]
    subjects = {s["name"]: s["digest"]["sha256"] for s in listed}
    if len(subjects) != len(listed) or subjects != cert.subjects:
        return [("SUBJECT_MISMATCH", "its subjects (names and sha256) are not the certificate's")]
    configured = [
        c.get("digest", {}).get("sha256")
        for c in statement["predicate"].get("configuration", [])
        if c["name"] == cert.path.name
    ]
    if configured != [cert.sha256]:
        return [("SUBJECT_MISMATCH", "it names another certificate (configuration digest differs)")]
    return []


def _bom(doc: dict[str, Any], cert: VerifiedCertificate | None) -> list[Reason]:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    try:
        problem = JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(doc))
    except Exception as exc:  # fail closed: a validator that broke did not accept
        return [("MALFORMED", f"the BOM could not be validated ({type(exc).__name__})")]
    if problem is not None:  # the comparisons below read only what the schema guarantees
        return [("MALFORMED", f"not valid CycloneDX 1.6: {safe_text(problem, 500)}")]
    if cert is None:
        return []
    reasons: list[Reason] = []
    components = doc.get("components", [])
    hashes = {
        c["name"]: [h["content"] for h in c.get("hashes", []) if h["alg"] == "SHA-256"]
        for c in components
    }
    if len(hashes) != len(components) or hashes != {k: [v] for k, v in cert.subjects.items()}:
        reasons.append(
            ("SUBJECT_MISMATCH", "its components' SHA-256 are not the certificate's subjects")
        )
    refs = [
        h["content"]
        for r in doc.get("externalReferences", [])
        if r["type"] == "attestation"
        for h in r.get("hashes", [])
    ]
    if cert.sha256 not in refs:
        reasons.append(
            ("SUBJECT_MISMATCH", "it does not reference this certificate by its SHA-256")
        )
    return reasons


def _bundle(
    path: Path, store: TrustStore, at: datetime, cert: VerifiedCertificate | None
) -> ExportCheck:
    from attest.verification.verifier import verify

    report = verify(path, trust=store, artifacts=[], at=at, require_artifacts=False)
    result = ExportCheck("sigstore-bundle", list(report.reasons), report.signatures, report.notes)
    if report.verified and cert is not None and report.statement != cert.statement:
        result.reasons.append(
            ("SUBJECT_MISMATCH", "it carries another statement than the certificate")
        )
    return result


def check_export(
    path: Path, store: TrustStore, certificate: VerifiedCertificate | None, at: datetime
) -> ExportCheck:
    """What ``path`` is and why it does not hold (no reasons: it holds), as of ``at``.
    An unreadable file or one that is not JSON at all is the caller's :class:`InputError`."""
    data = read_bytes_checked(path, what="export", max_bytes=MAX_JSON_BYTES)
    try:
        doc = loads_strict(data)
    except StrictJSONError as exc:
        raise InputError(f"export {safe_text(path)} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        return ExportCheck("unknown", [("MALFORMED", "the export is not a JSON object")])
    if is_bundle(doc):
        return _bundle(path, store, at, certificate)
    if doc.get("bomFormat") == "CycloneDX":
        result = ExportCheck("cyclonedx", _bom(doc, certificate))
        if certificate is None and not result.reasons:
            result.notes.append(
                "a BOM is not signed: it holds as CycloneDX, but proves nothing about a "
                "certificate unless checked with --certificate"
            )
        return result
    result = ExportCheck("test-result")
    statement = _test_result(data, store, at, result)
    if statement is not None and certificate is not None:
        result.reasons += _subject_problems(statement, certificate)
    return result
