"""What one ledger entry records, and the exact bytes that become its Merkle leaf.

An entry says what happened to a certificate (issued, verified, rejected, revoked), which
certificate (id and the sha256 of the certificate file), which model (name, version, digest of
the model artifact) and policy (digest), who or which host, the result with reason codes, and
when. By construction it holds no patient data: only identifiers, digests and short names, and
reason *codes* (never a verifier's free-text message, which may quote paths).

The leaf data is the RFC 8785 canonical JSON of the entry (:attr:`LedgerEntry.leaf_data`
through :func:`leaf_data_of`, the one place that makes those bytes); :func:`entry_from_leaf_data`
refuses leaf data that is not exactly that encoding, so two different byte strings can never
stand for one entry.
"""

from __future__ import annotations

import base64
import binascii
import getpass
import json
import os
import re
import socket
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from attest._version import __version__
from attest.certificate.bundle import BundleError, envelope_of
from attest.certificate.signing import canonical_json, canonical_json_text
from attest.core.files import read_bytes_checked
from attest.core.io import MAX_JSON_BYTES, StrictJSONError, loads_strict, sha256_bytes
from attest.core.validation import validation_problems
from attest.errors import AttestError, InputError, LedgerError

__all__ = [
    "ENTRY_FORMAT",
    "CertificateRef",
    "Event",
    "LedgerEntry",
    "ModelRef",
    "SubjectDigest",
    "entry_for_certificate",
    "entry_for_verification",
    "entry_from_leaf_data",
    "is_reason_code",
    "leaf_data_of",
    "utc_now",
]

ENTRY_FORMAT: Final = "gradient-attest/ledger-entry/v1"
ACTOR_ENV = "ATTEST_ACTOR"

Event = Literal["issued", "verified", "rejected", "revoked"]
Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
# Short printable text: no control characters, bounded length.
ShortText = Annotated[
    str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")
]
ReasonCode = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]{0,63}$")]
Timestamp = Annotated[
    str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")
]
RevocationText = Annotated[
    str, StringConstraints(min_length=4, max_length=40_000, pattern=r"^[A-Za-z0-9+/]+={0,2}$")
]
_REASON_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CertificateRef(_Strict):
    """Which certificate: the id in its predicate and the sha256 of the certificate file."""

    id: ShortText | None = None
    sha256: Sha256Hex | None = None


class ModelRef(_Strict):
    """Which model: name and version from the predicate, digest of the model artifact."""

    name: ShortText | None = None
    version: ShortText | None = None
    digest: Sha256Hex | None = Field(
        default=None,
        description="sha256 of the certified model artifact: the ONNX subject if any, else the weights",
    )


class SubjectDigest(_Strict):
    """One subject of the certificate: artifact name and sha256 (never its content)."""

    name: ShortText
    sha256: Sha256Hex


class LedgerEntry(_Strict):
    """One audit record. ``leaf_data`` (RFC 8785 canonical JSON) is what the Merkle leaf hashes."""

    format: Literal["gradient-attest/ledger-entry/v1"] = ENTRY_FORMAT
    event: Event
    time: Timestamp
    certificate: CertificateRef = Field(default_factory=CertificateRef)
    model: ModelRef = Field(default_factory=ModelRef)
    policy_digest: Sha256Hex | None = None
    subjects: list[SubjectDigest] = Field(default_factory=list, max_length=256)
    result: Literal["pass", "fail"] | None = Field(
        default=None,
        description="issued: the certificate's verdict; verified: pass; rejected: fail",
    )
    reason_codes: list[ReasonCode] = Field(default_factory=list, max_length=32)
    certificate_checked: bool = Field(
        description=(
            "true when the verifier (attest verify) checked the certificate's signatures against a "
            "trust store before this entry was written; false when `attest ledger append` recorded "
            "the certificate's own claims without verifying them"
        )
    )
    actor: ShortText | None = None
    host: ShortText | None = None
    tool_version: ShortText = __version__
    revocation: RevocationText | None = Field(
        default=None,
        description="revoked: the signed revocation statement (base64 of its DSSE envelope), "
        "which attest verify --ledger checks; absent from the leaf data when not set",
    )

    def plain(self) -> dict[str, Any]:
        """The entry as JSON data; ``revocation`` only when set, so entries written before it
        existed keep their leaf bytes."""
        return _plain(self.model_dump(mode="json"))

    @property
    def leaf_data(self) -> bytes:
        """The RFC 8785 canonical JSON of the entry: the bytes the Merkle leaf commits to."""
        return leaf_data_of(self.model_dump(mode="json"))


def _plain(dumped: dict[str, Any]) -> dict[str, Any]:
    if dumped.get("revocation") is None:
        dumped.pop("revocation", None)
    return dumped


