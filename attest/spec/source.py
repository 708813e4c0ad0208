"""Where the model comes from: a factory and a weights file, a MONAI bundle, or a local Hugging
Face folder, each turned into one :class:`ModelSource` that :func:`attest.spec.load.load_spec`
builds the model from.

A bundle or folder is a :class:`ModelFolder`: the certificate binds every file of it through
one manifest, as one subject named as the folder (collection records the manifest,
:func:`attest.certificate.folder_manifest.folder_manifest`; certify hashes it again and
binds it, :mod:`attest.pipeline.subjects`), and its model block
carries what the folder says of itself (``card``: the bundle's version, intended use, data
source, authors and changelog; the Hugging Face architecture). Nothing is ever written into
the folder: :func:`refuse_inside` stops outputs that would land there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from attest.errors import InputError

if TYPE_CHECKING:
    from torch import nn

__all__ = ["FolderKind", "ModelFolder", "ModelSource", "refuse_inside"]

FolderKind = Literal["monai_bundle", "huggingface"]


@dataclass(frozen=True)
class ModelFolder:
    """A MONAI bundle or Hugging Face folder the model is loaded from."""

    kind: FolderKind
    root: Path  # resolved
    card: dict[str, Any] = field(default_factory=dict)  # JSON values; keys of ModelCard
    # paths left out of its manifest besides the git files (relative to the folder): what
    # certify leaves out (the certificate's name, --ignore); None: the certificate's default
    # name (attest.certificate.format.CERTIFICATE_NAME)
    ignore: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        """The folder's subject prefix: its name (``--artifact FOLDER/`` on the server)."""
        return self.root.name

    def record(self) -> dict[str, Any]:
        """The folder as the evidence's model section records it (the files' digests are
        added by collection)."""
        return {"kind": self.kind, "name": self.name, "path": str(self.root), "card": self.card}


@dataclass
class ModelSource:
    """How to build the model: ``make()`` returns a fresh module, with its trained weights
    when ``state`` is None (TorchScript, ``from_pretrained``), else ``state`` is loaded into
    it strictly."""

    name: str
    version: str
    factory: str  # what builds it, as evidence records it ("module:callable", "monai:...")
    factory_args: dict[str, Any]
    make: Callable[[], nn.Module]
    state: dict[str, Any] | None
    weights: Path | None  # the weights file (role "weights"); None: several (a HF folder)
    folder: ModelFolder | None = None


def refuse_inside(folder: ModelFolder | None, outputs: dict[str, Path | None]) -> None:
    """An :class:`InputError` when an output (``{what: path}``) would be written into the
    bundle or folder: its files are bound as they are, and never edited."""
    if folder is None:
        return
    for what, path in outputs.items():
        if path is None:
            continue
        resolved = Path(path).resolve()
        if resolved == folder.root or folder.root in resolved.parents:
            raise InputError(
                f"the {what} {path} would be written inside the model folder {folder.root}, "
                "whose files the certificate binds as they are",
                hint=f"write it beside the folder, e.g. -o {folder.root.parent}/"
                "gradient_certificate.json",
            )
