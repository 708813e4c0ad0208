"""``--ledger URL`` on ``attest verify`` and ``attest certify``: where and as whom events are
submitted (through the offline spool), the revocations the remote log holds, and the witness
policy a trust store names. Click only: attest.ledger.service does the work."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from attest.core.text import safe_text
from attest.errors import InputError

if TYPE_CHECKING:
    from attest.certificate.signing import PrivateKey, PublicKey
    from attest.ledger.entries import LedgerEntry
    from attest.ledger.witness.cosignature import WitnessPolicy
    from attest.verification.outcome import VerificationReport


def witness_policy(trust_path: Path | None) -> WitnessPolicy | None:
    """The witness policy of ``--trust`` (None without it)."""
    if trust_path is None:
        return None
    from attest.ledger.witness.cosignature import WitnessPolicy
    from attest.verification.trust import load_trust_store

    store = load_trust_store(trust_path)
    return WitnessPolicy.of(store.witnesses, store.witness_quorum)


# -- `attest verify/certify --ledger URL`: submitting through the offline spool ------------------


@dataclass(frozen=True)
class RemoteLedger:
    """Where and as whom ``--ledger URL`` submits."""

    url: str
    client: str
    key: PrivateKey
    log_key: tuple[PublicKey, str | None] | None
    tiles: str | None = None  # --ledger-tiles: where the log's reads are served

    @property
    def reads(self) -> str:
        """The URL the log's checkpoint, tiles and clients are read from."""
        return self.tiles or self.url


def remote_ledger(
    url: str,
    client: str | None,
    client_key: Path | None,
    log_key: Path | None,
    tiles: str | None = None,
) -> RemoteLedger:
    """Check the options of ``--ledger URL`` before any work is done (usage errors, exit 2)."""
    from attest.certificate.signing import load_private_key
    from attest.ledger.checkpoint import load_checkpoint_key

    if not client or client_key is None:
        raise InputError(
            "--ledger URL needs --ledger-client NAME and --ledger-client-key KEY",
            hint="the service accepts writes signed by the clients listed in its clients.yaml",
        )
    try:
        import httpx  # noqa: F401  (the HTTP client of --ledger URL, imported where it is used)
    except ModuleNotFoundError:
        raise InputError(
            "--ledger URL needs the httpx package",
            hint="pip install 'gradient-attest[ledger-service]' (or httpx alone)",
        ) from None
    if tiles is not None and not tiles.startswith(("http://", "https://")):
        raise InputError(f"--ledger-tiles {safe_text(tiles)!r} is not an http:// or https:// URL")
    key = load_private_key(client_key)
    return RemoteLedger(
        url, client, key, load_checkpoint_key(log_key) if log_key is not None else None, tiles
    )


def submit_remote(target: RemoteLedger, entry: LedgerEntry) -> int | None:
    """Spool ``entry`` durably, then submit everything pending for the service in order;
    says on stderr what happened. Unreachable: the events stay queued (not an error). A
    refusal by the service is a :class:`LedgerError`. Returns the index ``entry`` was recorded
    at once proven, else None."""
    from attest.errors import LedgerError
    from attest.ledger.service.spool import Spool, default_spool_path

    path = default_spool_path()
    with Spool(path) as spool:
        mine = spool.enqueue(target.url, target.client, entry)
        log_key, log_name = target.log_key or (None, None)
        result = spool.flush(
            target.url,
            target.key,
            log_key=log_key,
            log_key_name=log_name,
            client_name=target.client,
        )
    for seq, index in result.submitted:
        click.echo(
            f"ledger: event {seq} recorded at {safe_text(target.url)} as entry {index}"
            " (proven in the log's signed checkpoint)",
            err=True,
        )
    for seq, reason in result.unproven:
        click.echo(
            f"ledger: event {seq} submitted, not proven: {safe_text(reason, 500)}; kept pending"
            f" in {path} until attest ledger flush {safe_text(target.url)} --key LEDGER.pub"
            " proves it",
            err=True,
        )
    if result.unreachable:
        click.echo(
            f"ledger: {safe_text(result.unreachable, 500)}; {result.pending} event(s) queued in "
            f"{path}, sent on the next run with --ledger {safe_text(target.url)}",
            err=True,
        )
    if result.refused:
        seq, reason = result.refused[-1]
        raise LedgerError(
            f"the ledger service refused event {seq}: {reason}",
            hint="check --ledger-client and --ledger-client-key against the service's clients.yaml",
        )
    return next((index for seq, index in result.submitted if seq == mine), None)


# -- `attest verify --ledger URL`: the revocations the remote log holds ----------------------------


# the reason code (listed in attest.verification.verifier.REASON_CODES)
REVOCATION_STATUS_UNKNOWN = "REVOCATION_STATUS_UNKNOWN"


def write_ledger_proof(url: str, certificate: Path, index: int | None, out: Path) -> None:
    """``certify --ledger URL --ledger-proof-out FILE``: the C2SP tlog-proof of the issued
    entry just recorded at ``index`` (None: it was not recorded yet), fetched from the log's
    tiles and checked against its checkpoint before it is written (atomically)."""
    from attest.core.io import atomic_write_text, sha256_file
    from attest.errors import LedgerError
    from attest.ledger.tlog_proof_build import build_tlog_proof

    later = (
        f"fetch it once the entry is recorded: attest ledger proof {safe_text(str(certificate))}"
        f" --ledger {safe_text(url)} -o {safe_text(str(out))}"
    )
    if index is None:
        raise LedgerError(
            "the certificate is written, but its issued entry is not recorded in the ledger yet"
            f" (queued or not proven): no proof was written to {out}",
            hint=later,
        )
    try:
        text = build_tlog_proof(url, sha256_file(certificate), index=index)
    except LedgerError as exc:
        raise LedgerError(
            f"the certificate is written and recorded as entry {index}, but its proof could not"
            f" be made: {exc.message}",
            hint=later,
        ) from None
    atomic_write_text(out, text)
    click.echo(f"ledger: offline proof of entry {index} written to {out}", err=True)


