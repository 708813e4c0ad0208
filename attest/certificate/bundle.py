"""The certificate as a Sigstore bundle v0.3 (``attest certify --format sigstore-bundle``,
``attest export bundle``), and back.

A Sigstore bundle (``application/vnd.dev.sigstore.bundle.v0.3+json``, sigstore/protobuf-specs)
carries a DSSE envelope with the material to verify it; with a long-lived key that material is
``verificationMaterial.publicKey.hint`` (the key's id) and no transparency-log entry::

    {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
     "verificationMaterial": {"publicKey": {"hint": "<keyid>"}, "tlogEntries": []},
     "dsseEnvelope": {"payload": "...", "payloadType": "application/vnd.in-toto+json",
                      "signatures": [{"sig": "...", "keyid": "<keyid>"}]}}

The envelope inside is the certificate's own, byte for byte in its payload and signatures, so
cosign, sigstore-python and model-signing's verifiers read it and ours verifies it as the plain
certificate. What the bundle cannot hold is the per-signature ``signer`` block (the Part 11
signer attestation and its timestamp, :mod:`attest.certificate.signers`): the protobuf DSSE
signature has only ``sig`` and ``keyid``. Those signatures still verify, as plain DSSE
signatures that state no meaning (they count toward a threshold, never toward a role
requirement); keep the native certificate (or ``attest archive``) as the regulated record.

Plain dicts only (no pydantic): the verifier unwraps bundles with this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "BUNDLE_MEDIA_TYPE",
    "BundleError",
    "dropped_signer_blocks",
    "envelope_of",
    "is_bundle",
    "to_bundle",
]

BUNDLE_MEDIA_TYPE: Final = "application/vnd.dev.sigstore.bundle.v0.3+json"
_ENVELOPE_KEYS: Final = frozenset({"payload", "payloadType", "signatures"})


class BundleError(ValueError):
    """A document that claims to be a Sigstore bundle but is not one this tool can read."""


def is_bundle(doc: Any) -> bool:
    """Whether ``doc`` (parsed JSON) is in the bundle form (it names a ``mediaType``)."""
    return isinstance(doc, Mapping) and "mediaType" in doc


def to_bundle(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """The bundle form of a DSSE envelope; the hint is the first signature's key id."""
    signatures = [
        {"sig": str(s["sig"]), "keyid": str(s.get("keyid", ""))} for s in envelope["signatures"]
    ]
    if not signatures:
        raise BundleError("the envelope has no signature to put in a bundle")
    return {
        "mediaType": BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": signatures[0]["keyid"]}, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": envelope["payload"],
            "payloadType": envelope["payloadType"],
            "signatures": signatures,
        },
    }


def dropped_signer_blocks(envelope: Mapping[str, Any]) -> int:
    """How many signer attestations the bundle form would not carry."""
    return sum(
        1 for s in envelope.get("signatures") or [] if isinstance(s, Mapping) and "signer" in s
    )


def envelope_of(doc: Any) -> Any:
    """The DSSE envelope of a bundle (strictly checked), or ``doc`` itself when it is not one.

    Refused (:class:`BundleError`): another media type or bundle version, a message signature
    instead of an envelope, unknown keys, and verification material this verifier would not
    check (certificates, transparency-log entries, timestamps): a bundle is accepted only in the
    form :func:`to_bundle` writes, so nothing in it goes unverified.
    """
    if not is_bundle(doc):
        return doc
    if doc["mediaType"] != BUNDLE_MEDIA_TYPE:
        raise BundleError(
            f"bundle media type {str(doc['mediaType'])[:120]!r} is not {BUNDLE_MEDIA_TYPE}"
        )
    if set(doc) != {"mediaType", "verificationMaterial", "dsseEnvelope"}:
        raise BundleError(
            "the bundle must hold exactly mediaType, verificationMaterial and dsseEnvelope "
            f"(it holds {', '.join(sorted(map(str, doc)))})"
        )
    material = doc["verificationMaterial"]
    if not isinstance(material, Mapping) or set(material) - {"publicKey", "tlogEntries"}:
        raise BundleError(
            "the bundle's verificationMaterial may hold only publicKey and an empty "
            "tlogEntries: certificates, timestamps and log entries are not verified here"
        )
    hint = material.get("publicKey")
    if not isinstance(hint, Mapping) or set(hint) != {"hint"} or not isinstance(hint["hint"], str):
        raise BundleError("the bundle's verificationMaterial.publicKey is not {hint: KEYID}")
    if material.get("tlogEntries", []) != []:
        raise BundleError(
            "the bundle carries transparency-log entries, which are not verified here"
        )
    envelope = doc["dsseEnvelope"]
    if not isinstance(envelope, Mapping) or set(envelope) != _ENVELOPE_KEYS:
        raise BundleError("the bundle's dsseEnvelope is not {payload, payloadType, signatures}")
    signatures = envelope["signatures"]
    if not isinstance(signatures, list) or not all(
        isinstance(s, Mapping) and set(s) <= {"sig", "keyid"} and "sig" in s for s in signatures
    ):
        raise BundleError("the bundle's dsseEnvelope.signatures are not [{sig, keyid}]")
    return {
        "payload": envelope["payload"],
        "payloadType": envelope["payloadType"],
        "signatures": [dict(s) for s in signatures],
    }
