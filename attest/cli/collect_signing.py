"""``attest collect --key``: the collector's key and identity, and the evidence it signs.

The options (``--key --name --role --target-name --require-signed``), the key loaded before
any work, the statement written beside the evidence by
:func:`attest.collection.provenance.sign_evidence`, and the line collect prints: who signed
it, or that it is unsigned. With ``--ray --targets`` each node signs its own target's
evidence with its own key (:mod:`attest.collection.cluster.node_signing`): ``--key`` is
refused there, and the lines name each target's collector.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from attest.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from attest.certificate.signing import PrivateKey
    from attest.evidence.model import Evidence

__all__ = [
    "CollectorSigning",
    "collector_options",
    "load_collector",
    "sign_collected",
    "signed_summary",
    "target_signed_lines",
]

F = TypeVar("F", bound=Callable[..., Any])


def collector_options(command: F) -> F:
    """The options naming the collector's key and identity."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


_OPTIONS = [
    click.option(
        "--key",
        "key_path",
        default=None,
        type=click.Path(path_type=Path, dir_okay=False),
        help="Collector's private key: sign the evidence into STEM.intoto.json beside it "
        "(passphrase from ATTEST_KEY_PASSPHRASE or a prompt). Without it the evidence is unsigned.",
    ),
    click.option(
        "--name",
        "collector_name",
        default=None,
        help="With --key: the collector's name in the statement [default: the key file's stem].",
    ),
    click.option(
        "--role",
        "collector_role",
        default="collector",
        show_default=True,
        help="With --key: the role the collector states (the trust store decides what counts).",
    ),
    click.option(
        "--target-name",
        default=None,
        metavar="NAME",
        help="With --key: the target name the statement binds (certify --evidence NAME=FILE) "
        "[default: the hardware target measured, e.g. cpu:x86_64:avx2].",
    ),
    click.option(
        "--require-signed",
        is_flag=True,
        help="Fail unless the evidence is signed. With --ray --targets: fail a target whose "
        "node has no collector key (always so when targets.yaml names a collector_key).",
    ),
]


@dataclass(frozen=True)
class CollectorSigning:
    key: PrivateKey
    name: str
    role: str
    target: str | None


def load_collector(
    key_path: Path | None,
    name: str | None,
    role: str,
    target: str | None,
    merge: bool,
    targets_file: Path | None,
    require_signed: bool = False,
) -> CollectorSigning | None:
    """The collector's key and identity, loaded before any work (a wrong passphrase costs
    nothing); ``None`` without --key."""
    if targets_file is not None and (
        key_path is not None or name is not None or target is not None or role != "collector"
    ):
        raise InputError(
            "with --ray --targets each target's evidence is signed on the node that measured "
            "it, with that node's collector key: --key, --name, --role and --target-name would "
            "sign on this machine",
            hint="name the key's path on the nodes in targets.yaml (collector_key:, "
            "collector_name:) or set ATTEST_COLLECTOR_KEY on them (docs/scale.md)",
        )
    if merge and (key_path is not None or require_signed):
        raise InputError(
            "--key and --require-signed sign what this machine measured, not a merge",
            hint="sign each target's collect; certify --evidence takes each target's file",
        )
    if key_path is None:
        if name is not None or target is not None or role != "collector":
            raise InputError("--name, --role and --target-name name the signer: they need --key")
        if require_signed and targets_file is None:
            raise InputError(
                "--require-signed: this collect would be unsigned (no --key)",
                hint="attest collect SPEC --key COLLECTOR.key -o evidence.json",
            )
        return None
    from attest.certificate.signing import load_private_key

    return CollectorSigning(load_private_key(key_path), name or key_path.stem, role, target)


def sign_collected(
    out: Path,
    spec: Path,
    signing: CollectorSigning,
    evidence: Evidence,
    started: datetime,
    workers: int,
    ray_address: str | None,
) -> Path:
    from attest.collection.provenance import dispatch_of, sign_evidence

    return sign_evidence(
        out,
        spec,
        signing.key,
        started_at=started,
        name=signing.name,
        role=signing.role,
        target=signing.target,
        dispatch=dispatch_of(evidence, workers, ray_address),
    )


def signed_summary(signing: CollectorSigning | None, statement: Path | None, merge: bool) -> str:
    """The line collect prints about the evidence's signature."""
    if signing is not None and statement is not None:
        return (
            f"  signed by {signing.name} ({signing.role}, key {signing.key.keyid[:16]}): "
            f"{statement}"
        )
    return (
        "  UNSIGNED: "
        + ("a merge is never signed" if merge else "no --key")
        + ", so certify cannot tell who collected this evidence (a policy requiring signed "
        "evidence refuses it)"
    )


def target_signed_lines(signed_by: dict[str, str | None]) -> list[str]:
    """The lines ``collect --ray --targets`` prints about each target's signature."""
    return [
        f"  target {name}: signed on its node by {who}"
        if who is not None
        else f"  target {name}: UNSIGNED: its node has no collector key (a policy requiring "
        "signed evidence refuses it)"
        for name, who in signed_by.items()
    ]
