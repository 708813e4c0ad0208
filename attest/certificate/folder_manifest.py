"""Folder binding: every file of a model folder bound through one manifest.

The manifest is OpenSSF model-signing's (predicate ``https://model_signing/signature/v1.0``):
``serialization`` (how the folder was cut into resources, and the ``ignore_paths`` left out)
and ``resources`` (``{"name", "algorithm", "digest"}`` each), and the in-toto subject
``{"name": <folder>, "digest": {"sha256": <root>}}`` where the root is the sha256 of the
resource digests' bytes concatenated in model-signing's order. A certificate binds a folder
with exactly that subject, and keeps the predicate in ``predicate.folders[<subject name>]``;
so the model-signing statement can be rebuilt from the certificate byte for byte
(:meth:`FolderManifest.statement`) and model-signing's verifier reads it, and a manifest
model-signing wrote is read here (:func:`parse_statement`).

We write the ``shards`` serialization (per-shard digests, ``path:start:end``; why:
:mod:`attest.certificate.folder_hash`) and read both ``shards`` and ``files``. model-signing
gives an empty file no shard at all, so under ``shards`` a file could be added or removed
empty without changing the manifest; the names of the certified empty files are therefore kept
in the predicate as well (``empty_files``: model-signing's verifiers ignore predicate fields
they do not know), and our verifier refuses an empty file that is not among them.

Certify calls :func:`folder_manifest`; the verifier calls :func:`parse_binding` and
:func:`check_folder`. No torch, no numpy, no pydantic: the server imports this module.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attest.certificate.folder_hash import (
    Range,
    hash_ranges,
    is_ignored,
    list_folder,
    read_kept,
    shard_ranges,
)
from attest.certificate.format import SHA256_PATTERN, STATEMENT_TYPE, SUBJECT_NAME_PATTERN
from attest.errors import InputError

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "GIT_PATHS",
    "MODEL_SIGNING_PREDICATE",
    "FolderCheck",
    "FolderManifest",
    "bytes_match",
    "check_folder",
    "clean_ignore",
    "folder_manifest",
    "parse_binding",
    "parse_statement",
]

MODEL_SIGNING_PREDICATE = "https://model_signing/signature/v1.0"
# 64 MiB: a 4 GiB file is 64 shards, enough to keep 64 cores busy, while a 1 TB folder's
# manifest (16k resources, ~2.5 MB) stays far inside the certificate's 16 MiB limit.
DEFAULT_SHARD_SIZE = 64 << 20
# What model-signing's own tools leave out of a folder (``ignore_git_paths``).
GIT_PATHS = (".git", ".gitattributes", ".github", ".gitignore")
MAX_RESOURCES = 200_000

_NAME = re.compile(SUBJECT_NAME_PATTERN)
_SHA256 = re.compile(SHA256_PATTERN)
Expected = list[tuple[int, int | None, str]]  # (start, end or None: to the end, sha256 hex)


def _sort_key(rel: str, start: int, end: int) -> tuple[tuple[str, ...], int, int]:
    # model-signing sorts its items as (PurePosixPath, start, end): paths compare by their
    # components, not as strings ("a/b" < "a-c"), and the root digest follows that order.
    return (tuple(rel.split("/")), start, end)


@dataclass(frozen=True)
class FolderManifest:
    """A folder's manifest: ``files`` maps each bound file to its digests (one per shard, or
    one whole-file digest under ``files`` serialization, ``end`` None)."""

    name: str
    files: dict[str, Expected]
    shard_size: int | None  # None: model-signing's "files" serialization
    ignore: tuple[str, ...] = ()
    empty_files: tuple[str, ...] = ()  # shards only: certified empty files
    extra: dict[str, Any] = field(default_factory=dict)  # other predicate fields, kept as read

    def _resources(self) -> list[tuple[tuple[tuple[str, ...], int, int], str, str]]:
        rows = []
        for rel, parts in self.files.items():
            for start, end, digest in parts:
                if self.shard_size is None:
                    rows.append((_sort_key(rel, 0, 0), rel, digest))
                else:
                    assert end is not None
                    rows.append((_sort_key(rel, start, end), f"{rel}:{start}:{end}", digest))
        return sorted(rows)

    @property
    def root_digest(self) -> str:
        """model-signing's subject digest: sha256 over the resource digests, in order."""
        root = hashlib.sha256()
        for _, _, digest in self._resources():
            root.update(bytes.fromhex(digest))
        return root.hexdigest()

    @property
    def bound(self) -> set[str]:
        """Every file name the manifest binds (empty files included)."""
        return set(self.files) | set(self.empty_files)

    def predicate(self) -> dict[str, Any]:
        """The model-signing predicate (plus ``empty_files`` when there are any)."""
        algorithm = "sha256" if self.shard_size is None else f"sha256-sharded-{self.shard_size}"
        serialization: dict[str, Any] = {
            "method": "files" if self.shard_size is None else "shards",
            "hash_type": "sha256",
            "allow_symlinks": False,
        }
        if self.shard_size is not None:
            serialization["shard_size"] = self.shard_size
        if self.ignore:
            serialization["ignore_paths"] = list(self.ignore)
        out: dict[str, Any] = {
            **self.extra,
            "serialization": serialization,
            "resources": [
                {"name": name, "algorithm": algorithm, "digest": digest}
                for _, name, digest in self._resources()
            ],
        }
        if self.empty_files:
            out["empty_files"] = sorted(self.empty_files)
        return out

    def statement(self) -> dict[str, Any]:
        """The in-toto statement model-signing signs (and its verifier reads) for this folder."""
        return {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": self.name, "digest": {"sha256": self.root_digest}}],
            "predicateType": MODEL_SIGNING_PREDICATE,
            "predicate": self.predicate(),
        }


