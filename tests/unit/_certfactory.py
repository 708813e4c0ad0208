"""Test helper: a small world of keys, artifacts and a trust store, and certificates over it.

Certificates can be built from raw statement dicts (bypassing the pydantic models) so that the
tests can sign statements that are deliberately wrong.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from attest.certificate.format import PAYLOAD_TYPE
from attest.certificate.signing import (
    PrivateKey,
    canonical_json,
    dsse_envelope,
    key_id,
    public_key_pem,
)
from attest.certificate.statement import build_statement, subjects_from_paths
from attest.core.times import format_timestamp
from attest.verification.trust import TrustStore, add_key, empty_trust_store
from attest.verification.verifier import VerificationReport, verify

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=timezone.utc)


def new_key(algorithm: str = "ed25519") -> PrivateKey:
    """A fresh in-memory signing key."""
    private: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey
    if algorithm == "ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
    else:
        private = ec.generate_private_key(ec.SECP256R1())
    return PrivateKey(key=private, keyid=key_id(private.public_key()))


def sign_raw(
    statement: dict[str, Any] | bytes,
    keys: list[PrivateKey],
    payload_type: str = PAYLOAD_TYPE,
) -> dict[str, Any]:
    """An envelope over a statement dict (canonicalized) or over exact payload bytes."""
    payload = statement if isinstance(statement, bytes) else canonical_json(statement)
    return dsse_envelope(payload, payload_type, keys)


def decode(envelope: dict[str, Any]) -> tuple[bytes, str, list[bytes]]:
    """(payload bytes, payloadType, signature bytes) of an envelope."""
    return (
        base64.b64decode(envelope["payload"]),
        envelope["payloadType"],
        [base64.b64decode(s["sig"]) for s in envelope["signatures"]],
    )


def encode(payload: bytes, payload_type: str, sigs: list[tuple[str, bytes]]) -> dict[str, Any]:
    """An envelope from parts (no signing)."""
    return {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": payload_type,
        "signatures": [{"keyid": k, "sig": base64.b64encode(s).decode("ascii")} for k, s in sigs],
    }


@dataclass
class World:
    """Artifacts on disk, a trusted key, a second trusted key, an attacker key, a trust store."""

    root: Path
    key: PrivateKey
    second: PrivateKey
    attacker: PrivateKey
    trust: TrustStore
    onnx: Path
    probe: Path
    weights: Path

    def statement(self, **predicate: Any) -> dict[str, Any]:
        """A valid statement (as JSON data) over the three artifacts; predicate fields override."""
        subjects = subjects_from_paths(
            {
                "model.onnx": self.onnx,
                "probe.npz": self.probe,
                "weights.safetensors": self.weights,
            }
        )
        data = build_statement(
            subjects=subjects,
            model={"name": "digits-cnn", "version": "1.2.0"},
            policy={"id": "clinical-strict", "version": "1", "digest": {"sha256": "a" * 64}},
            verdict="pass",
            issued_at=NOW - timedelta(days=1),
            certificate_id="cert-0001",
        ).to_json_dict()
        data["predicate"].update(predicate)
        return data

    def envelope(self, **predicate: Any) -> dict[str, Any]:
        """A valid envelope signed by the trusted key."""
        return sign_raw(self.statement(**predicate), [self.key])

    def write(self, envelope: dict[str, Any] | bytes, name: str = "cert.json") -> Path:
        path = self.root / name
        data = envelope if isinstance(envelope, bytes) else json.dumps(envelope).encode()
        path.write_bytes(data)
        return path

    def verify(self, cert: Path, **kwargs: Any) -> VerificationReport:
        kwargs.setdefault("trust", self.trust)
        kwargs.setdefault("artifacts", [self.onnx, self.probe])
        kwargs.setdefault("at", NOW)
        return verify(cert, **kwargs)

    def with_keys(self, *keys: PrivateKey, threshold: int = 1, **window: Any) -> TrustStore:
        store = empty_trust_store("test trust store")
        for index, key in enumerate(keys):
            store, _ = add_key(store, public_key_pem(key.public_key), name=f"key{index}", **window)
        return replace(store, threshold=threshold)


def make_world(root: Path) -> World:
    """A world under ``root`` (a tmp_path)."""
    art = root / "server"
    art.mkdir()
    onnx = art / "model.onnx"
    # Well-formed protobuf (ir_version 7, producer_name repeated): the verifier scans .onnx
    # subjects for external data and refuses what does not parse.
    onnx.write_bytes(b"\x08\x07" + b"\x12\x10onnx-model-bytes" * 64)
    probe = art / "probe.npz"
    probe.write_bytes(b"PK\x03\x04probe-bundle" * 32)
    weights = root / "weights.safetensors"
    weights.write_bytes(b"weights" * 100)
    key, second, attacker = new_key(), new_key("ecdsa-p256"), new_key()
    world = World(root, key, second, attacker, empty_trust_store("x"), onnx, probe, weights)
    world.trust = world.with_keys(key, second)
    return world


def iso(moment: datetime) -> str:
    return format_timestamp(moment)


def sign_as(
    statement: dict[str, Any],
    signers: list[tuple[PrivateKey, str, str]],
    *,
    timestamper: Any = None,
) -> dict[str, Any]:
    """An envelope whose signatures carry signer attestations: ``(key, role, meaning)`` each,
    signed by "Dr Test <role>"; with ``timestamper`` (message -> token), timestamped."""
    from attest.certificate.signers import SignerIdentity, sign_payload

    return sign_payload(
        canonical_json(statement),
        PAYLOAD_TYPE,
        [k for k, _, _ in signers],
        [SignerIdentity(f"Dr Test {role}", role, meaning) for _, role, meaning in signers],
        timestamper=timestamper,
    )


def with_roles(store: TrustStore, roles: dict[str, tuple[str, ...]], **changes: Any) -> TrustStore:
    """``store`` with roles given to keys (by key id) and other fields replaced."""
    keys = tuple(replace(k, roles=roles.get(k.keyid, k.roles)) for k in store.keys)
    return replace(store, keys=keys, **changes)
