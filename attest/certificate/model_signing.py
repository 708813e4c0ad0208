"""OpenSSF model signing alongside the certificate (``attest certify --model-signing``).

The model directory (the spec's folder: weights, model code, spec, probe inputs) is signed the
way OpenSSF ``model-signing`` signs it, by that library (its key method: ECDSA over a manifest
of every file's digest, in a Sigstore bundle), into ``model.sig`` in the folder; the
certificate then binds ``model.sig`` as a subject, so a server that already verifies models
with ``model_signing verify key`` keeps doing so and the certificate vouches for that very
signature file.

model-signing's key method takes an elliptic-curve key (P-256 and friends), not Ed25519: the
release key must be an ECDSA P-256 key (``attest keygen --algorithm ecdsa-p256``). The key is
handed to the library as a PEM encrypted with a random one-time password, in a private
temporary folder removed afterwards: the private key never lies on disk in the clear.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from attest.certificate.signing import PrivateKey
from attest.errors import InputError, SigningError

__all__ = ["SIGNATURE_NAME", "require_model_signing_key", "sign_model_directory"]

SIGNATURE_NAME = "model.sig"


def require_model_signing_key(key: PrivateKey) -> None:
    """Refuse, before any work, a key model-signing's key method cannot use."""
    if not isinstance(key.key, ec.EllipticCurvePrivateKey):
        raise InputError(
            "--model-signing needs an ECDSA P-256 release key: model-signing's key method has "
            "no Ed25519",
            hint="attest keygen --algorithm ecdsa-p256, and certify with that key",
        )


def sign_model_directory(folder: str | Path, key: PrivateKey) -> Path:
    """Sign ``folder`` with model-signing's key method; returns the written ``model.sig``."""
    require_model_signing_key(key)
    assert isinstance(key.key, ec.EllipticCurvePrivateKey)
    try:
        from model_signing import hashing, signing
    except ImportError as exc:
        raise InputError(
            f"--model-signing needs the model-signing package ({exc})",
            hint="pip install 'gradient-attest[model-signing]'",
        ) from None
    model_dir = Path(folder)
    signature = model_dir / SIGNATURE_NAME
    password = secrets.token_urlsafe(32)
    private = Path(tempfile.mkdtemp(prefix="attest-model-signing-"))  # mode 0700
    try:
        pem = private / "key.pem"
        pem.write_bytes(
            key.key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(password.encode()),
            )
        )
        pem.chmod(0o600)
        # As model-signing's own CLI does: the signature file (and git metadata) is left out of
        # the manifest, and the manifest records that, so its verifier leaves it out too. The
        # password is annotated str but handed to cryptography's PEM loader, which needs bytes.
        config = signing.Config().use_elliptic_key_signer(  # type: ignore[no-untyped-call]
            private_key=pem,
            password=password.encode(),  # type: ignore[arg-type]
        )
        config.set_hashing_config(
            hashing.Config().set_ignored_paths(  # type: ignore[no-untyped-call]
                paths=[Path(SIGNATURE_NAME)], ignore_git_paths=True
            )
        ).sign(model_dir, signature)
    except Exception as exc:
        raise SigningError(f"model-signing could not sign {model_dir}: {exc}") from None
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return signature