def clean_ignore(ignore: Iterable[str]) -> tuple[str, ...]:
    """Ignore paths as relative POSIX paths inside the folder, deduplicated; ``ValueError``
    for one that is absolute or climbs out (``..``)."""
    out: list[str] = []
    for raw in ignore:
        text = str(raw).strip("/")
        if text.startswith("./"):
            text = text[2:]
        if not _NAME.fullmatch(text):
            raise ValueError(f"ignore path {raw!r} is not a relative path inside the folder")
        if text not in out:
            out.append(text)
    return tuple(out)


def folder_manifest(
    folder: str | Path,
    *,
    name: str | None = None,
    ignore: Iterable[str] = (),
    ignore_git: bool = True,
    shard_size: int = DEFAULT_SHARD_SIZE,
    workers: int | None = None,
) -> FolderManifest:
    """The manifest of every file under ``folder`` but the ``ignore``d paths (relative to the
    folder; a directory leaves out everything below it) and, with ``ignore_git``, the git
    files (:data:`GIT_PATHS`). ``name`` is the subject name (default: the folder's name).

    Raises :class:`InputError` for a folder that is missing, unreadable, empty, or holds a
    symbolic link or special file (a certified folder holds only files).
    """
    root = Path(folder)
    try:
        ignored = clean_ignore([*ignore, *(GIT_PATHS if ignore_git else ())])
    except ValueError as exc:
        raise InputError(str(exc), hint="name paths relative to the folder, e.g. .git") from None
    subject = name or root.resolve().name
    if not _NAME.fullmatch(subject) or "/" in subject:
        raise InputError(f"folder subject name {subject!r} is not a valid subject name")
    if shard_size < 1:
        raise InputError(f"shard size {shard_size} is not positive")
    try:
        listing = list_folder(root, ignored)
    except FileNotFoundError:
        raise InputError(f"folder {root} does not exist", hint="check the path") from None
    except OSError as exc:
        raise InputError(f"cannot read folder {root}: {exc.strerror or exc}") from None
    if listing.refused:
        rel, why = listing.refused[0]
        raise InputError(
            f"{root / rel} is {why}; a certified folder holds only regular files",
            hint="replace it with the file itself, or leave it out with --ignore",
        )
    if not listing.sizes:
        raise InputError(f"folder {root} holds no files to bind")
    ranges = [r for rel, size in listing.sizes.items() for r in shard_ranges(rel, size, shard_size)]
    digests = hash_ranges(root, ranges, workers=workers, sizes=listing.sizes)
    files: dict[str, Expected] = {}
    for (rel, start, end), digest in sorted(digests.items()):
        if digest is None:
            raise InputError(f"{root / rel} changed or vanished while it was hashed; retry")
        files.setdefault(rel, []).append((start, end, digest))
    empty = tuple(sorted(rel for rel, size in listing.sizes.items() if size == 0))
    return FolderManifest(subject, files, shard_size, ignored, empty)


# ---------------------------------------------------------------------------- reading


def _whole_number(value: Any, what: str) -> int:
    # protobuf's JSON (model-signing writes through it) spells integers as 1024.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError(f"{what} is not a whole number")
    return int(value)


def _resource_range(text: str, sharded: bool) -> tuple[str, int, int]:
    if not sharded:
        return text, 0, 0
    rel, sep1, rest = text.rpartition(":")  # model-signing's "path:start:end"
    path, sep2, start = rel.rpartition(":")
    if not (sep1 and sep2 and start.isdigit() and rest.isdigit()):
        raise ValueError(f"resource {text[:200]!r} is not of the form path:start:end")
    return path, int(start), int(rest)


