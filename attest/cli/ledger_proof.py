"""``attest ledger proof CERT --ledger URL|PATH -o cert.tlog-proof``: an offline proof (C2SP
tlog-proof@v1) of a certificate's ``issued`` entry, for servers that cannot reach the log.
Click only: attest.ledger.tlog_proof_build does the work."""

from __future__ import annotations

from pathlib import Path

import click

from attest.core.io import atomic_write_text


@click.command("proof")
@click.argument("certificate", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--ledger",
    "ledger",
    required=True,
    metavar="URL|PATH",
    help="The ledger service (http(s)://...) or a local ledger or mirror holding the entry.",
)
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the proof here (e.g. cert.tlog-proof).",
)
@click.option(
    "--index",
    "index",
    type=click.IntRange(min=0),
    default=None,
    help="For a URL: the entry's index (the one its write was answered with); only the entry"
    " bundle holding it is read. Default: the index the spool kept for this machine's write of"
    " the certificate, else every tile is searched.",
)
def proof(certificate: Path, ledger: str, out: Path, index: int | None) -> None:
    """Write the offline proof that CERTIFICATE was recorded as issued: the entry's index and
    data, its inclusion proof and the log's checkpoint with its witnesses' cosignatures.
    Check it with attest verify CERT --ledger-proof FILE (no network)."""
    from attest.core.files import read_bytes_checked
    from attest.core.io import MAX_JSON_BYTES, sha256_file
    from attest.ledger.tlog_proof_build import NotAtIndex, build_tlog_proof, spooled_index

    read_bytes_checked(certificate, what="certificate", max_bytes=MAX_JSON_BYTES)
    digest = sha256_file(certificate)
    remote = ledger.startswith(("http://", "https://"))
    if index is not None and not remote:
        raise click.UsageError("--index is for a ledger service URL; a local ledger is read whole")
    hint = spooled_index(ledger, digest) if remote and index is None else None
    try:
        text = build_tlog_proof(ledger, digest, index=index if index is not None else hint)
    except NotAtIndex:
        if hint is None:
            raise  # the index the user gave: fail closed
        text = build_tlog_proof(ledger, digest)  # the spool's hint was stale: search
    atomic_write_text(out, text)
    click.echo(f"wrote {out}", err=True)
