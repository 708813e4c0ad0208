"""``--progress auto|plain|none`` for ``attest collect`` and ``attest certify``, and the
heartbeat interval of plain progress (``ATTEST_PROGRESS_HEARTBEAT_S``, seconds; default 60)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from attest.errors import InputError

__all__ = ["HEARTBEAT_ENV", "heartbeat_seconds", "progress_option"]

HEARTBEAT_ENV = "ATTEST_PROGRESS_HEARTBEAT_S"
_DEFAULT_HEARTBEAT_S = 60.0

F = TypeVar("F", bound=Callable[..., Any])


def progress_option(func: F) -> F:
    """The ``--progress`` option (passed as ``progress_mode``)."""
    return click.option(
        "--progress",
        "progress_mode",
        type=click.Choice(["auto", "plain", "none"]),
        default="auto",
        show_default=True,
        help="Progress on stderr. auto: a live display on a terminal, else plain lines (one "
        "per phase, and the last known state every minute while a check runs: "
        f"{HEARTBEAT_ENV} sets the seconds), none with --json; plain: those lines always; "
        "none: nothing.",
    )(func)


def heartbeat_seconds() -> float:
    """The heartbeat interval of plain progress: :data:`HEARTBEAT_ENV`, else 60 s."""
    text = os.environ.get(HEARTBEAT_ENV, "").strip()
    if not text:
        return _DEFAULT_HEARTBEAT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(
            f"{HEARTBEAT_ENV}={text!r} is not a number of seconds above 0",
            hint=f"unset it (default {_DEFAULT_HEARTBEAT_S:.0f} s) or set e.g. {HEARTBEAT_ENV}=30",
        )
    return seconds
