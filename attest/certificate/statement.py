"""The certificate: pydantic models of the in-toto Statement v1 and its predicate.

A certificate (``gradient_certificate.json``) is a DSSE envelope whose payload is the RFC 8785
canonical JSON of a :class:`Statement`. :attr:`Statement.signed_bytes` is the one place that
produces those bytes; :func:`sign_statement` wraps them in an envelope.

The predicate has a strict outer frame (certificate id, model identity, validity window,
tool, verdict, policy, deployment envelope) and loosely typed sections that the collect,
policy and export stages fill (``operators``, ``checks``, ``findings``, ``waivers``,
``onnx_mapping``...), so those stages can grow their content without changing these models.

Example (release side)::

    subjects = subjects_from_paths({"weights.safetensors": "out/weights.safetensors"})
    statement = build_statement(
        subjects=subjects,
        model=ModelIdentity(name="digits-cnn", version="1.2.0"),
        policy=PolicyRef(id="clinical-strict", version="1", digest={"sha256": "..."}),
        verdict="pass",
    )
    envelope = sign_statement(statement, [load_private_key("keys/release.key")])
    write_certificate("gradient_certificate.json", envelope)

The JSON Schema ``schemas/statement.schema.json`` is generated from :class:`Statement`
(``python -m attest.certificate.schemas write``); a copy ships inside the package
(``attest/schemas/``) so the offline verifier validates payloads even when installed from a
wheel, without building these models.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from attest._version import __version__
from attest.certificate.artifacts import artifact_name_and_path, hash_directory, hash_regular_file
from attest.certificate.folder_manifest import parse_binding
from attest.certificate.format import (
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    SHA256_PATTERN,
    STATEMENT_TYPE,
    SUBJECT_NAME_PATTERN,
    TIMESTAMP_PATTERN,
    VERSION_PATTERN,
)
from attest.certificate.model_card import ModelCard
from attest.certificate.signers import SignerIdentity, default_identity, sign_payload
from attest.certificate.signing import PrivateKey, canonical_json
from attest.core.io import atomic_write_json
from attest.core.times import format_timestamp, parse_timestamp
from attest.errors import InputError, SigningError

__all__ = [
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "SUBJECT_NAME_PATTERN",
    "TIMESTAMP_PATTERN",
    "VERSION_PATTERN",
    "CollectorRef",
    "DeploymentEnvelope",
    "DigestSet",
    "EvidenceProvenance",
    "ModelIdentity",
    "PolicyRef",
    "Predicate",
    "Statement",
    "Subject",
    "TargetEnvelope",
    "ToolInfo",
    "build_statement",
    "format_timestamp",
    "parse_timestamp",
    "sign_statement",
    "subjects_from_paths",
    "write_certificate",
]


def _valid_timestamp(text: str) -> str:
    parse_timestamp(text)  # pattern checked the shape; this checks the calendar
    return text


Sha256Hex = Annotated[str, StringConstraints(pattern=SHA256_PATTERN)]
Timestamp = Annotated[
    str, StringConstraints(pattern=TIMESTAMP_PATTERN), AfterValidator(_valid_timestamp)
]
SubjectName = Annotated[str, StringConstraints(pattern=SUBJECT_NAME_PATTERN, max_length=4096)]
Version = Annotated[str, StringConstraints(pattern=VERSION_PATTERN, max_length=128)]
Text = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Verdict = Literal["pass", "fail"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class DigestSet(_Strict):
    """Content digests of one artifact (in-toto DigestSet); sha256 is required."""

    sha256: Sha256Hex


class Subject(_Strict):
    """One artifact the certificate vouches for (in-toto ResourceDescriptor subset).

    ``name`` is role-neutral (``model.onnx``, ``weights.safetensors``, ``probe.npz``,
    ``attest.yaml``); files of a directory artifact are named ``dir/relative/path``.
    """

    name: SubjectName
    digest: DigestSet


class ModelIdentity(_Strict):
    """The model line and release version; the verifier refuses rollback to a lower version.
    ``card``: what a MONAI bundle or Hugging Face folder says of itself (absent otherwise)."""

    name: Text
    version: Version
    card: ModelCard | None = Field(default=None, exclude_if=lambda value: value is None)


class ToolInfo(_Strict):
    """The tool (and version) that issued the certificate."""

    name: Text = "gradient-attest"
    version: Text = __version__


class PolicyRef(_Strict):
    """The policy the evidence was held against: id, version and the digest of its file."""

    id: Text
    version: Text
    digest: DigestSet


class TargetEnvelope(_Strict):
    """One hardware target of a certificate over several (``attest certify --evidence``): its
    verdict under the policy, whether the policy required it, the runtime it was measured in
    and the keys whose difference rejects a server, and the digest of its evidence file."""

    verdict: Verdict
    required: bool
    hardware: list[Text] = Field(default_factory=list)
    runtime: dict[str, Any] = Field(default_factory=dict)
    fatal_differences: list[Text] = Field(default_factory=list)
    evidence_digest: DigestSet | None = None


class DeploymentEnvelope(_Strict):
    """The targets and runtime settings the certificate covers.

    - ``targets``: hardware targets, ``kind:arch[:isa]`` (``cpu:x86_64:avx2``, ``cuda:sm_90``).
    - ``runtime``: runtime facts and settings (``onnxruntime`` version, ``execution_provider``,
      ``intra_op_num_threads``, ``python``, ``system``, ``machine``, ``cpu_isa``...).
    - ``fatal_differences``: names (``target`` or a ``runtime`` key) whose difference from the
      local runtime rejects the certificate under ``--check-environment``; differences in
      other names are reported as notes only.
    - ``per_target``: for a certificate over several targets, each target by name
      (:class:`TargetEnvelope`); ``--check-environment`` matches the server to one of them.
    """

    targets: list[Text] = Field(default_factory=list)
    runtime: dict[str, Any] = Field(default_factory=dict)
    fatal_differences: list[Text] = Field(default_factory=list)
    per_target: dict[str, TargetEnvelope] = Field(default_factory=dict)


class CollectorRef(_Strict):
    """The collector that signed a target's evidence statement: the name and role it stated,
    its key id, and what made the key count at certify (``role collector``, ``name NAME``)."""

    name: Text
    role: Text
    keyid: Sha256Hex
    trusted_as: Text


class EvidenceProvenance(_Strict):
    """Where one target's evidence came from (``predicate.evidence_provenance[TARGET]``).

    ``collected_by``: ``certify`` when the certify run collected it itself (its own signature
    vouches for it), ``collect`` for a file given with ``certify --evidence``. ``signed``: the
    file's collector statement was checked against certify's trust store (then
    ``statement_digest`` and ``collector`` are set). ``host``, ``started_at``,
    ``finished_at``: as the statement signs them, or as the certify run measured them; unsigned
    files give only their own ``created_at`` as ``finished_at``."""

    collected_by: Literal["certify", "collect"]
    signed: bool
    evidence_digest: DigestSet
    statement_digest: DigestSet | None = None
    collector: CollectorRef | None = None
    host: Text | None = None
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    note: str | None = Field(default=None, max_length=1024)


class Predicate(_Strict):
    """The gradient certificate predicate (``predicateType`` = :data:`PREDICATE_TYPE`).

    The outer frame is strict. The sections after ``deployment`` are filled by later stages
    and typed loosely on purpose: their content is described by the evidence and policy
    schemas, not here.
    """

    certificate_id: Text
    model: ModelIdentity
    issued_at: Timestamp
    expires_at: Timestamp
    tool: ToolInfo = Field(default_factory=ToolInfo)
    verdict: Verdict
    policy: PolicyRef
    environment: dict[str, Any] = Field(default_factory=dict)
    deployment: DeploymentEnvelope = Field(default_factory=DeploymentEnvelope)
    # Filled by the collect / evaluate / export stages:
    evidence_digest: DigestSet | None = None
    model_metrics: dict[str, Any] = Field(default_factory=dict)
    operators: list[dict[str, Any]] = Field(default_factory=list)
    modules: list[dict[str, Any]] = Field(default_factory=list)
    checks: dict[str, Any] = Field(default_factory=dict)
    findings: list[dict[str, Any]] = Field(default_factory=list)
    waivers: list[dict[str, Any]] = Field(default_factory=list)
    onnx_mapping: dict[str, Any] = Field(default_factory=dict)
    # Where each target's evidence came from: collector, host, time (docs/certificate-format.md)
    evidence_provenance: dict[str, EvidenceProvenance] = Field(default_factory=dict)
    # Folder subject name -> its manifest: OpenSSF model-signing's predicate (serialization,
    # resources), whose root digest is that subject's sha256 (attest.certificate.folder_manifest).
    folders: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Namespaced additions ("<stage>.<name>") before they earn a field of their own.
    extensions: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _window_is_ordered(self) -> Predicate:
        if parse_timestamp(self.expires_at) <= parse_timestamp(self.issued_at):
            raise ValueError("expires_at must be later than issued_at")
        return self


class Statement(_Strict):
    """An in-toto Statement v1 whose predicate is a :class:`Predicate`."""

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(default=STATEMENT_TYPE, alias="_type")
    subject: list[Subject] = Field(min_length=1)
    predicateType: Literal["https://gradient-attest.dev/certificate/v1"] = PREDICATE_TYPE
    predicate: Predicate

    @field_validator("subject")
    @classmethod
    def _unique_names(cls, subjects: list[Subject]) -> list[Subject]:
        names = [s.name for s in subjects]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"subject names must be unique; repeated: {', '.join(duplicates)}")
        return subjects

    @model_validator(mode="after")
    def _folders_are_subjects(self) -> Statement:
        digests = {s.name: s.digest.sha256 for s in self.subject}
        for name, binding in self.predicate.folders.items():
            if name not in digests:
                raise ValueError(f"folder {name!r} is not a subject")
            parse_binding(name, binding, digests[name])  # ValueError says what is wrong
        return self

    def to_json_dict(self) -> dict[str, Any]:
        """The statement as plain JSON data, with ``_type`` spelled as in-toto requires."""
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        if not data["predicate"]["folders"]:
            # A certificate that binds no folder keeps the bytes it always had, so verifiers
            # from before folder binding still read it; one that does is refused by them
            # (an unknown predicate field), which is right: they cannot check the folder.
            del data["predicate"]["folders"]
        return data

    @property
    def signed_bytes(self) -> bytes:
        """The RFC 8785 canonical bytes that are signed: the DSSE payload. The only place
        that makes them."""
        return canonical_json(self.to_json_dict())

    @classmethod
    def from_json_dict(cls, data: Any, *, source: str = "statement") -> Statement:
        """Validate JSON data as a statement; errors are an :class:`InputError` naming ``source``."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
                for err in exc.errors()[:5]
            )
            raise InputError(
                f"{source} is not a valid gradient-attest statement: {problems}",
                hint="see docs/certificate-format.md and schemas/statement.schema.json",
            ) from None


