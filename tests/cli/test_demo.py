"""``make demo`` does the whole job: certify digits under clinical-strict, verify, log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_certifies_digits_and_verifies(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "attest._demo", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = done.stdout
    assert "policy clinical-strict: PASS" in text
    assert "verify against the trained weights: VERIFIED" in text
    assert "behavioural probe: VERIFIED" in text
    assert "verify with one bit flipped in the weights: REJECTED" in text
    assert "SUBJECT_MISMATCH" in text
    assert "DEMO ONLY" in text
    for name in (
        "gradient_certificate.json",
        "evidence.json",
        "findings.json",
        "model.onnx",
        "probe.npz",
    ):
        assert (out / "release" / name).is_file(), name
        assert str(out / "release" / name) in text  # says where each output is
    findings = json.loads((out / "release" / "findings.json").read_text())
    assert findings["policy"]["id"] == "clinical-strict"
    assert findings["verdict"] == "pass" and findings["counts"]["fail"] == 0
    # the short monitored run and its training report (charts and the half-life summary)
    assert "monitored training run:" in text and "fidelity half-life" in text
    assert str(out / "training" / "training.html") in text
    assert 'id="training-monitor"' in (out / "training" / "training.html").read_text()
    assert b"ENCRYPTED" not in (out / "keys" / "DEMO-ONLY-unencrypted.key").read_bytes()
