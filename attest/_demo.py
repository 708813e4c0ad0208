"""``make demo``: certify the digits example under clinical-strict, verify it, log it.

``python -m attest._demo build/demo`` recreates the folder given and, in it:

1. ``keys/DEMO-ONLY-unencrypted.key`` / ``.pub``: a throw-away key stored WITHOUT a passphrase,
   there to show the flow; never trust it anywhere;
2. runs ``attest certify examples/digits/attest.yaml --policy policies/clinical-strict.yaml``
   (collect every check, evaluate, sign): ``release/gradient_certificate.json`` with
   ``evidence.json``, ``findings.json``, the exported ``model.onnx`` and ``probe.npz``, and
   ``report.html`` (in the demo folder) where the report stage is installed;
3. builds ``trust.yaml`` holding the demo public key and verifies the certificate as the
   training side would (the weights) and as a deployment server would (the ONNX file and the
   behavioural probe, no torch needed there);
4. shows that one flipped bit in the weights is rejected (``SUBJECT_MISMATCH``);
5. appends the issued certificate and each verification to ``ledger.sqlite`` where the ledger
   is installed;
6. trains the digits architecture for two epochs under :class:`attest.TrainingMonitor`
   (``training/run.jsonl``) and writes its training report (``training/training.html``: the
   fidelity, bit-exact, gradient-norm and memory charts and the half-life summary). This short
   run is a demonstration, not the run that made the shipped weights, so it is not bound into
   the certificate (``attest certify --training-log`` does that for a release's own log);

and prints where each output is. Exit 0 when every step behaved as expected.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path
from typing import Any

from attest.certificate.signing import generate_keypair
from attest.core.progress import print_stages
from attest.errors import AttestError
from attest.verification.trust import add_key, empty_trust_store, save_trust_store
from attest.verification.verifier import VerificationReport, verify

__all__ = ["run_demo"]

DEMO_KEY_NAME = "DEMO-ONLY-unencrypted"
REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "digits" / "attest.yaml"
POLICY = REPO / "policies" / "clinical-strict.yaml"


def _show(title: str, report: VerificationReport) -> None:
    outcome = "VERIFIED" if report.verified else "REJECTED"
    print(f"{title}: {outcome}")
    for code, message in report.reasons:
        print(f"    {code}: {message}")
    if report.subjects_checked:
        print(f"    subjects checked: {', '.join(report.subjects_checked)}")
    if report.probe:
        print(f"    behavioural probe: {report.probe.get('message', report.probe)}")


def _optional(module: str, name: str) -> Any:
    """A later stage's function, or None where this build does not have it yet."""
    try:
        return getattr(importlib.import_module(module), name, None)
    except ModuleNotFoundError:
        return None


def _monitored_run(folder: Path) -> tuple[Path, Path | None]:
    """Two epochs of the digits model under the monitor; the log and its HTML report."""
    import importlib.util

    from attest.collection.monitor import TrainingMonitor
    from attest.evidence.training_log import read_training_log
    from attest.evidence.training_summary import summarize_training_log

    spec = importlib.util.spec_from_file_location("digits_train", EXAMPLE.parent / "train.py")
    assert spec is not None and spec.loader is not None
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    import torch

    torch.manual_seed(0)
    x_train, y_train, x_test, y_test = train.load_split()
    probe = train.probe_batch(x_test, y_test)
    model = train.build()
    optimizer = torch.optim.Adam(model.parameters(), lr=train.LR)
    log = folder / "run.jsonl"
    step = 0
    with TrainingMonitor(model, train.loss, probe, every=8, log=log) as monitor:
        for epoch in range(2):
            model.train()
            for start in range(0, len(y_train), train.BATCH):
                optimizer.zero_grad()
                batch = slice(start, start + train.BATCH)
                train.loss(model(x_train[batch]), y_train[batch]).backward()
                optimizer.step()
                monitor.step(epoch=epoch, step=step)
                step += 1
    summary = summarize_training_log(read_training_log(log))
    fid = summary.fidelity
    print(
        f"monitored training run: {summary.samples} samples over {step} steps; fidelity "
        f"half-life {fid.status}; memory-delta RSD {summary.memory.rsd_pct} %; "
        f"monitor time {summary.monitor_wall_s:.2f} s"
    )
    writer = _optional("attest.report.training_log", "write_training_report")
    return log, writer(log, folder / "training.html") if writer is not None else None


