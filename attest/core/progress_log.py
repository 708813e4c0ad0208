"""Progress that a log file keeps: plain lines on a stream that is not a terminal.

A CI job sends stderr to a log; a live display draws nothing there, and a collect of a
real-size model runs for many minutes, some checks for minutes each with no new stage to
report. :class:`PlainProgress` prints one line per stage (the phase, the stage, the checks
done, the time elapsed and the estimate of the time left, as :class:`~attest.core.progress.Tracker`
keeps them) and, from a daemon thread, the last known state again whenever nothing was
printed for ``heartbeat_s`` seconds (``still running | ...``), so a log shows the run is
alive. The thread only prints under the lock the stage lines take, stops when the command's
run ends (:func:`plain_progress` leaves its ``with`` block), and prints nothing after the
closing line (``finished ... done`` or ``... stopped``), which comes before the command's
result.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

from attest.core.progress import Tracker, stage_line

__all__ = ["HEARTBEAT_PREFIX", "PlainProgress", "plain_progress"]

HEARTBEAT_PREFIX = "still running | "


class PlainProgress:
    """The progress callback printing plain lines to ``stream``, with a heartbeat thread."""

    def __init__(
        self,
        stream: IO[str],
        *,
        heartbeat_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._every = heartbeat_s
        self._tracker = Tracker(clock)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._closed = False
        self._last = time.monotonic()  # when a line was last printed (real time, for the beat)
        self._thread = threading.Thread(
            target=self._beat, name="attest-progress-heartbeat", daemon=True
        )

    def __call__(self, message: str) -> None:
        with self._lock:
            if self._closed:
                return
            line = stage_line(self._tracker, message)
            if line is not None:
                self._emit(line)

    def _emit(self, line: str) -> None:  # under the lock
        # a closed pipe or stream: progress is not worth failing the command for
        with contextlib.suppress(OSError, ValueError):
            print(f"  {line}", file=self._stream, flush=True)
        self._last = time.monotonic()

    def _beat(self) -> None:
        while True:
            with self._lock:
                due = self._last + self._every
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            with self._lock:
                if self._closed:
                    return
                if time.monotonic() >= self._last + self._every:
                    self._emit(HEARTBEAT_PREFIX + self._tracker.line())

    def start(self) -> None:
        """Start the heartbeat thread."""
        self._thread.start()

    def close(self, outcome: str = "done") -> None:
        """Print the closing line, stop the heartbeat and wait for its thread: nothing is
        printed after this returns."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._tracker.finish(outcome)
            self._emit(self._tracker.line())
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


@contextmanager
def plain_progress(
    stream: IO[str], *, heartbeat_s: float = 60.0, clock: Callable[[], float] = time.monotonic
) -> Iterator[PlainProgress]:
    """A :class:`PlainProgress` whose heartbeat runs for the ``with`` block; the closing line
    says ``done``, or ``stopped`` when the block raised."""
    plain = PlainProgress(stream, heartbeat_s=heartbeat_s, clock=clock)
    plain.start()
    try:
        yield plain
    except BaseException:
        plain.close("stopped")
        raise
    plain.close()
