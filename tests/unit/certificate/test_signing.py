"""Keys, PAE, canonical JSON and DSSE envelopes (attest.certificate.signing, attest.certificate.statement)."""

from __future__ import annotations

import base64
import hashlib
import json
import stat
from pathlib import Path

import pytest
from _certfactory import NOW, make_world
from cryptography.hazmat.primitives import serialization

from attest.certificate.format import compare_versions
from attest.certificate.signing import (
    PASSPHRASE_ENV,
    canonical_json,
    generate_keypair,
    key_id,
    load_private_key,
    load_public_key,
    pae,
    verify_signature,
)
from attest.certificate.statement import PAYLOAD_TYPE, Statement, sign_statement
from attest.core.times import parse_timestamp
from attest.errors import InputError, KeyError_, SigningError

VECTORS = Path(__file__).resolve().parents[2] / "vectors"  # vendored, see tests/vectors/README.md


def test_pae_matches_the_dsse_vector() -> None:
    vector = json.loads((VECTORS / "dsse.json").read_text())
    got = pae(vector["payload_type"], vector["payload_utf8"].encode())
    assert got == vector["pae_utf8"].encode()


def test_pae_counts_bytes_not_characters() -> None:
    assert pae("t", "é".encode()) == b"DSSEv1 1 t 2 " + "é".encode()


def test_canonical_json_is_rfc8785() -> None:
    assert canonical_json({"b": 1, "a": [1.0, "x"], "c": 1e21}) == b'{"a":[1,"x"],"b":1,"c":1e+21}'
    with pytest.raises(SigningError):
        canonical_json({"x": float("nan")})


@pytest.mark.parametrize("algorithm", ["ed25519", "ecdsa-p256"])
def test_keygen_writes_an_encrypted_key_0600_and_refuses_to_overwrite(
    tmp_path: Path, algorithm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_path, pub_path, keyid = generate_keypair(
        tmp_path / "k" / "release",
        algorithm=algorithm,
        passphrase=b"correct horse",  # type: ignore[arg-type]
    )
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert b"ENCRYPTED PRIVATE KEY" in key_path.read_bytes()
    public = load_public_key(pub_path)
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert keyid == key_id(public) == hashlib.sha256(der).hexdigest()
    with pytest.raises(InputError, match="refusing to overwrite"):
        generate_keypair(tmp_path / "k" / "release", passphrase=None)
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)
    with pytest.raises(KeyError_, match="no passphrase"):
        load_private_key(key_path, prompt=False)
    monkeypatch.setenv(PASSPHRASE_ENV, "wrong")
    with pytest.raises(KeyError_, match="wrong passphrase"):
        load_private_key(key_path, prompt=False)
    monkeypatch.setenv(PASSPHRASE_ENV, "correct horse")
    loaded = load_private_key(key_path, prompt=False)
    assert loaded.keyid == keyid
    assert "PRIVATE" not in repr(loaded) and keyid[:16] in repr(loaded)
    signature = loaded.sign(b"message")
    assert verify_signature(public, signature, b"message")
    assert not verify_signature(public, signature, b"messagE")
    assert not verify_signature(public, b"", b"message")


def test_sign_statement_makes_a_dsse_envelope_over_canonical_bytes(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    statement = Statement.from_json_dict(world.statement())
    envelope = sign_statement(statement, [world.key, world.second])
    assert set(envelope) == {"payload", "payloadType", "signatures"}
    assert envelope["payloadType"] == PAYLOAD_TYPE
    payload = base64.b64decode(envelope["payload"])
    assert payload == statement.signed_bytes == canonical_json(json.loads(payload))
    assert json.loads(payload)["_type"] == "https://in-toto.io/Statement/v1"
    for signature, key in zip(envelope["signatures"], [world.key, world.second], strict=True):
        assert signature["keyid"] == key.keyid
        sig = base64.b64decode(signature["sig"])
        assert verify_signature(key.public_key, sig, pae(PAYLOAD_TYPE, payload))
    with pytest.raises(SigningError):
        sign_statement(statement, [])


def test_statement_model_refuses_bad_statements(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    good = world.statement()
    Statement.from_json_dict(good)
    for edit in (
        lambda s: s.update(extra=1),
        lambda s: s["predicate"].update(verdict="maybe"),
        lambda s: s["predicate"]["model"].update(version="one"),
        lambda s: s["predicate"].update(expires_at=s["predicate"]["issued_at"]),
        lambda s: s["predicate"].update(issued_at="2026-02-30T00:00:00Z"),
        lambda s: s["subject"][0].update(name="/etc/passwd"),
        lambda s: s["subject"][0].update(name="a/../b"),
        lambda s: s["subject"][0]["digest"].update(sha256="ABC"),
        lambda s: s.update(subject=[]),
        lambda s: s["subject"].append(dict(s["subject"][0])),
        lambda s: s.update(predicateType="x"),
    ):
        bad = json.loads(json.dumps(good))
        edit(bad)
        with pytest.raises(InputError):
            Statement.from_json_dict(bad)


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.9.0", "1.10.0"),
        ("1.2.0", "1.2.1"),
        ("1.0.0-rc.1", "1.0.0"),
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-beta.2", "1.0.0-beta.11"),
        ("0.9", "1"),
        ("2.0.0", "10.0.0"),
    ],
)
def test_versions_order_like_semver(lower: str, higher: str) -> None:
    assert compare_versions(lower, higher) == -1
    assert compare_versions(higher, lower) == 1


def test_versions_equal_and_invalid() -> None:
    assert compare_versions("1.2", "1.2.0") == 0
    assert compare_versions("1.2.0+build.5", "1.2.0") == 0
    with pytest.raises(ValueError):
        compare_versions("1.x", "1.0")


def test_timestamps() -> None:
    assert parse_timestamp("2026-06-01T12:00:00Z") == NOW
    assert parse_timestamp("2026-06-01T14:00:00+02:00") == NOW
    assert parse_timestamp("2026-06-01") == NOW.replace(hour=0)
    with pytest.raises(ValueError):
        parse_timestamp("2026-06-01T12:00:00")
