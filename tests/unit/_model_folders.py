"""Real model folders for the tests, built with their makers' own tools: a MONAI bundle
(``monai.bundle.init_bundle`` writing configs/metadata.json, configs/inference.json with
``network_def``, models/model.pt) and a Hugging Face folder (``save_pretrained`` of a tiny
BERT, sharded so that it has an index, with a tokenizer's files)."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

NET_DEF: dict[str, Any] = {
    "_target_": "UNet",
    "spatial_dims": 2,
    "in_channels": 1,
    "out_channels": 2,
    "channels": [4, 8],
    "strides": [2],
    "num_res_units": 0,
}

METADATA: dict[str, Any] = {
    "name": "tiny-seg",
    "version": "0.2.1",
    "changelog": {"0.2.1": "smaller network", "0.1.0": "first release"},
    "authors": "Imaging Team",
    "task": "segment bright squares",
    "intended_use": "research only; not for diagnosis",
    "data_source": "synthetic squares",
    "network_data_format": {
        "inputs": {
            "image": {
                "type": "image",
                "num_channels": 1,
                "spatial_shape": ["8*n", "8*n"],
                "dtype": "float32",
                "value_range": [0, 1],
            }
        },
        "outputs": {
            "pred": {
                "type": "image",
                "num_channels": 2,
                "spatial_shape": ["8*n", "8*n"],
                "dtype": "float32",
                "value_range": [0, 1],  # after softmax: never held against the logits
            }
        },
    },
}

SPEC = "inputs: {probe: probe.safetensors}\ntarget: 1\nrepeats: 2\n"


def make_bundle(
    parent: Path,
    *,
    metadata: dict[str, Any] | None = None,
    probe: torch.Tensor | None = None,
    spec: str | None = SPEC,
    name: str = "tiny_seg",
) -> Path:
    """A MONAI bundle under ``parent`` with attest.yaml and the probe beside it."""
    from monai.bundle import init_bundle
    from monai.networks.nets import UNet

    parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    args = {k: v for k, v in NET_DEF.items() if k != "_target_"}
    net = UNet(**args)
    init_bundle(
        parent / name,
        network=net,
        metadata_str=copy.deepcopy(metadata if metadata is not None else METADATA),
        inference_str={"bundle_root": ".", "network_def": NET_DEF},
    )
    x = probe if probe is not None else torch.rand(3, 1, 8, 8, generator=_gen())
    save_file({"x": x.contiguous()}, str(parent / "probe.safetensors"))
    if spec is not None:
        (parent / "attest.yaml").write_text(spec, encoding="utf-8")
    return parent / name


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(1)


HF_SPEC = """model: {name: tiny-bert, version: 1.0.0, pretrained: tiny_bert}
inputs:
  probe: probe.safetensors
  input_ids: {role: embedded, kwarg: input_ids, embedding: bert.embeddings.word_embeddings}
  attention_mask: {role: fixed, kwarg: attention_mask}
output: logits
target: 1
repeats: 2
"""


def make_hf_folder(parent: Path, *, head: bool = True, spec: str = HF_SPEC) -> Path:
    """A Hugging Face folder (tiny BERT, five safetensors shards and their index, a
    WordPiece tokenizer's files) under ``parent``, with attest.yaml and the probe beside it."""
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

    parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=16, num_labels=2,
    )  # fmt: skip
    model = (BertForSequenceClassification if head else BertModel)(config).eval()
    folder = parent / "tiny_bert"
    model.save_pretrained(folder, max_shard_size="20KB")
    vocab = parent / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + [f"w{i}" for i in range(35)]) + "\n", encoding="utf-8")  # fmt: skip
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(folder)
    vocab.unlink()
    ids = torch.randint(5, 40, (3, 8), generator=_gen())
    mask = (torch.arange(8)[None] < torch.tensor([[7], [5], [6]])).long()
    save_file({"input_ids": ids * mask, "attention_mask": mask}, str(parent / "probe.safetensors"))
    (parent / "attest.yaml").write_text(spec, encoding="utf-8")
    return folder


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (and which files there are)."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def with_format(**changes: Any) -> dict[str, Any]:
    """METADATA with ``network_data_format`` keys changed: ``inputs__image__dtype="float16"``."""
    meta = copy.deepcopy(METADATA)
    for path, value in changes.items():
        node = meta["network_data_format"]
        *parts, last = path.split("__")
        for part in parts:
            node = node[part]
        node[last] = value
    return meta


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2)
