"""``attest collect --key``: the collector's key and identity, and the evidence it signs.

The four options (``--key --name --role --target-name``), the key loaded before any work, the
statement written beside the evidence by :func:`attest.collection.provenance.sign_evidence`,
and the line collect prints: who signed it, or that it is unsigned.
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
) -> CollectorSigning | None:
    """The collector's key and identity, loaded before any work (a wrong passphrase costs
    nothing); ``None`` without --key."""
    if key_path is None:
        if name is not None or target is not None or role != "collector":
            raise InputError("--name, --role and --target-name name the signer: they need --key")
        return None
    if merge:
        raise InputError(
            "--key signs what this machine measured, not a merge",
            hint="sign each target's collect; certify --evidence takes each target's file",
        )
    if targets_file is not None:
        raise InputError(
            "--key with --ray --targets is not supported yet: each target's evidence must be "
            "signed on the node that measured it, with that node's key",
            hint="collect each target with attest collect SPEC --key NODE.key on its machine",
        )
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
