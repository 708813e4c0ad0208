"""Helpers for the deployment tests: a tiny ONNX model built without torch, its probe bundle,
keys, a trust store and a signed certificate binding them, the way ``attest certify`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from attest.certificate.signing import PrivateKey, generate_keypair, load_private_key
from attest.certificate.statement import build_statement, sign_statement, write_certificate
from attest.core.io import sha256_file
from attest.deployment.environment import deployment_envelope, local_environment
from attest.deployment.probe_bundle import ProbeBundle, write_probe_bundle
from attest.deployment.runtime import RuntimeSettings, create_session
from attest.verification.trust import add_key, empty_trust_store, save_trust_store

RNG_SEED = 7


def tiny_onnx(path: Path, *, weight: np.ndarray | None = None, hidden: int = 3) -> Path:
    """y = relu(x @ W.T + b): x (N, 4) float32 -> y (N, hidden). Valid for onnx.checker."""
    rng = np.random.default_rng(RNG_SEED)
    w = rng.standard_normal((hidden, 4)).astype(np.float32) if weight is None else weight
    b = rng.standard_normal((hidden,)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "W", "b"], ["h"], transB=1, name="fc"),
            helper.make_node("Relu", ["h"], ["y"], name="act"),
        ],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", hidden])],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def probe_inputs() -> np.ndarray:
    return np.random.default_rng(RNG_SEED + 1).standard_normal((5, 4)).astype(np.float32)


def make_probe(
    onnx_path: Path, probe_path: Path, *, rtol: float = 1e-4, threads: int = 1
) -> dict[str, Any]:
    """Run the model with the certified settings and write probe.npz; returns the deployment envelope."""
    settings = RuntimeSettings(intra_op_threads=threads)
    session = create_session(onnx_path, settings)
    x = probe_inputs()
    (y,) = session.run(None, {"x": x})
    environment = local_environment(threads=threads)
    write_probe_bundle(
        probe_path,
        ProbeBundle(
            input_names=["x"],
            inputs=[x],
            output_names=["y"],
            outputs=[np.asarray(y)],
            tolerances={"y": {"rtol": rtol, "atol": rtol * float(np.abs(y).max())}},
            onnx_sha256=sha256_file(onnx_path),
            runtime=settings.to_dict(),
            environment=environment,
        ),
    )
    return deployment_envelope(settings.to_dict(), environment)


def keypair(folder: Path, name: str) -> tuple[PrivateKey, bytes]:
    key_path, pub_path, _ = generate_keypair(folder / name, passphrase=None)
    return load_private_key(key_path, prompt=False), pub_path.read_bytes()


def trust_store(path: Path, *pems: bytes) -> Path:
    store = empty_trust_store(str(path))
    for i, pem in enumerate(pems):
        store, _ = add_key(store, pem, name=f"release-{i}")
    save_trust_store(store, path)
    return path


def certify(
    cert_path: Path,
    artifacts: dict[str, Path],
    key: PrivateKey,
    *,
    deployment: dict[str, Any] | None = None,
    version: str = "1.0.0",
) -> Path:
    """Sign a passing certificate whose subjects are ``artifacts`` (name -> path)."""
    statement = build_statement(
        subjects={name: sha256_file(path) for name, path in artifacts.items()},
        model={"name": "tiny", "version": version},
        policy={"id": "test", "version": "1", "digest": {"sha256": "0" * 64}},
        verdict="pass",
        deployment=deployment,
    )
    write_certificate(cert_path, sign_statement(statement, [key]))
    return cert_path


def release(tmp: Path) -> dict[str, Path]:
    """A certified release: model.onnx, probe.npz, a trusted key and a certificate."""
    onnx_path = tiny_onnx(tmp / "model.onnx")
    probe_path = tmp / "probe.npz"
    deployment = make_probe(onnx_path, probe_path)
    key, pem = keypair(tmp, "release")
    trust = trust_store(tmp / "trust.yaml", pem)
    cert = certify(
        tmp / "gradient_certificate.json",
        {"model.onnx": onnx_path, "probe.npz": probe_path},
        key,
        deployment=deployment,
    )
    return {"onnx": onnx_path, "probe": probe_path, "trust": trust, "cert": cert}
