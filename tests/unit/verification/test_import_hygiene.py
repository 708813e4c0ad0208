"""The verifier runs where torch (and numpy) may not be installed: importing it, and running
`attest verify`, must leave both out of sys.modules. Checked in fresh interpreters.

`attest verify` also pays for every import at each start (docs/benchmarks.md, "Behavioural
probe"), so a full verification must import no more than it needs: no jsonschema stack (the
statement is checked by generated code), no pydantic models, no other attest modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _certfactory import make_world

from attest.verification.trust import save_trust_store

HEAVY = ("torch", "numpy")
# Never on the plain verify path: the jsonschema stack, pydantic, the signing-side canonicalizer.
NOT_FOR_VERIFY = (
    *HEAVY,
    "onnxruntime",
    "jsonschema",
    "referencing",
    "jsonschema_specifications",
    "attrs",
    "pydantic",
    "rfc8785",
)
# The attest modules `attest verify` may load (anything else is a start-up cost to justify).
VERIFY_MODULES = {
    "attest",
    "attest.certificate",
    "attest.core",
    "attest.core.times",
    "attest.deployment",
    "attest.verification",
    "attest.verification.artifact_check",
    "attest.certificate.artifacts",
    "attest.certificate.format",
    "attest.cli",
    "attest.cli.verify",
    "attest.cli.remote_options",  # the --ledger URL options (click only)
    "attest.verification.envelope",
    "attest.core.io",
    "attest.core.files",
    "attest.core.strict_yaml",
    "attest.deployment.onnx_refs",
    "attest.verification.rollback",
    "attest.certificate.statement_validator",
    "attest.core.text",
    "attest._version",
    "attest.errors",
    "attest.certificate.signing",
    "attest.certificate.bundle",
    "attest.certificate.signers",  # the signer attestation format (issue 21)
    "attest.verification.signatures",
    "attest.verification.trust",
    "attest.verification.trust_fields",
    "attest.certificate.note_keys",  # the witnesses of the trust store (issue 37)
    "attest.verification.policy_accept",
    "attest.verification.outcome",
    "attest.verification.verifier",
    # only for a certificate that binds a folder through its manifest (issue 36)
    "attest.certificate.folder_manifest",
    "attest.certificate.folder_hash",
}


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


CHECK = f"""
import sys
heavy = [m for m in {HEAVY!r} if m in sys.modules]
print("HEAVY:" + ",".join(heavy))
"""


@pytest.mark.parametrize(
    "setup",
    [
        "import attest",
        "import attest.verification.verifier",
        "import attest, attest.verification.trust, attest.verification.envelope; attest.verify",
        "from attest.cli import main\ntry:\n    main(['verify', '--help'])\nexcept SystemExit:\n    pass",
        "from attest.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
    ],
)
def test_imports_stay_light(setup: str) -> None:
    out = _run(setup + "\n" + CHECK)
    assert out.strip().endswith("HEAVY:"), out


def test_a_full_verification_stays_light(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    cert = world.write(world.envelope())
    trust = save_trust_store(world.trust, tmp_path / "trust.yaml")
    args = ["verify", str(cert), "--trust", str(trust), "--at", "2026-06-01T12:00:00Z"]
    args += ["--artifact", str(world.onnx), "--artifact", str(world.probe)]
    code = (
        f"""
from attest.cli import main
try:
    main({args!r})
except SystemExit as exc:
    assert exc.code == 0, exc.code
"""
        + CHECK
    )
    out = _run(code)
    assert "VERIFIED" in out and out.strip().endswith("HEAVY:"), out


def test_a_full_verification_imports_only_what_it_needs(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    cert = world.write(world.envelope())
    trust = save_trust_store(world.trust, tmp_path / "trust.yaml")
    args = ["verify", str(cert), "--trust", str(trust), "--at", "2026-06-01T12:00:00Z"]
    args += ["--artifact", str(world.onnx)]
    code = f"""
import sys
from attest.cli import main
try:
    main({args!r})
except SystemExit as exc:
    assert exc.code == 0, exc.code
print("FOUND:" + ",".join(m for m in {NOT_FOR_VERIFY!r} if m in sys.modules))
print("ATTEST:" + ",".join(sorted(m for m in sys.modules if m.split(".")[0] == "attest")))
"""
    lines = dict(line.split(":", 1) for line in _run(code).splitlines() if ":" in line)
    assert lines["FOUND"] == "", lines["FOUND"]
    loaded = set(lines["ATTEST"].split(","))
    assert "attest.certificate.statement_validator" in loaded  # the statement was checked
    assert loaded <= VERIFY_MODULES, sorted(loaded - VERIFY_MODULES)
