"""``attest ledger witness``: a C2SP tlog-witness for ledger logs (``serve``), a one-shot
cosignature from a local mirror (``cosign``), and the witness's verifier key (``key``).
Click only: attest.ledger.witness does the work."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from attest.core.io import atomic_write_text
from attest.core.text import safe_text
from attest.errors import InputError, LedgerError

if TYPE_CHECKING:
    from attest.ledger.witness.core import Witness

_KEY = click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The witness's Ed25519 private key (attest keygen --algorithm ed25519).",
)
_NAME = click.option(
    "--name",
    required=True,
    help="The witness's name (its cosignature key name), a schema-less URL such as"
    " witness.example.org/w1.",
)
_LOGS = click.option(
    "--logs",
    "logs_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="logs.yaml: the logs this witness cosigns, each by origin and key.",
)
_STATE = click.option(
    "--state",
    "state_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of the latest checkpoint cosigned per log (keep it and back it up: a witness"
    " that loses it would cosign a rolled-back log).",
)


@click.group("witness")
def witness() -> None:
    """A witness: cosigns a log's checkpoints (C2SP tlog-witness, tlog-cosignature/v1) only
    after a consistency proof from the last one it cosigned, so a log cannot show different
    trees to different clients without being refused."""


def _witness(key_path: Path, name: str, logs_path: Path, state_dir: Path) -> Witness:
    from attest.certificate.signing import load_private_key
    from attest.ledger.checkpoint import check_origin
    from attest.ledger.witness.core import Witness
    from attest.ledger.witness.logs import load_logs

    try:
        name = check_origin(name)
    except LedgerError as exc:
        raise InputError(f"--name: {safe_text(exc.message)}", hint=exc.hint) from None
    return Witness(load_private_key(key_path), name, load_logs(logs_path), state_dir)


@witness.command("serve")
@_KEY
@_NAME
@_LOGS
@_STATE
@click.option(
    "--listen", default="127.0.0.1:8090", show_default=True, help="HOST:PORT to listen on."
)
def serve(key_path: Path, name: str, logs_path: Path, state_dir: Path, listen: str) -> None:
    """Run the witness: POST /add-checkpoint, GET /<origin hash>/checkpoint."""
    import logging

    from attest.cli.ledger_service import listen_address, missing_module

    host, port = listen_address(listen)
    try:
        from attest.ledger.service.guard import run_guarded
        from attest.ledger.service.limits import ConnectionLimits
        from attest.ledger.witness.app import create_witness_app
    except ModuleNotFoundError as exc:
        raise missing_module(exc) from None
    found = _witness(key_path, name, logs_path, state_dir)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    click.echo(f"witness {name}: http://{host}:{port}/ ({len(found.logs)} logs)", err=True)
    click.echo(f"verifier key: {found.vkey.text}", err=True)
    limits = ConnectionLimits().check()
    run_guarded(
        create_witness_app(found),
        host=host,
        port=port,
        limits=limits,
        max_connections=limits.max_connections,
    )


@witness.command("cosign")
@_KEY
@_NAME
@_LOGS
@_STATE
@click.option(
    "--ledger",
    "ledger_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A local ledger or mirror (attest ledger mirror) holding the log's latest checkpoint.",
)
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the cosigned checkpoint here (default: standard output).",
)
def cosign(
    key_path: Path,
    name: str,
    logs_path: Path,
    state_dir: Path,
    ledger_path: Path,
    out: Path | None,
) -> None:
    """Cosign, once, the latest checkpoint of a local ledger or mirror, after the same checks
    as serve (a consistency proof from the last checkpoint this witness cosigned, computed
    from the local copy)."""
    from attest.ledger.witness.oneshot import cosign_local

    note = cosign_local(_witness(key_path, name, logs_path, state_dir), ledger_path)
    if out is None:
        click.echo(note, nl=False)
        return
    atomic_write_text(out, note)
    click.echo(f"wrote {out}", err=True)


@witness.command("key")
@_KEY
@_NAME
def key(key_path: Path, name: str) -> None:
    """Print the witness's cosigner verifier key (name+keyid+base64), for trust stores."""
    from attest.certificate.signing import load_private_key
    from attest.ledger.checkpoint import check_origin
    from attest.ledger.witness.cosignature import witness_key

    try:
        vkey = witness_key(check_origin(name), load_private_key(key_path))
    except LedgerError as exc:
        raise InputError(f"--name: {safe_text(exc.message)}", hint=exc.hint) from None
    click.echo(vkey.text)
