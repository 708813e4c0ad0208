"""``attest ledger``: the tamper-evident audit ledger (append, show, prove, consistency,
checkpoint, verify, verify-proof). Click only: parse, call :mod:`attest.ledger`, print."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from attest.core.text import json_safe, printable_json, safe_text
from attest.errors import EXIT_NEGATIVE, InputError

F = TypeVar("F", bound=Callable[..., Any])

_LEDGER_HELP = (
    "Ledger database (SQLite). Default: $ATTEST_LEDGER, else "
    "$XDG_DATA_HOME/gradient-attest/ledger.sqlite (~/.local/share/gradient-attest/ledger.sqlite)."
)


def _ledger_option(f: F) -> F:
    return click.option(
        "--ledger",
        "ledger_path",
        default=None,
        metavar="PATH",
        type=click.Path(dir_okay=False, path_type=Path),
        help=_LEDGER_HELP,
    )(f)


def _json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(f)


def _print_json(data: Any) -> None:
    click.echo(printable_json(json_safe(data)))  # entries quote certificates' own text


@click.group("ledger")
def ledger() -> None:
    """The tamper-evident audit ledger: an append-only Merkle log (RFC 6962/9162) of
    certificates and verifications, with signed checkpoints (C2SP tlog-checkpoint, Ed25519).

    Every command takes --ledger PATH; without it the ledger is $ATTEST_LEDGER, else
    ~/.local/share/gradient-attest/ledger.sqlite ($XDG_DATA_HOME is honoured).
    """


@ledger.command("append")
@click.argument("certificate", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--event",
    type=click.Choice(["issued", "revoked"]),
    default="issued",
    show_default=True,
    help="What happened to the certificate. Verifications are recorded by attest verify --ledger.",
)
@click.option(
    "--reason",
    "reasons",
    multiple=True,
    metavar="CODE",
    help="Reason code to record (e.g. KEY_COMPROMISED for a revocation); repeatable. Codes only, no free text.",
)
@click.option(
    "--actor", default=None, help="Who records this (default: $ATTEST_ACTOR or the login name)."
)
@_ledger_option
@_json_option
def append(
    certificate: Path,
    event: str,
    reasons: tuple[str, ...],
    actor: str | None,
    ledger_path: Path | None,
    as_json: bool,
) -> None:
    """Record a certificate as issued (or revoked).

    The certificate is read strictly but NOT verified: the entry records what it claims and says
    so (certificate_checked: false). To record a checked verification, run
    attest verify CERT --trust T --ledger PATH.
    """
    from attest.errors import InputError
    from attest.ledger import append_certificate, default_ledger_path
    from attest.ledger.entries import is_reason_code

    for code in reasons:
        if not is_reason_code(code):
            raise InputError(
                f"--reason {code!r} is not a reason code",
                hint="use UPPER_CASE letters, digits and _ (e.g. KEY_COMPROMISED)",
            )
    path = ledger_path or default_ledger_path()
    result = append_certificate(
        path,
        certificate,
        event="revoked" if event == "revoked" else "issued",
        reason_codes=list(reasons),
        actor=actor,
    )
    if as_json:
        _print_json(
            {
                "ledger": str(path),
                "index": result.index,
                "leaf_hash": result.leaf_hash.hex(),
                "tree_size": result.tree_size,
                "root": result.root.hex(),
                "certificate_checked": False,
            }
        )
        return
    click.echo(f"appended entry {result.index} ({event}) to {path}")
    click.echo(f"tree size {result.tree_size}, root {result.root.hex()}")
    click.echo(
        "note: the certificate was recorded as given, not verified (certificate_checked: false)"
    )


@ledger.command("show")
@click.argument("index", type=click.IntRange(min=0), required=False)
@_ledger_option
@_json_option
def show(index: int | None, ledger_path: Path | None, as_json: bool) -> None:
    """Print entry INDEX (default: the latest), checked against its stored leaf hash."""
    from attest.errors import LedgerError
    from attest.ledger import open_ledger

    with open_ledger(ledger_path) as book:
        size = book.tree_head().size
        if index is None:
            if size == 0:
                raise LedgerError("the ledger is empty")
            index = size - 1
        leaf, entry = book.entry(index)
    data = {
        "index": leaf.index,
        "tree_size": size,
        "leaf_hash": leaf.leaf_hash.hex(),
        "entry": entry.plain(),
    }
    if as_json:
        _print_json(data)
        return
    click.echo(f"entry {leaf.index} of {size}  leaf hash {leaf.leaf_hash.hex()}")
    click.echo(printable_json(json_safe(data["entry"])))


@ledger.command("prove")
@click.argument("index", type=click.IntRange(min=0))
@click.option(
    "-o",
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Proof file to write.",
)
@click.option(
    "--tree-size",
    type=click.IntRange(min=1),
    default=None,
    help="Prove against the signed checkpoint of this size (default: the latest covering INDEX).",
)
@_ledger_option
@_json_option
def prove(
    index: int, out: Path, tree_size: int | None, ledger_path: Path | None, as_json: bool
) -> None:
    """Write an inclusion proof of entry INDEX with the signed checkpoint it is relative to.

    An auditor checks it offline: attest ledger verify-proof PROOF --key LEDGER.pub
    """
    from attest.core.io import atomic_write_json
    from attest.ledger import open_ledger
    from attest.ledger.proofs import inclusion_proof_file

    with open_ledger(ledger_path) as book:
        result = book.prove_inclusion(index, tree_size)
    document = inclusion_proof_file(result).model_dump(mode="json")
    atomic_write_json(out, document)
    if as_json:
        _print_json(
            {
                "proof": str(out),
                **{k: document[k] for k in ("index", "tree_size", "inclusion_proof")},
            }
        )
        return
    click.echo(
        f"wrote {out}: entry {index} in the tree of {result.checkpoint.size} entries "
        f"(checkpoint {result.checkpoint.id}), {len(result.proof)} hashes"
    )
    for number, h in enumerate(document["inclusion_proof"]):
        click.echo(f"  [{number}] {h}")


@ledger.command("consistency")
@click.argument("old_size", type=click.IntRange(min=1))
@click.argument("new_size", type=click.IntRange(min=1), required=False)
@click.option(
    "-o",
    "--out",
    "out",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the proof file.",
)
@_ledger_option
@_json_option
def consistency(
    old_size: int, new_size: int | None, out: Path | None, ledger_path: Path | None, as_json: bool
) -> None:
    """Consistency proof that the tree of NEW_SIZE entries (default: now) extends OLD_SIZE."""
    from attest.core.io import atomic_write_json
    from attest.ledger import open_ledger
    from attest.ledger.proofs import consistency_proof_file

    with open_ledger(ledger_path) as book:
        result = book.prove_consistency(old_size, new_size)
    document = consistency_proof_file(result).model_dump(mode="json")
    if out is not None:
        atomic_write_json(out, document)
    if as_json:
        _print_json(document)
        return
    click.echo(f"tree {result.old.size} root {result.old.root.hex()}")
    click.echo(f"tree {result.new.size} root {result.new.root.hex()}")
    click.echo(f"consistency proof ({len(result.proof)} hashes, verified):")
    for number, h in enumerate(document["consistency_proof"]):
        click.echo(f"  [{number}] {h}")
    if out is not None:
        click.echo(f"wrote {out}")


@ledger.command("checkpoint")
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Ed25519 private key (attest keygen).",
)
@click.option(
    "--origin",
    default=None,
    help="Origin line (the log's identity); fixed by the first checkpoint.",
)
@click.option(
    "--previous",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A copy of an earlier checkpoint kept outside the database; refuse to sign unless consistent with it.",
)
@click.option(
    "-o",
    "--out",
    "out",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the signed note here.",
)
@_ledger_option
@_json_option
def checkpoint(
    key_path: Path,
    origin: str | None,
    previous: Path | None,
    out: Path | None,
    ledger_path: Path | None,
    as_json: bool,
) -> None:
    """Sign a checkpoint of the current tree (C2SP tlog-checkpoint, signed note, Ed25519).

    Refuses to sign a tree inconsistent with an earlier checkpoint of the same key. The
    passphrase comes from ATTEST_KEY_PASSPHRASE or a prompt.
    """
    from attest.certificate.signing import load_private_key
    from attest.core.io import atomic_write_text
    from attest.errors import InputError
    from attest.ledger import open_ledger
    from attest.ledger.checkpoint import verifier_key

    key = load_private_key(key_path)
    previous_note = None
    if previous is not None:
        try:
            previous_note = previous.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read --previous {previous}: {exc}") from None
    with open_ledger(ledger_path) as book:
        stored = book.sign_checkpoint(key, origin=origin, previous_note=previous_note)
    if out is not None:
        atomic_write_text(out, stored.note)
    vkey = verifier_key(stored.origin, key.public_key)
    if as_json:
        _print_json(
            {
                "id": stored.id,
                "size": stored.size,
                "root": stored.root.hex(),
                "origin": stored.origin,
                "note": stored.note,
                "verifier_key": vkey,
            }
        )
        return
    click.echo(stored.note, nl=False)
    if out is not None:
        click.echo(f"wrote {out}", err=True)


@ledger.command("verify")
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
    ledger_path: Path | None,
    as_json: bool,
) -> None:
    """Recompute the whole tree from the stored entries; check every stored hash and checkpoint.

    With URL (a ledger service), audit the remote log from its tiles instead, against the
    state stored from the last audit of the log signed by --key (--state; --origin names the
    log's origin), checking its published clients and every client signature in its leaves.
    Exit 0 when intact, 1 when anything was edited, deleted, reordered or inserted (each
    problem reported with its entry index).
    """
    if url is not None:
        from attest.cli.ledger_service import verify_remote

        verify_remote(ctx, url, key_paths, state_path, skip_entries, as_json, origin=origin)
        return
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


@ledger.command("verify-proof")
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


def _add_service_commands() -> None:
    from attest.cli.ledger_flush import flush
    from attest.cli.ledger_service import mirror, serve

    ledger.add_command(serve)
    ledger.add_command(mirror)
    ledger.add_command(flush)


_add_service_commands()
