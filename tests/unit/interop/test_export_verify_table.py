"""``attest export verify`` as a table (issue 33, item 8): each row an export that must not
hold, refused with its reason code through the library (:func:`check_export`) and the command
line (exit 1, the code in ``--json``, which is valid JSON, no traceback).

The trust rows are test results signed well enough, by a trust store's key, but short of what
the store demands of a certificate (threshold, key window, role requirements, revoked keys,
trusted time): ``attest export verify`` used to count any one good signature. The hostile rows
are documents of every wrong shape, which used to end in exit 3 (AttributeError).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from _certfactory import NOW, World, iso, make_world, sign_raw, with_roles
from _signer_cases import CS, RE
from _tsa import make_tsa, needs_openssl

from attest.cli import main
from attest.core.io import sha256_file
from attest.interop.check import check_export
from attest.interop.source import VerifiedCertificate
from attest.interop.test_result import PAYLOAD_TYPE
from attest.interop.test_result import test_result_statement as _result_statement
from attest.verification.trust import Requirement, TimestampAuthority, revoke_key, save_trust_store

Row = tuple[Any, dict[str, Any]]  # (the export as JSON data or bytes, options)
Case = Callable[[World, VerifiedCertificate], Row]


@pytest.fixture
def world(tmp_path: Path) -> tuple[World, VerifiedCertificate]:
    w = make_world(tmp_path)
    cert_path = w.write(sign_raw(w.statement(), [w.key]), "gradient_certificate.json")
    statement = json.loads(base64.b64decode(json.loads(cert_path.read_text())["payload"]))
    return w, VerifiedCertificate(cert_path, sha256_file(cert_path), statement)


def _statement(cert: VerifiedCertificate) -> dict[str, Any]:
    return _result_statement(cert)


def _signed(statement: Any, *keys: Any) -> dict[str, Any]:
    return sign_raw(statement, list(keys), payload_type=PAYLOAD_TYPE)


# ------------------------------------------------------------------ the trust decision


def threshold_two_one_signature(w: World, c: VerifiedCertificate) -> Row:
    return _signed(_statement(c), w.key), {"trust": replace(w.trust, threshold=2)}


def same_key_twice_threshold_two(w: World, c: VerifiedCertificate) -> Row:
    return _signed(_statement(c), w.key, w.key), {"trust": replace(w.trust, threshold=2)}


def duplicated_key_ids_threshold_two(w: World, c: VerifiedCertificate) -> Row:
    """Two signatures naming the two trusted key ids, both made by the first key."""
    env = _signed(_statement(c), w.key, w.key)
    env["signatures"][1]["keyid"] = w.second.keyid
    return env, {"trust": replace(w.trust, threshold=2)}


def key_window_ended(w: World, c: VerifiedCertificate) -> Row:
    trust = w.with_keys(w.key, not_after=datetime(2020, 1, 1, tzinfo=timezone.utc))
    return _signed(_statement(c), w.key), {"trust": trust}


def key_not_yet_valid(w: World, c: VerifiedCertificate) -> Row:
    return _signed(_statement(c), w.key), {
        "trust": w.with_keys(w.key, not_before=NOW + timedelta(days=2))
    }


def revoked_key(w: World, c: VerifiedCertificate) -> Row:
    return _signed(_statement(c), w.key), {"trust": revoke_key(w.trust, w.key.keyid, reason="lost")}


def untrusted_key(w: World, c: VerifiedCertificate) -> Row:
    return _signed(_statement(c), w.attacker), {}


def requirement_unmet_plain_signature(w: World, c: VerifiedCertificate) -> Row:
    trust = with_roles(w.trust, {w.key.keyid: (CS,)}, requirements=(Requirement(CS, "approval"),))
    return _signed(_statement(c), w.key), {"trust": trust}


def role_claimed_not_held(w: World, c: VerifiedCertificate) -> Row:
    env = _signed_as(_statement(c), [(w.key, CS, "approval")])
    trust = with_roles(w.trust, {w.key.keyid: (RE,)}, requirements=(Requirement(CS, "approval"),))
    return env, {"trust": trust}


def _signed_as(statement: dict[str, Any], signers: list[Any], **options: Any) -> dict[str, Any]:
    """A test result whose signatures carry signer attestations ``(key, role, meaning)``."""
    from attest.certificate.signers import SignerIdentity, sign_payload
    from attest.certificate.signing import canonical_json

    identities = [SignerIdentity(f"Dr Test {role}", role, meaning) for _, role, meaning in signers]
    keys = [key for key, _, _ in signers]
    return sign_payload(canonical_json(statement), PAYLOAD_TYPE, keys, identities, **options)


@needs_openssl
def timestamped_after_key_compromise(w: World, c: VerifiedCertificate) -> Row:
    tsa = make_tsa(w.root / "tsa")
    env = _signed_as(_statement(c), [(w.key, RE, "authorship")], timestamper=tsa.stamp_message)
    compromised = datetime.now(timezone.utc) - timedelta(hours=1)
    trust = revoke_key(w.trust, w.key.keyid, reason="compromised", at=compromised)
    authorities = (TimestampAuthority("tsa", tsa.root_pem),)
    return env, {"trust": with_roles(trust, {}, timestamp_authorities=authorities)}


@needs_openssl
def timestamped_after_key_window(w: World, c: VerifiedCertificate) -> Row:
    tsa = make_tsa(w.root / "tsa")
    env = _signed_as(_statement(c), [(w.key, RE, "authorship")], timestamper=tsa.stamp_message)
    trust = w.with_keys(w.key, not_after=datetime.now(timezone.utc) - timedelta(hours=1))
    authorities = (TimestampAuthority("tsa", tsa.root_pem),)
    return env, {"trust": with_roles(trust, {}, timestamp_authorities=authorities)}


@needs_openssl
def timestamp_from_untrusted_tsa(w: World, c: VerifiedCertificate) -> Row:
    tsa = make_tsa(w.root / "tsa")
    env = _signed_as(_statement(c), [(w.key, RE, "authorship")], timestamper=tsa.stamp_message)
    other = make_tsa(w.root / "other", name="Other TSA")
    authorities = (TimestampAuthority("other", other.root_pem),)
    return env, {"trust": with_roles(w.trust, {}, timestamp_authorities=authorities)}


TRUST_ROWS: list[tuple[Case, str]] = [
    (threshold_two_one_signature, "UNTRUSTED_KEY"),
    (same_key_twice_threshold_two, "UNTRUSTED_KEY"),
    (duplicated_key_ids_threshold_two, "UNTRUSTED_KEY"),
    (key_window_ended, "UNTRUSTED_KEY"),
    (key_not_yet_valid, "UNTRUSTED_KEY"),
    (revoked_key, "KEY_REVOKED"),
    (untrusted_key, "UNTRUSTED_KEY"),
    (requirement_unmet_plain_signature, "SIGNATURES_INSUFFICIENT"),
    (role_claimed_not_held, "SIGNATURES_INSUFFICIENT"),
    (timestamped_after_key_compromise, "KEY_REVOKED"),
    (timestamped_after_key_window, "UNTRUSTED_KEY"),
    (timestamp_from_untrusted_tsa, "TIMESTAMP_INVALID"),
]

# ------------------------------------------------------------------ hostile shapes


def _envelope_with(**fields: Any) -> Callable[[World, VerifiedCertificate], Row]:
    def case(w: World, c: VerifiedCertificate) -> Row:
        env = _signed(_statement(c), w.key)
        env.update(fields)
        return env, {}

    return case


def _signature_with(**fields: Any) -> Callable[[World, VerifiedCertificate], Row]:
    def case(w: World, c: VerifiedCertificate) -> Row:
        env = _signed(_statement(c), w.key)
        env["signatures"][0].update(fields)
        return env, {}

    return case


def _signed_statement(change: Callable[[dict[str, Any]], Any]) -> Case:
    def case(w: World, c: VerifiedCertificate) -> Row:
        statement = _statement(c)
        change(statement)
        return _signed(statement, w.key), {}

    return case


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": [value]}
    return value


def _bom(w: World, c: VerifiedCertificate, change: Callable[[dict[str, Any]], Any]) -> Row:
    from attest.interop.cyclonedx import cyclonedx_bom

    bom = cyclonedx_bom(c)
    change(bom)
    return bom, {"certificate": True}


def _bom_case(change: Callable[[dict[str, Any]], Any]) -> Case:
    return lambda w, c: _bom(w, c, change)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change that sets the field at a dotted ``path`` (list indexes as numbers)."""

    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[int(last) if isinstance(node, list) else last] = value

    return change


