"""A local Hugging Face folder as the model (``model: {pretrained: ./folder}``).

The folder is what ``save_pretrained`` writes: ``config.json`` and the weights as safetensors
(one file, or shards with ``model.safetensors.index.json``), usually with the tokenizer's
files. The model is loaded with transformers' ``from_pretrained`` of the class that
``architecture:`` names (default: ``config.json``'s ``architectures[0]``), from the folder
only: ``local_files_only=True`` with the Hub offline (``HF_HUB_OFFLINE``), safetensors only
(no pickled ``.bin``), no remote code. A weight the class expects but the folder lacks, or one
of another shape, would be initialised at random by transformers with a warning: here it is
an error, as is a weight the class does not use (the certificate would bind weights that do
not run). Every file of the folder, the tokenizer's included, is bound by the certificate.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attest.core.io import read_json_file
from attest.errors import ConfigError
from attest.spec.files import first_line
from attest.spec.source import ModelFolder, ModelSource

if TYPE_CHECKING:
    from torch import nn

    from attest.spec.model import ModelSection

__all__ = ["pretrained_source"]

_OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """The Hub offline, and transformers' progress bars off (they would tear attest's own
    progress display), while loading; both as they were afterwards."""
    from transformers.utils import logging as hf_logging

    before = {key: os.environ.get(key) for key in _OFFLINE}
    bars = hf_logging.is_progress_bar_enabled()
    os.environ.update(_OFFLINE)
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _folder(section: ModelSection, spec_dir: Path, spec_path: Path) -> Path:
    assert section.pretrained is not None
    root = Path(section.pretrained)
    root = (root if root.is_absolute() else spec_dir / root).resolve()
    if not root.is_dir():
        raise ConfigError(
            f"pretrained folder {root} (named in {spec_path}) is not a folder",
            hint="name a local folder written by save_pretrained; nothing is downloaded",
        )
    if not (root / "config.json").is_file():
        raise ConfigError(
            f"pretrained folder {root} (named in {spec_path}) has no config.json",
            hint="a Hugging Face model folder holds config.json and its *.safetensors",
        )
    return root


def _architecture(section: ModelSection, config: dict[str, Any], where: Path) -> str:
    if section.architecture is not None:
        return section.architecture
    names = config.get("architectures")
    if isinstance(names, list) and len(names) == 1 and isinstance(names[0], str):
        return names[0]
    raise ConfigError(
        f"{where}: config.json names no single architecture ({names!r})",
        hint="say which class loads it: model: {architecture: BertForSequenceClassification}",
    )


def _model_class(name: str, spec_path: Path) -> Any:
    try:
        import transformers
    except ImportError:
        raise ConfigError(
            f"spec {spec_path}: pretrained: needs transformers, which is not installed",
            hint="pip install 'gradient-attest[huggingface]' (or transformers)",
        ) from None
    cls = getattr(transformers, name, None)
    if cls is None or not hasattr(cls, "from_pretrained"):
        raise ConfigError(
            f"spec {spec_path}: transformers has no model class {name!r}",
            hint="architecture: names a transformers class, e.g. BertForSequenceClassification",
        )
    return cls


def pretrained_source(section: ModelSection, spec_dir: Path, spec_path: Path) -> ModelSource:
    """The folder's model, loaded afresh by each ``make()``."""
    root = _folder(section, spec_dir, spec_path)
    config = read_json_file(root / "config.json", what="model config")
    if not isinstance(config, dict):
        raise ConfigError(f"{root / 'config.json'} is not a JSON object")
    architecture = _architecture(section, config, root)
    cls = _model_class(architecture, spec_path)

    def make() -> nn.Module:
        try:
            with _offline():
                model, info = cls.from_pretrained(
                    str(root),
                    local_files_only=True,
                    use_safetensors=True,
                    trust_remote_code=False,
                    output_loading_info=True,
                )
        except Exception as exc:
            raise ConfigError(
                f"{architecture}.from_pretrained({root}) raised {type(exc).__name__}: "
                f"{first_line(exc)}",
                hint="the folder needs config.json and the weights as *.safetensors (with "
                "model.safetensors.index.json when sharded); nothing is downloaded",
            ) from None
        for kind in ("missing_keys", "mismatched_keys", "unexpected_keys"):
            found = sorted(str(k) for k in info.get(kind) or [])
            if found:
                raise ConfigError(
                    f"{architecture} from {root}: {kind.replace('_', ' ')} "
                    f"{', '.join(found[:5])}" + (" ..." if len(found) > 5 else ""),
                    hint="the folder's weights must be exactly this class's (transformers would "
                    "initialise missing ones at random); check architecture:",
                )
        return model  # type: ignore[no-any-return]

    card: dict[str, Any] = {"format": "huggingface", "architecture": architecture}
    for key in ("model_type", "transformers_version"):
        if isinstance(config.get(key), str):
            card[key] = config[key]
    folder = ModelFolder(kind="huggingface", root=root, card=card)
    factory = f"transformers:{architecture}.from_pretrained"
    assert section.pretrained is not None
    args = {"pretrained": section.pretrained}
    return ModelSource(section.name, section.version, factory, args, make, None, None, folder)
