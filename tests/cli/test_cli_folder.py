"""``attest certify --artifact FOLDER/`` binds every file of a folder through one manifest;
``attest verify --artifact FOLDER/`` and :func:`attest.verification.verify_folder` check the
whole folder, naming the file that was changed, removed or added.

Certify runs on evidence written here (``--evidence``: nothing is collected, so the test is
fast); what is certified and verified is real: signatures, manifests, digests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from _folder_cases import make_folder

from attest.certificate.signing import generate_keypair
from attest.cli import main
from attest.core.io import sha256_file
from attest.evidence.model import Evidence
from attest.verification import FolderRejected, verify_folder
from attest.verification.trust import add_key, empty_trust_store, save_trust_store

REPO = Path(__file__).resolve().parents[2]
RESEARCH = REPO / "policies" / "research.yaml"
# one probe input whose operator path did not diverge: a measured, consistent check
TOPOLOGY = {
    "check": "topology",
    "status": "computed",
    "items": [
        {"subject": {"kind": "model"}, "status": "pass", "metrics": {"first_divergence": None}}
    ],
    "summary": {"inputs": 1, "diverging_inputs": 0, "failed_inputs": 0},
}


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    code = info.value.code
    return (code if isinstance(code, int) else 0), out + err


@pytest.fixture
def release(tmp_path: Path) -> dict[str, Path]:
    spec_dir = tmp_path / "spec"  # placeholder weights and probe: no model is built
    spec_dir.mkdir()
    (spec_dir / "weights.safetensors").write_bytes(b"weights")
    (spec_dir / "probe.safetensors").write_bytes(b"probe")
    spec = spec_dir / "attest.yaml"
    model = {"name": "m", "version": "1.0.0", "factory": "model:build"}
    model["weights"] = "weights.safetensors"
    spec.write_text(yaml.safe_dump({"model": model, "inputs": {"probe": "probe.safetensors"}}))
    key, pub, _ = generate_keypair(tmp_path / "release", passphrase=None)
    trust = tmp_path / "trust.yaml"
    store, _ = add_key(empty_trust_store(str(trust)), Path(pub).read_bytes(), name="release")
    save_trust_store(store, trust)
    recorded = {
        role: {"sha256": sha256_file(spec_dir / name)}
        for role, name in (
            ("spec", "attest.yaml"),
            ("weights", "weights.safetensors"),
            ("probe", "probe.safetensors"),
        )
    }
    evidence = Evidence.model_validate(
        {
            "tool_version": "0",
            "created_at": "2026-01-01T00:00:00Z",
            "model": {"name": "m", "version": "1.0.0"},
            "artifacts": recorded,
            "checks": {"topology": TOPOLOGY},
        }
    )
    evidence_path = tmp_path / "collected" / "evidence.json"
    evidence_path.parent.mkdir()
    evidence_path.write_text(json.dumps(evidence.model_dump(mode="json")))
    return {
        "spec": spec,
        "key": key,
        "trust": trust,
        "evidence": evidence_path,
        "folder": make_folder(tmp_path),
        "root": tmp_path,
    }


def certify(release: dict[str, Path], capsys: Any, *extra: str, out: Path | None = None) -> Path:
    cert = out or release["root"] / "gradient_certificate.json"
    code, text = run(
        [
            "certify",
            str(release["spec"]),
            "--policy",
            str(RESEARCH),
            "--key",
            str(release["key"]),
            "--evidence",
            str(release["evidence"]),
            "--artifact",
            f"{release['folder']}/",
            "-o",
            str(cert),
            "-q",
            *extra,
        ],
        capsys,
    )
    assert code == 0, text
    return cert


def verify(release: dict[str, Path], cert: Path, capsys: Any) -> tuple[int, dict[str, Any]]:
    code, text = run(
        [
            "verify",
            str(cert),
            "--trust",
            str(release["trust"]),
            "--artifact",
            f"{release['folder']}/",
            "--json",
        ],
        capsys,
    )
    return code, json.loads(text)


def test_certify_binds_the_folder_and_verify_checks_it_whole(
    release: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cert = certify(release, capsys, "--ignore", "notes")
    envelope = json.loads(cert.read_text())
    import base64

    statement = json.loads(base64.b64decode(envelope["payload"]))
    binding = statement["predicate"]["folders"]["model-folder"]
    ignore = binding["serialization"]["ignore_paths"]
    assert {".git", "gradient_certificate.json", "notes"} <= set(ignore)
    assert binding["serialization"]["method"] == "shards"
    assert "model-folder" in {s["name"] for s in statement["subject"]}

    code, report = verify(release, cert, capsys)
    assert code == 0, report["reasons"]
    assert "model-folder" in report["subjects_checked"]
    assert "tokenizer/vocab.txt" in report["folder_files"]["model-folder"]

    code, text = run(
        [
            "verify",
            str(cert),
            "--trust",
            str(release["trust"]),
            "--artifact",
            str(release["folder"]),
        ],
        capsys,
    )
    assert code == 0 and "folder model-folder: 5 files checked" in text, text

    (release["folder"] / ".git" / "HEAD").write_text("moved on\n")  # ignored
    (release["folder"] / "notes").mkdir()
    (release["folder"] / "notes" / "todo.txt").write_text("ignored too")
    assert verify(release, cert, capsys)[0] == 0

    (release["folder"] / "tokenizer" / "extra.json").write_text("{}")
    os.remove(release["folder"] / "config.json")
    code, report = verify(release, cert, capsys)
    assert code == 1
    reasons = {(r["code"], r["message"].split()[0]) for r in report["reasons"]}
    assert reasons == {
        ("UNEXPECTED_FILE", "model-folder/tokenizer/extra.json"),
        ("ARTIFACT_MISSING", "model-folder/config.json"),
    }


def test_verify_folder_gate(release: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    folder = release["folder"]
    cert = certify(release, capsys, out=folder / "gradient_certificate.json")  # ships inside
    verified = verify_folder(folder, trust=release["trust"], require_policy="research")
    assert verified.certificate == cert
    assert verified.model == {"name": "m", "version": "1.0.0"}
    assert "tokenizer/vocab.txt" in verified.files and "config.json" in verified.files

    with pytest.raises(FolderRejected) as refused:
        verify_folder(folder, trust=release["trust"], require_policy="clinical-strict")
    assert refused.value.codes == ["POLICY_NOT_ACCEPTED"] and refused.value.exit_code == 1

    (folder / "model-00002-of-00002.safetensors").write_bytes(b"swapped weights")
    with pytest.raises(FolderRejected) as refused:
        verify_folder(folder, trust=release["trust"])
    assert refused.value.codes == ["SUBJECT_MISMATCH"]
    assert "model-00002-of-00002.safetensors" in refused.value.message


def test_ignore_without_a_folder_is_refused(
    release: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = run(
        [
            "certify",
            str(release["spec"]),
            "--policy",
            str(RESEARCH),
            "--key",
            str(release["key"]),
            "--evidence",
            str(release["evidence"]),
            "--ignore",
            "x",
            "-q",
        ],
        capsys,
    )
    assert code == 2 and "--ignore" in text


def _monai_bundle(root: Path) -> Path:
    """A small MONAI bundle: metadata, an inference config with network_def, its weights."""
    torch = pytest.importorskip("torch")
    bundle_tools = pytest.importorskip("monai.bundle")
    bundle = root / "seg_bundle"
    (bundle / "configs").mkdir(parents=True)
    (bundle / "models").mkdir()
    network_def = {
        "_target_": "torch.nn.Conv2d",
        "in_channels": 1,
        "out_channels": 2,
        "kernel_size": 3,
        "padding": 1,
    }
    metadata = {
        "version": "0.1.0",
        "network_data_format": {
            "inputs": {"image": {"num_channels": 1, "spatial_shape": [16, 16], "dtype": "float32"}},
            "outputs": {"pred": {"num_channels": 2, "spatial_shape": [16, 16]}},
        },
    }
    (bundle / "configs" / "inference.json").write_text(json.dumps({"network_def": network_def}))
    (bundle / "configs" / "metadata.json").write_text(json.dumps(metadata))
    parser = bundle_tools.ConfigParser({"network_def": network_def})
    torch.manual_seed(0)
    torch.save(
        parser.get_parsed_content("network_def").state_dict(), bundle / "models" / "model.pt"
    )
    return bundle


def test_the_inference_app_example_loads_only_a_verified_bundle(
    release: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    import subprocess
    import sys

    bundle = _monai_bundle(release["root"])
    release["folder"] = bundle
    certify(release, capsys)  # gradient_certificate.json beside the bundle
    app = [sys.executable, str(REPO / "examples" / "bundle-gate" / "app.py"), str(bundle)]
    app += ["--trust", str(release["trust"]), "--require-policy", "research"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }

    served = subprocess.run(app, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert served.returncode == 0, served.stderr
    assert "verified m 1.0.0 under research" in served.stdout
    assert "ran Conv2d on [1, 1, 16, 16]: output [1, 2, 16, 16]" in served.stdout

    (bundle / "configs" / "override.json").write_text('{"network_def": {"out_channels": 3}}')
    refused = subprocess.run(app, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert refused.returncode == 1
    assert "refused: UNEXPECTED_FILE: seg_bundle/configs/override.json" in refused.stderr
    assert "ran " not in refused.stdout and "Traceback" not in refused.stderr
