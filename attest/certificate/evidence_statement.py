"""Signed evidence: the collector's in-toto Statement over what it measured.

``attest collect --key COLLECTOR.key`` writes ``evidence.intoto.json`` beside ``evidence.json``:
a DSSE envelope (the certificate's DSSE code, :func:`attest.certificate.signing.dsse_envelope`,
PAE over the payload type) whose payload is the RFC 8785 canonical JSON of an
:class:`EvidenceStatement`::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "evidence:evidence.json", "digest": {"sha256": "..."}},
                 {"name": "spec:attest.yaml", ...}, {"name": "weights:model.safetensors", ...},
                 {"name": "probe:probe.pt", ...}],
     "predicateType": "https://gradient-attest.dev/evidence/v1",
     "predicate": {"collector": {"name", "role", "keyid"}, "target": "cpu:x86_64:avx2",
                   "host": "...", "hardware": {...}, "software": {...},
                   "started_at": "...Z", "finished_at": "...Z", "attest_version": "0.1.0",
                   "model": {"name", "version"}, "dispatch": {"engine", "workers", ...}}}

Each subject's name says which file it is: ``ROLE:BASENAME`` with ROLE one of
:data:`SUBJECT_ROLES`. ``attest certify --evidence --trust T`` holds the signature to a key of
``T`` with the collector role (or a name the policy lists), and every subject to the file it
certifies (:mod:`attest.pipeline.provenance`). The JSON Schema is
``schemas/evidence-statement.schema.json`` (shipped in ``attest/schemas/`` too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from attest.certificate.format import PAYLOAD_TYPE, STATEMENT_TYPE
from attest.certificate.signing import PrivateKey, canonical_json, dsse_envelope
from attest.certificate.statement import (
    DigestSet,
    ModelIdentity,
    Sha256Hex,
    Subject,
    Text,
    Timestamp,
    Version,
)
from attest.core.times import parse_timestamp

__all__ = [
    "COLLECTOR_ROLE",
    "EVIDENCE_PREDICATE_TYPE",
    "STATEMENT_SUFFIX",
    "SUBJECT_ROLES",
    "CollectDispatch",
    "Collector",
    "EvidencePredicate",
    "EvidenceStatement",
    "evidence_subjects",
    "sign_evidence_statement",
    "statement_path",
    "subject_name",
]

# Versioned like the certificate's: a change old readers cannot read gets .../v2.
EVIDENCE_PREDICATE_TYPE: Final = "https://gradient-attest.dev/evidence/v1"
COLLECTOR_ROLE: Final = "collector"  # the trust store role whose keys may sign evidence
SUBJECT_ROLES: Final = ("evidence", "spec", "weights", "probe")
STATEMENT_SUFFIX: Final = ".intoto.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Collector(_Strict):
    """Who signed: the name and role the collector states, and its key id (sha256 of the DER
    public key). Only the key id is proven by the signature; certify checks the trust store
    gives that key the collector role, or the name a policy lists."""

    name: Text
    role: Text
    keyid: Sha256Hex


class CollectDispatch(_Strict):
    """How the collect ran: in this process (``local``), split over ``workers`` local
    processes (``processes``, ``attest collect --workers N``) or on Ray (``ray``, with the
    cluster's address and the per-node records of ``Evidence.dispatch``)."""

    engine: Literal["local", "processes", "ray"]
    workers: int = Field(default=1, ge=1, le=1024)
    address: str | None = Field(default=None, max_length=512)
    nodes: list[dict[str, Any]] = Field(default_factory=list, max_length=1024)


class EvidencePredicate(_Strict):
    """What a collector states about one collect (``predicateType`` =
    :data:`EVIDENCE_PREDICATE_TYPE`)."""

    collector: Collector
    target: Text = Field(
        description="the target name this evidence is for (certify --evidence NAME=FILE must "
        "use the same name)"
    )
    model: ModelIdentity
    host: Text
    hardware: dict[str, Any] = Field(default_factory=dict)
    software: dict[str, Any] = Field(default_factory=dict)
    started_at: Timestamp
    finished_at: Timestamp
    attest_version: Version
    dispatch: CollectDispatch

    @model_validator(mode="after")
    def _ordered(self) -> EvidencePredicate:
        if parse_timestamp(self.finished_at) < parse_timestamp(self.started_at):
            raise ValueError("finished_at must not be earlier than started_at")
        return self


class EvidenceStatement(_Strict):
    """An in-toto Statement v1 over one evidence file and the spec, weights and probe it was
    collected from; one subject per role of :data:`SUBJECT_ROLES`, named ``ROLE:BASENAME``."""

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(default=STATEMENT_TYPE, alias="_type")
    subject: list[Subject] = Field(min_length=len(SUBJECT_ROLES), max_length=len(SUBJECT_ROLES))
    predicateType: Literal["https://gradient-attest.dev/evidence/v1"] = EVIDENCE_PREDICATE_TYPE
    predicate: EvidencePredicate

    @field_validator("subject")
    @classmethod
    def _one_per_role(cls, subjects: list[Subject]) -> list[Subject]:
        roles = sorted(s.name.partition(":")[0] for s in subjects)
        if roles != sorted(SUBJECT_ROLES):
            raise ValueError(
                "subjects must be one per role, named ROLE:FILE with ROLE one of "
                + ", ".join(SUBJECT_ROLES)
            )
        return subjects

    def digest_of(self, role: str) -> str:
        """The sha256 the statement gives the subject of ``role``."""
        return next(s.digest.sha256 for s in self.subject if s.name.partition(":")[0] == role)

    def name_of(self, role: str) -> str:
        """The file name (after ``ROLE:``) of the subject of ``role``."""
        return next(s.name for s in self.subject if s.name.partition(":")[0] == role).partition(
            ":"
        )[2]

    def to_json_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return data


def subject_name(role: str, path: Path) -> str:
    """``ROLE:BASENAME``, the subject name of a file of ``role``."""
    if role not in SUBJECT_ROLES:
        raise ValueError(f"unknown subject role {role!r}")
    return f"{role}:{path.name}"


def statement_path(evidence_path: str | Path) -> Path:
    """Where the statement of an evidence file lies: beside it, ``STEM.intoto.json``
    (``evidence.json`` -> ``evidence.intoto.json``)."""
    p = Path(evidence_path)
    return p.with_name(p.stem + STATEMENT_SUFFIX)


def evidence_subjects(digests: dict[str, tuple[str, str]]) -> list[Subject]:
    """Subjects from ``{role: (file name, sha256)}``, in :data:`SUBJECT_ROLES` order."""
    return [
        Subject(name=f"{role}:{digests[role][0]}", digest=DigestSet(sha256=digests[role][1]))
        for role in SUBJECT_ROLES
    ]


def sign_evidence_statement(statement: EvidenceStatement, key: PrivateKey) -> dict[str, Any]:
    """The DSSE envelope of ``statement`` signed by ``key``; its key id must be the one the
    predicate names (a statement cannot say one collector and be signed by another)."""
    if statement.predicate.collector.keyid != key.keyid:
        raise ValueError("the statement names another collector key than the signing key")
    payload = canonical_json(statement.to_json_dict())
    return dsse_envelope(payload, PAYLOAD_TYPE, [key])
