"""The example models under the shipped policies, end to end through ``attest certify``.

digits, phantom-seg and volume3d must pass clinical-strict and verify; unstable must fail it
for its real defect (a one-pass float16 LayerNorm).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from attest.certificate.signing import generate_keypair
from attest.cli import main
from attest.verification.verifier import verify

REPO = Path(__file__).resolve().parents[2]
STRICT = REPO / "policies" / "clinical-strict.yaml"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    key, pub, _ = generate_keypair(tmp_path_factory.mktemp("keys") / "release", passphrase=None)
    return key, pub


def copy_example(name: str, into: Path) -> Path:
    """The example's files in a temp folder, so nothing is written into the repository."""
    folder = into / name
    shutil.copytree(REPO / "examples" / name, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder / "attest.yaml"


def certify(
    spec: Path, policy: Path, key: Path, out: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any]]:
    with pytest.raises(SystemExit) as info:
        main(
            [
                "certify",
                str(spec),
                "--policy",
                str(policy),
                "--key",
                str(key),
                "-o",
                str(out / "gradient_certificate.json"),
                "--json",
            ]
        )
    out_text, err = capsys.readouterr()
    assert "Traceback" not in err
    code = info.value.code
    return (code if isinstance(code, int) else 0), json.loads(out_text)


@pytest.mark.slow
@pytest.mark.parametrize(
    "example",
    [
        "digits",
        "phantom-seg",
        "volume3d",
    ],
)
def test_example_passes_clinical_strict_and_verifies(
    example: str, tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = copy_example(example, tmp_path)
    out = tmp_path / "release"
    code, summary = certify(spec, STRICT, keys[0], out, capsys)
    failed = [(f["rule"], f["message"]) for f in summary["failed"]]
    assert code == 0, failed
    assert summary["counts"]["fail"] == 0
    cert = Path(summary["outputs"]["certificate"])
    from attest.verification.trust import add_key, empty_trust_store

    store, _ = add_key(empty_trust_store("trust.yaml"), keys[1].read_bytes(), name="release")
    weights = verify(cert, trust=store, artifacts=[spec.parent / "weights.safetensors"])
    assert weights.verified, weights.reasons
    deployed = verify(
        cert,
        trust=store,
        artifacts=[out / "model.onnx", out / "probe.npz"],
        probe=out / "probe.npz",
    )
    assert deployed.verified, deployed.reasons
    names = {s["name"] for s in deployed.certificate_subjects}
    assert {
        "attest.yaml",
        "weights.safetensors",
        "probe.safetensors",
        "model.onnx",
        "probe.npz",
    } <= names


@pytest.fixture(scope="module")
def unstable_run(
    tmp_path_factory: pytest.TempPathFactory, keys: tuple[Path, Path]
) -> tuple[int, dict[str, Any], Path]:
    base = tmp_path_factory.mktemp("unstable")
    spec = copy_example("unstable", base)
    from attest.pipeline import certify as run_certify

    result = run_certify(
        spec, policy=STRICT, key=keys[0], out=base / "release" / "gradient_certificate.json"
    )
    return (
        (0 if result.passed else 1),
        json.loads(result.findings_path.read_text()),
        result.evidence_path,
    )


@pytest.mark.slow
def test_unstable_fails_clinical_strict_where_the_defect_is(
    unstable_run: tuple[int, dict[str, Any], Path],
) -> None:
    code, findings, evidence = unstable_run
    assert code == 1 and findings["verdict"] == "fail"
    assert not (evidence.parent / "gradient_certificate.json").exists()
    local = [
        f for f in findings["findings"] if f["rule"] == "fidelity.local" and f["verdict"] == "fail"
    ]
    # local fidelity isolates the culprit: the E[x^2] - E[x]^2 subtraction inside FastLayerNorm
    assert local, "local fidelity finds the one-pass variance"
    assert {f["subject"]["module"] for f in local} == {"norm"}
    assert any(f["subject"]["op"] == "aten.sub.Tensor" for f in local)
    assert all(f["threshold"] == 99.5 for f in local)  # the float16 bound
    accumulated = [
        f
        for f in findings["findings"]
        if f["rule"] == "fidelity.accumulated" and f["verdict"] == "fail"
    ]
    assert {"norm", "fc1", "fc2"} <= {
        f["subject"]["module"] for f in accumulated
    }  # inherited downstream


@pytest.mark.slow
def test_unstable_waiver_and_research_policies(
    unstable_run: tuple[int, dict[str, Any], Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    _, strict, evidence = unstable_run
    waived_out = tmp_path / "waived.json"
    with pytest.raises(SystemExit) as info:
        main(
            [
                "evaluate",
                str(evidence),
                "--policy",
                str(REPO / "examples" / "unstable" / "waiver-policy.yaml"),
                "-o",
                str(waived_out),
            ]
        )
    capsys.readouterr()
    waived = json.loads(waived_out.read_text())
    fidelity = [
        f for f in waived["findings"] if f["check"] == "fidelity" and f["verdict"] != "pass"
    ]
    assert fidelity and all(f["verdict"] == "waived" for f in fidelity)
    assert all(f["waiver"]["reference"].startswith("HAZ-0001") for f in fidelity)
    still_failing = {f["check"] for f in waived["findings"] if f["verdict"] == "fail"}
    strict_failing = {f["check"] for f in strict["findings"] if f["verdict"] == "fail"}
    assert still_failing == strict_failing - {"fidelity"}
    assert info.value.code == (1 if still_failing else 0)

    research_out = tmp_path / "research.json"
    with pytest.raises(SystemExit) as info:
        main(
            [
                "evaluate",
                str(evidence),
                "--policy",
                str(REPO / "policies" / "research.yaml"),
                "-o",
                str(research_out),
            ]
        )
    capsys.readouterr()
    assert info.value.code == 0
    research = json.loads(research_out.read_text())
    annotated = [
        f for f in research["findings"] if f["waiver"] and f["waiver"]["kind"] == "annotation"
    ]
    assert annotated and {f["subject"]["module"] for f in annotated} == {"norm"}
    assert research["counts"]["warn"] > 0
