"""Which evidence ``attest certify --evidence`` accepts: its collector's signed statement, held
to the trust store, the files certified, the target name, the policy's age and version limits.

For each ``--evidence FILE`` the statement ``STEM.intoto.json`` beside it
(:mod:`attest.certificate.evidence_statement`, written by ``attest collect --key``) is read
and, in this order:

1. parsed strictly: a DSSE envelope, payload type in-toto, the payload valid against the
   shipped ``evidence-statement.schema.json`` (EVIDENCE_STATEMENT_INVALID);
2. with a trust store (``certify --trust``), its signature must verify under a key that the
   store gives one of the policy's ``evidence.collectors`` roles, or whose name it lists
   (default: the ``collector`` role), valid and unrevoked at the signed ``finished_at``
   (EVIDENCE_SIGNATURE_INVALID, EVIDENCE_UNTRUSTED_COLLECTOR), and name that key; a key whose
   entry lists ``targets:`` counts only for a statement of one of them
   (EVIDENCE_TARGET_NOT_ALLOWED);
3. its subjects must be the evidence file's bytes (EVIDENCE_EDITED) and the spec, weights
   and probe being certified (EVIDENCE_SUBJECT_MISMATCH, naming which), its model the spec's
   (EVIDENCE_MODEL_MISMATCH), its target the name the evidence is certified under
   (EVIDENCE_TARGET_MISMATCH), its attest version not below ``evidence.min_attest_version``
   (EVIDENCE_TOOL_TOO_OLD), its ``finished_at`` within ``evidence.max_age`` and not in the
   future (EVIDENCE_TOO_OLD, EVIDENCE_FROM_THE_FUTURE).

A file without a statement is unsigned: refused when the policy sets
``evidence.require_signed`` (EVIDENCE_UNSIGNED), else certified with ``signed: false``. A
statement present is always checked as far as the trust store allows: without one, steps 1 and
3 still run (a statement that does not cover the file's bytes is refused) and the record says
``signed: false`` with a note. Every refusal is an :class:`EvidenceProvenanceError` (exit 2,
like certify's other refusals of bad evidence).
"""

from __future__ import annotations

import hashlib
import json
import socket
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from attest.certificate.evidence_statement import COLLECTOR_ROLE, EvidenceStatement, statement_path
from attest.certificate.format import PAYLOAD_TYPE, compare_versions
from attest.certificate.statement import EvidenceProvenance
from attest.core.files import read_bytes_checked
from attest.core.io import MAX_JSON_BYTES, StrictJSONError, loads_strict
from attest.core.times import format_timestamp, parse_timestamp
from attest.core.validation import validation_problems
from attest.errors import EvidenceError
from attest.evidence.model import Evidence
from attest.policy.evidence_rules import EvidenceRules
from attest.policy.model import Policy
from attest.verification.envelope import Rejected, parse_envelope
from attest.verification.signatures import check_signatures
from attest.verification.trust import TrustStore

__all__ = [
    "EvidenceProvenanceError",
    "ReleaseFiles",
    "check_provenance",
    "local_provenance",
    "require_trust_store",
]

FUTURE_SKEW = timedelta(minutes=5)  # a statement finished later than now + this is refused


class EvidenceProvenanceError(EvidenceError):
    """Evidence whose provenance certify refuses; ``code`` names why (module docstring)."""

    def __init__(self, code: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"{code}: {message}", hint=hint)
        self.code = code


@dataclass(frozen=True)
class ReleaseFiles:
    """What is being certified: the spec, weights and probe by role (path, sha256), and the
    spec's model name and version."""

    files: dict[str, tuple[Path, str]]
    model: tuple[str, str]


def rules_of(policy: Policy) -> EvidenceRules:
    return policy.evidence or EvidenceRules()


