"""The verifier runs the bytes it hashed, and binds an ONNX model's external data.

The swaps happen in a hook between step 6 (hashing) and step 9 (the probe), not in a race:
the test wraps the probe so that the files on disk are replaced just before it starts.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from _deploy_testkit import certify, keypair, make_probe, release, tiny_onnx, trust_store
from onnx import numpy_helper

import attest.verification.probe as probe_module
from attest.cli import main
from attest.deployment.probe_bundle import read_probe_bundle, write_probe_bundle
from attest.verification.probe import run_probe
from attest.verification.verifier import verify


@pytest.fixture
def rel(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "release").mkdir()
    return release(tmp_path / "release")


def _evil_model(src: Path, dst: Path) -> Path:
    """The same graph with the bias moved by 30: outputs change by tens."""
    model = onnx.load(str(src))
    for init in model.graph.initializer:
        if init.name == "b":
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) + 30.0, "b"))
    onnx.save(model, str(dst))
    return dst


def _evil_bundle(src: Path, dst: Path, onnx_sha256: str) -> Path:
    """A bundle that keeps the certified ONNX digest but tolerates anything and claims another
    machine produced it (so the probe compares within tolerance, not bit for bit)."""
    bundle = read_probe_bundle(src)
    bundle.tolerances = {name: {"rtol": 1e9, "atol": 1e9} for name in bundle.output_names}
    bundle.environment = {**bundle.environment, "cpu_arch": "elsewhere", "cpu_features": "x"}
    bundle.onnx_sha256 = onnx_sha256
    write_probe_bundle(dst, bundle)
    return dst


def _swap_before_probe(
    monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None], seen: list[Any]
) -> None:
    real = probe_module.run_probe

    def hooked(onnx_arg: Any, probe_arg: Any, **kwargs: Any) -> Any:
        swap()  # the files on disk change after they were hashed
        outcome = real(onnx_arg, probe_arg, **kwargs)
        seen.append(outcome)
        return outcome

    monkeypatch.setattr(probe_module, "run_probe", hooked)


def test_both_files_swapped_after_hashing_the_certified_bytes_run(
    rel: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evil_model = _evil_model(rel["onnx"], tmp_path / "evil.onnx")
    evil_probe = _evil_bundle(rel["probe"], tmp_path / "evil.npz", _sha(rel["onnx"]))
    # The attack works against a probe that re-reads paths after the verifier hashed them
    # (and passes on the digest it computed): the evil pair passes.
    attack = run_probe(evil_model, evil_probe, onnx_sha256=_sha(rel["onnx"]))
    assert attack.passed and attack.mode == "tolerance" and attack.outputs[0].max_abs_error > 10

    def swap() -> None:
        shutil.copyfile(evil_model, rel["onnx"])
        shutil.copyfile(evil_probe, rel["probe"])

    seen: list[Any] = []
    _swap_before_probe(monkeypatch, swap, seen)
    report = verify(rel["cert"], trust=rel["trust"], artifacts=[rel["onnx"]], probe=rel["probe"])
    assert report.verified, report.reasons
    (outcome,) = seen
    assert outcome.mode == "bit_exact" and outcome.outputs[0].max_abs_error == 0.0
    assert outcome.outputs[0].rtol < 1  # the certified tolerance, not the planted one
    assert rel["onnx"].read_bytes() == evil_model.read_bytes()  # the swap did happen


def test_model_swapped_after_hashing_the_certified_model_runs(
    rel: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evil_model = _evil_model(rel["onnx"], tmp_path / "evil.onnx")
    seen: list[Any] = []
    _swap_before_probe(monkeypatch, lambda: shutil.copyfile(evil_model, rel["onnx"]), seen)
    report = verify(rel["cert"], trust=rel["trust"], artifacts=[rel["onnx"]], probe=rel["probe"])
    assert report.verified, report.reasons
    assert seen[0].outputs[0].bit_exact


def _sha(path: Path) -> str:
    from attest.core.io import sha256_file

    return sha256_file(path)


# ------------------------------------------------------------------ external data


def _external_release(root: Path, *, location: str = "model.onnx.data") -> dict[str, Path]:
    """A release whose model keeps its weights in an external data file."""
    root.mkdir(parents=True)
    inline = tiny_onnx(root / "inline.onnx")
    model = onnx.load(str(inline))
    onnx_path = root / "model.onnx"
    onnx.save_model(
        model, str(onnx_path), save_as_external_data=True, location=location, size_threshold=0
    )
    probe = root / "probe.npz"
    deployment = make_probe(onnx_path, probe)
    key, pem = keypair(root, "release")
    data = (root / location).resolve()
    return {
        "onnx": onnx_path,
        "data": data,
        "probe": probe,
        "trust": trust_store(root / "trust.yaml", pem),
        "key": key,  # type: ignore[dict-item]
        "deployment": deployment,  # type: ignore[dict-item]
    }


def _certify(r: dict[str, Any], root: Path, *, with_data: bool = True) -> Path:
    subjects = {"model.onnx": r["onnx"], "probe.npz": r["probe"]}
    if with_data:
        subjects["model.onnx.data"] = r["data"]
    return certify(root / "cert.json", subjects, r["key"], deployment=r["deployment"])


ExternalCase = Callable[[dict[str, Any], Path], tuple[Path, list[Any], dict[str, Any]]]


def data_bound_and_given(r: dict[str, Any], root: Path) -> tuple[Path, list[Any], dict[str, Any]]:
    return _certify(r, root), [r["onnx"], r["data"]], {"probe": r["probe"]}


def data_bound_and_given_no_probe(r: dict[str, Any], root: Path) -> tuple[Path, list[Any], dict]:
    return _certify(r, root), [r["onnx"], r["data"]], {}


def data_not_a_subject(r: dict[str, Any], root: Path) -> tuple[Path, list[Any], dict[str, Any]]:
    return _certify(r, root, with_data=False), [r["onnx"]], {}


def data_not_a_subject_with_probe(r: dict[str, Any], root: Path) -> tuple[Path, list[Any], dict]:
    return _certify(r, root, with_data=False), [r["onnx"]], {"probe": r["probe"]}


def data_subject_not_given(r: dict[str, Any], root: Path) -> tuple[Path, list[Any], dict]:
    return _certify(r, root), [r["onnx"]], {}


def data_replaced_on_disk(r: dict[str, Any], root: Path) -> tuple[Path, list[Any], dict]:
    cert = _certify(r, root)
    data = bytearray(r["data"].read_bytes())
    data[0] ^= 0x40
    r["data"].write_bytes(bytes(data))
    return cert, [r["onnx"], r["data"]], {"probe": r["probe"]}


def data_in_a_directory_artifact(r: dict[str, Any], root: Path) -> tuple[Path, list, dict]:
    from attest.certificate.statement import subjects_from_paths

    folder = root / "served"
    folder.mkdir()
    shutil.copyfile(r["onnx"], folder / "model.onnx")
    shutil.copyfile(r["data"], folder / "model.onnx.data")
    subjects = {"probe.npz": _sha(r["probe"])}
    subjects.update(subjects_from_paths({"served": folder}))
    from attest.certificate.statement import build_statement, sign_statement, write_certificate

    statement = build_statement(
        subjects=subjects,
        model={"name": "tiny", "version": "1.0.0"},
        policy={"id": "test", "version": "1", "digest": {"sha256": "0" * 64}},
        verdict="pass",
        deployment=r["deployment"],
    )
    write_certificate(root / "cert.json", sign_statement(statement, [r["key"]]))
    return root / "cert.json", [folder], {"probe": r["probe"]}


def _bound_folder(r: dict[str, Any], root: Path) -> tuple[Path, Path]:
    """The model and its external data in a folder bound through its manifest."""
    from attest.certificate.folder_manifest import folder_manifest
    from attest.certificate.statement import build_statement, sign_statement, write_certificate

    folder = root / "served"
    folder.mkdir()
    shutil.copyfile(r["onnx"], folder / "model.onnx")
    shutil.copyfile(r["data"], folder / "model.onnx.data")
    manifest = folder_manifest(folder, shard_size=4096)
    statement = build_statement(
        subjects={"probe.npz": _sha(r["probe"]), "served": manifest.root_digest},
        folders={"served": manifest.predicate()},
        model={"name": "tiny", "version": "1.0.0"},
        policy={"id": "test", "version": "1", "digest": {"sha256": "0" * 64}},
        verdict="pass",
        deployment=r["deployment"],
    )
    return write_certificate(root / "cert.json", sign_statement(statement, [r["key"]])), folder


def data_in_a_bound_folder(r: dict[str, Any], root: Path) -> tuple[Path, list, dict]:
    cert, folder = _bound_folder(r, root)
    return cert, [folder], {"probe": r["probe"]}


def data_in_a_bound_folder_changed(r: dict[str, Any], root: Path) -> tuple[Path, list, dict]:
    cert, folder = _bound_folder(r, root)
    data = bytearray((folder / "model.onnx.data").read_bytes())
    data[0] ^= 0x40
    (folder / "model.onnx.data").write_bytes(bytes(data))
    return cert, [folder], {"probe": r["probe"]}


def data_outside_the_model_folder(r: dict[str, Any], root: Path) -> tuple[Path, list, dict]:
    model = onnx.load(str(r["onnx"]), load_external_data=False)
    for init in model.graph.initializer:
        for entry in init.external_data:
            if entry.key == "location":
                entry.value = "../model.onnx.data"
    onnx.save(model, str(r["onnx"]))
    return _certify(r, root), [r["onnx"], r["data"]], {}


def not_protobuf(r: dict[str, Any], root: Path) -> tuple[Path, list[Any], dict[str, Any]]:
    r["onnx"].write_bytes(b"\x0f\xff not an onnx model")
    return _certify(r, root), [r["onnx"], r["data"]], {}


EXTERNAL: list[tuple[ExternalCase, str | None]] = [
    (data_bound_and_given, None),
    (data_bound_and_given_no_probe, None),
    (data_in_a_directory_artifact, None),
    (data_in_a_bound_folder, None),
    (data_in_a_bound_folder_changed, "SUBJECT_MISMATCH"),
    (data_not_a_subject, "SUBJECT_MISMATCH"),
    (data_not_a_subject_with_probe, "SUBJECT_MISMATCH"),
    (data_subject_not_given, "ARTIFACT_MISSING"),
    (data_replaced_on_disk, "SUBJECT_MISMATCH"),
    (data_outside_the_model_folder, "SUBJECT_MISMATCH"),
    (not_protobuf, "SUBJECT_MISMATCH"),
]


@pytest.mark.parametrize(("case", "code"), EXTERNAL, ids=[c.__name__ for c, _ in EXTERNAL])
def test_external_data(
    case: ExternalCase, code: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = _external_release(tmp_path / "rel")
    cert, artifacts, kwargs = case(r, tmp_path)
    report = verify(cert, trust=r["trust"], artifacts=artifacts, **kwargs)
    if code is None:
        assert report.verified, report.reasons
        if "probe" in kwargs:
            assert report.probe is not None and report.probe["passed"]
    else:
        assert not report.verified and report.codes[0] == code, report.reasons
    # the same through the command line: exit 0/1, never a crash
    args = ["verify", str(cert), "--trust", str(r["trust"]), "--no-state"]
    for artifact in artifacts:
        args += ["--artifact", str(artifact)]
    if "probe" in kwargs:
        args += ["--probe", str(kwargs["probe"])]
    try:
        main(args)
        exit_code = 0
    except SystemExit as exc:
        exit_code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert exit_code == (0 if code is None else 1), out + err
    assert "Traceback" not in out + err and "internal error" not in out + err


def test_external_data_swapped_between_hash_and_probe_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = _external_release(tmp_path / "rel")
    cert = _certify(r, tmp_path)
    weights = np.full((3, 4), 7.0, dtype=np.float32).tobytes()

    def swap() -> None:
        r["data"].write_bytes(weights + r["data"].read_bytes()[len(weights) :])

    seen: list[Any] = []
    real = probe_module.run_probe
    monkeypatch.setattr(probe_module, "run_probe", lambda *a, **k: seen.append(1) or real(*a, **k))
    import attest.verification.artifact_check as check

    original = check.read_external_data

    def hooked(*args: Any) -> Any:
        swap()
        return original(*args)

    monkeypatch.setattr("attest.verification.verifier.read_external_data", hooked)
    report = verify(cert, trust=r["trust"], artifacts=[r["onnx"], r["data"]], probe=r["probe"])
    assert report.codes == ["SUBJECT_MISMATCH"], report.reasons
    assert "changed or vanished" in report.reasons[0][1]
    assert not seen  # the model never ran


def test_external_data_in_a_bound_folder_swapped_before_the_probe_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = _external_release(tmp_path / "rel")
    cert, folder = _bound_folder(r, tmp_path)
    import attest.verification.artifact_check as check

    original = check.read_external_data

    def hooked(*args: Any) -> Any:  # a link to the certified bytes, swapped in after step 6
        outside = tmp_path / "elsewhere.data"
        shutil.copyfile(folder / "model.onnx.data", outside)
        (folder / "model.onnx.data").unlink()
        (folder / "model.onnx.data").symlink_to(outside)
        return original(*args)

    monkeypatch.setattr("attest.verification.verifier.read_external_data", hooked)
    report = verify(cert, trust=r["trust"], artifacts=[folder], probe=r["probe"])
    assert report.codes == ["SUBJECT_MISMATCH"], report.reasons
    assert "served/model.onnx.data changed or vanished" in report.reasons[0][1]
