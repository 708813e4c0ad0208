"""``attest export verify``: an export checked and tied back to its certificate.

- a Sigstore bundle: the offline verifier, as for the native certificate;
- a test-result attestation: a DSSE envelope signed by a key of the trust store (not revoked),
  an in-toto Statement v1 with the test-result predicate and its fields;
- a CycloneDX BOM: valid against the CycloneDX 1.6 schema (the library's strict validator).

With ``--certificate``, the export must also restate that (verified) certificate: the same
subjects with the same digests (the BOM: every subject as a component hash), and the
certificate's own digest where the export names it. Every problem is a reason string; none is
an exception.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from attest.certificate.bundle import is_bundle
from attest.certificate.signing import pae, verify_signature
from attest.core.io import loads_strict, read_json_file
from attest.interop.source import VerifiedCertificate
from attest.interop.test_result import PAYLOAD_TYPE, STATEMENT_TYPE, TEST_RESULT_PREDICATE

__all__ = ["check_export"]

_RESULTS = ("PASSED", "WARNED", "FAILED")


def _test_result(doc: dict[str, Any], trust: Path) -> tuple[list[str], dict[str, Any] | None]:
    from attest.verification.trust import load_trust_store

    if set(doc) != {"payload", "payloadType", "signatures"} or doc["payloadType"] != PAYLOAD_TYPE:
        return [f"not a DSSE envelope of {PAYLOAD_TYPE}"], None
    try:
        payload = base64.b64decode(doc["payload"], validate=True)
        statement = loads_strict(payload)
    except ValueError as exc:
        return [f"the payload is not base64 of strict JSON: {exc}"], None
    store = load_trust_store(trust)
    message = pae(PAYLOAD_TYPE, payload)
    good = []
    for sig in doc["signatures"] if isinstance(doc["signatures"], list) else []:
        key = store.key(str(sig.get("keyid", ""))) if isinstance(sig, dict) else None
        if key is None or store.is_revoked(key.keyid):
            continue
        try:
            raw = base64.b64decode(str(sig.get("sig", "")), validate=True)
        except ValueError:
            continue
        if verify_signature(key.public_key, raw, message):
            good.append(key.label())
    reasons = [] if good else ["no signature by a trusted, unrevoked key verifies"]
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        return [*reasons, "the payload is not an in-toto Statement v1"], None
    if statement.get("predicateType") != TEST_RESULT_PREDICATE:
        return [*reasons, f"the predicate type is not {TEST_RESULT_PREDICATE}"], None
    predicate = statement.get("predicate") or {}
    if predicate.get("result") not in _RESULTS:
        reasons.append("predicate.result is not PASSED, WARNED or FAILED")
    for key_name in ("passedTests", "warnedTests", "failedTests", "configuration"):
        if not isinstance(predicate.get(key_name, []), list):
            reasons.append(f"predicate.{key_name} is not a list")
    return reasons, statement


def _subject_problems(statement: dict[str, Any], cert: VerifiedCertificate) -> list[str]:
    subjects = {
        s.get("name"): (s.get("digest") or {}).get("sha256") for s in statement.get("subject", [])
    }
    if subjects != cert.subjects:
        return ["its subjects (names and sha256) are not the certificate's"]
    configured = {
        c.get("name"): (c.get("digest") or {}).get("sha256")
        for c in statement["predicate"].get("configuration", [])
    }
    if configured.get(cert.path.name) != cert.sha256:
        return ["it names another certificate (configuration digest differs)"]
    return []


def _bom(doc: dict[str, Any], cert: VerifiedCertificate | None) -> list[str]:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    problem = JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(doc))
    reasons = [f"not valid CycloneDX 1.6: {problem}"] if problem is not None else []
    if cert is None:
        return reasons
    hashes = {
        c.get("name"): next(
            (h.get("content") for h in c.get("hashes", []) if h.get("alg") == "SHA-256"), None
        )
        for c in doc.get("components", [])
    }
    if hashes != cert.subjects:
        reasons.append("its components' SHA-256 are not the certificate's subjects")
    refs = [
        h.get("content")
        for r in doc.get("externalReferences", [])
        if r.get("type") == "attestation"
        for h in r.get("hashes", [])
    ]
    if cert.sha256 not in refs:
        reasons.append("it does not reference this certificate by its SHA-256")
    return reasons


def check_export(
    path: Path, trust: Path, certificate: VerifiedCertificate | None
) -> tuple[str, list[str]]:
    """``(kind, reasons)``: what the file is and why it does not hold (empty: it holds)."""
    doc = read_json_file(path, what="export")
    if not isinstance(doc, dict):
        return "unknown", ["not a JSON object"]
    if is_bundle(doc):
        from attest.errors import AttestError
        from attest.interop.source import verified_statement

        try:
            bundled = verified_statement(path, trust)
        except AttestError as exc:
            return "sigstore-bundle", [exc.message]
        if certificate is not None and bundled.statement != certificate.statement:
            return "sigstore-bundle", ["it carries another statement than the certificate"]
        return "sigstore-bundle", []
    if doc.get("bomFormat") == "CycloneDX":
        return "cyclonedx", _bom(doc, certificate)
    reasons, statement = _test_result(doc, trust)
    if statement is not None and certificate is not None:
        reasons += _subject_problems(statement, certificate)
    return "test-result", reasons
