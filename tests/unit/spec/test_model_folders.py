"""Loading a MONAI bundle and a Hugging Face folder as the model (issue 36): the network from
MONAI's ConfigParser, the probe held against the bundle's network_data_format (each
disagreement names its metadata key), the spec found beside the bundle, from_pretrained from
the folder only, and nothing written into either."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from _model_folders import (
    METADATA,
    NET_DEF,
    digests,
    make_bundle,
    make_hf_folder,
    with_format,
)

from attest.errors import AttestError, ConfigError, InputError
from attest.spec import load_spec
from attest.spec.bundle_format import size_fits

pytest.importorskip("monai")


def test_a_bundle_loads_with_monai_config_parser(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path)
    before = digests(bundle)
    spec = load_spec(bundle)  # attest.yaml found beside the bundle
    assert (spec.name, spec.version) == ("tiny-seg", "0.2.1")  # from metadata.json
    assert spec.folder is not None and spec.folder.kind == "monai_bundle"
    card = spec.folder.card
    assert card["authors"] == ["Imaging Team"] and card["intended_use"].startswith("research")
    assert card["changelog"] == METADATA["changelog"]
    assert spec.artifacts["weights"] == bundle.resolve() / "models" / "model.pt"
    assert spec.artifacts["spec"] == tmp_path.resolve() / "attest.yaml"
    # the trained weights of models/model.pt, in a network built from network_def
    model = spec.build_model()
    saved = torch.load(bundle / "models" / "model.pt", weights_only=True)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, saved[key], rtol=0, atol=0)
    assert spec.build_model() is not model  # a fresh network each time
    assert digests(bundle) == before  # no bytecode, no file, nothing changed


@pytest.mark.filterwarnings("ignore:`torch.jit.(script|save)` is deprecated:DeprecationWarning")
def test_a_torchscript_bundle_loads_model_ts(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path)
    reference = load_spec(bundle).build_model()
    torch.jit.save(torch.jit.script(reference), str(bundle / "models" / "model.ts"))
    (bundle / "models" / "model.pt").unlink()
    spec = load_spec(bundle)
    assert spec.artifacts["weights"].name == "model.ts"
    x = spec.inputs[:1]
    torch.testing.assert_close(spec.build_model()(x), reference(x), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("metadata", "probe", "message"),
    [
        (
            with_format(inputs__image__num_channels=3),
            None,
            r"network_data_format\.inputs\.image\.num_channels is 3, but the probe's 'x' has 1",
        ),
        (
            with_format(inputs__image__spatial_shape=["16*n", "16*n"]),
            None,
            r"inputs\.image\.spatial_shape\[0\] is '16\*n', but the probe's 'x''s spatial size "
            r"0 is 8",
        ),
        (
            with_format(inputs__image__spatial_shape=[8, 8, 8]),
            None,
            r"inputs\.image\.spatial_shape is \[8, 8, 8\] \(3 spatial dims\)",
        ),
        (
            with_format(inputs__image__dtype="float16"),
            None,
            r"inputs\.image\.dtype is 'float16', but the probe's 'x' is float32",
        ),
        (
            None,
            torch.full((2, 1, 8, 8), 2.0),
            r"inputs\.image\.value_range is \[0, 1\], but the probe's 'x' spans \[2, 2\]",
        ),
        (
            with_format(outputs__pred__num_channels=3),
            None,
            r"outputs\.pred\.num_channels is 3, but the network's output has 2",
        ),
        (
            with_format(inputs__image__dtype="float"),  # numpy's name: float64, as MONAI reads it
            None,
            r"inputs\.image\.dtype is 'float', but the probe's 'x' is float32",
        ),
        (
            with_format(inputs__image__dtype="floaty"),
            None,
            r"inputs\.image\.dtype: 'floaty' is not a dtype",
        ),
        (
            with_format(outputs__pred__dtype="float16"),
            None,
            r"outputs\.pred\.dtype is 'float16', but the network's output is float32",
        ),
        (
            with_format(inputs={}),
            None,
            r"network_data_format\.inputs is missing or empty",
        ),
        (
            with_format(inputs__label={"num_channels": 1}),
            None,
            r"network_data_format\.inputs lists 2 inputs \(image, label\)",
        ),
    ],
)
def test_probe_and_metadata_disagreements_name_the_key(
    tmp_path: Path, metadata: dict[str, Any] | None, probe: torch.Tensor | None, message: str
) -> None:
    bundle = make_bundle(tmp_path, metadata=metadata, probe=probe)
    with pytest.raises(ConfigError, match=message):
        load_spec(bundle)


def test_a_clean_bundle_with_a_power_of_two_pattern_loads(tmp_path: Path) -> None:
    # "2**p" and "*" allow 8; the output's spatial_shape and value_range are not held against
    # the logits (MONAI's own check reads channels and dtype): false alarms on a clean bundle
    metadata = with_format(
        inputs__image__spatial_shape=["2**p", "*"],
        inputs__image__dtype="torch.float32",
        outputs__pred__spatial_shape=[1],
    )
    bundle = make_bundle(tmp_path, metadata=metadata)
    assert load_spec(bundle).inputs.shape == (3, 1, 8, 8)


@pytest.mark.parametrize(
    ("pattern", "size", "fits"),
    [
        ("*", 7, True), (96, 96, True), (96, 95, False), ("16*n", 32, True),
        ("16*n", 40, False), ("16*n", 16, True), ("2**p", 64, True), ("2**p", 48, False),
        ("2**p*n", 48, True), ("2**p*n", 7, False), ("32 * n", 64, True),
    ],
)  # fmt: skip
def test_spatial_size_patterns(pattern: Any, size: int, fits: bool) -> None:
    assert size_fits(pattern, size) is fits


def test_a_bad_size_expression_is_refused() -> None:
    with pytest.raises(ValueError, match="names other than n and p"):
        size_fits("__import__('os')", 8)


def test_the_spec_beside_the_bundle_or_given(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "a", spec=None)
    with pytest.raises(ConfigError, match=r"no attest.yaml beside it .* a bundle holds no probe"):
        load_spec(bundle)
    other = tmp_path / "specs" / "seg.yaml"
    other.parent.mkdir()
    other.write_text("inputs: {probe: ../a/probe.safetensors}\ntarget: 0\n", encoding="utf-8")
    spec = load_spec(bundle, spec=other)
    assert spec.target == 0 and spec.spec_override == other.resolve()
    with_model = tmp_path / "with_model.yaml"
    with_model.write_text(
        "model: {name: m, version: '1', factory: m:f, weights: w.pt}\n"
        "inputs: {probe: a/probe.safetensors}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="model: is given, but the MONAI bundle"):
        load_spec(bundle, spec=with_model)
    with pytest.raises(InputError, match="is a folder, but not a MONAI bundle"):
        load_spec(tmp_path / "specs")


def test_bundle_problems_are_named(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path)
    meta = bundle / "configs" / "metadata.json"
    data = json.loads(meta.read_text())
    data.pop("version")
    meta.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="has no version"):
        load_spec(bundle)
    meta.write_text(json.dumps(METADATA))
    (bundle / "configs" / "inference.json").write_text(
        json.dumps({"network_def": {**NET_DEF, "_target_": "NoSuchNet"}})
    )
    with pytest.raises(ConfigError, match="building network_def raised"):
        load_spec(bundle)
    (bundle / "configs" / "inference.json").write_text(json.dumps({"network": {}}))
    with pytest.raises(ConfigError, match="has no network_def"):
        load_spec(bundle)


def test_a_hugging_face_folder_loads_from_pretrained_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers")
    folder = make_hf_folder(tmp_path)
    names = set(digests(folder))
    assert "model.safetensors.index.json" in names and "tokenizer.json" in names
    assert sum(n.endswith(".safetensors") for n in names) > 1  # sharded
    before = digests(folder)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    spec = load_spec(tmp_path / "attest.yaml")
    assert "HF_HUB_OFFLINE" not in __import__("os").environ  # restored after loading
    assert spec.folder is not None and spec.folder.kind == "huggingface"
    assert spec.folder.card["architecture"] == "BertForSequenceClassification"
    assert "weights" not in spec.artifacts  # the shards are bound with the folder
    assert spec.factory == "transformers:BertForSequenceClassification.from_pretrained"
    assert digests(folder) == before


def test_a_folder_missing_the_class_weights_is_refused(tmp_path: Path) -> None:
    # transformers would initialise the classifier at random, with a warning
    pytest.importorskip("transformers")
    make_hf_folder(tmp_path, head=False)
    spec = tmp_path / "attest.yaml"
    spec.write_text(
        spec.read_text().replace("pretrained: tiny_bert}", "pretrained: tiny_bert, "
                                 "architecture: BertForSequenceClassification}"),
        encoding="utf-8",
    )  # fmt: skip
    with pytest.raises(ConfigError, match="missing keys classifier"):
        load_spec(spec)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("{name: m, version: '1', pretrained: nowhere}", "is not a folder"),
        ("{name: m, version: '1', pretrained: tiny_bert, factory: m:f}", "remove factory:"),
        ("{name: m, version: '1', pretrained: tiny_bert, architecture: NoSuchModel}",
         "transformers has no model class 'NoSuchModel'"),
        ("{name: m, version: '1', factory: m:f}", "model.weights missing: give factory: and weights:"),
    ],
)  # fmt: skip
def test_pretrained_spec_problems(tmp_path: Path, model: str, message: str) -> None:
    pytest.importorskip("transformers")
    (tmp_path / "tiny_bert").mkdir()
    (tmp_path / "tiny_bert" / "config.json").write_text('{"architectures": ["BertModel"]}')
    (tmp_path / "p.safetensors").write_bytes(b"")
    spec = tmp_path / "attest.yaml"
    spec.write_text(f"model: {model}\ninputs: {{probe: p.safetensors}}\n", encoding="utf-8")
    with pytest.raises(AttestError, match=message):
        load_spec(spec)


def _collected(spec: Any) -> Any:
    """Evidence whose model section is what collection records of ``spec`` (its folder's
    manifest included), without running the checks."""
    from attest.collection.rows import folder_record
    from attest.evidence.model import Evidence

    model = {"name": spec.name, "version": spec.version, "folder": folder_record(spec)}
    return Evidence.model_validate(
        {"tool_version": "0", "created_at": "2026-01-01T00:00:00Z", "model": model}
    )


def test_collect_records_the_bundle_manifest_and_certify_binds_it_once(tmp_path: Path) -> None:
    """The folder binding of a bundle: collection records its manifest (the root digest is the
    certificate's subject digest); certify binds the bundle as one subject through the same
    manifest, the certificate's name and git's files left out."""
    from attest.certificate.folder_manifest import folder_manifest
    from attest.pipeline.subjects import ExtraArtifacts

    bundle = make_bundle(tmp_path)
    (bundle / ".git").mkdir()
    (bundle / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    spec = load_spec(bundle)
    evidence = _collected(spec)
    record = evidence.model["folder"]
    manifest = folder_manifest(bundle, ignore=["gradient_certificate.json"])
    assert record["root_digest"] == manifest.root_digest
    assert "gradient_certificate.json" in record["manifest"]["serialization"]["ignore_paths"]
    assert "files" not in record  # no second, per-file binding
    subjects: dict[str, str] = {}
    cert = tmp_path / "gradient_certificate.json"
    (bundle / ".git" / "HEAD").write_text("moved on\n")  # ignored: not a change
    assert spec.folder is not None
    extra = ExtraArtifacts().with_model_folder(spec.folder, evidence)
    folders = extra.bind(subjects, [cert])
    assert subjects == {"tiny_seg": manifest.root_digest}
    assert set(folders) == {"tiny_seg"} and folders["tiny_seg"] == manifest.predicate()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("models/model.pt", "models/model.pt"),  # weights swapped during the collect
        ("+configs/extra.json", "configs/extra.json"),  # a file added
        ("-LICENSE", "LICENSE"),  # a file removed
        ("+docs/empty.py", "docs/empty.py"),  # an empty file added (no shard of its own)
    ],
)
def test_certify_refuses_a_bundle_changed_after_collect(
    tmp_path: Path, change: str, named: str
) -> None:
    from attest.pipeline.subjects import ExtraArtifacts

    bundle = make_bundle(tmp_path)
    spec = load_spec(bundle)
    assert spec.folder is not None
    extra = ExtraArtifacts().with_model_folder(spec.folder, _collected(spec))
    target = bundle / change.lstrip("+-")
    if change.startswith("+"):
        target.parent.mkdir(exist_ok=True)
        target.write_text("" if target.suffix == ".py" else "{}")
    elif change.startswith("-"):
        target.unlink()
    else:
        data = bytearray(target.read_bytes())
        data[-1] ^= 1
        target.write_bytes(bytes(data))
    with pytest.raises(InputError, match="changed after its evidence was collected") as info:
        extra.bind({}, [tmp_path / "gradient_certificate.json"])
    assert f"({named})" in str(info.value)


def test_evidence_without_the_folder_manifest_is_refused(tmp_path: Path) -> None:
    from attest.evidence.model import Evidence
    from attest.pipeline.subjects import ExtraArtifacts

    bundle = make_bundle(tmp_path)
    spec = load_spec(bundle)
    old = Evidence.model_validate(
        {
            "tool_version": "0",
            "created_at": "2026-01-01T00:00:00Z",
            "model": {"name": "tiny-seg", "version": "0.2.1", "folder": {"kind": "monai_bundle"}},
        }
    )
    assert spec.folder is not None
    with pytest.raises(InputError, match="records no manifest of the model folder"):
        ExtraArtifacts().with_model_folder(spec.folder, old)
    twice = ExtraArtifacts(items=(("tiny_seg", bundle),))
    with pytest.raises(InputError, match="named as the model folder"):
        twice.with_model_folder(spec.folder, _collected(spec))


def test_ignore_paths_leave_the_same_files_out_at_collect_and_certify(tmp_path: Path) -> None:
    """``attest certify BUNDLE/ --ignore notes -o release.json``: collection's manifest and
    certify's leave out the same paths (the certificate's name, --ignore, git's files)."""
    import dataclasses

    from attest.pipeline.subjects import ExtraArtifacts

    bundle = make_bundle(tmp_path)
    (bundle / "notes").mkdir()
    (bundle / "notes" / "todo.txt").write_text("reviewed\n")
    (bundle / "release.json").write_text("{}")  # an older certificate shipped inside
    spec = load_spec(bundle)
    assert spec.folder is not None
    extra = ExtraArtifacts.parse([], ["notes"])
    cert = tmp_path / "release.json"
    folder = dataclasses.replace(spec.folder, ignore=extra.model_folder_ignore(cert))
    spec = dataclasses.replace(spec, folder=folder)
    evidence = _collected(spec)
    (bundle / "notes" / "todo.txt").write_text("changed: ignored\n")
    (bundle / "release.json").write_text('{"replaced": true}')
    subjects: dict[str, str] = {}
    folders = extra.with_model_folder(folder, evidence).bind(subjects, [cert])
    assert subjects["tiny_seg"] == evidence.model["folder"]["root_digest"]
    ignored = folders["tiny_seg"]["serialization"]["ignore_paths"]
    assert {"notes", "release.json", ".git"} <= set(ignored)
    names = {r["name"].split(":")[0] for r in folders["tiny_seg"]["resources"]}
    assert not [n for n in names if n.startswith("notes/") or n == "release.json"]