def leaf_data_of(dumped: dict[str, Any]) -> bytes:
    """The leaf data of the entry whose ``model_dump(mode="json")`` is ``dumped`` (which is
    consumed): the one place that makes those bytes, for a caller that has the dump already.
    An entry holds no numbers, so :func:`canonical_json_text` gives its RFC 8785 bytes."""
    return canonical_json_text(_plain(dumped))


MAX_LEAF_BYTES = 64 * 1024


def entry_from_leaf_data(data: bytes) -> LedgerEntry:
    """Parse leaf data back into an entry, refusing anything that is not its canonical form.

    A log's leaf may also be a service-written leaf: read those with
    :func:`attest.ledger.writers.entry_of_leaf`. pydantic's JSON parser reads the bytes (it keeps the last of duplicate keys, but then the
    re-encoding below differs from ``data``, so duplicates are refused too).
    """
    if len(data) > MAX_LEAF_BYTES:
        raise LedgerError(f"leaf data is {len(data)} bytes, over the {MAX_LEAF_BYTES}-byte limit")
    try:
        entry = LedgerEntry.model_validate_json(data)
    except ValidationError as exc:
        raise LedgerError(
            f"leaf data is not a valid ledger entry: {validation_problems(exc, limit=3)}"
        ) from None
    if not _is_canonical(entry, data):
        raise LedgerError("leaf data is not the RFC 8785 canonical encoding of its entry")
    return entry


def _is_canonical(entry: LedgerEntry, data: bytes) -> bool:
    """``entry.leaf_data == data``, with a fast first look for ``ledger verify``.

    For an entry's value types (strings without control characters, booleans, null, lists and
    objects with ASCII keys; no numbers) the standard library's sorted, compact, non-ASCII-
    preserving encoding is byte-identical to RFC 8785 (a test holds the two encoders to that on
    generated entries). It is about four times faster than the ``rfc8785`` package, so it
    decides the common case; whenever it disagrees with ``data``, ``rfc8785`` decides.
    """
    plain = entry.plain()
    try:
        quick = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8"
        )
    except UnicodeEncodeError:
        quick = b""
    if quick == data:
        return True
    try:
        return canonical_json(plain) == data
    except AttestError:  # not representable as canonical JSON at all
        return False


def utc_now() -> str:
    """The current time as RFC 3339 UTC with microseconds, e.g. ``2026-01-31T12:00:00.000001Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _who() -> tuple[str | None, str | None]:
    """``(actor, host)``: ``$ATTEST_ACTOR`` or the login name, and the host name."""
    actor = os.environ.get(ACTOR_ENV)
    if not actor:
        try:
            actor = getpass.getuser()
        except (OSError, KeyError):  # no login name in some containers
            actor = None
    try:
        host: str | None = socket.gethostname() or None
    except OSError:
        host = None
    return _clip(actor), _clip(host)


def _clip(value: Any) -> str | None:
    """A value as ShortText, or None when it is missing or unusable."""
    if not isinstance(value, str):
        return None
    text = "".join(ch for ch in value if ch >= " " and ch != "\x7f")[:256]
    return text or None


def _hex_digest(value: Any) -> str | None:
    """A sha256 hex digest from ``"hex"``, ``"sha256:hex"`` or ``{"sha256": "hex"}``."""
    if isinstance(value, Mapping):
        value = value.get("sha256")
    if not isinstance(value, str):
        return None
    text = value.removeprefix("sha256:").lower()
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text
    return None


def _subjects(raw: Any) -> list[SubjectDigest]:
    out: list[SubjectDigest] = []
    if not isinstance(raw, list):
        return out
    for item in raw[:256]:
        if not isinstance(item, Mapping):
            continue
        name = _clip(item.get("name"))
        digest = _hex_digest(item.get("digest") if "digest" in item else item.get("sha256"))
        if name and digest:
            out.append(SubjectDigest(name=name, sha256=digest))
    return out


def _model_digest(subjects: list[SubjectDigest]) -> str | None:
    """The model artifact's digest: the ONNX subject if there is one, else the weights."""
    for suffixes in ((".onnx",), _WEIGHT_SUFFIXES):
        for subject in subjects:
            if subject.name.lower().endswith(suffixes):
                return subject.sha256
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _statement_of(envelope: Any) -> Mapping[str, Any]:
    """The in-toto statement inside a DSSE envelope, or ``{}`` when it cannot be read."""
    payload = _mapping(envelope).get("payload")
    if not isinstance(payload, str):
        return {}
    try:
        return _mapping(loads_strict(base64.b64decode(payload, validate=True)))
    except (binascii.Error, ValueError):
        return {}


