"""The certificate in the formats the rest of the supply chain reads (docs/interop.md).

``source`` reads a certificate (either form) after verifying it; ``test_result`` writes the
in-toto test-result attestation; ``cyclonedx`` the CycloneDX ML-BOM; ``model_signing`` signs
the model directory with OpenSSF model-signing. The Sigstore bundle form itself lives with the
certificate format (:mod:`attest.certificate.bundle`), since the verifier reads it.
"""
