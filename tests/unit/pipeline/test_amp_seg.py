"""examples/amp-seg certified under clinical-strict: the four training checks are computed on a
model trained in float16 mixed precision with checkpointed blocks, and pass.

amp-seg is the one shipped example with a ``training:`` mapping (autocast float16, a loss
scaler, two ``training.checkpoint`` blocks, batch sizes 1/4/8, an optimizer), so this is where
the training checks and the policy's training rules meet a clean, really trained model: a
check that alarms here is a false alarm (or the example regressed). One certify of the shipped
spec, unchanged, shared by the tests (about 40 s of CPU).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from attest.certificate.signing import generate_keypair
from attest.evidence.model import TRAINING_CHECKS
from attest.pipeline import CertifyResult, certify

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "amp-seg"
STRICT = REPO / "policies" / "clinical-strict.yaml"


@pytest.fixture(scope="module")
def certified(tmp_path_factory: pytest.TempPathFactory) -> CertifyResult:
    base = tmp_path_factory.mktemp("amp-seg")
    folder = base / "amp-seg"  # a copy: nothing is written into the repository
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    key, _, _ = generate_keypair(base / "keys" / "release", passphrase=None)
    return certify(
        folder / "attest.yaml",
        policy=STRICT,
        key=key,
        out=base / "release" / "gradient_certificate.json",
    )


@pytest.mark.slow
def test_amp_seg_passes_clinical_strict(certified: CertifyResult) -> None:
    assert certified.passed, [(f.rule, f.message) for f in certified.findings.failed]
    assert certified.certificate_path is not None and certified.certificate_path.exists()


@pytest.mark.slow
@pytest.mark.parametrize("check", TRAINING_CHECKS)
def test_training_check_is_computed_and_clean(certified: CertifyResult, check: str) -> None:
    result = certified.evidence.checks[check]
    assert result.status == "computed", result.reason
    bad = [(i.subject.label(), i.status, i.message) for i in result.items if i.status != "pass"]
    assert bad == []
    findings = [f for f in certified.findings.findings if f.check == check]
    assert len(findings) >= 2  # the check's own verdicts and at least one explicit bound
    assert {f.verdict for f in findings} == {"pass"}, [
        (f.rule, f.verdict, f.message) for f in findings if f.verdict != "pass"
    ]


@pytest.mark.slow
def test_training_summaries_say_what_was_trained(certified: CertifyResult) -> None:
    checks = certified.evidence.checks
    mixed = checks["mixed_precision"]
    assert mixed.parameters["autocast"] == "float16" and mixed.parameters["grad_scaler"]
    (model,) = [i for i in mixed.items if i.subject.kind == "model"]
    assert model.metrics["loss_scale_in_safe_range"] is True
    assert model.metrics["grads_nonfinite"] is False
    assert mixed.summary["max_grad_rel_error"] < 0.0625

    recompute = checks["recompute"]
    regions = {i.subject.module: i.metrics for i in recompute.items if "calls" in i.metrics}
    assert set(regions) == {"enc2", "dec1"}  # training.checkpoint: [enc2, dec1]
    assert all(m["declared"] and m["recomputed"] and not m["reentrant"] for m in regions.values())
    assert recompute.summary["grad_bit_exact"] is True

    batch = checks["batch_invariance"]
    sizes = {i.metrics["batch_size"] for i in batch.items if i.subject.kind == "model"}
    assert sizes == {1, 4, 8}
    assert batch.summary["smallest_interacting_batch_size"] is None  # GroupNorm: per example

    resume = checks["resume"]
    assert resume.parameters["steps"] == 3 and resume.parameters["grad_scaler"] is True
    assert resume.summary["params_bit_exact"] is True and resume.summary["unrestored_state"] == 0
