"""The local runtime description and its comparison with the certified deployment envelope."""

from __future__ import annotations

from pathlib import Path

import pytest
from _deploy_testkit import certify, keypair, make_probe, tiny_onnx, trust_store

from attest.deployment import environment as env_mod
from attest.deployment.environment import (
    DEFAULT_FATAL,
    compare_environment,
    cpu_description,
    deployment_envelope,
    local_environment,
)
from attest.verification.verifier import verify

X86_AVX512 = "processor\t: 0\nflags\t\t: fpu sse4_1 sse4_2 avx f16c avx2 fma avx512f avx512dq avx512bw avx512vl avx512_vnni\n"
X86_AVX2 = "processor\t: 0\nflags\t\t: fpu sse4_1 sse4_2 avx f16c avx2 fma\n"
X86_AVX2_NO_FMA = "flags : sse4_2 avx avx2\n"
ARM_SVE = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes sve asimddp\n"
ARM_NEON = "processor\t: 0\nFeatures\t: fp asimd evtstrm\n"


@pytest.mark.parametrize(
    ("machine", "text", "isa", "must_have"),
    [
        ("x86_64", X86_AVX512, "avx512", {"avx512f", "avx512_vnni", "fma"}),
        ("AMD64", X86_AVX2, "avx2", {"avx2", "fma"}),
        ("x86_64", X86_AVX2_NO_FMA, "avx", {"avx2"}),
        ("aarch64", ARM_SVE, "sve", {"sve", "asimd"}),
        ("arm64", ARM_NEON, "neon", {"asimd"}),
        ("x86_64", "", "unknown", set()),
    ],
)
def test_cpu_description(
    machine: str, text: str, isa: str, must_have: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(env_mod.platform, "machine", lambda: machine)
    cpu = cpu_description(text)
    assert cpu["cpu_isa"] == isa
    assert must_have <= set(cpu["cpu_features"])
    assert cpu["cpu_arch"] in ("x86_64", "aarch64")


def test_local_environment_describes_onnxruntime() -> None:
    import onnxruntime

    local = local_environment(threads=3)
    assert local["onnxruntime_version"] == onnxruntime.__version__
    assert local["execution_provider"] == "CPUExecutionProvider"
    assert local["intra_op_threads"] == 3
    assert local["cpu_arch"] and local["cpu_isa"]
    missing = local_environment(execution_provider="NoSuchExecutionProvider")
    assert missing["execution_provider"] is None
    assert missing["intra_op_threads"] >= 1


CERTIFIED = {
    "cpu_arch": "x86_64",
    "execution_provider": "CPUExecutionProvider",
    "onnxruntime_version": "1.32.0",
    "cpu_isa": "avx512",
    "cpu_features": ["avx2", "avx512f"],
    "intra_op_threads": 2,
    "graph_optimization_level": "all",  # not compared
}


@pytest.mark.parametrize(
    ("change", "keys", "fatal_keys"),
    [
        ({}, [], []),
        ({"cpu_features": ["avx512f", "avx2"]}, [], []),  # order does not matter
        ({"graph_optimization_level": "basic"}, [], []),
        ({"onnxruntime_version": "1.17.0"}, ["onnxruntime_version"], []),
        ({"cpu_isa": "avx2", "cpu_features": ["avx2"]}, ["cpu_isa", "cpu_features"], []),
        ({"intra_op_threads": 8}, ["intra_op_threads"], []),
        ({"cpu_arch": "aarch64"}, ["cpu_arch"], ["cpu_arch"]),
        ({"execution_provider": None}, ["execution_provider"], ["execution_provider"]),
    ],
)
def test_compare_environment_table(
    change: dict[str, object], keys: list[str], fatal_keys: list[str]
) -> None:
    local = {**CERTIFIED, **change}
    differences = compare_environment(CERTIFIED, local, DEFAULT_FATAL)
    assert [d.key for d in differences] == keys
    assert [d.key for d in differences if d.fatal] == fatal_keys
    for d in differences:
        assert d.key in d.message and repr(d.certified) in d.message


def test_compare_environment_ignores_keys_not_certified() -> None:
    assert (
        compare_environment({"cpu_arch": "x86_64"}, {"cpu_arch": "x86_64", "cpu_isa": "sve"}, [])
        == []
    )


def test_policy_decides_what_is_fatal() -> None:
    local = {**CERTIFIED, "onnxruntime_version": "1.18.0"}
    (diff,) = compare_environment(CERTIFIED, local, ["onnxruntime_version"])
    assert diff.fatal and "fatal" in diff.message


def _release_with(
    tmp_path: Path, runtime_change: dict[str, object], fatal: list[str]
) -> dict[str, Path]:
    onnx_path = tiny_onnx(tmp_path / "model.onnx")
    probe = tmp_path / "probe.npz"
    deployment = make_probe(onnx_path, probe)
    deployment["runtime"].update(runtime_change)
    deployment["fatal_differences"] = fatal
    key, pem = keypair(tmp_path, "release")
    cert = certify(
        tmp_path / "cert.json",
        {"model.onnx": onnx_path, "probe.npz": probe},
        key,
        deployment=deployment,
    )
    return {
        "cert": cert,
        "trust": trust_store(tmp_path / "trust.yaml", pem),
        "onnx": onnx_path,
        "probe": probe,
    }


def test_verify_check_environment_matching(tmp_path: Path) -> None:
    r = _release_with(tmp_path, {}, list(DEFAULT_FATAL))
    report = verify(r["cert"], trust=r["trust"], artifacts=[r["onnx"]], check_environment=True)
    assert report.verified, report.reasons
    assert report.environment_differences == []


def test_verify_check_environment_fatal_difference(tmp_path: Path) -> None:
    r = _release_with(tmp_path, {"cpu_arch": "riscv64"}, ["cpu_arch"])
    report = verify(r["cert"], trust=r["trust"], artifacts=[r["onnx"]], check_environment=True)
    assert not report.verified
    assert report.codes == ["ENVIRONMENT_MISMATCH"]
    assert "riscv64" in report.reasons[0][1]


def test_verify_check_environment_non_fatal_difference_is_a_note(tmp_path: Path) -> None:
    r = _release_with(tmp_path, {"onnxruntime_version": "0.0.1"}, ["cpu_arch"])
    report = verify(r["cert"], trust=r["trust"], artifacts=[r["onnx"]], check_environment=True)
    assert report.verified, report.reasons
    assert [d["key"] for d in report.environment_differences] == ["onnxruntime_version"]
    assert any("onnxruntime_version" in n for n in report.notes)
    # The probe bundle was produced on this machine, so the probe still demands bit-exactness.
    with_probe = verify(r["cert"], trust=r["trust"], artifacts=[r["onnx"]], probe=r["probe"])
    assert with_probe.verified and with_probe.probe is not None
    assert with_probe.probe["mode"] == "bit_exact"


def test_deployment_envelope_shape() -> None:
    env = deployment_envelope({"intra_op_threads": 2}, {**CERTIFIED, "os": "linux", "extra": 1})
    assert env["targets"] == ["cpu:x86_64:avx512"]
    assert env["runtime"]["intra_op_threads"] == 2 and "extra" not in env["runtime"]
    assert env["fatal_differences"] == list(DEFAULT_FATAL)
    from attest.certificate.statement import DeploymentEnvelope

    DeploymentEnvelope.model_validate(env)  # the certificate accepts it as is
