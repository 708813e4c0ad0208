"""Signing each target's evidence on the node that measured it (``attest collect --ray --targets``).

Only a key's *path* travels with the task, never the key: the path a target names in
targets.yaml (``collector_key:``, with ``collector_name:``), else the node's environment
(``ATTEST_COLLECTOR_KEY``, ``ATTEST_COLLECTOR_NAME``). The task reads the file on its node
(passphrase: the node's ``ATTEST_KEY_PASSPHRASE``; never a prompt), before it collects, so a
missing key or a wrong passphrase fails the target at once. After the collect it signs the
target's final evidence bytes with :func:`attest.collection.provenance.sign_evidence` and sends
back the statement's bytes beside the evidence's; the driver writes both as they came
(``OUT_STEM.targets/NAME/evidence.json`` and ``evidence.intoto.json``).

The driver checks what came back (:func:`returned_statement`): the statement must be for this
target and cover exactly the evidence bytes it came with (a plumbing check; whether the key is
trusted is ``attest certify --trust``'s question). A target whose evidence came back unsigned is
refused when signing was asked for: ``attest collect --require-signed``, or any target of
targets.yaml naming a ``collector_key`` (docs/scale.md, "Signing on each node").
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from attest.certificate.evidence_statement import EvidenceStatement
from attest.certificate.signing import PrivateKey, b64decode_strict, load_private_key
from attest.errors import AttestError, CollectError

__all__ = [
    "KEY_ENV",
    "NAME_ENV",
    "NodeCollector",
    "NodeKey",
    "load_node_collector",
    "returned_statement",
    "sign_on_node",
]

KEY_ENV = "ATTEST_COLLECTOR_KEY"  # on a node: the path of its collector's private key
NAME_ENV = "ATTEST_COLLECTOR_NAME"  # on a node: the collector's name [default: the key's stem]


@dataclass(frozen=True)
class NodeKey:
    """What the driver sends about a target's key: the path on the node and the name, as
    targets.yaml gives them (either may be None: the node's environment decides)."""

    path: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class NodeCollector:
    """The key loaded on the node and the collector's name."""

    key: PrivateKey
    name: str
    path: str


def load_node_collector(target: str, configured: NodeKey | None) -> NodeCollector | None:
    """The collector key of this node for ``target``: targets.yaml's path, else
    ``$ATTEST_COLLECTOR_KEY``; None when neither names one (the evidence stays unsigned).
    A key named but not loadable fails the target (:class:`CollectError` naming the host)."""
    configured = configured or NodeKey()
    path = configured.path or os.environ.get(KEY_ENV) or None
    if path is None:
        return None
    where = "targets.yaml collector_key" if configured.path else f"${KEY_ENV}"
    try:
        key = load_private_key(path, prompt=False)
    except AttestError as exc:
        raise CollectError(
            f"target {target}: the collector key on node {socket.gethostname()} ({where}) "
            f"cannot be used: {exc.message}",
            hint=exc.hint or "mount the key file on every node of this target",
        ) from None
    name = configured.name or os.environ.get(NAME_ENV) or Path(path).stem
    return NodeCollector(key=key, name=name, path=path)


def sign_on_node(
    evidence_path: Path,
    spec_path: Path,
    collector: NodeCollector,
    target: str,
    started: datetime,
    address: str,
) -> bytes:
    """Sign the target's evidence file as written on this node; the statement's bytes."""
    from attest.collection.provenance import dispatch_of, sign_evidence
    from attest.evidence.model import load_evidence

    statement = sign_evidence(
        evidence_path,
        spec_path,
        collector.key,
        started_at=started,
        name=collector.name,
        target=target,
        dispatch=dispatch_of(load_evidence(evidence_path), 1, address),
    )
    return statement.read_bytes()


def returned_statement(target: str, evidence: bytes, statement: bytes | None) -> str | None:
    """The driver's check of a target's statement as it came back: None when unsigned, else
    ``NAME (key KEYID) on HOST``. A statement for another target or other evidence bytes fails
    the target (:class:`CollectError`)."""
    if statement is None:
        return None
    try:
        envelope = json.loads(statement)
        parsed = EvidenceStatement.model_validate_json(b64decode_strict(envelope["payload"]))
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        raise CollectError(
            f"target {target}: the evidence statement its node sent back is not readable: "
            f"{str(exc).splitlines()[0][:200]}",
            hint="check that every node runs the same attest version",
        ) from None
    predicate = parsed.predicate
    problem = (
        f"is for target {predicate.target!r}"
        if predicate.target != target
        else "covers other evidence bytes than came with it"
        if parsed.digest_of("evidence") != hashlib.sha256(evidence).hexdigest()
        else None
    )
    if problem is not None:
        raise CollectError(
            f"target {target}: the statement its node sent back {problem}",
            hint="collect again; the node signs the evidence it sends",
        )
    return f"{predicate.collector.name} (key {predicate.collector.keyid[:16]}) on {predicate.host}"
