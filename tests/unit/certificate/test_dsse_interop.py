"""Interoperability with a standard DSSE implementation (securesystemslib, test-only)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from _certfactory import make_world, new_key, sign_raw
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from attest.certificate.format import PAYLOAD_TYPE
from attest.certificate.signing import canonical_json, public_key_pem
from attest.verification.trust import add_key, empty_trust_store

dsse = pytest.importorskip("securesystemslib.dsse")
sslib_signer = pytest.importorskip("securesystemslib.signer")
sslib_exceptions = pytest.importorskip("securesystemslib.exceptions")


@pytest.mark.parametrize("algorithm", ["ed25519", "ecdsa-p256"])
def test_our_envelope_verifies_with_securesystemslib(tmp_path: Path, algorithm: str) -> None:
    world = make_world(tmp_path)
    key = new_key(algorithm)
    envelope = sign_raw(world.statement(), [key])
    theirs = dsse.Envelope.from_dict(json.loads(json.dumps(envelope)))
    public = sslib_signer.SSlibKey.from_crypto(key.public_key, keyid=key.keyid)
    accepted = theirs.verify([public], 1)
    assert list(accepted) == [key.keyid]
    assert theirs.payload == base64.b64decode(envelope["payload"])
    # and it really checks: a flipped payload byte is refused by securesystemslib too
    tampered = dsse.Envelope.from_dict(json.loads(json.dumps(envelope)))
    assert b'"1.2.0"' in tampered.payload
    tampered.payload = tampered.payload.replace(b'"1.2.0"', b'"1.2.1"')
    with pytest.raises(sslib_exceptions.VerificationError):
        tampered.verify([public], 1)


@pytest.mark.parametrize("algorithm", ["ed25519", "ecdsa-p256"])
def test_securesystemslib_envelope_verifies_with_ours(tmp_path: Path, algorithm: str) -> None:
    world = make_world(tmp_path)
    private: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey
    if algorithm == "ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
    else:
        private = ec.generate_private_key(ec.SECP256R1())
    signer = sslib_signer.CryptoSigner(private)  # its key id is securesystemslib's, not ours
    envelope = dsse.Envelope(canonical_json(world.statement()), PAYLOAD_TYPE, {})
    envelope.sign(signer)
    cert = world.write(envelope.to_dict(), "sslib.json")
    trust, _ = add_key(
        empty_trust_store("interop"), public_key_pem(private.public_key()), name="sslib"
    )
    report = world.verify(cert, trust=trust)
    assert report.verified, report.reasons
    # the same envelope is rejected when the key is not trusted
    assert world.verify(cert).codes == ["UNTRUSTED_KEY"]


def test_signer_attestations_leave_the_dsse_signature_verifiable(tmp_path: Path) -> None:
    """The signer block is an extra signature field: securesystemslib keeps it and still
    verifies the release signature over the payload (issue 21)."""
    from _certfactory import sign_as

    world = make_world(tmp_path)
    envelope = sign_as(
        world.statement(),
        [
            (world.key, "release-engineer", "authorship"),
            (world.second, "clinical-safety", "approval"),
        ],
    )
    theirs = dsse.Envelope.from_dict(json.loads(json.dumps(envelope)))
    keys = [
        sslib_signer.SSlibKey.from_crypto(k.public_key, keyid=k.keyid)
        for k in (world.key, world.second)
    ]
    assert sorted(theirs.verify(keys, 2)) == sorted([world.key.keyid, world.second.keyid])
    assert "signer" in theirs.to_dict()["signatures"][0]  # kept on a round trip
