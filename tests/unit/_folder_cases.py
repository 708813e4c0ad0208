"""Test helper: a model folder bound through one manifest in a certificate, and the tamperings
the verifier must refuse (each naming the file), as rows for the verify table."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from _certfactory import World, sign_raw

from attest.certificate.folder_manifest import FolderManifest, folder_manifest

SHARD = 4096  # small shards, so that a few KiB of weights are several shards


def make_folder(root: Path) -> Path:
    """A Hugging Face style folder: config, two weight shards, a tokenizer, a git folder."""
    folder = root / "model-folder"
    (folder / "tokenizer").mkdir(parents=True)
    (folder / ".git" / "objects").mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}\n')
    (folder / "model-00001-of-00002.safetensors").write_bytes(bytes(range(256)) * 40)
    (folder / "model-00002-of-00002.safetensors").write_bytes(b"w2" * 3000)
    (folder / "tokenizer" / "vocab.txt").write_text("a\nb\nc\n")
    (folder / "tokenizer" / "__init__.py").write_bytes(b"")  # empty files are bound too
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return folder


def bind(w: World, folder: Path, **options: Any) -> tuple[dict[str, Any], FolderManifest]:
    """The world's statement with ``folder`` bound as one subject through its manifest."""
    manifest = folder_manifest(folder, shard_size=SHARD, **options)
    statement = w.statement()
    statement["subject"].append({"name": manifest.name, "digest": {"sha256": manifest.root_digest}})
    statement["subject"].sort(key=lambda s: s["name"])
    statement["predicate"]["folders"] = {manifest.name: manifest.predicate()}
    return statement, manifest


def _certified(w: World) -> tuple[Path, Path]:
    folder = make_folder(w.root)
    statement, _ = bind(w, folder)
    return w.write(sign_raw(statement, [w.key])), folder


def folder_extra_file(w: World) -> tuple[Path, dict[str, Any]]:
    cert, folder = _certified(w)
    (folder / "tokenizer" / "added.json").write_text("{}")
    return cert, {"artifacts": [folder]}


def folder_edited_file(w: World) -> tuple[Path, dict[str, Any]]:
    cert, folder = _certified(w)
    (folder / "config.json").write_text('{"hidden_size": 9}\n')
    return cert, {"artifacts": [folder]}


def folder_removed_file(w: World) -> tuple[Path, dict[str, Any]]:
    cert, folder = _certified(w)
    os.remove(folder / "tokenizer" / "vocab.txt")
    return cert, {"artifacts": [folder]}


def folder_manifest_forged(w: World) -> tuple[Path, dict[str, Any]]:
    folder = make_folder(w.root)
    statement, _ = bind(w, folder)
    resources = statement["predicate"]["folders"]["model-folder"]["resources"]
    resources[0]["digest"] = "0" * 64  # no longer hashes to the subject's root digest
    return w.write(sign_raw(statement, [w.key])), {"artifacts": [folder]}


ROWS = [
    (folder_extra_file, "UNEXPECTED_FILE"),
    (folder_edited_file, "SUBJECT_MISMATCH"),
    (folder_removed_file, "ARTIFACT_MISSING"),
    (folder_manifest_forged, "MALFORMED"),
]
