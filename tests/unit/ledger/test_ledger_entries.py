"""Ledger entries: canonical leaf data, certificates read leniently but safely, verifier reports,
no patient data, and ``record_verification`` (the verifier's hook)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attest.certificate.signing import canonical_json
from attest.errors import InputError, LedgerError
from attest.ledger import append_certificate, open_ledger, record_verification
from attest.ledger.entries import (
    LedgerEntry,
    entry_for_certificate,
    entry_for_verification,
    entry_from_leaf_data,
)

SHA_A, SHA_B, SHA_P = "a" * 64, "b" * 64, "c" * 64


def write_certificate(
    path: Path, predicate: dict[str, Any] | None = None, subjects: list[Any] | None = None
) -> Path:
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": subjects
        if subjects is not None
        else [
            {"name": "weights.safetensors", "digest": {"sha256": SHA_A}},
            {"name": "model.onnx", "digest": {"sha256": SHA_B}},
        ],
        "predicateType": "https://gradient-attest.dev/certificate/v1",
        "predicate": predicate
        if predicate is not None
        else {
            "certificate_id": "cert-0001",
            "model": {"name": "digits-cnn", "version": "1.2.0"},
            "verdict": "pass",
            "policy": {"id": "clinical-strict", "version": "1", "digest": {"sha256": SHA_P}},
        },
    }
    envelope = {
        "payload": base64.b64encode(canonical_json(statement)).decode(),
        "payloadType": "application/vnd.in-toto+json",
        "signatures": [{"keyid": "k", "sig": "AAAA"}],
    }
    path.write_text(json.dumps(envelope))
    return path


def test_leaf_data_is_canonical_json_and_round_trips() -> None:
    entry = LedgerEntry(
        event="verified", time="2026-01-01T00:00:00Z", certificate_checked=True, result="pass"
    )
    data = entry.leaf_data
    assert data == canonical_json(json.loads(data))
    assert entry_from_leaf_data(data) == entry
    with pytest.raises(LedgerError, match="canonical"):
        entry_from_leaf_data(json.dumps(json.loads(data), indent=1).encode())
    with pytest.raises(LedgerError, match="not a valid ledger entry"):
        entry_from_leaf_data(data.replace(b'"verified"', b'"approved"'))
    with pytest.raises(LedgerError):
        entry_from_leaf_data(b'{"event":"issued","event":"revoked"}')


def test_certificate_entry_takes_what_the_certificate_claims(tmp_path: Path) -> None:
    cert = write_certificate(tmp_path / "cert.json")
    entry = entry_for_certificate(cert, actor="release-bot")
    assert entry.event == "issued" and entry.certificate_checked is False
    assert entry.certificate.id == "cert-0001"
    assert entry.certificate.sha256 is not None and len(entry.certificate.sha256) == 64
    assert (entry.model.name, entry.model.version, entry.model.digest) == (
        "digits-cnn",
        "1.2.0",
        SHA_B,
    )
    assert entry.policy_digest == SHA_P and entry.result == "pass"
    assert [s.name for s in entry.subjects] == ["weights.safetensors", "model.onnx"]
    assert entry.actor == "release-bot" and entry.host


def test_certificate_entry_is_lenient_with_missing_fields(tmp_path: Path) -> None:
    cert = write_certificate(
        tmp_path / "cert.json", predicate={"verdict": "fail", "model": "?"}, subjects=[{"x": 1}]
    )
    entry = entry_for_certificate(cert, event="revoked", reason_codes=["KEY_COMPROMISED"])
    assert entry.certificate.id is None and entry.model.name is None and entry.subjects == []
    assert entry.result is None and entry.reason_codes == ["KEY_COMPROMISED"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not valid JSON"),
        (b'{"payload": "x", "payload": "y"}', "not valid JSON"),
        (b"[1, 2]", "not a DSSE envelope"),
        (b'{"payload": "!!!"}', "not base64"),
        (b'{"payload": "' + base64.b64encode(b"[1]") + b'"}', "not base64 of a JSON statement"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_unreadable_certificates_are_input_errors(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "cert.json"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        entry_for_certificate(path)
    with pytest.raises(InputError, match="does not exist"):
        entry_for_certificate(tmp_path / "absent.json")


def verifier_report(verified: bool) -> dict[str, Any]:
    """The shape ``attest verify --json`` prints."""
    return {
        "verified": verified,
        "reasons": []
        if verified
        else [
            {
                "code": "SUBJECT_MISMATCH",
                "message": "artifact /data/patient-4711/scan.onnx digest differs",
            },
            {"code": "EXPIRED", "message": "expired"},
        ],
        "subjects_checked": ["model.onnx"],
        "certificate": {"path": "/data/patient-4711/cert.json", "sha256": SHA_A, "id": "cert-0001"},
        "model": {"name": "digits-cnn", "version": "1.2.0"},
        "policy": {"id": "clinical-strict", "version": "1", "digest": {"sha256": SHA_P}},
    }


def test_verification_entries_keep_codes_never_messages_or_paths() -> None:
    rejected = entry_for_verification(verifier_report(False))
    assert (
        rejected.event == "rejected" and rejected.result == "fail" and rejected.certificate_checked
    )
    assert rejected.reason_codes == ["SUBJECT_MISMATCH", "EXPIRED"]
    assert (rejected.model.name, rejected.policy_digest, rejected.certificate.id) == (
        "digits-cnn",
        SHA_P,
        "cert-0001",
    )
    assert b"patient" not in rejected.leaf_data  # neither the messages nor the paths are recorded
    accepted = entry_for_verification(verifier_report(True))
    assert (accepted.event, accepted.result, accepted.reason_codes) == ("verified", "pass", [])
    # the brief's shape, with model and policy digest inside "certificate", and odd values
    nested = entry_for_verification(
        {
            "verified": False,
            "reasons": [{"code": "not a code"}, "junk"],
            "certificate": {
                "id": "c",
                "sha256": "sha256:" + SHA_B,
                "model": {"name": "m"},
                "policy_digest": SHA_P,
            },
        }
    )
    assert (
        nested.certificate.sha256 == SHA_B
        and nested.model.name == "m"
        and nested.policy_digest == SHA_P
    )
    assert nested.reason_codes == []
    assert entry_for_verification({}).event == "rejected"


def test_entry_fields_hold_no_free_text() -> None:
    # the only strings are identifiers, digests, names and codes: nothing sized for narrative
    assert set(LedgerEntry.model_fields) == {
        "format",
        "event",
        "time",
        "certificate",
        "model",
        "policy_digest",
        "subjects",
        "result",
        "reason_codes",
        "certificate_checked",
        "actor",
        "host",
        "tool_version",
        # a revoked entry keeps the signed revocation statement (base64) that attest verify
        # --ledger checks; its reason is the revoker's short text (docs/ledger.md)
        "revocation",
    }
    with pytest.raises(ValueError):
        LedgerEntry(
            event="issued", time="2026-01-01T00:00:00Z", certificate_checked=False, notes="x"
        )  # type: ignore[call-arg]


def test_record_verification_and_append_certificate(tmp_path: Path) -> None:
    path = tmp_path / "audit" / "ledger.sqlite"
    cert = write_certificate(tmp_path / "cert.json")
    issued = append_certificate(path, cert)
    assert issued.index == 0
    assert record_verification(path, verifier_report(True)) == 1
    assert record_verification(str(path), verifier_report(False)) == 2
    with open_ledger(path) as ledger:
        events = [ledger.entry(i)[1].event for i in range(3)]
    assert events == ["issued", "verified", "rejected"]


def test_ledger_imports_neither_torch_nor_numpy() -> None:
    import subprocess

    code = "import sys, attest.ledger, attest.cli.ledger; print(sorted({'torch','numpy'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


_TEXT = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",), blacklist_characters=[chr(c) for c in range(32)] + ["\x7f"]
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    name=_TEXT,
    version=_TEXT,
    actor=st.one_of(st.none(), _TEXT),
    subject=_TEXT,
    codes=st.lists(st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True), max_size=3),
    checked=st.booleans(),
)
def test_fast_canonical_check_agrees_with_rfc8785(
    name: str, version: str, actor: str | None, subject: str, codes: list[str], checked: bool
) -> None:
    entry = LedgerEntry.model_validate(
        {
            "event": "issued",
            "time": "2026-01-01T00:00:00Z",
            "model": {"name": name, "version": version},
            "subjects": [{"name": subject, "sha256": SHA_A}],
            "reason_codes": codes,
            "certificate_checked": checked,
            "actor": actor,
        }
    )
    plain = entry.plain()
    quick = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert quick == canonical_json(plain) == entry.leaf_data
    assert entry_from_leaf_data(entry.leaf_data) == entry


_JSON_TEXT_ONLY = st.recursive(
    st.one_of(st.none(), st.booleans(), st.text(st.characters(blacklist_categories=("Cs",)))),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(st.characters(max_codepoint=127), max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=_JSON_TEXT_ONLY)
def test_canonical_json_text_is_rfc8785_for_values_without_numbers(value: object) -> None:
    """Any text (controls, U+2028, astral characters, quotes, backslashes), booleans, null,
    nested arrays and objects with ASCII keys: the fast encoder gives the rfc8785 bytes."""
    from attest.certificate.signing import canonical_json_text

    assert canonical_json_text(value) == canonical_json(value)


def test_canonical_json_text_refuses_a_lone_surrogate_as_rfc8785_does() -> None:
    from attest.certificate.signing import canonical_json_text
    from attest.errors import SigningError

    with pytest.raises(SigningError):
        canonical_json_text({"a": "\ud800"})
