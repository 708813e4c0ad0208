"""Step 6 of the verifier: the artifacts at hand against the certificate's subjects.

Each file is opened once. The files the verifier goes on to read (ONNX models, scanned for
external data and run by the probe; the probe bundle) are read into memory once and hashed
from there, so what is scanned and run is byte for byte what matched the certificate, whatever
happens to the paths afterwards (:func:`attest.certificate.artifacts.read_regular_file`).

An ONNX model that keeps tensors in external data files is bound by its certificate only if
every file it refers to is a subject too: otherwise the weights could be swapped under a valid
signature. Each reference must resolve inside the model's folder to a subject name, and that
subject must be among the artifacts checked in this run.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from attest.certificate.artifacts import hash_directory, read_regular_file
from attest.core.text import safe_text
from attest.deployment.onnx_refs import OnnxFormatError, external_references, resolve_location

if TYPE_CHECKING:  # imported when a certificate binds a folder, not at every start
    from attest.certificate.folder_manifest import FolderManifest

__all__ = ["ArtifactMatch", "is_onnx", "match_artifacts", "read_external_data"]

Reason = tuple[str, str]


def check_bound_folder(
    name: str, root: Path, manifest: FolderManifest, keep: set[str], found: ArtifactMatch
) -> None:
    """Hold the folder ``root`` against the manifest its subject ``name`` is bound through:
    a changed file is SUBJECT_MISMATCH, a missing one ARTIFACT_MISSING, a file the manifest
    does not bind (and does not ignore) UNEXPECTED_FILE, each naming the file."""
    from attest.certificate.folder_manifest import check_folder

    check = check_folder(root, manifest, keep=lambda rel: is_onnx(rel) or f"{name}/{rel}" in keep)
    found.problems += [
        ("SUBJECT_MISMATCH", f"{name}/{safe_text(rel)} {why}") for rel, why in check.changed
    ]
    found.problems += [
        (
            "ARTIFACT_MISSING",
            f"{name}/{safe_text(rel)} is certified but not in {safe_text(str(root))}",
        )
        for rel in check.missing
    ]
    found.problems += [
        ("UNEXPECTED_FILE", f"{name}/{safe_text(rel)} ({why}) is not bound by the certificate")
        for rel, why in check.unexpected
    ]
    for rel in check.checked:
        found.checked.append(f"{name}/{rel}")
        found.paths[f"{name}/{rel}"] = root / rel
        found.members[f"{name}/{rel}"] = (manifest, root, rel)
        if rel in check.contents:
            found.contents[f"{name}/{rel}"] = check.contents[rel]
    if not (check.changed or check.missing or check.unexpected):
        found.checked.append(name)


def is_onnx(name: str) -> bool:
    """Whether a subject name is an ONNX model (the files the probe runs and this step scans)."""
    return name.lower().endswith(".onnx")


@dataclass
class ArtifactMatch:
    """What step 6 found."""

    checked: list[str] = field(default_factory=list)  # subject names matched
    problems: list[Reason] = field(default_factory=list)
    contents: dict[str, bytes] = field(default_factory=dict)  # subject name -> bytes hashed
    paths: dict[str, Path] = field(default_factory=dict)  # subject name -> where it was read
    external: dict[str, dict[str, str]] = field(default_factory=dict)  # model -> location -> name
    # files checked through a folder manifest ("folder/rel"), which are not subjects themselves
    members: dict[str, tuple[FolderManifest, Path, str]] = field(
        default_factory=dict
    )  # (., root, rel)
    folders: dict[str, FolderManifest] = field(default_factory=dict)  # subject -> its manifest


def _directory(
    name: str, root: Path, subjects: dict[str, str], keep: set[str], found: ArtifactMatch
) -> None:
    expected = {n[len(name) + 1 :]: d for n, d in subjects.items() if n.startswith(name + "/")}
    shown = safe_text(str(root))
    if not expected:
        found.problems.append(
            ("SUBJECT_MISMATCH", f"directory {shown} ({name}/) matches no subject")
        )
        return
    listing = hash_directory(
        root, wanted=set(expected), keep=lambda rel: is_onnx(rel) or f"{name}/{rel}" in keep
    )
    found.problems += [
        ("SUBJECT_MISMATCH", f"{name}/{safe_text(rel)} is {why}; refused")
        for rel, why in listing.refused
    ]
    found.problems += [
        ("SUBJECT_MISMATCH", f"{name}/{safe_text(rel)} is not a subject of the certificate")
        for rel in listing.unexpected
    ]
    for rel, digest in sorted(listing.digests.items()):
        if digest == expected[rel]:
            found.checked.append(f"{name}/{rel}")
            found.paths[f"{name}/{rel}"] = root / rel
            if rel in listing.contents:
                found.contents[f"{name}/{rel}"] = listing.contents[rel]
        else:
            found.problems.append(
                ("SUBJECT_MISMATCH", f"{name}/{rel}: sha256 differs from the certificate")
            )
    found.problems += [
        ("ARTIFACT_MISSING", f"{name}/{rel} is in the certificate but not in {shown}")
        for rel in sorted(set(expected) - set(listing.digests))
    ]


_Read = tuple[str, bytes | None] | None


def _hash_in_parallel(paths: list[Path]) -> dict[Path, _Read | Exception]:
    """Several files given one by one, each hashed whole (its subject's digest is its sha256)
    in its own thread: ``hashlib`` releases the GIL, so they take the longest one's time."""
    from concurrent.futures import ThreadPoolExecutor

    from attest.certificate.folder_hash import default_workers

    def one(path: Path) -> _Read | Exception:
        try:
            return read_regular_file(path, follow=True)
        except (OSError, ValueError) as exc:  # raised where the file is looked at
            return exc

    with ThreadPoolExecutor(max_workers=min(len(paths), default_workers())) as pool:
        return dict(zip(paths, pool.map(one, paths), strict=True))


def _file(
    name: str,
    path: Path,
    subjects: dict[str, str],
    keep: set[str],
    found: ArtifactMatch,
    hashed: dict[Path, _Read | Exception],
) -> None:
    shown = safe_text(str(path))
    if name in found.folders:
        found.problems.append(
            ("SUBJECT_MISMATCH", f"artifact {shown} is a file; {name} is a certified folder")
        )
        return
    if name not in subjects:
        found.problems.append(("SUBJECT_MISMATCH", f"artifact {shown} ({name}) matches no subject"))
        return
    if path in hashed:
        done = hashed[path]
        if isinstance(done, Exception):
            raise done
        read = done
    else:
        read = read_regular_file(path, follow=True, keep=is_onnx(name) or name in keep)
    if read is None:
        found.problems.append(("SUBJECT_MISMATCH", f"artifact {shown} is not a regular file"))
    elif read[0] != subjects[name]:
        found.problems.append(
            (
                "SUBJECT_MISMATCH",
                f"artifact {shown} ({name}): sha256 {read[0][:16]}... differs from the "
                f"certificate's {subjects[name][:16]}...",
            )
        )
    else:
        found.checked.append(name)
        found.paths[name] = path
        if read[1] is not None:
            found.contents[name] = read[1]


def _external_data(found: ArtifactMatch, subjects: dict[str, str]) -> None:
    """Every checked ONNX model's external data must be subjects checked in this run."""
    checked = set(found.checked)
    for model in sorted(n for n in found.contents if is_onnx(n)):
        try:
            references = external_references(found.contents[model])
        except OnnxFormatError as exc:
            found.problems.append(
                (
                    "SUBJECT_MISMATCH",
                    f"{model} is not a well-formed ONNX model ({exc}); cannot tell which "
                    "external data it would load",
                )
            )
            continue
        locations: dict[str, str] = {}
        for ref in references:
            where = f"{model} keeps tensor {safe_text(ref.tensor, 80)!r} in external data " + (
                f"{safe_text(ref.location, 200)!r}"
            )
            target = resolve_location(model, ref.location)
            if target is None:
                found.problems.append(
                    ("SUBJECT_MISMATCH", f"{where}, outside the model's folder; refused")
                )
            elif target not in subjects and target not in found.members:
                found.problems.append(
                    (
                        "SUBJECT_MISMATCH",
                        f"{where}, which is not a subject of the certificate: the signature "
                        "does not bind those weights",
                    )
                )
            elif target not in checked and target not in found.members:
                found.problems.append(
                    (
                        "ARTIFACT_MISSING",
                        f"{where} ({target}), a subject not given here; pass it with "
                        f"--artifact {target}=PATH",
                    )
                )
            else:
                locations[ref.location] = target
        found.external[model] = locations


def match_artifacts(
    specs: list[tuple[str, Path]],
    subjects: dict[str, str],
    *,
    keep: frozenset[str] = frozenset(),
    folders: dict[str, FolderManifest] | None = None,
) -> ArtifactMatch:
    """Hash each ``(subject name, path)`` against ``subjects`` (name -> sha256 hex); a folder
    whose subject is bound through a manifest (``folders``) is held against that manifest;
    keep the bytes of ONNX models and of the names in ``keep``; check ONNX external data."""
    folders = folders or {}
    found = ArtifactMatch(folders=folders)
    streamed = [  # files whose bytes are not kept: hashed in parallel, streamed
        path
        for name, path in specs
        if name in subjects
        and name not in folders
        and not is_onnx(name)
        and name not in keep
        and path.is_file()
    ]
    hashed = _hash_in_parallel(streamed) if len(set(streamed)) > 1 else {}
    for name, path in specs:
        shown = safe_text(str(path))
        try:
            if stat.S_ISDIR(path.stat().st_mode) and name in folders:
                check_bound_folder(name, path, folders[name], set(keep), found)
            elif stat.S_ISDIR(path.stat().st_mode):
                _directory(name, path, subjects, set(keep), found)
            else:
                _file(name, path, subjects, set(keep), found, hashed)
        except FileNotFoundError:
            found.problems.append(("ARTIFACT_MISSING", f"artifact {shown} does not exist"))
        except OSError as exc:
            found.problems.append(
                ("ARTIFACT_MISSING", f"artifact {shown} cannot be read: {exc.strerror}")
            )
    _external_data(found, subjects)
    return found


def read_external_data(
    found: ArtifactMatch, model: str, subjects: dict[str, str]
) -> tuple[dict[str, bytes], Reason | None]:
    """The bytes of ``model``'s external data files (location -> bytes) for the probe, each
    read once from the path checked in step 6 and held against the certificate again: the
    bytes handed to the runtime are bytes that match the certified digest."""
    out: dict[str, bytes] = {}
    for location, name in found.external.get(model, {}).items():
        if name in found.contents:
            out[location] = found.contents[name]
            continue
        data = _read_again(found, name, subjects)
        if data is None:
            return {}, ("SUBJECT_MISMATCH", f"{name} changed or vanished during verification")
        out[location] = data
    return out, None


def _read_again(found: ArtifactMatch, name: str, subjects: dict[str, str]) -> bytes | None:
    """The bytes of a checked file read once more, or None when they no longer match: a
    folder member below its folder without following links, another file from its path."""
    if name in found.members:
        from attest.certificate.folder_hash import read_kept
        from attest.certificate.folder_manifest import bytes_match

        manifest, root, rel = found.members[name]
        try:
            kept, _ = read_kept(root, [rel], lambda _rel: True)
        except (OSError, ValueError):
            return None
        data = kept.get(rel)
        return data if data is not None and bytes_match(manifest, rel, data) else None
    path = found.paths.get(name)
    try:
        read = None if path is None else read_regular_file(path, follow=True, keep=True)
    except (OSError, ValueError):
        read = None
    if read is None or read[1] is None or read[0] != subjects.get(name):
        return None
    return read[1]
