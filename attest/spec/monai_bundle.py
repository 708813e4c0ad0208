"""A MONAI bundle as the model to certify (``attest certify path/to/bundle/``).

A folder is a bundle when it holds ``configs/metadata.json``. The network is built from the
inference config's (``configs/inference.json``, or ``.yaml``) ``network_def`` with MONAI's own
``monai.bundle.ConfigParser`` (``bundle_root`` set to the folder, so configs that refer to it
resolve, and the folder importable for a bundle's ``scripts/``); its weights are
``models/model.pt`` (a state_dict, or a checkpoint holding one under ``model``) or, without it,
the TorchScript ``models/model.ts``. The bundle's ``network_data_format`` is held against the
probe (:mod:`attest.spec.bundle_format`) by :func:`attest.spec.load.load_spec`.

The configs are code: ``ConfigParser`` evaluates their ``$`` expressions and instantiates
their ``_target_`` classes, as MONAI does when it runs the bundle, on the release machine
only (the verifier never reads them). Nothing is written into the bundle: no bytecode is
cached while its modules are imported.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attest.core.io import read_json_file
from attest.errors import ConfigError, InputError
from attest.spec.files import first_line, read_state_dict
from attest.spec.source import ModelFolder, ModelSource

if TYPE_CHECKING:
    from torch import nn

__all__ = ["METADATA", "bundle_source", "is_monai_bundle", "read_metadata"]

METADATA = Path("configs") / "metadata.json"
_INFERENCE = ("inference.json", "inference.yaml", "inference.yml")
# What of metadata.json goes into the certificate's model block (ModelCard), as MONAI names it
_CARD_TEXT = ("task", "description", "intended_use", "data_source", "copyright", "license")


def is_monai_bundle(path: Path) -> bool:
    return path.is_dir() and (path / METADATA).is_file()


def read_metadata(root: Path) -> dict[str, Any]:
    meta = root / METADATA
    data = read_json_file(meta, what="bundle metadata")
    if not isinstance(data, dict):
        raise ConfigError(f"bundle metadata {meta} is not a JSON object")
    return data


def _text(meta: Path, data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{meta}: {key} must be non-empty text, not {value!r}")
    return value


def _card(meta: Path, data: dict[str, Any]) -> dict[str, Any]:
    """What the bundle says of itself, for the certificate's model block (ModelCard)."""
    card: dict[str, Any] = {"format": "monai_bundle"}
    for key in ("name", "version", "monai_version", "pytorch_version", *_CARD_TEXT):
        value = _text(meta, data, key)
        if value is not None:
            card[key] = value
    authors = data.get("authors")
    if isinstance(authors, str) and authors.strip():
        card["authors"] = [authors]
    elif isinstance(authors, list) and authors and all(isinstance(a, str) for a in authors):
        card["authors"] = list(authors)
    elif authors is not None:
        raise ConfigError(f"{meta}: authors must be text or a list of text, not {authors!r}")
    changelog = data.get("changelog")
    if changelog is not None:
        if not isinstance(changelog, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in changelog.items()
        ):
            raise ConfigError(f"{meta}: changelog must map versions to text")
        card["changelog"] = dict(changelog)
    return card


@contextlib.contextmanager
def _importable(root: Path) -> Iterator[None]:
    """The bundle folder first on ``sys.path`` (its ``scripts/``), writing no bytecode into it."""
    folder, before = str(root), sys.dont_write_bytecode
    sys.path.insert(0, folder)
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = before
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def _inference_config(root: Path) -> Path:
    for name in _INFERENCE:
        path = root / "configs" / name
        if path.is_file():
            return path
    raise ConfigError(
        f"bundle {root} has no configs/inference.json (or .yaml)",
        hint="a bundle's inference config defines network_def, the network to certify",
    )


def _network_builder(root: Path, meta: Path) -> tuple[Any, Path]:
    """A function building a fresh network from ``network_def`` with MONAI's ConfigParser."""
    try:
        from monai.bundle.config_parser import ConfigParser
    except ImportError:
        raise ConfigError(
            f"{root} is a MONAI bundle, but MONAI is not installed",
            hint="pip install 'gradient-attest[monai]' (or monai)",
        ) from None
    config = _inference_config(root)
    parser = ConfigParser()
    try:
        parser.read_config(str(config))
        parser.read_meta(str(meta))
    except Exception as exc:
        raise ConfigError(
            f"bundle config {config} cannot be read: {type(exc).__name__}: {first_line(exc)}"
        ) from None
    parser["bundle_root"] = str(root)
    if "network_def" not in parser:
        raise ConfigError(
            f"bundle config {config} has no network_def",
            hint="network_def is the network the bundle runs (MONAI's bundle specification)",
        )

    def build() -> nn.Module:
        try:
            with _importable(root):
                # lazy=False: a fresh instance on every call (the parser caches otherwise)
                return parser.get_parsed_content("network_def", lazy=False)  # type: ignore[no-any-return]
        except Exception as exc:
            raise ConfigError(
                f"bundle config {config}: building network_def raised {type(exc).__name__}: "
                f"{first_line(exc)}",
                hint="check network_def and that the bundle's required packages are installed",
            ) from None

    return build, config


def _torchscript(path: Path) -> Any:
    def build() -> nn.Module:
        import torch

        try:
            with warnings.catch_warnings():
                # torch deprecates TorchScript; MONAI bundles still ship model.ts, and the
                # warning is torch's advice to the bundle's author, not to whoever certifies it
                warnings.simplefilter("ignore", DeprecationWarning)
                return torch.jit.load(str(path), map_location="cpu")  # type: ignore[no-untyped-call,no-any-return]
        except Exception as exc:
            raise InputError(
                f"TorchScript model {path} cannot be loaded: {type(exc).__name__}: "
                f"{first_line(exc)}"
            ) from None

    return build


def bundle_source(root: Path) -> ModelSource:
    """The bundle's network (``network_def`` with models/model.pt, or models/model.ts), its
    identity (metadata's ``name``, else the folder's, and ``version``) and its card."""
    root = root.resolve()
    meta = root / METADATA
    data = read_metadata(root)
    card = _card(meta, data)
    version = card.get("version")
    if version is None:
        raise ConfigError(
            f"{meta} has no version",
            hint='a bundle\'s metadata states its version (e.g. "version": "0.1.0")',
        )
    if not isinstance(data.get("network_data_format"), dict):
        raise ConfigError(
            f"{meta} has no network_data_format",
            hint="describe the network's inputs and outputs as the MONAI bundle specification "
            "asks; the probe is held against it",
        )
    folder = ModelFolder(kind="monai_bundle", root=root, card=card)
    name = card.get("name", root.name)
    weights, script = root / "models" / "model.pt", root / "models" / "model.ts"
    if weights.is_file():
        build, config = _network_builder(root, meta)
        state = read_state_dict(weights, config, unwrap=("state_dict", "model"))
        factory = f"monai.bundle:{config.relative_to(root).as_posix()}#network_def"
        return ModelSource(name, version, factory, {}, build, state, weights, folder)
    if script.is_file():
        factory = "torch.jit:load(models/model.ts)"
        return ModelSource(name, version, factory, {}, _torchscript(script), None, script, folder)
    raise InputError(
        f"bundle {root} has no models/model.pt or models/model.ts",
        hint="the bundle's trained weights: a state_dict in models/model.pt, or TorchScript",
    )