def entry_for_certificate(
    certificate_path: str | Path,
    *,
    event: Event = "issued",
    reason_codes: list[str] | None = None,
    actor: str | None = None,
    time: str | None = None,
    revocation: bytes | None = None,
) -> LedgerEntry:
    """An entry for a certificate file, read strictly but NOT verified (``certificate_checked``
    is false): the ledger records what the certificate claims; ``attest verify --ledger``
    records a checked verification. ``revocation`` (event ``revoked``): the signed revocation
    statement's bytes, kept in the entry."""
    path = Path(certificate_path)
    raw = read_bytes_checked(path, what="certificate", max_bytes=MAX_JSON_BYTES)
    try:
        envelope = envelope_of(loads_strict(raw))  # the Sigstore bundle form too
    except StrictJSONError as exc:
        raise InputError(f"certificate {path} is not valid JSON: {exc}") from None
    except BundleError as exc:
        raise InputError(f"certificate {path} is not a usable Sigstore bundle: {exc}") from None
    if not isinstance(envelope, Mapping) or not isinstance(envelope.get("payload"), str):
        raise InputError(
            f"certificate {path} is not a DSSE envelope (no string 'payload')",
            hint="pass the gradient_certificate.json written by attest certify",
        )
    statement = _statement_of(envelope)
    if not statement:
        raise InputError(f"certificate {path}: the payload is not base64 of a JSON statement")
    predicate = _mapping(statement.get("predicate"))
    model = _mapping(predicate.get("model"))
    subjects = _subjects(statement.get("subject"))
    verdict = predicate.get("verdict")
    codes = list(reason_codes or [])
    if event == "issued" and verdict == "fail":
        codes.append("POLICY_FAILED")
    who_actor, host = _who()
    try:
        return LedgerEntry(
            event=event,
            time=time or utc_now(),
            certificate=CertificateRef(
                id=_clip(predicate.get("certificate_id")), sha256=sha256_bytes(raw)
            ),
            model=ModelRef(
                name=_clip(model.get("name")),
                version=_clip(model.get("version")),
                digest=_hex_digest(model.get("digest")) or _model_digest(subjects),
            ),
            policy_digest=_hex_digest(_mapping(predicate.get("policy")).get("digest")),
            subjects=subjects,
            result=verdict if verdict in ("pass", "fail") and event == "issued" else None,
            reason_codes=codes,
            certificate_checked=False,
            actor=_clip(actor) or who_actor,
            host=host,
            revocation=None if revocation is None else base64.b64encode(revocation).decode(),
        )
    except ValidationError as exc:
        raise InputError(
            f"cannot record certificate {path}: {validation_problems(exc, limit=3)}"
        ) from None


def entry_for_verification(
    report: Mapping[str, Any], *, actor: str | None = None, time: str | None = None
) -> LedgerEntry:
    """An entry for the verifier's JSON report: ``verified`` (result pass) or ``rejected``
    (result fail, with the reason codes). Missing keys are left empty."""
    verified = report.get("verified") is True
    certificate = _mapping(report.get("certificate"))
    # The verifier puts model and policy beside "certificate"; accept them inside it too.
    model = _mapping(certificate.get("model") or report.get("model"))
    policy = (
        certificate.get("policy_digest")
        or _mapping(certificate.get("policy")).get("digest")
        or report.get("policy_digest")
        or _mapping(report.get("policy")).get("digest")
    )
    subjects = _subjects(certificate.get("subjects") or certificate.get("subject"))
    codes: list[str] = []
    reasons = report.get("reasons")
    for reason in reasons if isinstance(reasons, list) else []:
        code = _mapping(reason).get("code")
        if isinstance(code, str) and code not in codes:
            codes.append(code)
    who_actor, host = _who()
    try:
        return LedgerEntry(
            event="verified" if verified else "rejected",
            time=time or utc_now(),
            certificate=CertificateRef(
                id=_clip(certificate.get("id") or certificate.get("certificate_id")),
                sha256=_hex_digest(certificate.get("sha256")),
            ),
            model=ModelRef(
                name=_clip(model.get("name")),
                version=_clip(model.get("version")),
                digest=_hex_digest(model.get("digest")) or _model_digest(subjects),
            ),
            policy_digest=_hex_digest(policy),
            subjects=subjects,
            result="pass" if verified else "fail",
            reason_codes=[c for c in codes if is_reason_code(c)][:32],
            # False only when verification stopped before a verdict (an unusable input)
            certificate_checked=report.get("certificate_checked", True) is not False,
            actor=_clip(actor) or who_actor,
            host=host,
        )
    except ValidationError as exc:
        raise LedgerError(
            f"cannot record the verification: {validation_problems(exc, limit=3)}"
        ) from None


def is_reason_code(text: str) -> bool:
    """True for an UPPER_SNAKE reason code such as ``SIGNATURE_INVALID``."""
    return _REASON_CODE.fullmatch(text) is not None
