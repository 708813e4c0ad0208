"""A folder bound through its manifest (a MONAI bundle, a Hugging Face folder) is the model in
the exports when its manifest holds a weights file; other folders and files as before."""

from __future__ import annotations

from typing import Any

from attest.interop.cyclonedx import is_model_subject


def _folder(*names: str) -> dict[str, Any]:
    return {"resources": [{"name": n, "algorithm": "sha256", "digest": "0" * 64} for n in names]}


def test_a_folder_holding_weights_is_a_model_subject() -> None:
    predicate = {
        "folders": {
            "spleen_ct": _folder("configs/inference.json:0:12", "models/model.pt:0:64"),
            "scripted": _folder("models/model.ts"),  # files serialization: no range
            "tiny_bert": _folder("model-00001-of-00002.safetensors:0:9", "tokenizer.json:0:3"),
            "docs": _folder("README.md:0:5", "configs/model.pt.json:0:2"),
        }
    }
    assert is_model_subject("spleen_ct", predicate)
    assert is_model_subject("scripted", predicate)
    assert is_model_subject("tiny_bert", predicate)
    assert not is_model_subject("docs", predicate)


def test_files_keep_their_suffix_rule() -> None:
    assert is_model_subject("weights.safetensors", {})
    assert is_model_subject("model.onnx", {"folders": {}})
    assert not is_model_subject("probe.safetensors", {})
    assert not is_model_subject("attest.yaml", {})
    assert not is_model_subject("script.ts", {})  # .ts counts only inside a bound folder