def sign_statement(
    statement: Statement,
    keys: Sequence[PrivateKey],
    *,
    signers: Sequence[SignerIdentity] | None = None,
    timestamper: Callable[[bytes], bytes] | None = None,
) -> dict[str, Any]:
    """Sign a statement into a DSSE envelope ``{"payload", "payloadType", "signatures"}``;
    each signature carries its signer's attestation (name, role, meaning; default: the account
    name as release-engineer, authorship) and, with a ``timestamper``, an RFC 3161 token."""
    if not keys:
        raise SigningError("no signing key given", hint="pass at least one --key")
    who = list(signers) if signers is not None else [default_identity() for _ in keys]
    return sign_payload(
        statement.signed_bytes, PAYLOAD_TYPE, list(keys), who, timestamper=timestamper
    )


def write_certificate(path: str | Path, envelope: Mapping[str, Any]) -> Path:
    """Write a signed envelope atomically as ``gradient_certificate.json``."""
    return atomic_write_json(path, dict(envelope))


def subjects_from_paths(artifacts: Mapping[str, str | Path]) -> dict[str, str]:
    """Hash artifacts into ``{subject name: sha256}``, exactly as the verifier will read them.

    ``artifacts`` maps a role-neutral name (``model.onnx``) to a path. A directory becomes one
    subject per regular file, named ``name/relative/path``; a directory that is empty or holds
    a symbolic link or special file is refused.
    """
    subjects: dict[str, str] = {}
    for name, raw_path in artifacts.items():
        name, path = artifact_name_and_path((name, raw_path))
        try:
            if path.is_dir():
                listing = hash_directory(path)
                if listing.refused:
                    rel, why = listing.refused[0]
                    raise InputError(
                        f"{path / rel} is {why}; a certified directory holds only files"
                    )
                if not listing.digests:
                    raise InputError(f"artifact directory {path} holds no files")
                subjects.update({f"{name}/{rel}": d for rel, d in listing.digests.items()})
                continue
            digest = hash_regular_file(path)
        except FileNotFoundError:
            raise InputError(f"artifact {path} does not exist", hint="check the path") from None
        except OSError as exc:
            raise InputError(f"cannot read artifact {path}: {exc.strerror}") from None
        if digest is None:
            raise InputError(f"artifact {path} is not a regular file")
        subjects[name] = digest
    return subjects


