"""The options of ``--ledger URL`` that ``attest verify``, ``attest certify`` and ``attest ledger
flush`` share (here, not in attest.cli.ledger_remote, so that a plain ``attest verify`` does not
import the ledger client). Click only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def remote_ledger_options(f: F) -> F:
    """--ledger-client, --ledger-client-key and --ledger-log-key, for --ledger URL."""
    f = click.option(
        "--ledger-log-key",
        default=None,
        envvar="ATTEST_LEDGER_LOG_KEY",
        type=click.Path(dir_okay=False, path_type=Path),
        help="With --ledger URL: the log's public key; an event leaves the local spool only when "
        "the service's answer proves it (a checkpoint signed by this key, the entry's inclusion "
        "proof, consistency with the last checkpoint seen), else it is 'submitted, not proven' "
        "and stays pending; verify also reads the revocations the log holds, rejecting the "
        "certificate when they cannot be read (env ATTEST_LEDGER_LOG_KEY).",
    )(f)
    f = click.option(
        "--ledger-client-key",
        default=None,
        envvar="ATTEST_LEDGER_CLIENT_KEY",
        type=click.Path(dir_okay=False, path_type=Path),
        help="With --ledger URL: this client's private key, listed in the service's clients.yaml "
        "(env ATTEST_LEDGER_CLIENT_KEY).",
    )(f)
    return click.option(
        "--ledger-client",
        default=None,
        envvar="ATTEST_LEDGER_CLIENT",
        help="With --ledger URL: this client's name in the service's clients.yaml "
        "(env ATTEST_LEDGER_CLIENT).",
    )(f)


def ledger_tiles_option(f: F) -> F:
    """--ledger-tiles URL, for the commands that read the log as well (verify, certify)."""
    return click.option(
        "--ledger-tiles",
        default=None,
        envvar="ATTEST_LEDGER_TILES",
        metavar="URL",
        help="With --ledger URL: where the log's reads are served when not by the service itself"
        " (its --static-dir behind nginx, docs/ledger.md): verify reads the log's revocations,"
        " certify the offline proof (--ledger-proof-out) from there; writes still go to --ledger"
        " (env ATTEST_LEDGER_TILES).",
    )(f)
