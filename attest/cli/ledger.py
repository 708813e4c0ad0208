"""``attest ledger``: the tamper-evident audit ledger (append, show, prove, consistency,
checkpoint; verify and verify-proof in attest.cli.ledger_checks). Click only: parse, call
:mod:`attest.ledger`, print."""

from __future__ import annotations

from pathlib import Path

import click

from attest.cli.ledger_options import json_option as _json_option
from attest.cli.ledger_options import ledger_option as _ledger_option
from attest.cli.ledger_options import print_json as _print_json
from attest.core.text import json_safe, printable_json


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


def _add_service_commands() -> None:
    from attest.cli.ledger_checks import verify, verify_proof
    from attest.cli.ledger_flush import flush
    from attest.cli.ledger_proof import proof
    from attest.cli.ledger_service import mirror, serve
    from attest.cli.ledger_witness import witness

    ledger.add_command(verify)
    ledger.add_command(verify_proof)
    ledger.add_command(serve)
    ledger.add_command(mirror)
    ledger.add_command(flush)
    ledger.add_command(witness)
    ledger.add_command(proof)


_add_service_commands()
