"""A table of tampered and malformed certificates, each rejected with its reason code.

Every row is checked twice: through :func:`attest.verification.verifier.verify` (the code) and through the
command line (exit code 1, the code in ``--json``, no traceback).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _certfactory import NOW, World, decode, encode, iso, make_world, sign_raw
from _folder_cases import ROWS as FOLDER_ROWS
from _policy_cases import POLICY_ROWS
from _signer_cases import ROWS

from attest.cli import main
from attest.verification.trust import revoke_key, save_trust_store

Case = Callable[[World], tuple[Path, dict[str, Any]]]


def _flip(data: bytes, index: int) -> bytes:
    out = bytearray(data)
    out[index] ^= 0x01
    return bytes(out)


def payload_byte_flip(w: World) -> tuple[Path, dict[str, Any]]:
    payload, ptype, sigs = decode(w.envelope())
    return w.write(encode(_flip(payload, 40), ptype, [(w.key.keyid, sigs[0])])), {}


def payload_last_byte_flip(w: World) -> tuple[Path, dict[str, Any]]:
    payload, ptype, sigs = decode(w.envelope())
    flipped = payload[:-1] + b"]"  # still ends the JSON oddly: signature fails first
    return w.write(encode(flipped, ptype, [(w.key.keyid, sigs[0])])), {}


def signature_byte_flip(w: World) -> tuple[Path, dict[str, Any]]:
    payload, ptype, sigs = decode(w.envelope())
    return w.write(encode(payload, ptype, [(w.key.keyid, _flip(sigs[0], 5))])), {}


def reencoded_edit(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope()
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["predicate"]["model"]["version"] = "9.9.9"
    env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    return w.write(env), {}


def reencoded_same_json(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope()
    statement = json.loads(base64.b64decode(env["payload"]))
    env["payload"] = base64.b64encode(json.dumps(statement, indent=1).encode()).decode()
    return w.write(env), {}


def swapped_signatures(w: World) -> tuple[Path, dict[str, Any]]:
    first = w.envelope()
    second = sign_raw(w.statement(certificate_id="cert-0002"), [w.key])
    first["signatures"] = second["signatures"]
    return w.write(first), {}


def wrong_key(w: World) -> tuple[Path, dict[str, Any]]:
    return w.write(sign_raw(w.statement(), [w.attacker])), {}


def wrong_key_forged_hint(w: World) -> tuple[Path, dict[str, Any]]:
    env = sign_raw(w.statement(), [w.attacker])
    env["signatures"][0]["keyid"] = w.key.keyid  # the hint lies
    return w.write(env), {}


def revoked_key(w: World) -> tuple[Path, dict[str, Any]]:
    return w.write(w.envelope()), {"trust": revoke_key(w.trust, w.key.keyid, reason="lost")}


def revoked_id_unlisted_hint(w: World) -> tuple[Path, dict[str, Any]]:
    trust = revoke_key(w.trust, w.attacker.keyid, reason="compromised")
    return w.write(sign_raw(w.statement(), [w.attacker])), {"trust": trust}


def key_after_window(w: World) -> tuple[Path, dict[str, Any]]:
    trust = w.with_keys(w.key, not_after=NOW - timedelta(days=2))
    return w.write(w.envelope()), {"trust": trust}


def key_before_window(w: World) -> tuple[Path, dict[str, Any]]:
    trust = w.with_keys(w.key, not_before=NOW + timedelta(days=2))
    return w.write(w.envelope()), {"trust": trust}


def expired(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope(
        issued_at=iso(NOW - timedelta(days=400)), expires_at=iso(NOW - timedelta(days=35))
    )
    return w.write(env), {}


def expired_beyond_skew(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope(expires_at=iso(NOW - timedelta(seconds=61)))
    return w.write(env), {}


def not_yet_valid(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope(
        issued_at=iso(NOW + timedelta(days=1)), expires_at=iso(NOW + timedelta(days=30))
    )
    return w.write(env), {}


def subject_digest_mismatch(w: World) -> tuple[Path, dict[str, Any]]:
    cert = w.write(w.envelope())
    w.onnx.write_bytes(_flip(w.onnx.read_bytes(), 3))
    return cert, {}


def missing_artifact(w: World) -> tuple[Path, dict[str, Any]]:
    return w.write(w.envelope()), {"artifacts": [w.root / "server" / "absent.onnx"]}


def artifact_matches_no_subject(w: World) -> tuple[Path, dict[str, Any]]:
    other = w.root / "server" / "other.bin"
    other.write_bytes(b"other")
    return w.write(w.envelope()), {"artifacts": [w.onnx, other]}


def right_bytes_wrong_name(w: World) -> tuple[Path, dict[str, Any]]:
    renamed = w.root / "renamed.onnx"
    renamed.write_bytes(w.onnx.read_bytes())
    return w.write(w.envelope()), {"artifacts": [renamed]}


def untrusted_extra_below_threshold(w: World) -> tuple[Path, dict[str, Any]]:
    env = sign_raw(w.statement(), [w.key, w.attacker])
    return w.write(env), {"trust": replace(w.trust, threshold=2)}


def same_key_twice_threshold_two(w: World) -> tuple[Path, dict[str, Any]]:
    env = sign_raw(w.statement(), [w.key, w.key])
    return w.write(env), {"trust": replace(w.trust, threshold=2)}


def zero_signatures(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope()
    env["signatures"] = []
    return w.write(env), {}


def empty_signature(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope()
    env["signatures"][0]["sig"] = ""
    return w.write(env), {}


def bad_base64_signature(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope()
    env["signatures"][0]["sig"] = "@@not base64@@"
    return w.write(env), {}


def noncanonical_base64_signature(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope()
    sig = env["signatures"][0]["sig"]  # 64 bytes: "...X==", the last char carries 2 spare bits
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = sig[-3]
    env["signatures"][0]["sig"] = sig[:-3] + alphabet[alphabet.index(last) ^ 1] + "=="
    return w.write(env), {}


def bad_base64_payload(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope()
    env["payload"] = env["payload"][:-3] + "!!!"
    return w.write(env), {}


def wrong_payload_type_signed(w: World) -> tuple[Path, dict[str, Any]]:
    return w.write(sign_raw(w.statement(), [w.key], payload_type="application/json")), {}


def payload_type_changed(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope()
    env["payloadType"] = "application/vnd.in-toto+json; charset=x"
    return w.write(env), {}


def wrong_statement_type(w: World) -> tuple[Path, dict[str, Any]]:
    statement = w.statement()
    statement["_type"] = "https://in-toto.io/Statement/v0.1"
    return w.write(sign_raw(statement, [w.key])), {}


def wrong_predicate_type(w: World) -> tuple[Path, dict[str, Any]]:
    statement = w.statement()
    statement["predicateType"] = "https://slsa.dev/provenance/v1"
    return w.write(sign_raw(statement, [w.key])), {}


def schema_violation(w: World) -> tuple[Path, dict[str, Any]]:
    statement = w.statement()
    del statement["predicate"]["certificate_id"]
    return w.write(sign_raw(statement, [w.key])), {}


def subject_path_escape(w: World) -> tuple[Path, dict[str, Any]]:
    statement = w.statement()
    statement["subject"][0]["name"] = "../model.onnx"
    return w.write(sign_raw(statement, [w.key])), {}


def duplicate_subject_names(w: World) -> tuple[Path, dict[str, Any]]:
    statement = w.statement()
    statement["subject"].append(dict(statement["subject"][0]))
    return w.write(sign_raw(statement, [w.key])), {}


def expires_before_issued(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope(issued_at=iso(NOW), expires_at=iso(NOW - timedelta(hours=1)))
    return w.write(env), {}


def verdict_fail(w: World) -> tuple[Path, dict[str, Any]]:
    return w.write(w.envelope(verdict="fail")), {}


def rollback(w: World) -> tuple[Path, dict[str, Any]]:
    state = w.root / "state.json"
    state.write_text(json.dumps({"version": 1, "models": {"digits-cnn": {"version": "1.10.0"}}}))
    return w.write(w.envelope()), {"state_file": state}


def duplicate_keys_envelope(w: World) -> tuple[Path, dict[str, Any]]:
    text = json.dumps(w.envelope())
    return w.write(('{"payloadType": "x", ' + text[1:]).encode()), {}


def duplicate_keys_payload(w: World) -> tuple[Path, dict[str, Any]]:
    body = json.dumps(w.statement())
    payload = ('{"_type": "x", ' + body[1:]).encode()
    return w.write(sign_raw(payload, [w.key])), {}


def nan_in_envelope(w: World) -> tuple[Path, dict[str, Any]]:
    text = json.dumps(w.envelope())
    return w.write(text[:-1].encode() + b', "x": NaN}'), {}


def infinity_in_payload(w: World) -> tuple[Path, dict[str, Any]]:
    body = json.dumps(w.statement())
    return w.write(sign_raw(body[:-1].encode() + b', "x": Infinity}', [w.key])), {}


def seventeen_mib(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope()
    env["padding"] = "A" * (17 * 1024 * 1024)
    return w.write(env), {}


def deep_nesting(w: World) -> tuple[Path, dict[str, Any]]:
    return w.write(b"[" * 10_000 + b"]" * 10_000), {}


def truncated(w: World) -> tuple[Path, dict[str, Any]]:
    data = json.dumps(w.envelope()).encode()
    return w.write(data[: len(data) // 2]), {}


def non_utf8(w: World) -> tuple[Path, dict[str, Any]]:
    data = json.dumps(w.envelope()).encode()
    return w.write(data[:10] + b"\xff\xfe" + data[10:]), {}


def byte_order_mark(w: World) -> tuple[Path, dict[str, Any]]:
    return w.write(b"\xef\xbb\xbf" + json.dumps(w.envelope()).encode()), {}


def not_an_object(w: World) -> tuple[Path, dict[str, Any]]:
    return w.write(json.dumps([w.envelope()]).encode()), {}


def extra_envelope_field(w: World) -> tuple[Path, dict[str, Any]]:
    env = w.envelope()
    env["payloadType2"] = "x"
    return w.write(env), {}


def empty_file(w: World) -> tuple[Path, dict[str, Any]]:
    return w.write(b""), {}


def directory_extra_file(w: World) -> tuple[Path, dict[str, Any]]:
    bundle = _bundle(w)
    cert = w.write(sign_raw(_bundle_statement(w, bundle), [w.key]))
    (bundle / "planted.py").write_text("print('hi')")
    return cert, {"artifacts": [bundle]}


def directory_missing_file(w: World) -> tuple[Path, dict[str, Any]]:
    bundle = _bundle(w)
    cert = w.write(sign_raw(_bundle_statement(w, bundle), [w.key]))
    (bundle / "sub" / "b.txt").unlink()
    return cert, {"artifacts": [bundle]}


def directory_symlink(w: World) -> tuple[Path, dict[str, Any]]:
    bundle = _bundle(w)
    cert = w.write(sign_raw(_bundle_statement(w, bundle), [w.key]))
    (bundle / "sub" / "b.txt").unlink()
    os.symlink(w.weights, bundle / "sub" / "b.txt")
    return cert, {"artifacts": [bundle]}


def probe_extension_missing(w: World) -> tuple[Path, dict[str, Any]]:
    return w.write(w.envelope()), {"probe": w.probe, "_probe_module": "attest.no_such_probe"}


def _bundle(w: World) -> Path:
    bundle = w.root / "server" / "tokenizer"
    (bundle / "sub").mkdir(parents=True)
    (bundle / "a.txt").write_text("a")
    (bundle / "sub" / "b.txt").write_text("b")
    return bundle


def _bundle_statement(w: World, bundle: Path) -> dict[str, Any]:
    from attest.certificate.statement import subjects_from_paths

    statement = w.statement()
    statement["subject"] += [
        {"name": n, "digest": {"sha256": d}}
        for n, d in subjects_from_paths({"tokenizer": bundle}).items()
    ]
    return statement


TABLE: list[tuple[Case, str]] = [
    (payload_byte_flip, "SIGNATURE_INVALID"),
    (payload_last_byte_flip, "SIGNATURE_INVALID"),
    (signature_byte_flip, "SIGNATURE_INVALID"),
    (reencoded_edit, "SIGNATURE_INVALID"),
    (reencoded_same_json, "SIGNATURE_INVALID"),
    (swapped_signatures, "SIGNATURE_INVALID"),
    (wrong_key, "UNTRUSTED_KEY"),
    (wrong_key_forged_hint, "SIGNATURE_INVALID"),
    (revoked_key, "KEY_REVOKED"),
    (revoked_id_unlisted_hint, "KEY_REVOKED"),
    (key_after_window, "UNTRUSTED_KEY"),
    (key_before_window, "UNTRUSTED_KEY"),
    (expired, "EXPIRED"),
    (expired_beyond_skew, "EXPIRED"),
    (not_yet_valid, "NOT_YET_VALID"),
    (subject_digest_mismatch, "SUBJECT_MISMATCH"),
    (missing_artifact, "ARTIFACT_MISSING"),
    (artifact_matches_no_subject, "SUBJECT_MISMATCH"),
    (right_bytes_wrong_name, "SUBJECT_MISMATCH"),
    (untrusted_extra_below_threshold, "UNTRUSTED_KEY"),
    (same_key_twice_threshold_two, "UNTRUSTED_KEY"),
    (zero_signatures, "MALFORMED"),
    (empty_signature, "SIGNATURE_INVALID"),
    (bad_base64_signature, "MALFORMED"),
    (noncanonical_base64_signature, "MALFORMED"),
    (bad_base64_payload, "MALFORMED"),
    (wrong_payload_type_signed, "MALFORMED"),
    (payload_type_changed, "SIGNATURE_INVALID"),
    (wrong_statement_type, "MALFORMED"),
    (wrong_predicate_type, "MALFORMED"),
    (schema_violation, "MALFORMED"),
    (subject_path_escape, "MALFORMED"),
    (duplicate_subject_names, "MALFORMED"),
    (expires_before_issued, "MALFORMED"),
    (verdict_fail, "POLICY_FAILED"),
    (rollback, "ROLLBACK"),
    (duplicate_keys_envelope, "MALFORMED"),
    (duplicate_keys_payload, "MALFORMED"),
    (nan_in_envelope, "MALFORMED"),
    (infinity_in_payload, "MALFORMED"),
    (seventeen_mib, "MALFORMED"),
    (deep_nesting, "MALFORMED"),
    (truncated, "MALFORMED"),
    (non_utf8, "MALFORMED"),
    (byte_order_mark, "MALFORMED"),
    (not_an_object, "MALFORMED"),
    (extra_envelope_field, "MALFORMED"),
    (empty_file, "MALFORMED"),
    (directory_extra_file, "SUBJECT_MISMATCH"),
    (directory_missing_file, "ARTIFACT_MISSING"),
    (directory_symlink, "SUBJECT_MISMATCH"),
    (probe_extension_missing, "PROBE_MISMATCH"),
    *FOLDER_ROWS,  # a folder bound through its manifest (tests/unit/_folder_cases.py)
    *POLICY_ROWS,  # accepted policies (tests/unit/verification/_policy_cases.py)
    *ROWS,  # signer attestations, roles, timestamps, revocations (tests/unit/_signer_cases.py)
]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def test_table_is_large_and_covers_the_codes() -> None:
    assert len(TABLE) >= 30
    from attest.verification.verifier import REASON_CODES

    covered = {code for _, code in TABLE}
    # ENVIRONMENT_MISMATCH needs the deployment extension; it is tested in test_verify_env.
    # REVOCATION_STATUS_UNKNOWN comes from verify --ledger URL (tests/cli/test_cli_ledger_service),
    # WITNESS_QUORUM_NOT_MET and LEDGER_PROOF_INVALID from verify --ledger URL / --ledger-proof
    # (tests/cli/test_cli_ledger_witness_policy.py).
    assert set(REASON_CODES) - covered <= {
        "ENVIRONMENT_MISMATCH",
        "REVOCATION_STATUS_UNKNOWN",
        "WITNESS_QUORUM_NOT_MET",
        "LEDGER_PROOF_INVALID",
    }


def test_the_untampered_certificate_verifies(world: World) -> None:
    report = world.verify(world.write(world.envelope()))
    assert report.verified, report.reasons
    assert report.subjects_checked == ["model.onnx", "probe.npz"]
    assert report.subjects_not_checked == ["weights.safetensors"]


@pytest.mark.parametrize(("case", "code"), TABLE, ids=[case.__name__ for case, _ in TABLE])
def test_rejected_with_reason_code(
    world: World, case: Case, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, kwargs = case(world)
    probe_module = kwargs.pop("_probe_module", None)
    if probe_module:
        monkeypatch.setattr("attest.verification.verifier.PROBE_MODULE", probe_module)
    report = world.verify(cert, **kwargs)
    assert not report.verified
    assert report.statement is None
    assert report.codes[0] == code, report.reasons
    assert all(message for _, message in report.reasons)


@pytest.mark.parametrize(("case", "code"), TABLE, ids=[case.__name__ for case, _ in TABLE])
def test_rejected_on_the_command_line(
    world: World,
    case: Case,
    code: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cert, kwargs = case(world)
    probe_module = kwargs.pop("_probe_module", None)
    if probe_module:
        monkeypatch.setattr("attest.verification.verifier.PROBE_MODULE", probe_module)
    trust_path = save_trust_store(kwargs.pop("trust", world.trust), world.root / "trust.yaml")
    args = ["verify", str(cert), "--trust", str(trust_path), "--at", iso(NOW), "--json"]
    for artifact in kwargs.pop("artifacts", [world.onnx, world.probe]):
        args += ["--artifact", str(artifact)]
    if "state_file" in kwargs:
        args += ["--state-file", str(kwargs.pop("state_file"))]
    if "probe" in kwargs:
        args += ["--probe", str(kwargs.pop("probe"))]
    for accepted in kwargs.pop("accepted_policies", []):
        args += ["--require-policy", accepted.label()]
    for index, (_, data) in enumerate(kwargs.pop("revocations", [])):
        path = world.root / f"revocation-{index}.json"
        path.write_bytes(data)
        args += ["--revocations", str(path)]
    assert not kwargs
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 1, err
    assert "Traceback" not in out + err
    data = json.loads(out)
    assert data["verified"] is False
    assert data["reasons"][0]["code"] == code