def _read_resources(resources: Any, shard_size: int | None) -> dict[str, Expected]:
    if not isinstance(resources, list) or len(resources) > MAX_RESOURCES:
        raise ValueError(f"resources is not a list of at most {MAX_RESOURCES} entries")
    algorithm = "sha256" if shard_size is None else f"sha256-sharded-{shard_size}"
    files: dict[str, Expected] = {}
    for item in resources:
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("name", "algorithm", "digest")
        ):
            raise ValueError("a resource is not {name, algorithm, digest} strings")
        if item["algorithm"] != algorithm:
            raise ValueError(f"resource algorithm {item['algorithm'][:60]!r}, expected {algorithm}")
        if not _SHA256.fullmatch(item["digest"]):
            raise ValueError(f"resource {item['name'][:200]!r} has no sha256 hex digest")
        rel, start, end = _resource_range(item["name"], shard_size is not None)
        if not _NAME.fullmatch(rel):
            raise ValueError(f"resource path {rel[:200]!r} is not a relative path in the folder")
        files.setdefault(rel, []).append(
            (start, None if shard_size is None else end, item["digest"])
        )
    for rel, parts in files.items():
        parts.sort()
        if shard_size is None:
            if len(parts) != 1:
                raise ValueError(f"{rel[:200]!r} is listed more than once")
            continue
        position = 0
        for index, (begin, stop, _) in enumerate(parts):
            last = index == len(parts) - 1
            assert stop is not None
            if (
                begin != position
                or not 0 < stop - begin <= shard_size
                or (not last and stop - begin != shard_size)
            ):
                raise ValueError(f"the shards of {rel[:200]!r} do not tile the file")
            position = stop
    return files


def parse_binding(name: str, predicate: Any, digest: str | None = None) -> FolderManifest:
    """Read a model-signing predicate (ours or theirs) as the manifest of folder ``name``;
    with ``digest`` (the subject's sha256), the resources must hash to it. Raises
    ``ValueError`` saying what is wrong."""
    if not isinstance(predicate, dict):
        raise ValueError("the folder manifest is not an object")
    serialization = predicate.get("serialization")
    if not isinstance(serialization, dict):
        raise ValueError("the folder manifest has no serialization object")
    method = serialization.get("method")
    if serialization.get("hash_type") != "sha256":
        raise ValueError(f"hash_type {str(serialization.get('hash_type'))[:40]!r} is not supported")
    if serialization.get("allow_symlinks") is not False:
        raise ValueError(
            "a manifest that allows symbolic links is not supported: links are refused"
        )
    if method == "shards":
        shard_size: int | None = _whole_number(serialization.get("shard_size"), "shard_size")
        if shard_size is None or shard_size < 1:
            raise ValueError("shard_size is not positive")
    elif method == "files":
        shard_size = None
    else:
        raise ValueError(f"serialization method {str(method)[:40]!r} is not supported")
    raw_ignore = serialization.get("ignore_paths", [])
    if not isinstance(raw_ignore, list) or not all(isinstance(p, str) for p in raw_ignore):
        raise ValueError("ignore_paths is not a list of paths")
    ignore = clean_ignore(raw_ignore)
    files = _read_resources(predicate.get("resources"), shard_size)
    empty = predicate.get("empty_files", [])
    if not isinstance(empty, list) or not all(
        isinstance(e, str) and _NAME.fullmatch(e) and e not in files for e in empty
    ):
        raise ValueError("empty_files is not a list of file names outside the resources")
    ignored = [rel for rel in [*files, *empty] if is_ignored(rel, ignore)]
    if ignored:
        raise ValueError(f"{ignored[0][:200]!r} is both bound and ignored")
    extra = {
        k: v for k, v in predicate.items() if k not in ("serialization", "resources", "empty_files")
    }
    manifest = FolderManifest(name, files, shard_size, ignore, tuple(empty), extra)
    if digest is not None and manifest.root_digest != digest:
        raise ValueError("its resources do not hash to the subject's digest")
    return manifest


def parse_statement(statement: Any) -> FolderManifest:
    """A model-signing in-toto statement (the payload of its ``model.sig``) as a manifest."""
    if not isinstance(statement, dict) or statement.get("predicateType") != MODEL_SIGNING_PREDICATE:
        raise ValueError(f"not a model-signing statement ({MODEL_SIGNING_PREDICATE})")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        raise ValueError("a model-signing statement has exactly one subject")
    name = subjects[0].get("name")
    digest = (subjects[0].get("digest") or {}).get("sha256")
    if not isinstance(name, str) or not isinstance(digest, str):
        raise ValueError("the subject has no name or sha256 digest")
    return parse_binding(name, statement.get("predicate"), digest)