def _huge_result(w: World, c: VerifiedCertificate) -> Row:
    """A number too large for any float, signed (canonical JSON would refuse to write it)."""
    statement = _statement(c)
    statement["predicate"]["result"] = 10**400
    return _signed(json.dumps(statement).encode(), w.key), {}


def _subject_twice(w: World, c: VerifiedCertificate) -> Row:
    statement = _statement(c)
    statement["subject"].append(statement["subject"][0])
    return _signed(statement, w.key), {"certificate": True}


def _component_twice(bom: dict[str, Any]) -> None:
    """The first component again under another bom-ref: the names no longer map one to one."""
    bom["components"].append(dict(bom["components"][0], **{"bom-ref": "again"}))


def _named(case: Case, name: str) -> Case:
    case.__name__ = name
    return case


HOSTILE_ROWS: list[tuple[Case, str]] = [
    (_named(lambda w, c: ([1, 2], {}), "json_list"), "MALFORMED"),
    (_named(lambda w, c: ("text", {}), "json_string"), "MALFORMED"),
    (_named(lambda w, c: (10**30, {}), "json_huge_number"), "MALFORMED"),
    (_named(lambda w, c: ({}, {}), "empty_object"), "MALFORMED"),
    (_named(_envelope_with(signatures={}), "signatures_an_object"), "MALFORMED"),
    (_named(_envelope_with(signatures=[1, "x", None]), "signatures_not_objects"), "MALFORMED"),
    (_named(_envelope_with(signatures=[]), "no_signatures"), "MALFORMED"),
    (_named(_envelope_with(payload=12), "payload_a_number"), "MALFORMED"),
    (_named(_envelope_with(payload=None), "payload_null"), "MALFORMED"),
    (_named(_envelope_with(payloadType=["x"]), "payload_type_a_list"), "MALFORMED"),
    (_named(_envelope_with(extra={"x": 1}), "extra_envelope_field"), "MALFORMED"),
    (_named(_signature_with(keyid=7), "keyid_a_number"), "MALFORMED"),
    (_named(_signature_with(sig=10**40), "sig_a_huge_number"), "MALFORMED"),
    (_named(_signature_with(sig={"a": 1}), "sig_an_object"), "MALFORMED"),
    (_named(_signature_with(signer="me"), "signer_a_string"), "MALFORMED"),
    (_named(_signature_with(extra=1), "extra_signature_field"), "MALFORMED"),
    (
        _named(lambda w, c: (_signed(_statement(c), *[w.key] * 33), {}), "too_many_signatures"),
        "MALFORMED",
    ),
    (
        _named(
            lambda w, c: (sign_raw(_statement(c), [w.key], "application/json"), {}),
            "other_payload_type",
        ),
        "MALFORMED",
    ),
    (
        _named(lambda w, c: (_signed(b"[1e999]", w.key), {}), "signed_payload_infinity"),
        "MALFORMED",
    ),
    (_named(lambda w, c: (_signed([1, 2], w.key), {}), "signed_payload_a_list"), "MALFORMED"),
    (_named(_signed_statement(_set("subject", "abc")), "subject_a_string"), "MALFORMED"),
    (_named(_signed_statement(_set("subject.0", 5)), "subject_item_a_number"), "MALFORMED"),
    (_named(_signed_statement(_set("subject.0.digest", [])), "digest_a_list"), "MALFORMED"),
    (_named(_signed_statement(_set("predicate", [])), "predicate_a_list"), "MALFORMED"),
    (_named(_huge_result, "result_huge"), "MALFORMED"),
    (_named(_signed_statement(_set("predicate.result", _deep(40))), "nested_garbage"), "MALFORMED"),
    (
        _named(_signed_statement(_set("predicate.configuration", {"a": 1})), "config_object"),
        "MALFORMED",
    ),
    (_named(_signed_statement(_set("predicate.passedTests", [{}])), "tests_objects"), "MALFORMED"),
    (_named(_signed_statement(_set("predicateType", None)), "predicate_type_null"), "MALFORMED"),
    (
        _named(_subject_twice, "subject_twice"),
        "SUBJECT_MISMATCH",
    ),
    (_named(_bom_case(_set("components", "x")), "bom_components_text"), "MALFORMED"),
    (_named(_bom_case(_set("components", [1, None])), "bom_components_numbers"), "MALFORMED"),
    (_named(_bom_case(_set("components.0.name", 5)), "bom_component_name_number"), "MALFORMED"),
    (_named(_bom_case(_set("components.0.hashes", {"a": 1})), "bom_hashes_object"), "MALFORMED"),
    (_named(_bom_case(_set("externalReferences", [7])), "bom_references_numbers"), "MALFORMED"),
    (_named(_bom_case(_set("metadata", _deep(30))), "bom_nested_garbage"), "MALFORMED"),
    (
        _named(_bom_case(_component_twice), "bom_dup_name"),
        "SUBJECT_MISMATCH",
    ),
    (
        _named(
            lambda w, c: (
                {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "dsseEnvelope": 5},
                {},
            ),
            "bundle_envelope_a_number",
        ),
        "MALFORMED",
    ),
]

