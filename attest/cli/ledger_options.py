"""The options the ``attest ledger`` commands share (attest.cli.ledger, attest.cli.ledger_checks):
--ledger PATH and --json, and printing JSON. Click only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from attest.core.text import json_safe, printable_json

F = TypeVar("F", bound=Callable[..., Any])

_LEDGER_HELP = (
    "Ledger database (SQLite). Default: $ATTEST_LEDGER, else "
    "$XDG_DATA_HOME/gradient-attest/ledger.sqlite (~/.local/share/gradient-attest/ledger.sqlite)."
)


def ledger_option(f: F) -> F:
    return click.option(
        "--ledger",
        "ledger_path",
        default=None,
        metavar="PATH",
        type=click.Path(dir_okay=False, path_type=Path),
        help=_LEDGER_HELP,
    )(f)


def witness_trust_option(f: F) -> F:
    """--trust: the trust store whose witnesses and witness_quorum a log checkpoint must meet."""
    return click.option(
        "--trust",
        "trust_path",
        default=None,
        type=click.Path(dir_okay=False, path_type=Path),
        help="Trust store (trust.yaml) whose witnesses and witness_quorum the log's checkpoint"
        " must meet (WITNESS_QUORUM_NOT_MET); without witness_quorum, no cosignature is needed.",
    )(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(f)


def print_json(data: Any) -> None:
    click.echo(printable_json(json_safe(data)))  # entries quote certificates' own text