# ---------------------------------------------------------------------------- checking


@dataclass
class FolderCheck:
    """What :func:`check_folder` found (names relative to the folder)."""

    checked: list[str] = field(default_factory=list)  # bound files whose bytes match
    changed: list[tuple[str, str]] = field(default_factory=list)  # (name, why): bound, differs
    missing: list[str] = field(default_factory=list)  # bound, not there
    unexpected: list[tuple[str, str]] = field(default_factory=list)  # (name, what): not bound
    contents: dict[str, bytes] = field(default_factory=dict)  # bytes hashed, for names kept


def _planned(manifest: FolderManifest, rel: str, size: int, found: FolderCheck) -> list[Range]:
    """The ranges to hash for ``rel`` (or none, with the reason recorded)."""
    if rel in manifest.empty_files:
        if size:
            found.changed.append((rel, f"is {size} bytes; the certificate has it empty"))
        else:
            found.checked.append(rel)
        return []
    if manifest.shard_size is None:
        return [(rel, 0, size)]
    expected = manifest.files[rel]
    certified = expected[-1][1]
    plan = shard_ranges(rel, size, manifest.shard_size)
    if size != certified:
        found.changed.append((rel, f"is {size} bytes; the certificate has {certified}"))
        return []
    return plan


def check_folder(
    folder: str | Path,
    manifest: FolderManifest,
    *,
    keep: Callable[[str], bool] | None = None,
    workers: int | None = None,
) -> FolderCheck:
    """Hold ``folder`` against ``manifest``: every bound file present with matching bytes, no
    other file (the ignored paths aside). The bytes of the files ``keep`` selects are read
    once and hashed from memory (:attr:`FolderCheck.contents`). Raises ``OSError`` when the
    folder itself cannot be opened."""
    found = FolderCheck()
    listing = list_folder(folder, manifest.ignore)
    bound = manifest.bound
    for rel, why in listing.refused:
        if rel in bound:
            found.changed.append((rel, f"is {why}; refused"))
        else:
            found.unexpected.append((rel, why))
    ranges: list[Range] = []
    for rel, size in sorted(listing.sizes.items()):
        if rel not in bound:
            found.unexpected.append((rel, f"a file of {size} bytes"))
        else:
            ranges += _planned(manifest, rel, size, found)
    present = set(listing.sizes) | {rel for rel, _ in listing.refused}
    found.missing = sorted(bound - present)
    to_hash = {rel for rel, _, _ in ranges}
    kept, unreadable = read_kept(folder, sorted(to_hash), keep or (lambda _rel: False))
    digests = hash_ranges(folder, ranges, workers=workers, kept=kept, sizes=listing.sizes)
    bad: dict[str, str] = {rel: "could not be read as a regular file" for rel in unreadable}
    for rel, data in kept.items():  # what the caller will use must be all that was hashed
        if len(data) != listing.sizes[rel]:
            bad[rel] = "changed while it was read"
    for rel, start, end in ranges:
        actual = digests[(rel, start, end)]
        wanted = {(s, e): d for s, e, d in manifest.files[rel]}
        expected = wanted.get((start, end), wanted.get((start, None)))
        if actual is None:
            bad.setdefault(rel, "changed or vanished while it was hashed")
        elif actual != expected:
            span = "its bytes" if manifest.shard_size is None else f"bytes {start}-{end}"
            bad.setdefault(rel, f"{span}: sha256 {actual[:16]}... differs from the certificate")
    found.changed += sorted(bad.items())
    found.checked += sorted(to_hash - set(bad))
    found.checked.sort()
    found.contents = {rel: data for rel, data in kept.items() if rel not in bad}
    return found


def bytes_match(manifest: FolderManifest, rel: str, data: bytes) -> bool:
    """Whether ``data`` are the certified bytes of ``rel`` (used to re-check a file read again,
    such as an ONNX model's external data)."""
    if rel in manifest.empty_files:
        return not data
    expected = manifest.files.get(rel)
    if expected is None:
        return False
    if manifest.shard_size is None:
        return hashlib.sha256(data).hexdigest() == expected[0][2]
    plan = shard_ranges(rel, len(data), manifest.shard_size)
    return [(s, e) for _, s, e in plan] == [(s, e) for s, e, _ in expected] and all(
        hashlib.sha256(memoryview(data)[s:e]).hexdigest() == d for s, e, d in expected if e
    )