def build_statement(
    *,
    subjects: Mapping[str, str],
    model: ModelIdentity | Mapping[str, Any],
    policy: PolicyRef | Mapping[str, Any],
    verdict: Verdict,
    issued_at: datetime | None = None,
    expires_in: timedelta = timedelta(days=365),
    certificate_id: str | None = None,
    environment: Mapping[str, Any] | None = None,
    deployment: DeploymentEnvelope | Mapping[str, Any] | None = None,
    **sections: Any,
) -> Statement:
    """Build a validated statement.

    ``subjects`` maps names to sha256 hex (see :func:`subjects_from_paths`); ``sections`` fills
    the loosely typed predicate sections (``operators=...``, ``checks=...``, ``findings=...``,
    ``waivers=...``, ``evidence_digest=...``, ``onnx_mapping=...``, ``model_metrics=...``,
    ``modules=...``, ``evidence_provenance=...``, ``extensions=...``). Raises :class:`InputError` if anything is invalid.
    """
    issued = (issued_at or datetime.now(timezone.utc)).replace(microsecond=0)
    if expires_in <= timedelta(0):
        raise InputError(
            f"expiry {expires_in} is not in the future", hint="use a positive --expires-in"
        )
    predicate: dict[str, Any] = {
        "certificate_id": certificate_id or str(uuid.uuid4()),
        "model": model if isinstance(model, Mapping) else model.model_dump(),
        "issued_at": format_timestamp(issued),
        "expires_at": format_timestamp(issued + expires_in),
        "verdict": verdict,
        "policy": policy if isinstance(policy, Mapping) else policy.model_dump(),
        "environment": dict(environment or {}),
        **sections,
    }
    if deployment is not None:
        predicate["deployment"] = (
            deployment if isinstance(deployment, Mapping) else deployment.model_dump()
        )
    data = {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": digest}}
            for name, digest in sorted(subjects.items())
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }
    return Statement.from_json_dict(data, source="the statement being built")