def require_trust_store(policy: Policy, trust: TrustStore | None) -> None:
    """Refuse before any work when the policy requires signed evidence and no store is given."""
    if trust is None and rules_of(policy).require_signed:
        raise EvidenceProvenanceError(
            "TRUST_STORE_REQUIRED",
            f"policy {policy.id} requires evidence signed by a trusted collector "
            "(evidence.require_signed), and no trust store was given to check the signatures",
            hint="certify --evidence FILE --trust TRUST.yaml, a store whose collector keys were "
            "added with: attest trust add COLLECTOR.pub --role collector",
        )


@cache
def _schema() -> dict[str, Any]:
    path = Path(__file__).resolve().parents[1] / "schemas" / "evidence-statement.schema.json"
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _read_statement(path: Path, source: str) -> tuple[bytes, Any, EvidenceStatement]:
    """The statement file's bytes, envelope and statement, parsed strictly, not yet trusted."""
    raw = read_bytes_checked(
        path, what="evidence statement", max_bytes=MAX_JSON_BYTES, error=EvidenceError
    )
    try:
        envelope = parse_envelope(raw, what=f"the evidence statement {path}")
        if envelope.payload_type != PAYLOAD_TYPE:
            raise Rejected("MALFORMED", f"its payloadType is not {PAYLOAD_TYPE}")
        data = loads_strict(envelope.payload)
    except (Rejected, StrictJSONError) as exc:
        message = exc.message if isinstance(exc, Rejected) else f"payload is not JSON: {exc}"
        raise _invalid(source, path, message) from None
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    error = best_match(Draft202012Validator(_schema()).iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "<root>"
        raise _invalid(source, path, f"{where}: {error.message[:300]}")
    try:
        statement = EvidenceStatement.model_validate(data)
    except ValidationError as exc:
        raise _invalid(source, path, validation_problems(exc)) from None
    return raw, envelope, statement


def _invalid(source: str, path: Path, message: str) -> EvidenceProvenanceError:
    return EvidenceProvenanceError(
        "EVIDENCE_STATEMENT_INVALID",
        f"--evidence {source}: its statement {path} is not a signed evidence statement: {message}",
        hint="collect again with attest collect SPEC --key COLLECTOR.key",
    )


def _collectors(trust: TrustStore, rules: EvidenceRules) -> TrustStore:
    """The store cut to the keys whose signature on evidence counts: one of them must sign."""
    wanted = set(rules.collectors)
    keys = tuple(k for k in trust.keys if wanted & set(k.roles) or k.name in wanted)
    return replace(trust, keys=keys, threshold=1, requirements=())


def _trusted_as(key: Any, rules: EvidenceRules) -> str:
    role = next((r for r in rules.collectors if r in key.roles), None)
    return f"role {role}" if role is not None else f"name {key.name}"


def _check_signature(
    envelope: Any, statement: EvidenceStatement, trust: TrustStore, rules: EvidenceRules, where: str
) -> dict[str, Any]:
    """The collector that counted (:class:`CollectorRef` data); refused unless a collector key
    of ``trust`` signed, valid and unrevoked at the signed finish time, and is the key the
    statement names."""
    allowed = _collectors(trust, rules)
    at = parse_timestamp(statement.predicate.finished_at)
    check = check_signatures(envelope, allowed, at, timedelta(0)) if allowed.keys else None
    if check is not None and not check.problems:
        claimed = statement.predicate.collector
        key = next((k for k in check.counted if k.keyid == claimed.keyid), None)
        if key is None:
            raise EvidenceProvenanceError(
                "EVIDENCE_SIGNATURE_INVALID",
                f"{where}: the statement names collector key {claimed.keyid[:16]} but is signed "
                f"by {', '.join(k.label() for k in check.counted)}",
                hint="collect again; a statement is signed by the key it names",
            )
        target = statement.predicate.target
        if not key.may_vouch_for(target):
            raise EvidenceProvenanceError(
                "EVIDENCE_TARGET_NOT_ALLOWED",
                f"{where}: signed by {key.label()} for target {target!r}, but {trust.source} "
                f"lets that key sign evidence only for target(s) {', '.join(key.targets)}",
                hint="certify each target's evidence as signed by its own node pool's key; if "
                f"this key does collect {target!r}, attest trust targets {key.keyid[:16]} "
                f"--add {target} --trust TRUST.yaml",
            )
        return {"name": claimed.name, "role": claimed.role, "keyid": key.keyid,
                "trusted_as": _trusted_as(key, rules)}  # fmt: skip
    wanted = ", ".join(rules.collectors)
    others = check_signatures(
        envelope, replace(trust, threshold=1, requirements=()), at, timedelta(0)
    )
    if not others.problems:
        key = others.counted[0]
        raise EvidenceProvenanceError(
            "EVIDENCE_UNTRUSTED_COLLECTOR",
            f"{where}: signed by {key.label()}, whose roles in {trust.source} "
            f"({', '.join(key.roles) or 'none'}) and name are not among the policy's evidence "
            f"collectors ({wanted})",
            hint=f"attest trust role {key.keyid[:16]} --add {COLLECTOR_ROLE} --trust TRUST.yaml, "
            "if this key is a collector you trust",
        )
    problems = (check or others).problems
    reasons = "; ".join(f"{c}: {m}" for c, m in problems)
    untrusted = all(code == "UNTRUSTED_KEY" for code, _ in problems)
    raise EvidenceProvenanceError(
        "EVIDENCE_UNTRUSTED_COLLECTOR" if untrusted else "EVIDENCE_SIGNATURE_INVALID",
        f"{where}: no signature by a trusted collector ({wanted}) counts: {reasons}",
        hint=f"add the collector's key with attest trust add COLLECTOR.pub --role {COLLECTOR_ROLE}"
        " if you trust it"
        if untrusted
        else "the statement was changed after signing: collect the evidence again",
    )


def _check_subjects(
    statement: EvidenceStatement, evidence_sha256: str, release: ReleaseFiles, where: str
) -> None:
    if statement.digest_of("evidence") != evidence_sha256:
        raise EvidenceProvenanceError(
            "EVIDENCE_EDITED",
            f"{where}: the evidence file is not the one its collector signed (its sha256 "
            f"{evidence_sha256[:16]} differs from the statement's "
            f"{statement.digest_of('evidence')[:16]}): it was changed after collection",
            hint="certify the evidence exactly as attest collect wrote it, or collect again",
        )
    for role, (path, digest) in release.files.items():
        if statement.digest_of(role) != digest:
            raise EvidenceProvenanceError(
                "EVIDENCE_SUBJECT_MISMATCH",
                f"{where}: the statement is for other {role} ({statement.name_of(role)}, sha256 "
                f"{statement.digest_of(role)[:16]}) than the {role} being certified ({path}, "
                f"sha256 {digest[:16]})",
                hint="certify with the spec, weights and probe the evidence was collected from",
            )
    model = statement.predicate.model
    if (model.name, model.version) != release.model:
        raise EvidenceProvenanceError(
            "EVIDENCE_MODEL_MISMATCH",
            f"{where}: the statement is for model {model.name} {model.version}, not "
            f"{release.model[0]} {release.model[1]}",
        )


def _check_limits(
    statement: EvidenceStatement, target: str, rules: EvidenceRules, at: datetime, where: str
) -> None:
    predicate = statement.predicate
    if predicate.target != target:
        raise EvidenceProvenanceError(
            "EVIDENCE_TARGET_MISMATCH",
            f"{where}: its collector signed it for target {predicate.target!r}, and it is "
            f"certified as target {target!r}; a statement is not reusable for another target",
            hint=f"certify it as --evidence {predicate.target}=FILE, or collect the target "
            "again with attest collect --target-name NAME",
        )
    minimum = rules.min_attest_version
    if minimum is not None and compare_versions(predicate.attest_version, minimum) < 0:
        raise EvidenceProvenanceError(
            "EVIDENCE_TOOL_TOO_OLD",
            f"{where}: collected with attest {predicate.attest_version}; the policy accepts "
            f"{minimum} or later (evidence.min_attest_version)",
            hint="collect again with a current attest",
        )
    _check_age(parse_timestamp(predicate.finished_at), rules, at, where, "signed")


def _check_age(
    finished: datetime, rules: EvidenceRules, at: datetime, where: str, how: str
) -> None:
    if finished > at + FUTURE_SKEW:
        raise EvidenceProvenanceError(
            "EVIDENCE_FROM_THE_FUTURE",
            f"{where}: its {how} finish time {format_timestamp(finished)} is after the certify "
            f"time {format_timestamp(at)}",
            hint="check the collector's clock, and collect again",
        )
    limit = rules.max_age_delta
    if limit is not None and at - finished > limit:
        raise EvidenceProvenanceError(
            "EVIDENCE_TOO_OLD",
            f"{where}: collected {format_timestamp(finished)}, more than {rules.max_age} before "
            f"the certify time {format_timestamp(at)} (evidence.max_age)",
            hint="collect the target again",
        )


def check_provenance(
    source: Path,
    evidence: Evidence,
    evidence_sha256: str,
    *,
    target: str,
    release: ReleaseFiles,
    policy: Policy,
    trust: TrustStore | None,
    at: datetime | None = None,
) -> EvidenceProvenance:
    """The provenance record of one ``--evidence`` file certified as ``target``, or
    :class:`EvidenceProvenanceError` (the module docstring lists the checks)."""
    rules = rules_of(policy)
    now = (at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    where = f"--evidence {source}"
    path = statement_path(source)
    digest = {"sha256": evidence_sha256}
    if not path.exists():
        if rules.require_signed:
            raise EvidenceProvenanceError(
                "EVIDENCE_UNSIGNED",
                f"{where} is unsigned (no statement {path.name} beside it); policy {policy.id} "
                "requires evidence signed by a trusted collector (evidence.require_signed)",
                hint="collect it with attest collect SPEC --key COLLECTOR.key -o FILE on the "
                "machine that measures it",
            )
        created = _created_at(evidence)
        if created is not None:
            _check_age(created, rules, now, where, "recorded (unsigned)")
        return EvidenceProvenance(
            collected_by="collect",
            signed=False,
            evidence_digest=digest,  # type: ignore[arg-type]
            finished_at=format_timestamp(created) if created is not None else None,
            note="unsigned: no collector statement; nobody vouches for who collected it or where",
        )
    raw, envelope, statement = _read_statement(path, str(source))
    collector = None
    if trust is not None:
        collector = _check_signature(envelope, statement, trust, rules, where)
    else:
        require_trust_store(policy, trust)  # certify refused this already, before any work
    _check_subjects(statement, evidence_sha256, release, where)
    _check_limits(statement, target, rules, now, where)
    predicate = statement.predicate
    return EvidenceProvenance.model_validate(
        {
            "collected_by": "collect",
            "signed": collector is not None,
            "evidence_digest": digest,
            "statement_digest": {"sha256": hashlib.sha256(raw).hexdigest()},
            "collector": collector,
            "host": predicate.host,
            "started_at": predicate.started_at,
            "finished_at": predicate.finished_at,
            "note": None
            if collector is not None
            else "its collector statement was not checked: certify was given no trust store",
        }
    )


def _created_at(evidence: Evidence) -> datetime | None:
    try:
        return parse_timestamp(evidence.created_at)
    except ValueError:
        return None


def local_provenance(
    evidence_sha256: str, started: datetime, finished: datetime
) -> EvidenceProvenance:
    """The record of evidence this certify run collected itself: no collector statement; the
    certificate's own signature vouches for where and when."""
    return EvidenceProvenance(
        collected_by="certify",
        signed=False,
        evidence_digest={"sha256": evidence_sha256},  # type: ignore[arg-type]
        host=socket.gethostname() or None,
        started_at=format_timestamp(started),
        finished_at=format_timestamp(finished),
        note="collected by this certify run; the certificate's signature vouches for it",
    )
