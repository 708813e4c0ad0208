"""The certificate in the formats the rest of the supply chain reads (docs/interop.md).

``source`` reads a certificate (either form) after verifying it; ``test_result`` writes the
in-toto test-result attestation; ``cyclonedx`` the CycloneDX ML-BOM; ``spdx`` the SPDX 3.0.1
AI-profile document; ``check`` checks an export against its certificate. The Sigstore bundle
form (:mod:`attest.certificate.bundle`, the verifier reads it) and OpenSSF model signing
(:mod:`attest.certificate.model_signing`, certify binds its signature) live with the
certificate.
"""
