"""How ``attest collect`` and ``attest certify`` show their progress on stderr (``--progress``).

``auto`` (the default) draws a live display (``rich``) when stderr is a terminal and prints
plain lines otherwise (:mod:`attest.core.progress_log`: one per stage and a heartbeat, what a
CI log keeps); ``plain`` always prints plain lines; ``none`` shows nothing. ``--quiet`` shows
nothing whatever the mode, ``--json`` nothing in ``auto``. The state shown is a
:class:`~attest.core.progress.Tracker`; ``rich`` is imported when a display starts.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from attest.core.progress import ProgressFn, Tracker, format_duration
from attest.core.progress_log import plain_progress

__all__ = ["terminal_progress"]


def _rich_display(stream: IO[str], tracker: Tracker) -> Any:
    """A ``rich.progress.Progress`` drawing ``tracker`` on ``stream``; None without rich."""
    try:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task
        from rich.text import Text
    except ImportError:
        return None

    class _Column(ProgressColumn):
        # Text objects, never markup: stage text comes from the spec (names, paths).
        def __init__(self, render: Callable[[], str], style: str = "") -> None:
            super().__init__()
            self._render, self._style = render, style

        def render(self, task: Task) -> Text:
            return Text(self._render(), style=self._style)

    console = Console(file=stream, stderr=stream is sys.stderr, highlight=False)
    return Progress(
        SpinnerColumn(finished_text="✓"),
        _Column(lambda: tracker.stage),
        BarColumn(bar_width=24),
        _Column(tracker.steps_text, "cyan"),
        _Column(lambda: format_duration(tracker.elapsed()), "green"),
        _Column(tracker.remaining_text, "yellow"),
        console=console,
        refresh_per_second=4,
        redirect_stdout=sys.stdout.isatty(),
        redirect_stderr=stream is sys.stderr,
    )


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


@contextmanager
def terminal_progress(
    *,
    quiet: bool = False,
    as_json: bool = False,
    mode: str = "auto",
    heartbeat_s: float = 60.0,
    stream: IO[str] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[ProgressFn | None]:
    """The progress callback for a command, or None when nothing is to be shown.

    ``mode`` is the ``--progress`` option: ``auto`` draws a live display when ``stream``
    (default stderr) is a terminal and prints plain lines otherwise; ``plain`` always prints
    plain lines (:class:`attest.core.progress_log.PlainProgress`: one per stage, and the last
    known state every ``heartbeat_s`` seconds while nothing else is printed); ``none`` shows
    nothing. ``quiet`` shows nothing whatever the mode; ``as_json`` shows nothing in ``auto``.
    With nothing to show the command passes None and the library does no progress work.
    """
    out = sys.stderr if stream is None else stream
    if quiet or mode == "none" or (mode == "auto" and as_json):
        yield None
        return
    tracker = Tracker(clock)
    display = _rich_display(out, tracker) if mode == "auto" and _isatty(out) else None
    if display is None:
        with plain_progress(out, heartbeat_s=heartbeat_s, clock=clock) as plain:
            yield plain
        return
    with display:
        task = display.add_task("", total=None)

        def progress(message: str) -> None:
            tracker.update(message)
            display.update(task, total=tracker.total or None, completed=tracker.done)

        try:
            yield progress
        except BaseException:
            tracker.finish("stopped")
            raise
        tracker.finish()
        display.update(task, total=1, completed=1)