def run_demo(out: Path) -> int:
    """Run the demo into ``out`` (recreated); 0 when every step behaved as expected."""
    from attest.pipeline import certify

    if out.exists():
        shutil.rmtree(out)
    keys = out / "keys"
    keys.mkdir(parents=True)
    key_path, pub_path, keyid = generate_keypair(keys / DEMO_KEY_NAME, passphrase=None)
    print(f"demo key {keyid[:16]} (UNENCRYPTED, DEMO ONLY: never trust it): {key_path}")

    release = out / "release"
    report_writer = _optional("attest.report", "write_report")
    print(f"certifying {EXAMPLE.relative_to(REPO)} under {POLICY.relative_to(REPO)}:")
    result = certify(
        EXAMPLE,
        policy=POLICY,
        key=key_path,
        out=release / "gradient_certificate.json",
        report=out / "report.html" if report_writer is not None else None,
        progress=print_stages(sys.stdout),
    )
    counts = result.findings.counts
    print(
        f"policy {result.findings.policy.id}: {result.verdict.upper()} "
        f"({counts['pass']} pass, {counts['fail']} fail, {counts['warn']} warn, "
        f"{counts['waived']} waived, {counts['not_computed']} not computed)"
    )
    if not result.passed or result.certificate_path is None:
        for finding in result.findings.failed[:20]:
            print(f"  [{finding.rule}] {finding.subject.label()}: {finding.message}")
        print(f"demo: digits did not pass; evidence {result.evidence_path}", file=sys.stderr)
        return 1
    certificate = result.certificate_path

    store, _ = add_key(
        empty_trust_store(str(out / "trust.yaml")), pub_path.read_bytes(), name=DEMO_KEY_NAME
    )
    trust = save_trust_store(store, out / "trust.yaml")
    state = out / "verify-state.json"
    weights = EXAMPLE.parent / "weights.safetensors"
    reports: list[VerificationReport] = []

    good = verify(certificate, trust=trust, artifacts=[weights], state_file=state)
    _show("verify against the trained weights", good)
    reports.append(good)
    onnx, bundle = release / "model.onnx", release / "probe.npz"
    deployed_ok = True
    if onnx.is_file() and bundle.is_file():
        deployed = verify(
            certificate, trust=trust, artifacts=[onnx, bundle], probe=bundle, state_file=state
        )
        _show("verify on the server: model.onnx + probe.npz, behavioural probe", deployed)
        reports.append(deployed)
        deployed_ok = deployed.verified

    tampered = out / "tampered" / "weights.safetensors"
    tampered.parent.mkdir()
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0x01  # one flipped bit in the tensor data
    tampered.write_bytes(bytes(data))
    bad = verify(certificate, trust=trust, artifacts=[tampered])
    _show("verify with one bit flipped in the weights", bad)
    reports.append(bad)

    ledger_path = out / "ledger.sqlite"
    # appends the certificate and each verification, signs a checkpoint, prints an inclusion proof
    ledger_demo = _optional("attest.ledger.demo", "ledger_demo")
    logged = ledger_demo is None or ledger_demo(out, certificate, [r.to_dict() for r in reports])

    report_path = result.report_path
    if report_writer is not None:
        # the report again, now that a trust store exists: its signature is checked, so the
        # report marks the numbers verified (make report-screenshot renders this file)
        report_path = report_writer(
            certificate,
            out / "report.html",
            trust=trust,
            evidence=result.evidence_path,
            artifacts=[weights],
        ).path

    training_log, training_report = _monitored_run(out / "training")

    print("outputs:")
    rows = [
        ("certificate", certificate),
        ("evidence", result.evidence_path),
        ("findings", result.findings_path),
        ("ONNX model", onnx if onnx.is_file() else None),
        ("probe bundle", bundle if bundle.is_file() else None),
        ("report", report_path),
        ("trust store", trust),
        ("ledger", ledger_path if ledger_path.is_file() else None),
        ("training log", training_log),
        ("training report", training_report),
        ("demo key (DEMO ONLY)", key_path),
    ]
    for label, path in rows:
        if path is not None:
            print(f"  {label + ':':22} {path}")
    print(f"try: attest inspect {certificate}")
    print(f"     attest verify {certificate} --trust {trust} --artifact {onnx} --probe {bundle}")
    expected = good.verified and deployed_ok and bad.codes == ["SUBJECT_MISMATCH"] and logged
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