TABLE = TRUST_ROWS + HOSTILE_ROWS
IDS = [case.__name__ for case, _ in TABLE]


def _setup(world: tuple[World, VerifiedCertificate], case: Case) -> tuple[Path, dict[str, Any]]:
    w, cert = world
    doc, options = case(w, cert)
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    path = w.root / "export.json"
    path.write_bytes(data)
    return path, options


def test_the_untampered_exports_hold(world: tuple[World, VerifiedCertificate]) -> None:
    from attest.interop.cyclonedx import cyclonedx_bom

    w, cert = world
    for doc in (_signed(_statement(cert), w.key), cyclonedx_bom(cert)):
        path = w.write(doc, "good.json")
        result = check_export(path, w.trust, cert, NOW)
        assert result.reasons == [], result.reasons


@pytest.mark.parametrize(("case", "code"), TABLE, ids=IDS)
def test_refused_by_the_library(
    world: tuple[World, VerifiedCertificate], case: Case, code: str
) -> None:
    path, options = _setup(world, case)
    cert = world[1] if options.get("certificate") else None
    result = check_export(path, options.get("trust", world[0].trust), cert, NOW)
    assert result.reasons, "the export held"
    assert result.reasons[0][0] == code, result.reasons
    assert all(message for _, message in result.reasons)


