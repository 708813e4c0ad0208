"""Signing what a collect measured: :func:`sign_evidence` writes ``evidence.intoto.json``.

Called by ``attest collect --key`` after the evidence file is written (in one process or with
``--workers``), and meant to be called on the node that measured a target (a Ray task) with
that node's own collector key: the statement binds the evidence file's bytes, the spec,
weights and probe it was collected from, the target name, the host and its hardware and
software, the start and end time, the attest version and how the collect was dispatched
(:mod:`attest.certificate.evidence_statement`; docs/certificate-format.md, "Signed evidence").
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from attest._version import __version__
from attest.certificate.evidence_statement import (
    COLLECTOR_ROLE,
    CollectDispatch,
    EvidenceStatement,
    evidence_subjects,
    sign_evidence_statement,
    statement_path,
)
from attest.certificate.signing import PrivateKey
from attest.core.io import atomic_write_json, sha256_file
from attest.core.times import format_timestamp
from attest.core.validation import validation_problems
from attest.errors import InputError
from attest.evidence.model import Evidence, load_evidence
from attest.spec import LoadedSpec, parse_spec_file

__all__ = ["HARDWARE_KEYS", "SOFTWARE_KEYS", "dispatch_of", "sign_evidence", "spec_files"]

# The evidence environment's facts the predicate names as hardware, and as software.
HARDWARE_KEYS = ("target", "device", "arch", "isa", "cpu", "gpu", "compute_capability")
SOFTWARE_KEYS = ("os", "python", "torch", "numpy", "cuda", "cudnn_version", "precision", "threads")


def spec_files(spec: str | Path | LoadedSpec) -> dict[str, Path]:
    """The spec file, its weights and its probe inputs, by role."""
    if isinstance(spec, LoadedSpec):
        return {role: Path(spec.artifacts[role]) for role in ("spec", "weights", "probe")}
    path = Path(spec)
    parsed = None if path.is_dir() else parse_spec_file(path)
    if parsed is None or parsed.model is None or parsed.model.weights is None:
        # A MONAI bundle or Hugging Face folder is bound as a whole folder, not as the three
        # files this statement names; certify --evidence refuses such a model too.
        raise InputError(
            f"signed evidence (--key) binds a spec's weights file; {path} is a MONAI bundle or "
            "a Hugging Face folder, which is certified in one run, not from signed evidence",
            hint="attest certify BUNDLE/ --policy ... --key ... (collects and signs in one run)",
        )
    return {
        "spec": path,
        "weights": path.parent / parsed.model.weights,
        "probe": path.parent / parsed.inputs.probe,
    }


def dispatch_of(evidence: Evidence, workers: int, ray_address: str | None) -> CollectDispatch:
    """The dispatch record of a collect: local, local processes (``--workers``) or Ray."""
    nodes = [d.model_dump(mode="json") for d in evidence.dispatch]
    if ray_address is not None or nodes:
        return CollectDispatch(engine="ray", workers=workers, address=ray_address, nodes=nodes)
    return CollectDispatch(engine="processes" if workers > 1 else "local", workers=workers)


def _facts(environment: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {
        k: environment[k]
        for k in keys
        if isinstance(environment.get(k), (str, int, float, bool)) and environment.get(k) != ""
    }


def sign_evidence(
    evidence_path: str | Path,
    spec: str | Path | LoadedSpec,
    key: PrivateKey,
    *,
    started_at: datetime,
    finished_at: datetime | None = None,
    name: str,
    role: str = COLLECTOR_ROLE,
    target: str | None = None,
    dispatch: CollectDispatch | None = None,
    host: str | None = None,
    out: str | Path | None = None,
) -> Path:
    """Sign the evidence file at ``evidence_path`` as collected from ``spec``'s files with
    ``key``; write the DSSE envelope to ``out`` (default: ``STEM.intoto.json`` beside the
    evidence) and return its path.

    ``name`` and ``role`` are the collector's stated identity (the trust store decides what
    the key may do); ``target`` the target name the statement binds (default: the hardware
    target the evidence records, as ``certify --evidence`` names it); ``dispatch`` how the
    collect ran (default: in one process); ``host`` the machine (default: its host name).
    A spec, weights or probe file whose digest differs from the one the evidence recorded
    changed during the collect and is refused (:class:`InputError`).
    """
    evidence_file = Path(evidence_path)
    evidence = load_evidence(evidence_file)
    digests: dict[str, tuple[str, str]] = {
        "evidence": (evidence_file.name, sha256_file(evidence_file))
    }
    for role_name, path in spec_files(spec).items():
        digest = sha256_file(path)
        recorded = (evidence.artifacts.get(role_name) or {}).get("sha256")
        if recorded is not None and recorded != digest:
            raise InputError(
                f"{path} is not the {role_name} file {evidence_file} was collected from "
                "(sha256 differs): it changed during the collect",
                hint="collect again from files that do not change",
            )
        digests[role_name] = (path.name, digest)
    if not name.strip() or not role.strip():
        raise InputError("a collector needs a non-empty --name and --role")
    environment = evidence.environment
    predicate = {
        "collector": {"name": name.strip(), "role": role.strip(), "keyid": key.keyid},
        "target": target or "+".join(evidence.targets) or str(environment.get("target")),
        "model": {"name": evidence.model.get("name"), "version": evidence.model.get("version")},
        "host": host or socket.gethostname() or "unknown",
        "hardware": _facts(environment, HARDWARE_KEYS),
        "software": _facts(environment, SOFTWARE_KEYS),
        "started_at": format_timestamp(started_at),
        "finished_at": format_timestamp(finished_at or datetime.now(timezone.utc)),
        "attest_version": __version__,
        "dispatch": (dispatch or CollectDispatch(engine="local")).model_dump(mode="json"),
    }
    try:
        statement = EvidenceStatement.model_validate(
            {
                "subject": [s.model_dump() for s in evidence_subjects(digests)],
                "predicate": predicate,
            }
        )
    except ValidationError as exc:
        raise InputError(
            f"cannot sign {evidence_file}: {validation_problems(exc)}",
            hint='see docs/certificate-format.md, "Signed evidence"',
        ) from None
    where = Path(out) if out is not None else statement_path(evidence_file)
    atomic_write_json(where, sign_evidence_statement(statement, key))
    return where
