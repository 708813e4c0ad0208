"""``make demo`` (interim): sign a small example statement over real files and verify it.

``python -m attest._demo build/demo`` writes, under the folder given:

- ``keys/DEMO-ONLY-unencrypted.key`` / ``.pub``: a throw-away key, stored WITHOUT a passphrase.
  It exists to show the flow; never trust it anywhere;
- ``artifacts/``: the files the certificate vouches for;
- ``statement.json``, ``gradient_certificate.json``, ``trust.yaml``, ``verify-state.json``;

then verifies the certificate (as a deployment server would, with only some of the subjects),
and shows that a tampered artifact is rejected. Until the certify pipeline exists the statement
is a hand-made example (:func:`example_statement`); the pipeline replaces that one function.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from attest._io import atomic_write_json, atomic_write_text
from attest.certificate import (
    DigestSet,
    PolicyRef,
    Statement,
    build_statement,
    sign_statement,
    subjects_from_paths,
    write_certificate,
)
from attest.errors import AttestError
from attest.signing import generate_keypair, load_private_key
from attest.trust import add_key, empty_trust_store, save_trust_store
from attest.verify import VerificationReport, verify

__all__ = ["example_statement", "run_demo"]

DEMO_KEY_NAME = "DEMO-ONLY-unencrypted"
_EXAMPLE_SPEC = """\
# Example spec (demo only): what a release would certify.
model:
  name: demo-model
  version: 0.1.0
  factory: model:build
  weights: weights.bin
inputs:
  probe: probe.bin
"""


def example_statement(artifacts_dir: Path) -> Statement:
    """A small example statement over real files written into ``artifacts_dir``.

    The certify pipeline replaces this with the statement of a real ``attest certify`` run.
    """
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    spec = artifacts_dir / "attest.yaml"
    weights = artifacts_dir / "weights.bin"
    probe = artifacts_dir / "probe.bin"
    atomic_write_text(spec, _EXAMPLE_SPEC)
    # Deterministic example bytes standing in for trained weights and probe inputs.
    weights.write_bytes(bytes((i * 31 + 7) % 251 for i in range(64 * 1024)))
    probe.write_bytes(bytes((i * 17 + 3) % 241 for i in range(4 * 1024)))
    subjects = subjects_from_paths(
        {"attest.yaml": spec, "weights.bin": weights, "probe.bin": probe}
    )
    return build_statement(
        subjects=subjects,
        model={"name": "demo-model", "version": "0.1.0"},
        policy=PolicyRef(id="demo", version="0", digest=DigestSet(sha256="0" * 64)),
        verdict="pass",
        extensions={"demo.note": "hand-made example statement; not a certification"},
    )


def _show(title: str, report: VerificationReport) -> None:
    outcome = "VERIFIED" if report.verified else "REJECTED"
    print(f"{title}: {outcome}")
    for code, message in report.reasons:
        print(f"    {code}: {message}")
    if report.subjects_checked:
        print(f"    subjects checked: {', '.join(report.subjects_checked)}")


def run_demo(out: Path) -> int:
    """Run the demo into ``out`` (recreated); 0 when every step behaved as expected."""
    if out.exists():
        shutil.rmtree(out)
    keys = out / "keys"
    keys.mkdir(parents=True)
    key_path, pub_path, keyid = generate_keypair(keys / DEMO_KEY_NAME, passphrase=None)
    statement = example_statement(out / "artifacts")
    atomic_write_json(out / "statement.json", statement.to_json_dict())
    certificate = write_certificate(
        out / "gradient_certificate.json", sign_statement(statement, [load_private_key(key_path)])
    )
    store, _ = add_key(
        empty_trust_store(str(out / "trust.yaml")), pub_path.read_bytes(), name=DEMO_KEY_NAME
    )
    trust = save_trust_store(store, out / "trust.yaml")
    state = out / "verify-state.json"
    print(f"demo key {keyid[:16]} (UNENCRYPTED, demo only): {key_path}")

    good = verify(
        certificate,
        trust=trust,
        artifacts=[out / "artifacts" / "weights.bin", out / "artifacts" / "probe.bin"],
        state_file=state,
    )
    _show("verify with the certified files", good)

    tampered = out / "tampered" / "weights.bin"
    tampered.parent.mkdir()
    data = bytearray((out / "artifacts" / "weights.bin").read_bytes())
    data[1000] ^= 0x01  # one flipped bit
    tampered.write_bytes(bytes(data))
    bad = verify(certificate, trust=trust, artifacts=[tampered], state_file=state)
    _show("verify with one bit flipped in weights.bin", bad)

    from attest.ledger.demo import ledger_demo  # the audit record of both verifications

    recorded = ledger_demo(out, certificate, [good.to_dict(), bad.to_dict()])
    print(f"outputs in {out}/: gradient_certificate.json, statement.json, trust.yaml, keys/")
    print(
        f"try: attest verify {certificate} --trust {trust} "
        f"--artifact {out / 'artifacts' / 'weights.bin'}"
    )
    expected = good.verified and bad.codes == ["SUBJECT_MISMATCH"] and recorded
    if not expected:
        print("demo: UNEXPECTED outcome", file=sys.stderr)
    return 0 if expected else 1


def main(argv: list[str]) -> int:
    """``python -m attest._demo [OUT]``."""
    out = Path(argv[0] if argv else "build/demo")
    try:
        return run_demo(out)
    except AttestError as exc:
        print(f"error: {exc.diagnostics()}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
