"""``attest ledger verify`` (the whole log: a local ledger, or a ledger service's from its tiles)
and ``attest ledger verify-proof`` (one proof, offline): checking a ledger. Click only."""

from __future__ import annotations

from pathlib import Path

import click

from attest.cli.ledger_options import json_option as _json_option
from attest.cli.ledger_options import ledger_option as _ledger_option
from attest.cli.ledger_options import print_json as _print_json
from attest.cli.ledger_options import witness_trust_option
from attest.core.text import safe_text
from attest.errors import EXIT_NEGATIVE, InputError


@click.command("verify")
@click.argument("url", required=False)
@click.option(
    "--state",
    "state_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="With URL: the auditor's stored state of that log (default: one file per log key "
    "in the user's state directory); the log must stay consistent with it.",
)
@click.option(
    "--origin",
    default=None,
    help="With URL: the log's origin as you know it; the log's checkpoint must carry it (the "
    "stored state is keyed by the log's key, and an origin change for that key is an error).",
)
@click.option(
    "--key",
    "key_paths",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Public key (PEM or note verifier key) to check checkpoint signatures with; repeatable.",
)
@click.option(
    "--skip-entries",
    is_flag=True,
    help="Check hashes only, not that every entry is a valid canonical record.",
)
@witness_trust_option
@_ledger_option
@_json_option
@click.pass_context
def verify(
    ctx: click.Context,
    url: str | None,
    state_path: Path | None,
    origin: str | None,
    key_paths: tuple[Path, ...],
    skip_entries: bool,
    trust_path: Path | None,
    ledger_path: Path | None,
    as_json: bool,
) -> None:
    """Recompute the whole tree from the stored entries; check every stored hash and checkpoint.

    With URL (a ledger service), audit the remote log from its tiles instead, against the
    state stored from the last audit of the log signed by --key (--state; --origin names the
    log's origin), checking its published clients and every client signature in its leaves.
    With --trust, the log's checkpoint must be cosigned by the trust store's witness quorum.
    Exit 0 when intact, 1 when anything was edited, deleted, reordered or inserted (each
    problem reported with its entry index).
    """
    if url is not None:
        from attest.cli.ledger_remote import witness_policy
        from attest.cli.ledger_service import verify_remote

        policy = witness_policy(trust_path)
        verify_remote(
            ctx, url, key_paths, state_path, skip_entries, as_json, origin=origin, policy=policy
        )
        return
    if trust_path is not None:
        raise InputError("--trust applies to a remote log: attest ledger verify URL --trust T")
    if origin is not None:
        raise InputError("--origin applies to a remote log: attest ledger verify URL --origin O")
    from attest.ledger import audit_ledger, open_ledger
    from attest.ledger.checkpoint import load_checkpoint_key

    keys = [load_checkpoint_key(p) for p in key_paths]
    with open_ledger(ledger_path) as book:
        report = audit_ledger(book.storage, public_keys=keys, check_entries=not skip_entries)
    if as_json:
        _print_json(report.to_json())
    else:
        state = "OK" if report.ok else "TAMPERED"
        click.echo(
            f"{state}: {report.entries_checked} entries, {report.nodes_checked} stored hashes, "
            f"{report.checkpoints_checked} checkpoints ({report.signatures_checked} signatures checked) "
            f"in {report.seconds:.2f} s"
        )
        if report.ok:
            click.echo(f"tree size {report.tree_size}, root {report.root.hex()}")
        click.echo(_signed_coverage(report.tree_size, report.signed_size, report.signed_by))
        if not keys and report.checkpoints_checked:
            click.echo("note: checkpoint signatures not checked (pass --key LEDGER.pub)")
        for problem in report.problems:
            where = f"entry {problem.index}" if problem.index is not None else "ledger"
            click.echo(f"  [{problem.kind}] {where}: {safe_text(problem.message, 2000)}")
        if report.problems_total > len(report.problems):
            click.echo(f"  ... and {report.problems_total - len(report.problems)} more")
    if not report.ok:
        ctx.exit(EXIT_NEGATIVE)


def _signed_coverage(size: int, signed_size: int | None, signed_by: str | None) -> str:
    """The line of ``ledger verify`` saying which signed checkpoint the tree was checked against."""
    sign = "sign one: attest ledger checkpoint --key KEY"
    if signed_size is None:
        return (
            "no signed checkpoint: deleted entries at the end and a rewrite of the whole log "
            f"cannot be detected; {sign}"
        )
    if signed_size > size:
        return (
            f"verified against {signed_by}: signed size {signed_size}, but only {size} entries "
            "are stored"
        )
    if signed_size == size:
        return (
            f"verified against {signed_by}: signed size {signed_size}, every stored entry covered"
        )
    return (
        f"verified against {signed_by}: signed size {signed_size}; entries {signed_size}.."
        f"{size - 1} are covered by no signature yet (deleting them may go unnoticed); {sign}"
    )


@click.command("verify-proof")
@click.argument("proof", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--checkpoint",
    "checkpoints",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Signed checkpoint from a source you trust, always used: for an inclusion proof it "
    "replaces the one in the proof file; for a consistency proof it is the earlier tree head the "
    "proof must start from (same size and root). Once.",
)
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The ledger's public key (PEM or note verifier key).",
)
@click.option(
    "--key-name", default=None, help="Signer name in the note (default: the checkpoint's origin)."
)
@_json_option
@click.pass_context
def verify_proof(
    ctx: click.Context,
    proof: Path,
    checkpoints: tuple[Path, ...],
    key_path: Path,
    key_name: str | None,
    as_json: bool,
) -> None:
    """Check an inclusion or consistency proof offline, without the database.

    Exit 0 when the proof holds, 1 when it does not (with reason codes), 2 for unusable input.
    """
    from attest.errors import InputError
    from attest.ledger.checkpoint import load_checkpoint_key
    from attest.ledger.proofs import verify_proof_document

    key, vkey_name = load_checkpoint_key(key_path)
    notes = []
    for path in checkpoints:
        try:
            notes.append(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read checkpoint {path}: {exc}") from None
    verdict = verify_proof_document(
        proof, key, key_name=key_name or vkey_name, checkpoint_notes=notes
    )
    if as_json:
        _print_json(verdict.to_json())
    elif verdict.ok:
        if verdict.kind == "inclusion":
            click.echo(
                f"VERIFIED: entry {verdict.details['index']} is in the tree of {verdict.details['tree_size']} "
                f"entries signed by {verdict.details.get('origin')}"
            )
        else:
            given = " (your checkpoint)" if verdict.details.get("checkpoint") == "given" else ""
            click.echo(
                f"VERIFIED: the tree of {verdict.details['new_size']} entries extends the tree of "
                f"{verdict.details['old_size']}{given}, signed by {verdict.details.get('origin')}"
            )
    else:
        click.echo("REJECTED:")
        for code, message in verdict.reasons:
            click.echo(f"  {code}: {safe_text(message, 2000)}")
    if not verdict.ok:
        ctx.exit(EXIT_NEGATIVE)