@pytest.mark.parametrize(("case", "code"), TABLE, ids=IDS)
def test_refused_on_the_command_line(
    world: tuple[World, VerifiedCertificate],
    case: Case,
    code: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    w, cert = world
    path, options = _setup(world, case)
    trust = save_trust_store(options.get("trust", w.trust), w.root / "trust.yaml")
    args = ["export", "verify", str(path), "--trust", str(trust), "--at", iso(NOW)]
    if options.get("certificate"):
        args += ["--certificate", str(cert.path)]
    args.append("--json")
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    assert info.value.code == 1, out + err
    assert "Traceback" not in out + err
    data = json.loads(out)
    assert data["holds"] is False
    assert data["reasons"][0]["code"] == code
    with pytest.raises(SystemExit) as info:
        main(args[:-1])  # the text form: the code and a reason on each line
    out, _ = capsys.readouterr()
    assert info.value.code == 1 and f"  {code}: " in out


@pytest.mark.parametrize(
    "text",
    [b'{"payload": 1e999, "payloadType": "x", "signatures": []}', b"[NaN]", b"", b"\xff{}"],
    ids=["overflowing_number", "nan", "empty", "not_utf8"],
)
def test_a_file_that_is_not_json_is_bad_input(
    world: tuple[World, VerifiedCertificate], text: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    w, _ = world
    path = w.root / "export.json"
    path.write_bytes(text)
    trust = save_trust_store(w.trust, w.root / "trust.yaml")
    with pytest.raises(SystemExit) as info:
        main(["export", "verify", str(path), "--trust", str(trust), "--json"])
    out, err = capsys.readouterr()
    assert info.value.code == 2 and "not valid JSON" in err
    assert "Traceback" not in out + err


def test_a_revoked_certificate_is_not_restated(
    world: tuple[World, VerifiedCertificate], capsys: pytest.CaptureFixture[str]
) -> None:
    """--revocations: the certificate an export restates is judged with its revocations."""
    from attest.certificate.revocation import revocation_envelope

    w, cert = world
    export = w.write(_signed(_statement(cert), w.key), "tr.json")
    revocation = revocation_envelope(
        json.loads(cert.path.read_text()), w.second, reason="wrong weights", revoked_by="Dr Test",
        revoked_at=NOW - timedelta(hours=1),
    )  # fmt: skip
    rev = w.write(revocation, "rev.json")
    trust = save_trust_store(w.trust, w.root / "trust.yaml")
    base = ["export", "verify", str(export), "--trust", str(trust), "--at", iso(NOW)]
    with pytest.raises(SystemExit) as info:
        main([*base, "--certificate", str(cert.path)])
    assert info.value.code == 0, capsys.readouterr()
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main([*base, "--certificate", str(cert.path), "--revocations", str(rev)])
    _out, err = capsys.readouterr()
    assert info.value.code == 2 and "CERTIFICATE_REVOKED" in err
