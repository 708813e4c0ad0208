"""What a certificate binds: its subjects on the release machine.

The spec, its weights and probe inputs, the exported ONNX model and probe bundle, a training
log, OpenSSF ``model.sig`` (:func:`release_subjects`), and the extra ``--artifact`` paths
(:class:`ExtraArtifacts`): a file as one subject, a folder as one subject through its manifest
(:mod:`attest.certificate.folder_manifest`), with the ignore list written into the
certificate: the git files, the certificate's own name (so it can ship inside the folder) and
every output of this run that lies in the folder.

A MONAI bundle or Hugging Face folder the model was loaded from is bound the same way, as one
more folder (:meth:`ExtraArtifacts.with_model_folder`): collection recorded its manifest in the
evidence (``model.folder.manifest``), and certify hashes it once more and refuses a folder
whose files changed since, naming the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from attest.certificate import model_signing as openssf_model_signing
from attest.certificate.artifacts import ArtifactSpec, artifact_name_and_path
from attest.certificate.folder_manifest import (
    FolderManifest,
    clean_ignore,
    folder_manifest,
    parse_binding,
)
from attest.certificate.signing import PrivateKey
from attest.certificate.statement import subjects_from_paths
from attest.core.io import atomic_write_bytes, sha256_file
from attest.errors import InputError
from attest.evidence.model import Evidence, ExportedFile
from attest.spec import LoadedSpec, parse_spec_file
from attest.spec.source import ModelFolder

__all__ = ["ExtraArtifacts", "certificate_subjects", "release_subjects"]


@dataclass(frozen=True)
class ExtraArtifacts:
    """Paths bound besides the spec's own files (``attest certify --artifact``): a file as a
    subject, a folder as one subject through its manifest; ``ignore`` (paths relative to each
    folder) is left out of every folder, with the git files and this run's outputs.
    ``recorded`` holds the manifests collection recorded of a folder (the model's own bundle):
    it must hash the same again."""

    items: tuple[tuple[str, Path], ...] = ()
    ignore: tuple[str, ...] = ()
    recorded: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def parse(cls, artifacts: Iterable[ArtifactSpec], ignore: Iterable[str] = ()) -> ExtraArtifacts:
        """Named paths from ``[NAME=]PATH`` arguments, each checked to exist (before any work)."""
        items = tuple(artifact_name_and_path(a) for a in artifacts)
        for _, path in items:
            if not path.exists():
                raise InputError(f"artifact {path} does not exist", hint="check the path")
        names = [name for name, _ in items]
        if len(set(names)) != len(names):
            raise InputError(
                "two artifacts have the same subject name",
                hint="name them apart: --artifact NAME=PATH",
            )
        try:
            cleaned = clean_ignore(ignore)
        except ValueError as exc:
            raise InputError(
                f"--ignore: {exc}", hint="e.g. --ignore logs/ or --ignore notes.txt"
            ) from None
        return cls(items, cleaned)

    def bind(self, subjects: dict[str, str], outputs: Sequence[Path]) -> dict[str, dict[str, Any]]:
        """Add the artifacts to ``subjects`` (name -> sha256); return the folders' manifests
        (``predicate.folders``). ``outputs`` are this run's files: left out of a folder they
        lie in (the first, the certificate, by name at every folder's top as well)."""
        folders: dict[str, dict[str, Any]] = {}
        for name, path in self.items:
            if name in subjects:
                raise InputError(
                    f"a subject is already named {name}", hint="rename it: --artifact NAME=PATH"
                )
            if not path.is_dir():
                subjects.update(subjects_from_paths({name: path}))
                continue
            manifest = self.manifest(name, path, outputs)
            if name in self.recorded:
                _same_as_collected(path, self.recorded[name], manifest)
            subjects[name] = manifest.root_digest
            folders[name] = manifest.predicate()
        return folders

    def manifest(self, name: str, folder: Path, outputs: Sequence[Path]) -> FolderManifest:
        """The manifest of one folder, leaving out the ignore list and this run's outputs."""
        ignore = list(self.ignore)
        if outputs:
            ignore.append(outputs[0].name)  # the certificate may later ship inside the folder
        top = folder.resolve()
        for output in outputs:
            try:
                ignore.append(output.resolve().relative_to(top).as_posix())
            except ValueError:  # not inside this folder
                continue
        return folder_manifest(folder, name=name, ignore=ignore)

    def model_folder_ignore(self, certificate: Path) -> tuple[str, ...]:
        """What the model folder's manifest leaves out when collection records it: what
        :meth:`bind` will leave out (the certificate's name, ``ignore``; no output is written
        inside a model folder), so the two manifests agree."""
        return (certificate.name, *self.ignore)

    def with_model_folder(self, folder: ModelFolder, evidence: Evidence) -> ExtraArtifacts:
        """These artifacts and the MONAI bundle or Hugging Face folder the model was loaded
        from, bound first, as the evidence recorded it (``model.folder.manifest``)."""
        record = evidence.model.get("folder")
        recorded = record.get("manifest") if isinstance(record, Mapping) else None
        if not isinstance(recorded, Mapping):
            raise InputError(
                f"the evidence records no manifest of the model folder {folder.root}",
                hint="rerun attest certify so the evidence and the certificate cover the folder",
            )
        if folder.name in {name for name, _ in self.items}:
            raise InputError(
                f"--artifact {folder.name} is named as the model folder, which is bound already",
                hint="rename it: --artifact NAME=PATH",
            )
        return replace(
            self,
            items=((folder.name, folder.root), *self.items),
            recorded={**self.recorded, folder.name: dict(recorded)},
        )


def _same_as_collected(root: Path, recorded: Mapping[str, Any], now: FolderManifest) -> None:
    """Refuse a folder whose manifest differs from the one collection recorded, naming the
    first file changed, added or removed since."""
    try:
        then = parse_binding(now.name, dict(recorded))
    except ValueError as exc:
        raise InputError(f"the evidence's manifest of {root} is unreadable: {exc}") from None
    if then.root_digest == now.root_digest and then.bound == now.bound:
        return
    moved = sorted(
        rel
        for rel in then.bound | now.bound
        if then.files.get(rel) != now.files.get(rel)
        or (rel in then.empty_files) != (rel in now.empty_files)
    )
    where = f" ({moved[0]})" if moved else ""
    raise InputError(
        f"the model folder {root} changed after its evidence was collected{where}",
        hint="rerun attest certify so the evidence and the certificate cover the same files",
    )


def outputs_of(evidence: Evidence, paths: Sequence[Path | None], model_signing: bool) -> list[Path]:
    """This run's output files: the certificate first, then evidence, findings, report, the
    deployment files beside the certificate and ``model.sig``."""
    out = [p for p in paths if p is not None]
    top = out[0].parent
    if evidence.export is not None:
        out += [top / evidence.export.onnx.name, top / evidence.export.probe_bundle.name]
    if model_signing:
        out.append(top / openssf_model_signing.SIGNATURE_NAME)
    return out


def _recorded_digest(evidence: Evidence, role: str) -> str | None:
    entry = evidence.artifacts.get(role)
    value = entry.get("sha256") if isinstance(entry, Mapping) else None
    return value if isinstance(value, str) else None


def _deployment_files(
    evidence: Evidence, out_dir: Path, evidence_dir: Path | None = None
) -> dict[str, Path]:
    """The ONNX file and probe bundle the export check wrote (:attr:`Evidence.export`), placed
    next to the certificate (copied there if the check wrote them elsewhere) and checked against
    their recorded digests. Evidence collected on another machine records paths of that
    machine: then the files are looked for by name next to the evidence file
    (``evidence_dir``)."""
    if evidence.export is None:
        return {}
    files: dict[str, Path] = {}
    exported: tuple[ExportedFile, ...] = (evidence.export.onnx, evidence.export.probe_bundle)
    for entry in exported:
        name, source, digest = entry.name, Path(entry.path), entry.sha256
        target = out_dir / name
        if not source.is_file() and evidence_dir is not None:
            source = evidence_dir / name
        if not source.is_file():
            raise InputError(
                f"the exported {name} ({source}) is gone",
                hint="rerun attest certify; for evidence collected elsewhere, copy the exported "
                "files next to the evidence file",
            )
        if source.resolve() != target.resolve():
            atomic_write_bytes(target, source.read_bytes())
        if sha256_file(target) != digest:
            raise InputError(
                f"{target} does not have the digest the export check recorded; rerun attest certify"
            )
        files[name] = target
    return files


def certificate_subjects(
    evidence: Evidence,
    spec: Path | LoadedSpec,
    out_dir: Path,
    training_log: Path | None = None,
    evidence_dir: Path | None = None,
) -> dict[str, str]:
    """``{subject name: sha256}``: the spec, its weights and probe inputs, and (when the spec
    exports) the ONNX file and the probe bundle, written next to the certificate; with a
    ``training_log``, that log too (its digest as the evidence recorded it).

    ``spec`` is the loaded spec the evidence was collected from, or the path of its
    ``attest.yaml`` (then read again, without loading the model). Names are base names (what
    the verifier's ``--artifact`` matches). A file whose digest differs from the one recorded
    in the evidence changed after collection and is refused.
    """
    spec_files = _spec_files(spec)
    folder = spec.folder if isinstance(spec, LoadedSpec) else None
    chosen: dict[str, Path] = {}
    for role, path in spec_files.items():
        if folder is not None and folder.root in path.resolve().parents:
            continue  # bound with the rest of the model folder (ExtraArtifacts.with_model_folder)
        recorded = _recorded_digest(evidence, role)
        if recorded is not None and sha256_file(path) != recorded:
            raise InputError(
                f"{path} changed after its evidence was collected (sha256 differs)",
                hint="rerun attest certify so the evidence and the certificate cover the same file",
            )
        chosen[path.name if path.name not in chosen else f"{role}-{path.name}"] = path
    for name, path in _deployment_files(evidence, out_dir, evidence_dir).items():
        chosen[name if name not in chosen else f"deploy-{name}"] = path
    subjects = subjects_from_paths(chosen)
    record = evidence.training_log
    if training_log is not None and record is not None:
        if sha256_file(training_log) != record.sha256:
            raise InputError(
                f"training log {training_log} changed while certifying (sha256 differs)",
                hint="certify a log the training no longer appends to (a copy, or after training)",
            )
        subjects[record.log] = record.sha256
    return subjects


def _spec_files(spec: Path | LoadedSpec) -> dict[str, Path]:
    """The spec file, its weights and its probe inputs, by role."""
    if isinstance(spec, LoadedSpec):
        roles = ("spec", "weights", "probe")
        return {role: spec.artifacts[role] for role in roles if role in spec.artifacts}
    parsed = parse_spec_file(spec)
    if parsed.model is None or parsed.model.weights is None:
        raise InputError(
            f"{spec} certifies a MONAI bundle or a Hugging Face folder: certifying its evidence "
            "collected elsewhere (--evidence) is not supported yet",
            hint="certify it where it is collected: attest certify BUNDLE/ (or attest.yaml)",
        )
    return {
        "spec": spec,
        "weights": spec.parent / parsed.model.weights,
        "probe": spec.parent / parsed.inputs.probe,
    }


def release_subjects(
    evidence: Evidence,
    spec: Path | LoadedSpec,
    out_dir: Path,
    key: PrivateKey,
    model_signing: bool,
    training_log: Path | None = None,
    evidence_dir: Path | None = None,
) -> dict[str, str]:
    """:func:`certificate_subjects`, and the spec folder's OpenSSF ``model.sig`` if asked."""
    found = certificate_subjects(evidence, spec, out_dir, training_log, evidence_dir)
    if model_signing:
        name = openssf_model_signing.SIGNATURE_NAME
        if name in found:
            raise InputError(f"a subject is already named {name}; rename that file")
        folder = spec.artifacts["spec"].parent if isinstance(spec, LoadedSpec) else spec.parent
        found[name] = sha256_file(openssf_model_signing.sign_model_directory(folder, key))
    return found
