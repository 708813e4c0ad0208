"""The spec's folder as bytes with digests, to travel through Ray's object store.

The driver packs every regular file under the spec's folder (the spec, its weights and probe,
the model's Python code), skipping caches and hidden entries, with the sha256 of each. The
worker unpacks into a new private folder (mode 0700), checks every file against its digest
and the spec, weights and probe against the digests the driver read, and loads the spec from
there: a task runs on exactly the bytes the driver hashed, or refuses.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from attest.errors import InputError
from attest.spec import parse_spec_file

__all__ = ["SpecBundle", "pack_spec", "unpack_spec"]

_SKIP_DIRS = {"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
MAX_BUNDLE_BYTES = 8 << 30  # what one object-store object should carry


@dataclass(frozen=True)
class SpecBundle:
    """The files (relative POSIX path -> bytes), their sha256 and the spec's own path in it."""

    spec: str
    files: dict[str, bytes]
    digests: dict[str, str]
    # the spec, weights and probe by role: the digests the evidence must record
    roles: dict[str, str] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.files.values())


def _inside(folder: Path, path: Path, role: str) -> str:
    try:
        return path.resolve().relative_to(folder).as_posix()
    except ValueError:
        raise InputError(
            f"the spec's {role} file {path} is outside the spec's folder {folder}",
            hint="--ray sends the spec's folder to the cluster: keep the weights and probe in it",
        ) from None


def pack_spec(spec: str | Path) -> SpecBundle:
    """Every regular file under the spec's folder, with digests (module docstring)."""
    spec_path = Path(spec)
    if spec_path.is_dir():
        raise InputError(
            f"{spec_path} is a MONAI bundle: --ray does not carry a bundle to the cluster yet",
            hint="collect the bundle here (without --ray)",
        )
    parsed = parse_spec_file(spec_path)
    if parsed.model is None or parsed.model.weights is None:
        raise InputError(
            f"{spec_path} names a Hugging Face folder (pretrained:): --ray does not carry it "
            "to the cluster yet",
            hint="collect it here (without --ray)",
        )
    folder = spec_path.resolve().parent
    roles_paths = {
        "spec": spec_path,
        "weights": spec_path.parent / parsed.model.weights,
        "probe": spec_path.parent / parsed.inputs.probe,
    }
    roles = {role: _inside(folder, path, role) for role, path in roles_paths.items()}
    files: dict[str, bytes] = {}
    total = 0
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(names):
            path = Path(root) / name
            if name.startswith(".") or path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            total += len(data)
            if total > MAX_BUNDLE_BYTES:
                raise InputError(
                    f"the spec's folder {folder} holds more than {MAX_BUNDLE_BYTES >> 30} GiB",
                    hint="keep only the spec, weights, probe and model code in the folder",
                )
            files[path.relative_to(folder).as_posix()] = data
    missing = [rel for rel in roles.values() if rel not in files]
    if missing:
        raise InputError(f"{missing[0]} in {folder} is not a regular file")
    digests = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    return SpecBundle(
        spec=roles["spec"],
        files=files,
        digests=digests,
        roles={role: digests[rel] for role, rel in roles.items()},
    )


def unpack_spec(bundle: SpecBundle) -> tuple[Path, Path]:
    """Write the bundle into a new private folder, checked; returns (folder, spec path).

    Any file whose bytes do not match its digest, or a path that would leave the folder, is
    refused before anything is loaded. The caller removes the folder.
    """
    folder = Path(tempfile.mkdtemp(prefix="attest-target-"))  # mode 0700
    for rel, data in bundle.files.items():
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            raise InputError(f"the spec bundle holds a path outside its folder: {rel!r}")
        if hashlib.sha256(data).hexdigest() != bundle.digests.get(rel):
            raise InputError(
                f"{rel} arrived with other bytes than the driver hashed (sha256 differs)",
                hint="the object store delivered different bytes; rerun the collect",
            )
        target = folder.joinpath(*pure.parts)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        target.write_bytes(data)
    if set(bundle.digests) != set(bundle.files):
        raise InputError("the spec bundle's files and digests do not match one to one")
    return folder, folder.joinpath(*PurePosixPath(bundle.spec).parts)
