"""How the command line prints ``--json``: always valid JSON on stdout.

A figure that is not finite (a NaN loss, an infinite ratio) is written as ``null``, and a note
on stderr names where (JSON pointers), so that a program reading stdout always gets JSON and a
person still learns that a number was not finite (docs/threat-model.md, "Exports, non-finite numbers and revocations").
"""

from __future__ import annotations

from typing import Any

import click

from attest.core.text import finite_json, printable_json, safe_text

__all__ = ["echo_json"]


def echo_json(data: Any, *, indent: int | None = 2) -> None:
    """Print ``data`` as terminal-safe JSON; non-finite figures as null, noted on stderr."""
    clean, replaced = finite_json(data)
    click.echo(printable_json(clean, indent=indent))
    if replaced:
        shown = ", ".join(safe_text(p, 200) for p in replaced[:10])
        more = f" and {len(replaced) - 10} more" if len(replaced) > 10 else ""
        click.echo(
            f"note: {len(replaced)} non-finite figure(s) written as null: {shown}{more}", err=True
        )