def remote_copy_path(url: str) -> Path:
    """The verified local copy of the log at ``url`` that ``verify --ledger URL`` keeps (beside
    the spool: ``ledger-copy-<16 hex of sha256(url)>.sqlite``)."""
    import hashlib

    from attest.ledger.service.spool import default_spool_path

    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return default_spool_path().with_name(f"ledger-copy-{digest}.sqlite")


def remote_revocations(
    target: RemoteLedger, policy: WitnessPolicy | None = None
) -> tuple[list[tuple[str, bytes]], tuple[str, str] | None, str | None]:
    """The signed revocation statements the remote log holds, read from a local copy brought
    up to the log's checkpoint first (``attest ledger mirror``'s code: the checkpoint's signature
    under ``--ledger-log-key``, every new entry canonical, the copy reproducing the signed root,
    so a log rewritten under the copy is refused). Returns ``(revocations, problem, note)``:
    ``problem`` is a ``(REVOCATION_STATUS_UNKNOWN, message)`` reason when the log does not
    verify, or cannot be reached while no verified copy is kept (fail closed); ``note`` says
    when an unreachable service's revocations came from the copy. With ``policy``, a log
    checkpoint below the witness quorum is ``(WITNESS_QUORUM_NOT_MET, message)``."""
    from attest.errors import LedgerError
    from attest.ledger import revocations_in
    from attest.ledger.service.client import Unreachable
    from attest.ledger.service.remote_audit import mirror_log
    from attest.ledger.witness.cosignature import QuorumNotMet

    if target.log_key is None:  # attest verify reads them only with the key
        raise InputError("--ledger URL needs --ledger-log-key to read the log's revocations")
    copy = remote_copy_path(target.url)
    key, name = target.log_key
    shown = safe_text(target.reads)
    note = None
    try:
        mirror_log(target.reads, copy, key, key_name=name, policy=policy)
    except QuorumNotMet as exc:
        return [], (QuorumNotMet.code, f"the log at {shown}: {safe_text(exc.message, 800)}"), None
    except Unreachable as exc:
        size = _copy_size(copy)
        if size is None:
            return (
                [],
                (
                    REVOCATION_STATUS_UNKNOWN,
                    f"the ledger service {shown} could not be reached and no verified copy of its"
                    f" log is kept here, so its revocations are unknown ({safe_text(exc.message, 300)})",
                ),
                None,
            )
        note = (
            f"the ledger service {shown} could not be reached: revocations read from the verified"
            f" copy {copy} ({size} entries)"
        )
    except LedgerError as exc:
        return (
            [],
            (
                REVOCATION_STATUS_UNKNOWN,
                f"the log at {shown} does not verify against --ledger-log-key and the copy kept in"
                f" {copy}, so its revocations are unknown: {safe_text(exc.message, 500)}",
            ),
            None,
        )
    return revocations_in(copy), None, note


def _copy_size(copy: Path) -> int | None:
    """How many entries the verified copy holds; None when there is none (or it is empty)."""
    from attest.errors import LedgerError
    from attest.ledger import open_ledger

    if not copy.exists():
        return None
    try:
        with open_ledger(copy) as book:
            size = book.tree_head().size
    except LedgerError:
        return None
    return size or None


# -- `attest verify --ledger-proof`: an offline proof (C2SP tlog-proof) ----------------------------


def offline_proof_outcome(
    report: VerificationReport, proof_path: Path, trust_path: Path, certificate: Path
) -> None:
    """Check ``--ledger-proof`` with no network (attest.ledger.tlog_proof): the proof must show
    the certificate file's ``issued`` entry in a checkpoint signed by a valid ``ledger`` key of
    the trust store and cosigned by its witness quorum; else the certificate is rejected with
    LEDGER_PROOF_INVALID or WITNESS_QUORUM_NOT_MET."""
    from attest.core.files import read_text_checked
    from attest.core.io import sha256_file
    from attest.ledger.tlog_proof import MAX_PROOF_BYTES, verify_tlog_proof
    from attest.ledger.witness.cosignature import WitnessPolicy
    from attest.verification.trust import LEDGER_ROLE, load_trust_store

    text = read_text_checked(proof_path, what="ledger proof", max_bytes=MAX_PROOF_BYTES)
    store = load_trust_store(trust_path)
    keys = [
        k.public_key
        for k in store.keys
        if LEDGER_ROLE in k.roles
        and not store.is_revoked(k.keyid)
        and k.window_problem(report.checked_at) is None
    ]
    policy = WitnessPolicy.of(store.witnesses, store.witness_quorum)
    problems = verify_tlog_proof(text, sha256_file(certificate), keys, policy)
    if problems:
        report.reasons += problems
        report.verified = False
        report.statement = None
        return
    witnessed = f", cosigned by {store.witness_quorum} witness(es) or more" if policy.quorum else ""
    report.notes.append(
        f"offline ledger proof {proof_path}: the certificate's issue is in a checkpoint signed by"
        f" a ledger key of the trust store{witnessed}"
    )
