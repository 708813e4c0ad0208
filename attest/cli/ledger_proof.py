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
def proof(certificate: Path, ledger: str, out: Path) -> None:
    """Write the offline proof that CERTIFICATE was recorded as issued: the entry's index and
    data, its inclusion proof and the log's checkpoint with its witnesses' cosignatures.
    Check it with attest verify CERT --ledger-proof FILE (no network)."""
    from attest.core.files import read_bytes_checked
    from attest.core.io import MAX_JSON_BYTES, sha256_file
    from attest.ledger.tlog_proof_build import build_tlog_proof

    read_bytes_checked(certificate, what="certificate", max_bytes=MAX_JSON_BYTES)
    text = build_tlog_proof(ledger, sha256_file(certificate))
    atomic_write_text(out, text)
    click.echo(f"wrote {out}", err=True)
