"""``attest verify --probe`` and ``--check-environment`` from the command line.

The release is made with the command line too (keygen, trust add, sign); only the ONNX file
and its probe bundle are built with the library, without torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from _cli_run import run
from onnx import TensorProto, helper, numpy_helper

from attest.core.io import sha256_file
from attest.deployment.environment import deployment_envelope, local_environment
from attest.deployment.probe_bundle import ProbeBundle, read_probe_bundle, write_probe_bundle
from attest.deployment.runtime import RuntimeSettings, create_session


def _model(path: Path) -> Path:
    rng = np.random.default_rng(3)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"]),
            helper.make_node("Tanh", ["h"], ["y"]),
        ],
        "cli",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
        initializer=[numpy_helper.from_array(rng.standard_normal((6, 2)).astype(np.float32), "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _probe(onnx_path: Path, probe_path: Path) -> dict[str, Any]:
    settings = RuntimeSettings(intra_op_threads=1)
    x = np.random.default_rng(4).standard_normal((4, 6)).astype(np.float32)
    (y,) = create_session(onnx_path, settings).run(None, {"x": x})
    env = local_environment(threads=1)
    write_probe_bundle(
        probe_path,
        ProbeBundle(
            ["x"],
            [x],
            ["y"],
            [np.asarray(y)],
            {"y": {"rtol": 1e-4, "atol": 1e-4}},
            sha256_file(onnx_path),
            settings.to_dict(),
            env,
        ),
    )
    return deployment_envelope(settings.to_dict(), env)


@pytest.fixture
def release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Path]:
    return _release(tmp_path, capsys, monkeypatch)


def _release(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *,
    skew_expected_output: bool = False,
) -> dict[str, Path]:
    monkeypatch.setenv("ATTEST_KEY_PASSPHRASE", "probe test passphrase")
    monkeypatch.delenv("ATTEST_TRUST", raising=False)
    monkeypatch.delenv("ATTEST_STATE_FILE", raising=False)
    server = tmp_path / "server"
    server.mkdir()
    onnx_path = _model(server / "model.onnx")
    probe_path = server / "probe.npz"
    deployment = _probe(onnx_path, probe_path)
    if skew_expected_output:  # the release certified outputs this runtime does not produce
        bundle = read_probe_bundle(probe_path)
        bundle.outputs[0] = bundle.outputs[0].copy()
        bundle.outputs[0][2, 0] = np.nextafter(bundle.outputs[0][2, 0], np.float32(2))
        write_probe_bundle(probe_path, bundle)
    assert run(capsys, "keygen", "--out", tmp_path / "keys" / "release")[0] == 0
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [
            {"name": "model.onnx", "digest": {"sha256": sha256_file(onnx_path)}},
            {"name": "probe.npz", "digest": {"sha256": sha256_file(probe_path)}},
        ],
        "predicateType": "https://gradient-attest.dev/certificate/v1",
        "predicate": {
            "certificate_id": "probe-cli-1",
            "model": {"name": "cli-probe", "version": "1.0.0"},
            "issued_at": "2026-01-01T00:00:00Z",
            "expires_at": "2036-01-01T00:00:00Z",
            "verdict": "pass",
            "policy": {"id": "p", "version": "1", "digest": {"sha256": "c" * 64}},
            "deployment": deployment,
        },
    }
    statement_path = tmp_path / "statement.json"
    statement_path.write_text(json.dumps(statement))
    cert = tmp_path / "cert.json"
    key = tmp_path / "keys" / "release.key"
    code, _, err = run(capsys, "sign", statement_path, "--key", key, "-o", cert)
    assert code == 0, err
    trust = tmp_path / "trust.yaml"
    code, _, err = run(
        capsys, "trust", "add", tmp_path / "keys" / "release.pub", "--trust", trust, "--name", "r"
    )
    assert code == 0, err
    return {"cert": cert, "trust": trust, "onnx": onnx_path, "probe": probe_path}


def _verify(
    capsys: pytest.CaptureFixture[str], rel: dict[str, Path], *extra: Any
) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(
        capsys,
        "verify",
        rel["cert"],
        "--trust",
        rel["trust"],
        "--artifact",
        rel["onnx"],
        *extra,
        "--json",
    )
    return code, json.loads(out)


def test_verify_probe_passes_bit_exact(
    release: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = _verify(capsys, release, "--probe", release["probe"], "--check-environment")
    assert code == 0, data["reasons"]
    assert data["verified"] is True
    assert data["probe"]["passed"] is True and data["probe"]["mode"] == "bit_exact"
    assert data["environment_differences"] == []
    assert sorted(data["subjects_checked"]) == ["model.onnx", "probe.npz"]


def test_verify_probe_named_artifact(
    release: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    renamed = tmp_path / "bundle-from-release.npz"
    renamed.write_bytes(release["probe"].read_bytes())
    code, data = _verify(capsys, release, "--probe", f"probe.npz={renamed}")
    assert code == 0, data["reasons"]
    assert data["probe"]["passed"] is True


def test_verify_probe_text_output(
    release: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["verify", release["cert"], "--trust", release["trust"], "--artifact", release["onnx"]]
    code, out, _ = run(capsys, *base, "--probe", release["probe"])
    assert code == 0 and out.startswith("VERIFIED: cli-probe 1.0.0")
    assert "probe (bit_exact): probe outputs match bit-exact" in out


def test_edited_probe_bundle_is_rejected(
    release: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = read_probe_bundle(release["probe"])
    bundle.outputs[0] = bundle.outputs[0].copy()
    bundle.outputs[0][1, 1] = np.float32(bundle.outputs[0][1, 1] + 1e-3)
    write_probe_bundle(release["probe"], bundle)
    code, data = _verify(capsys, release, "--probe", release["probe"])
    assert code == 1 and [r["code"] for r in data["reasons"]] == ["SUBJECT_MISMATCH"]
    assert data["probe"] is None


def test_swapped_onnx_is_rejected(
    release: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    model = onnx.load(str(release["onnx"]))
    weight = numpy_helper.to_array(model.graph.initializer[0]) * np.float32(1.001)
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(weight, "W"))
    onnx.save(model, str(release["onnx"]))
    code, data = _verify(capsys, release, "--probe", release["probe"])
    assert code == 1 and "SUBJECT_MISMATCH" in [r["code"] for r in data["reasons"]]


def test_probe_without_onnx_artifact_is_rejected(
    release: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "verify",
        release["cert"],
        "--trust",
        release["trust"],
        "--artifact",
        release["probe"],
        "--probe",
        release["probe"],
        "--json",
    )
    data = json.loads(out)
    assert code == 1 and not data["verified"]
    assert data["probe"] is None


def test_certified_probe_that_does_not_reproduce_is_probe_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = _release(tmp_path, capsys, monkeypatch, skew_expected_output=True)
    code, data = _verify(capsys, rel, "--probe", rel["probe"])
    assert code == 1 and [r["code"] for r in data["reasons"]] == ["PROBE_MISMATCH"]
    assert "(2, 0)" in data["reasons"][0]["message"]
    assert data["probe"]["outputs"][0]["worst_index"] == [2, 0]
    base = ["verify", rel["cert"], "--trust", rel["trust"], "--artifact", rel["onnx"]]
    code, out, _ = run(capsys, *base, "--probe", rel["probe"])
    assert code == 1 and "REJECTED" in out and "PROBE_MISMATCH" in out
