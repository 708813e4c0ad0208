"""``attest certify path/to/bundle/`` and a Hugging Face folder end to end (issue 36): the
folder bound whole through one manifest (one subject named as the folder, the manifest in
``predicate.folders``, recorded at collect and checked at certify), the certificate and evidence
written beside it (never into it, its files unchanged), the bundle's card in the model block and
the exports, verified by folder on a server without torch (``attest verify`` and the
examples/bundle-gate app), each tampering refused.

The research policy and two repeats keep each collect to a few seconds."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _cli_run import run
from _model_folders import digests, make_bundle, make_hf_folder

from attest.certificate.folder_manifest import folder_manifest
from attest.certificate.signing import generate_keypair

pytest.importorskip("monai")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("keys")
    key, pub, _ = generate_keypair(folder / "release", passphrase=None)
    trust = folder / "trust.yaml"
    from attest.cli import main

    try:
        main(["trust", "add", str(pub), "--trust", str(trust), "--name", "release"])
    except SystemExit as exc:
        assert not exc.code
    return Path(key), trust


def _statement(cert: Path) -> dict[str, Any]:
    envelope = json.loads(cert.read_text())
    return json.loads(base64.b64decode(envelope["payload"]))  # type: ignore[no-any-return]


def _verify_without_torch(cert: Path, trust: Path, *artifacts: Path) -> tuple[int, str]:
    """``attest verify`` in a fresh interpreter where torch and numpy cannot be imported."""
    args = ["verify", str(cert), "--trust", str(trust)]
    for artifact in artifacts:
        args += ["--artifact", str(artifact)]
    code = (
        "import sys\nsys.modules['torch'] = None\nsys.modules['numpy'] = None\n"
        "from attest.cli import main\n"
        f"main({args!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
        check=False,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def certified_bundle(
    tmp_path_factory: pytest.TempPathFactory, keys: tuple[Path, Path]
) -> tuple[Path, Path, dict[str, str]]:
    """(bundle, certificate, the bundle's digests before certify)."""
    parent = tmp_path_factory.mktemp("release")
    bundle = make_bundle(parent)
    before = digests(bundle)
    from attest.cli import main

    try:  # no -o: the certificate goes beside the bundle
        main(["certify", f"{bundle}/", "--policy", "research", "--key", str(keys[0]), "-q"])
    except SystemExit as exc:
        assert not exc.code, exc.code
    return bundle, parent / "gradient_certificate.json", before


def _bound_files(folder: dict[str, Any]) -> set[str]:
    """The file names a folder manifest (``predicate.folders[name]``) binds."""
    return {r["name"].split(":")[0] for r in folder["resources"]} | set(
        folder.get("empty_files", [])
    )


def test_a_bundle_certifies_beside_itself_unchanged(
    certified_bundle: tuple[Path, Path, dict[str, str]],
) -> None:
    bundle, cert, before = certified_bundle
    assert cert.is_file() and (bundle.parent / "evidence.json").is_file()
    assert digests(bundle) == before  # nothing written into it, nothing changed
    statement = _statement(cert)
    names = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    manifest = folder_manifest(bundle, ignore=["gradient_certificate.json"])
    # one subject for the whole bundle: its manifest's root digest, every file in the manifest
    assert names["tiny_seg"] == manifest.root_digest
    assert not [n for n in names if n.startswith("tiny_seg/")]
    folders = statement["predicate"]["folders"]
    assert set(folders) == {"tiny_seg"} and _bound_files(folders["tiny_seg"]) == set(before)
    ignored = folders["tiny_seg"]["serialization"]["ignore_paths"]
    assert {".git", "gradient_certificate.json"} <= set(ignored)
    assert "model.pt" not in names  # bound once, as a file of the bundle
    assert {"attest.yaml", "probe.safetensors"} <= set(names)
    # collect recorded the same manifest; certify hashed it again and compared
    recorded = json.loads((bundle.parent / "evidence.json").read_text())["model"]["folder"]
    assert recorded["root_digest"] == manifest.root_digest and "files" not in recorded
    model = statement["predicate"]["model"]
    assert (model["name"], model["version"]) == ("tiny-seg", "0.2.1")
    card = model["card"]
    assert card["format"] == "monai_bundle" and card["authors"] == ["Imaging Team"]
    assert card["intended_use"] == "research only; not for diagnosis"
    assert card["data_source"] == "synthetic squares"
    assert card["changelog"]["0.2.1"] == "smaller network"


def test_a_bundle_verifies_by_folder_without_torch(
    certified_bundle: tuple[Path, Path, dict[str, str]], keys: tuple[Path, Path]
) -> None:
    bundle, cert, _ = certified_bundle
    code, out = _verify_without_torch(
        cert, keys[1], bundle, bundle.parent / "attest.yaml", bundle.parent / "probe.safetensors"
    )
    assert code == 0, out
    assert "VERIFIED: tiny-seg 0.2.1" in out and f"{len(digests(bundle))} files checked" in out


def test_the_inference_app_serves_a_bundle_certified_as_the_model(
    certified_bundle: tuple[Path, Path, dict[str, str]], keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """examples/bundle-gate on a bundle certified by ``attest certify BUNDLE/``: served as it
    is, refused (before MONAI loads anything) with a file added."""
    import shutil

    bundle, cert, _ = certified_bundle
    copy = tmp_path / "release" / bundle.name
    shutil.copytree(bundle, copy)
    app = [sys.executable, str(REPO / "examples" / "bundle-gate" / "app.py"), str(copy)]
    app += ["--trust", str(keys[1]), "--require-policy", "research", "--certificate", str(cert)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    served = subprocess.run(app, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert served.returncode == 0, served.stderr
    assert "verified tiny-seg 0.2.1 under research" in served.stdout
    assert "ran " in served.stdout and "output [1, 2, 8, 8]" in served.stdout
    (copy / "configs" / "override.json").write_text('{"network_def": {"out_channels": 3}}')
    refused = subprocess.run(app, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert refused.returncode == 1 and "ran " not in refused.stdout
    assert "refused: UNEXPECTED_FILE: tiny_seg/configs/override.json" in refused.stderr


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        ("configs/inference.json", "SUBJECT_MISMATCH: tiny_seg/configs/inference.json"),
        ("models/model.pt", "SUBJECT_MISMATCH: tiny_seg/models/model.pt"),
        ("configs/metadata.json", "SUBJECT_MISMATCH: tiny_seg/configs/metadata.json"),
        ("+docs/extra.txt", "UNEXPECTED_FILE: tiny_seg/docs/extra.txt"),
        ("-LICENSE", "ARTIFACT_MISSING: tiny_seg/LICENSE"),
    ],
)
def test_each_tampering_of_the_bundle_is_refused(
    certified_bundle: tuple[Path, Path, dict[str, str]],
    keys: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    tamper: str,
    reason: str,
) -> None:
    import shutil

    bundle, cert, _ = certified_bundle
    copy = tmp_path / bundle.name
    shutil.copytree(bundle, copy)
    target = copy / tamper.lstrip("+-")
    if tamper.startswith("+"):
        target.write_text("added after certification\n")
    elif tamper.startswith("-"):
        target.unlink()
    else:
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 1
        target.write_bytes(bytes(data))
    code, out, err = run(capsys, "verify", cert, "--trust", keys[1], "--artifact", copy)
    assert code == 1 and reason in out + err, out + err


def test_the_bundle_card_reaches_the_exports(
    certified_bundle: tuple[Path, Path, dict[str, str]],
    keys: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("cyclonedx")
    _, cert, _ = certified_bundle
    bom, spdx = tmp_path / "bom.json", tmp_path / "spdx.json"
    assert run(capsys, "export", "cyclonedx", cert, "--trust", keys[1], "-o", bom)[0] == 0
    data = json.loads(bom.read_text())
    assert data["metadata"]["component"]["authors"] == [{"name": "Imaging Team"}]
    cards = [c["modelCard"] for c in data["components"] if "modelCard" in c]
    # the bundle, bound as one folder holding models/model.pt, is the model component
    assert [c["name"] for c in data["components"] if "modelCard" in c] == ["tiny_seg"]
    assert cards[0]["modelParameters"]["task"] == "segment bright squares"
    assert cards[0]["considerations"]["useCases"] == ["research only; not for diagnosis"]
    assert cards[0]["considerations"]["technicalLimitations"] is not None
    props = {p["name"]: p["value"] for p in cards[0]["properties"]}
    assert props["attest:model:changelog:0.1.0"] == "first release"
    assert props["attest:model:data_source"] == "synthetic squares"
    pytest.importorskip("spdx_python_model")
    assert run(capsys, "export", "spdx", cert, "--trust", keys[1], "-o", spdx)[0] == 0
    text = spdx.read_text()
    assert '"ai_informationAboutApplication": "research only; not for diagnosis"' in text
    assert '"ai_informationAboutTraining": "synthetic squares"' in text


def test_outputs_inside_the_bundle_are_refused(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = make_bundle(tmp_path)
    before = digests(bundle)
    inside = bundle / "gradient_certificate.json"
    code, out, err = run(
        capsys, "certify", bundle, "--policy", "research", "--key", keys[0], "-o", inside, "-q"
    )
    assert code == 2 and "would be written inside the model folder" in out + err
    code, out, err = run(capsys, "collect", bundle, "-o", bundle / "docs" / "evidence.json", "-q")
    assert code == 2 and "would be written inside the model folder" in out + err
    assert digests(bundle) == before


def test_a_hugging_face_folder_certifies_and_verifies_by_folder(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("transformers")
    folder = make_hf_folder(tmp_path / "release")
    before = digests(folder)
    cert = tmp_path / "out" / "gradient_certificate.json"
    code, out, err = run(
        capsys, "certify", tmp_path / "release" / "attest.yaml", "--policy", "research",
        "--key", keys[0], "-o", cert, "-q",
    )  # fmt: skip
    assert code == 0, out + err
    assert digests(folder) == before
    statement = _statement(cert)
    names = {s["name"] for s in statement["subject"]}
    assert "tiny_bert" in names and not [n for n in names if n.startswith("tiny_bert/")]
    bound = _bound_files(statement["predicate"]["folders"]["tiny_bert"])
    assert bound == set(before)  # shards, index, tokenizer
    assert "tokenizer.json" in bound and "model.safetensors.index.json" in bound
    assert (
        statement["predicate"]["model"]["card"]["architecture"] == "BertForSequenceClassification"
    )
    code, text = _verify_without_torch(cert, keys[1], folder)
    assert code == 0 and "VERIFIED: tiny-bert 1.0.0" in text, text
    shard = sorted(folder.glob("model-*.safetensors"))[0]
    shard.write_bytes(shard.read_bytes() + b"\0")
    code, out, err = run(capsys, "verify", cert, "--trust", keys[1], "--artifact", folder)
    assert code == 1 and f"SUBJECT_MISMATCH: tiny_bert/{shard.name}" in out + err
    (folder / "added_tokens.json").write_text("{}")
    os.remove(folder / "config.json")
    code, out, err = run(capsys, "verify", cert, "--trust", keys[1], "--artifact", folder)
    assert code == 1 and "UNEXPECTED_FILE: tiny_bert/added_tokens.json" in out + err
    assert "ARTIFACT_MISSING: tiny_bert/config.json" in out + err
