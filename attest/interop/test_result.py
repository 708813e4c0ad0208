"""The in-toto test-result attestation of a certificate (``attest export test-result``).

Predicate type ``https://in-toto.io/attestation/test-result/v0.1`` (in-toto/attestation,
spec/predicates/test-result.md), so that generic in-toto and SLSA policy engines can gate on the
release without knowing our predicate:

- ``subject``: the certificate's subjects (the model artefacts), digest for digest;
- ``result``: ``PASSED``, or ``WARNED`` when a rule warned or a failure was waived
  (``FAILED`` cannot occur: a certificate is only issued when its policy passes);
- ``passedTests`` / ``warnedTests`` / ``failedTests``: the policy's rules as ``rule:<id>`` and
  the checks as ``check:<id>``, each with the worst verdict of its findings (a waived finding
  counts as a warning; a check without a finding, e.g. ``not_applicable``, is not listed);
- ``configuration``: the policy (``policy:<id>@<version>`` with its file's sha256) and the
  certificate itself (its file's sha256), and each target's signed evidence statement
  (``evidence-statement:TARGET``, its sha256), as in-toto ResourceDescriptors.

The statement is signed into a DSSE envelope (plain DSSE signatures, ``keyid`` + ``sig``), by
the key given to the command.
"""

from __future__ import annotations

from typing import Any, Final

from attest.certificate.signing import PrivateKey, canonical_json, dsse_envelope
from attest.interop.source import VerifiedCertificate

__all__ = [
    "TEST_RESULT_PREDICATE",
    "TEST_RESULT_SCHEMA",
    "sign_test_result",
    "test_result_statement",
]

TEST_RESULT_PREDICATE: Final = "https://in-toto.io/attestation/test-result/v0.1"
STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
_RANK: Final = {"pass": 0, "not_computed": 1, "warn": 1, "waived": 1, "fail": 2}


def _worst(findings: list[dict[str, Any]], key: str) -> dict[str, int]:
    worst: dict[str, int] = {}
    for finding in findings:
        name = str(finding.get(key))
        rank = _RANK.get(str(finding.get("verdict")), 2)  # an unknown verdict is a failure
        worst[name] = max(worst.get(name, 0), rank)
    return worst


def test_result_statement(cert: VerifiedCertificate) -> dict[str, Any]:
    """The test-result statement of a verified certificate (module docstring)."""
    predicate = cert.predicate
    findings = [f for f in predicate.get("findings") or [] if isinstance(f, dict)]
    tests: dict[str, int] = {f"rule:{k}": v for k, v in _worst(findings, "rule").items()}
    tests.update({f"check:{k}": v for k, v in _worst(findings, "check").items()})
    lists: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for name in sorted(tests):
        lists[tests[name]].append(name)
    result = "FAILED" if lists[2] else "WARNED" if lists[1] else "PASSED"
    policy = predicate["policy"]
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": digest}}
            for name, digest in sorted(cert.subjects.items())
        ],
        "predicateType": TEST_RESULT_PREDICATE,
        "predicate": {
            "result": result,
            "configuration": [
                {
                    "name": f"policy:{policy['id']}@{policy['version']}",
                    "digest": {"sha256": policy["digest"]["sha256"]},
                },
                {"name": cert.path.name, "digest": {"sha256": cert.sha256}},
                *_evidence_statements(predicate),
            ],
            "passedTests": lists[0],
            "warnedTests": lists[1],
            "failedTests": lists[2],
        },
    }


def _evidence_statements(predicate: dict[str, Any]) -> list[dict[str, Any]]:
    """The collectors' signed evidence statements the certificate records, one per target."""
    recorded = predicate.get("evidence_provenance")
    out = []
    for target, record in sorted(recorded.items()) if isinstance(recorded, dict) else []:
        digest = (record.get("statement_digest") or {}) if isinstance(record, dict) else {}
        if isinstance(digest.get("sha256"), str):
            out.append(
                {"name": f"evidence-statement:{target}", "digest": {"sha256": digest["sha256"]}}
            )
    return out


def sign_test_result(cert: VerifiedCertificate, key: PrivateKey) -> dict[str, Any]:
    """The test-result statement signed into a DSSE envelope by ``key``."""
    return dsse_envelope(canonical_json(test_result_statement(cert)), PAYLOAD_TYPE, [key])


def _descriptors(digest_required: bool) -> dict[str, Any]:
    digest = {
        "type": "object",
        "properties": {"sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}},
        "required": ["sha256"] if digest_required else [],
    }
    return {
        "type": "array",
        "maxItems": 10_000,
        "items": {
            "type": "object",
            "properties": {"name": {"type": "string", "maxLength": 4096}, "digest": digest},
            "required": ["name", "digest"],
        },
    }


# What `attest export verify` holds a test-result statement to before reading any field
# (checked with jsonschema, so that no hostile shape reaches the code that compares it).
_TESTS: Final = {"type": "array", "maxItems": 100_000, "items": {"type": "string"}}
TEST_RESULT_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "_type": {"const": STATEMENT_TYPE},
        "subject": {**_descriptors(True), "minItems": 1},
        "predicateType": {"const": TEST_RESULT_PREDICATE},
        "predicate": {
            "type": "object",
            "properties": {
                "result": {"enum": ["PASSED", "WARNED", "FAILED"]},
                "configuration": _descriptors(False),
                "passedTests": _TESTS,
                "warnedTests": _TESTS,
                "failedTests": _TESTS,
            },
            "required": ["result"],
        },
    },
    "required": ["_type", "subject", "predicateType", "predicate"],
}
