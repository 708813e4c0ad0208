"""The behavioural probe and the probe bundle (server side: numpy + onnxruntime, no torch)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from _deploy_testkit import certify, keypair, make_probe, release, tiny_onnx, trust_store
from onnx import numpy_helper

from attest.deployment.probe_bundle import PROBE_FORMAT, read_probe_bundle, write_probe_bundle
from attest.errors import InputError
from attest.verification.probe import compare_output, run_probe
from attest.verification.verifier import verify


@pytest.fixture
def rel(tmp_path: Path) -> dict[str, Path]:
    return release(tmp_path)


def _edit_bundle(src: Path, dst: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    bundle = read_probe_bundle(src)
    edit(bundle)
    write_probe_bundle(dst, bundle)
    return dst


# ------------------------------------------------------------------ probe on its own


def test_probe_is_bit_exact_on_the_certifying_machine(rel: dict[str, Path]) -> None:
    outcome = run_probe(rel["onnx"], rel["probe"])
    assert outcome.passed, outcome.message
    assert outcome.mode == "bit_exact"
    assert outcome.outputs[0].bit_exact
    assert outcome.outputs[0].max_abs_error == 0.0
    assert outcome.runtime["deterministic_compute"] is True
    assert outcome.runtime["execution_mode"] == "sequential"


def test_bundle_edited_by_one_value_is_a_probe_mismatch_at_that_index(
    rel: dict[str, Path], tmp_path: Path
) -> None:
    def bump(bundle) -> None:  # type: ignore[no-untyped-def]
        out = bundle.outputs[0].copy()
        out[3, 1] = np.nextafter(out[3, 1], np.float32(np.inf))  # one ulp
        bundle.outputs[0] = out

    edited = _edit_bundle(rel["probe"], tmp_path / "edited.npz", bump)
    outcome = run_probe(rel["onnx"], edited)
    assert not outcome.passed
    assert outcome.mode == "bit_exact"
    worst = outcome.largest_error
    assert worst is not None and worst.worst_index == [3, 1]
    assert "not bit-exact" in outcome.message and "(3, 1)" in outcome.message


def test_bundle_edited_input_is_a_probe_mismatch(rel: dict[str, Path], tmp_path: Path) -> None:
    def bump(bundle) -> None:  # type: ignore[no-untyped-def]
        bundle.inputs[0] = bundle.inputs[0] + np.float32(0.5)

    outcome = run_probe(rel["onnx"], _edit_bundle(rel["probe"], tmp_path / "e.npz", bump))
    assert not outcome.passed


def _elsewhere(monkeypatch: pytest.MonkeyPatch, **changes: object) -> None:
    """Make this machine look different from the one that certified the probe."""
    import attest.verification.probe as probe_module

    real = probe_module.local_environment

    def local_environment(**kwargs: object) -> dict[str, object]:
        return {**real(**kwargs), **changes}  # type: ignore[arg-type]

    monkeypatch.setattr(probe_module, "local_environment", local_environment)


def test_other_environment_compares_within_tolerance(
    rel: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _elsewhere(monkeypatch, cpu_isa="avx2", onnxruntime_version="1.17.0")
    outcome = run_probe(rel["onnx"], rel["probe"])
    assert outcome.passed
    assert outcome.mode == "tolerance"
    assert {d.key for d in outcome.environment_differences} == {"cpu_isa", "onnxruntime_version"}


def test_bundle_environment_decides_bit_exactness(rel: dict[str, Path]) -> None:
    # The certificate's envelope may be coarser; the bundle says where its outputs came from.
    bundle = read_probe_bundle(rel["probe"])
    other = {**bundle.environment, "cpu_isa": "sse4.2"}
    assert run_probe(rel["onnx"], rel["probe"], certified_env=other).mode == "bit_exact"


def test_tolerance_mode_rejects_error_beyond_tolerance(
    rel: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def shift(bundle) -> None:  # type: ignore[no-untyped-def]
        out = bundle.outputs[0].copy()
        scale = float(np.abs(out).max())
        out[2, 0] += np.float32(scale * 1e-2)  # 100x the certified rtol of 1e-4
        out[4, 2] += np.float32(scale * 1e-6)  # within tolerance
        bundle.outputs[0] = out

    edited = _edit_bundle(rel["probe"], tmp_path / "shifted.npz", shift)
    _elsewhere(monkeypatch, cpu_isa="sse4.2")
    outcome = run_probe(rel["onnx"], edited)
    assert not outcome.passed and outcome.mode == "tolerance"
    worst = outcome.largest_error
    assert worst is not None and worst.worst_index == [2, 0]
    assert worst.max_rel_error == pytest.approx(1e-2, rel=1e-3)
    assert "beyond the certified tolerance" in outcome.message


def test_probe_made_for_another_onnx_file_is_refused(rel: dict[str, Path], tmp_path: Path) -> None:
    other = tiny_onnx(tmp_path / "other.onnx", hidden=3, weight=np.ones((3, 4), np.float32))
    outcome = run_probe(other, rel["probe"])
    assert not outcome.passed
    assert outcome.problem is not None and outcome.message == outcome.problem
    assert "produced from an ONNX file with sha256" in outcome.message


@pytest.mark.parametrize(
    ("actual", "expected", "exact", "passed"),
    [
        ([1.0, 2.0], [1.0, 2.0], True, True),
        ([0.0, 2.0], [-0.0, 2.0], True, False),  # equal values, different bytes
        ([0.0, 2.0], [-0.0, 2.0], False, True),
        ([np.nan, 1.0], [np.nan, 1.0], False, True),
        ([np.nan, 1.0], [0.0, 1.0], False, False),
        ([np.inf, 1.0], [np.inf, 1.0], False, True),
        ([1.0, 2.0002], [1.0, 2.0], False, False),  # rtol 1e-5 * 2 + atol 1e-6 < 2e-4
    ],
)
def test_compare_output_table(
    actual: list[float], expected: list[float], exact: bool, passed: bool
) -> None:
    a = np.array(actual, np.float32)
    e = np.array(expected, np.float32)
    result = compare_output("y", a, e, rtol=1e-5, atol=1e-6, exact=exact)
    assert result.passed is passed


def test_compare_output_shape_mismatch() -> None:
    result = compare_output(
        "y", np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), rtol=0, atol=0, exact=False
    )
    assert not result.passed and result.problem is not None


# ------------------------------------------------------------------ malformed bundles


def _npz_bytes(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _meta(**overrides: object) -> np.ndarray:
    meta = {
        "format": PROBE_FORMAT,
        "input_names": ["x"],
        "output_names": ["y"],
        "tolerances": {"y": {"rtol": 1e-4, "atol": 1e-4}},
        "onnx_sha256": "0" * 64,
        "runtime": {},
        "environment": {},
        "extra": {},
    }
    meta.update(overrides)
    return np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)


_X = np.zeros((1, 4), np.float32)
_Y = np.zeros((1, 3), np.float32)
MALFORMED_BUNDLES = {
    "not a zip": b"hello",
    "single npy": None,  # filled below
    "no meta": _npz_bytes(input_0=_X, output_0=_Y),
    "meta not json": _npz_bytes(
        meta=np.frombuffer(b"{bad", dtype=np.uint8), input_0=_X, output_0=_Y
    ),
    "meta duplicate key": _npz_bytes(
        meta=np.frombuffer(b'{"format": 1, "format": 2}', dtype=np.uint8), input_0=_X, output_0=_Y
    ),
    "wrong format": _npz_bytes(meta=_meta(format="other/1"), input_0=_X, output_0=_Y),
    "missing output array": _npz_bytes(meta=_meta(), input_0=_X),
    "extra array": _npz_bytes(meta=_meta(), input_0=_X, output_0=_Y, payload=_Y),
    "negative tolerance": _npz_bytes(
        meta=_meta(tolerances={"y": {"rtol": -1.0, "atol": 0.0}}), input_0=_X, output_0=_Y
    ),
    "tolerance for another output": _npz_bytes(
        meta=_meta(tolerances={"z": {"rtol": 1.0, "atol": 0.0}}), input_0=_X, output_0=_Y
    ),
    "object array (pickle)": _npz_bytes(
        meta=_meta(), input_0=np.array([{"a": 1}], dtype=object), output_0=_Y
    ),
    "string array": _npz_bytes(meta=_meta(), input_0=np.array(["a"]), output_0=_Y),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_BUNDLES))
def test_malformed_bundles_are_refused(case: str, tmp_path: Path) -> None:
    path = tmp_path / "probe.npz"
    data = MALFORMED_BUNDLES[case]
    if data is None:
        np.save(tmp_path / "probe.npy", _X)
        path = tmp_path / "probe.npy"
    else:
        path.write_bytes(data)
    with pytest.raises(InputError, match="probe bundle"):
        read_probe_bundle(path)


def test_bundle_roundtrip_preserves_bytes(rel: dict[str, Path], tmp_path: Path) -> None:
    bundle = read_probe_bundle(rel["probe"])
    copy = tmp_path / "copy.npz"
    write_probe_bundle(copy, bundle)
    again = read_probe_bundle(copy)
    assert again.outputs[0].tobytes() == bundle.outputs[0].tobytes()
    assert again.meta() == bundle.meta()
    with zipfile.ZipFile(copy) as zf:
        assert sorted(zf.namelist()) == ["input_0.npy", "meta.npy", "output_0.npy"]


# ------------------------------------------------------------------ through the verifier


def test_verify_with_probe_passes(rel: dict[str, Path]) -> None:
    report = verify(rel["cert"], trust=rel["trust"], artifacts=[rel["onnx"]], probe=rel["probe"])
    assert report.verified, report.reasons
    assert report.probe is not None and report.probe["mode"] == "bit_exact"
    assert "probe.npz" in report.subjects_checked and "model.onnx" in report.subjects_checked


def test_swapped_onnx_file_is_subject_mismatch(rel: dict[str, Path], tmp_path: Path) -> None:
    swapped_dir = tmp_path / "server"
    swapped_dir.mkdir()
    swapped = tiny_onnx(swapped_dir / "model.onnx", weight=np.eye(3, 4, dtype=np.float32))
    onnx.checker.check_model(
        str(swapped)
    )  # a perfectly valid ONNX file, just not the certified one
    report = verify(rel["cert"], trust=rel["trust"], artifacts=[swapped], probe=rel["probe"])
    assert not report.verified
    assert "SUBJECT_MISMATCH" in report.codes
    assert report.probe is None  # the probe never ran on the wrong file


def test_bundle_edited_by_one_value_is_rejected_by_verify(
    rel: dict[str, Path], tmp_path: Path
) -> None:
    def bump(bundle) -> None:  # type: ignore[no-untyped-def]
        out = bundle.outputs[0].copy()
        out.flat[0] = np.nextafter(out.flat[0], np.float32(np.inf))
        bundle.outputs[0] = out

    server = tmp_path / "server"
    server.mkdir()
    edited = _edit_bundle(rel["probe"], server / "probe.npz", bump)
    report = verify(rel["cert"], trust=rel["trust"], artifacts=[rel["onnx"]], probe=edited)
    assert not report.verified
    assert report.codes == ["SUBJECT_MISMATCH"]


def test_probe_bundle_that_is_not_a_subject_is_refused(
    rel: dict[str, Path], tmp_path: Path
) -> None:
    stray = tmp_path / "server" / "my-probe.npz"
    stray.parent.mkdir()
    shutil.copy(rel["probe"], stray)  # same bytes, but the certificate names no "my-probe.npz"
    report = verify(rel["cert"], trust=rel["trust"], artifacts=[rel["onnx"]], probe=stray)
    assert not report.verified and "SUBJECT_MISMATCH" in report.codes
    assert report.probe is None


def test_perturbed_weight_resigned_by_untrusted_key_is_rejected(
    rel: dict[str, Path], tmp_path: Path
) -> None:
    attacker_dir = tmp_path / "attacker"
    attacker_dir.mkdir()
    model = onnx.load(str(rel["onnx"]))
    weight = numpy_helper.to_array(model.graph.initializer[0]).copy()
    weight[0, 0] += np.float32(1e-3)
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(weight, "W"))
    evil = attacker_dir / "model.onnx"
    onnx.save(model, str(evil))
    evil_probe = attacker_dir / "probe.npz"
    deployment = make_probe(evil, evil_probe)  # a self-consistent probe for the evil model
    attacker_key, _ = keypair(attacker_dir, "attacker")
    evil_cert = certify(
        attacker_dir / "gradient_certificate.json",
        {"model.onnx": evil, "probe.npz": evil_probe},
        attacker_key,
        deployment=deployment,
        version="9.0.0",
    )
    report = verify(evil_cert, trust=rel["trust"], artifacts=[evil], probe=evil_probe)
    assert not report.verified and report.codes == ["UNTRUSTED_KEY"]
    assert report.probe is None
    # The perturbed file against the genuine certificate and probe fails twice over.
    genuine = verify(rel["cert"], trust=rel["trust"], artifacts=[evil], probe=rel["probe"])
    assert "SUBJECT_MISMATCH" in genuine.codes
    assert not run_probe(evil, rel["probe"]).passed


def test_trusted_attacker_store_would_accept_it_showing_the_key_is_what_rejects(
    rel: dict[str, Path], tmp_path: Path
) -> None:
    # Control for the test above: the same forged release verifies against the attacker's
    # own trust store, so the rejection there comes from the key, not from a broken file.
    attacker_dir = tmp_path / "attacker"
    attacker_dir.mkdir()
    evil = tiny_onnx(attacker_dir / "model.onnx", weight=np.ones((3, 4), np.float32))
    evil_probe = attacker_dir / "probe.npz"
    deployment = make_probe(evil, evil_probe)
    attacker_key, pem = keypair(attacker_dir, "attacker")
    cert = certify(
        attacker_dir / "c.json",
        {"model.onnx": evil, "probe.npz": evil_probe},
        attacker_key,
        deployment=deployment,
    )
    own = trust_store(attacker_dir / "trust.yaml", pem)
    assert verify(cert, trust=own, artifacts=[evil], probe=evil_probe).verified


# ------------------------------------------------------------------ import hygiene


def test_probe_path_imports_numpy_and_onnxruntime_only(rel: dict[str, Path]) -> None:
    code = (
        "import sys\n"
        "from attest.verification.probe import run_probe\n"
        f"outcome = run_probe({str(rel['onnx'])!r}, {str(rel['probe'])!r})\n"
        "assert outcome.passed, outcome.message\n"
        "from attest.verification.verifier import verify\n"
        f"r = verify({str(rel['cert'])!r}, trust={str(rel['trust'])!r}, "
        f"artifacts=[{str(rel['onnx'])!r}], probe={str(rel['probe'])!r}, check_environment=True)\n"
        "assert r.verified, r.reasons\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'torch', 'onnx', 'onnxscript', 'onnx_ir', 'pydantic', 'safetensors', 'matplotlib', "
        "'jsonschema', 'referencing', 'attrs', 'rfc8785'})\n"
        "print(heavy)\n"
        "assert 'numpy' in sys.modules and 'onnxruntime' in sys.modules\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
