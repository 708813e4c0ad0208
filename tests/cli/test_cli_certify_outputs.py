"""What ``attest certify`` leaves on disk: every public output has the mode a plain write gives.

The files are written through temporary files (``mkstemp`` makes them 0600, the exporter too);
readers on the release side and the inference server must be able to read them like any
other file the user writes, so only private keys stay 0600.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from test_cli_certify import MINI_POLICY, run, write_policy, write_tiny

from attest.certificate.signing import generate_keypair

UMASK = 0o027  # not the usual 022, so a hard-coded 0644 would show


@pytest.mark.slow
def test_certify_outputs_get_the_umask_mode_and_the_key_stays_private(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_tiny(tmp_path / "model", export="onnx")
    policy = write_policy(tmp_path / "mini.yaml", MINI_POLICY)
    out = tmp_path / "out"
    cert = out / "gradient_certificate.json"
    old = os.umask(UMASK)
    try:
        key, pub, _ = generate_keypair(tmp_path / "keys" / "release", passphrase=None)
        code, stdout, stderr = run(
            [
                "certify",
                str(spec),
                "--policy",
                str(policy),
                "--key",
                str(key),
                "-o",
                str(cert),
                "--report",
                str(out / "report.html"),
            ],
            capsys,
        )
    finally:
        os.umask(old)
    assert code == 0, stdout + stderr
    want = 0o666 & ~UMASK
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir() if p.is_file()}
    expected = {
        "gradient_certificate.json",
        "evidence.json",
        "findings.json",
        "model.onnx",
        "probe.npz",
        "report.html",
    }
    assert expected <= set(modes), sorted(modes)
    assert {name: mode for name, mode in modes.items() if mode != want} == {}, oct(want)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(pub.stat().st_mode) != 0o600
