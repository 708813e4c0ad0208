"""What each phase of ``attest collect`` cost the process: wall time, CPU time, peak memory.

The figures go into the evidence (``Evidence.phases``; each check's ``peak_rss_bytes``) so a
user sees which check a large model's time and memory went to, and so the benchmark
(benchmarks/bench_certify.py) reads the split from the run it measured.

Peak memory is the process's peak resident set size (``VmHWM``), the figure the kernel's
out-of-memory killer and a cluster's memory limit act on, not tensor bytes. Linux lets a
process reset its own peak (writing ``5`` to ``/proc/self/clear_refs``, Linux 4.0+), so each
phase reads the peak it reached itself. The reset also resets what ``getrusage``/``wait4``
report as the process's maximum resident size, so the process's peak is the highest of its
phases' peaks (``Evidence.phases``), which is what benchmarks/bench_certify.py reads. Where that is refused (other kernels, some
containers), :class:`PhaseMeter` samples the resident size from a thread every 20 ms instead
and says so (``peak_method``). Neither needs psutil: two lines of ``/proc`` are enough, and the
collect side should not gain a dependency for them.

:func:`require_headroom` is asked before a phase that needs a known amount of memory: it refuses
with a clear error, the figure and the way out, rather than letting the kernel kill the process
halfway through (losing every check already computed).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import re
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import ClassVar

from attest.errors import CollectError

__all__ = [
    "PhaseMeter",
    "PhaseUsage",
    "available_memory",
    "current_rss",
    "is_out_of_memory",
    "out_of_memory_error",
    "release_memory",
    "require_headroom",
]

_STATUS = "/proc/self/status"
_MEMINFO = "/proc/meminfo"
_KIB = 1024


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read()
    except OSError:
        return None


def _status_field(name: str) -> int | None:
    """A ``kB`` field of /proc/self/status in bytes (None off Linux)."""
    text = _read(_STATUS)
    if text is None:
        return None
    match = re.search(rf"^{name}:\s+(\d+)\s*kB", text, re.MULTILINE)
    return int(match.group(1)) * _KIB if match else None


def current_rss() -> int | None:
    """The process's resident set size now, in bytes (None where /proc is not there)."""
    return _status_field("VmRSS")


def _peak_rss() -> int | None:
    return _status_field("VmHWM")


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS counter of this process; False where that is refused."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the system. glibc keeps what a
    phase freed in its arenas (measured: the process's resident size never fell between
    checks), so without ``malloc_trim`` each phase's peak stacks on the last one's. Python
    has no binding for it: ``ctypes`` calls glibc's own."""
    gc.collect()
    # not glibc (macOS, musl): nothing to trim
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def available_memory() -> int | None:
    """Memory the kernel can give without swapping (``MemAvailable``), and below a cgroup
    limit when one is set; None where neither can be read."""
    figures: list[int] = []
    text = _read(_MEMINFO)
    match = re.search(r"^MemAvailable:\s+(\d+)\s*kB", text or "", re.MULTILINE)
    if match:
        figures.append(int(match.group(1)) * _KIB)
    limit = _cgroup_room()
    if limit is not None:
        figures.append(limit)
    return min(figures) if figures else None


def _cgroup_room() -> int | None:
    """Bytes left below this cgroup's memory limit (cgroup v2), None when unlimited."""
    raw = (_read("/sys/fs/cgroup/memory.max") or "").strip()
    current = (_read("/sys/fs/cgroup/memory.current") or "").strip()
    if not raw.isdigit() or not current.isdigit():  # "max" (no limit), or no cgroup v2
        return None
    return max(0, int(raw) - int(current))


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def require_headroom(need_bytes: int, what: str) -> None:
    """Refuse to start ``what`` when it needs more memory than the machine has free now."""
    free = available_memory()
    if free is None or need_bytes <= free:
        return
    raise CollectError(
        f"not enough memory for {what}: about {_gib(need_bytes)} more is needed, but only "
        f"{_gib(free)} is free on this machine; stopping before the kernel kills the process",
        hint="use a smaller probe (fewer or smaller examples), collect on a machine with more "
        "memory, or give attest collect a --budget so it plans less work",
    )


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocator's out-of-memory failure (CPU or CUDA)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "can't allocate memory" in text
        or "out of memory" in text.lower()
        or "DefaultCPUAllocator" in text
    )


def out_of_memory_error(exc: BaseException, what: str) -> CollectError:
    """The clear error for an allocation that failed in ``what``."""
    free = available_memory()
    rss = current_rss()
    figures = []
    if rss is not None:
        figures.append(f"the process held {_gib(rss)}")
    if free is not None:
        figures.append(f"{_gib(free)} was free")
    detail = f" ({', '.join(figures)})" if figures else ""
    return CollectError(
        f"{what} ran out of memory{detail}: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}",
        hint="use a smaller probe (fewer or smaller examples), collect on a machine with more "
        "memory, or give attest collect a --budget so it plans less work",
    )


@dataclass
class PhaseUsage:
    """One phase's measured cost."""

    duration_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_bytes: int | None = None
    rss_start_bytes: int | None = None
    rss_end_bytes: int | None = None
    peak_method: str = "none"
    samples: list[int] = field(default_factory=list, repr=False)


class PhaseMeter:
    """Measure one phase: ``with PhaseMeter() as meter: ...`` then read ``meter.usage``.

    Meters nest (a check measured inside its phase): a meter that resets the kernel's peak
    counter first hands the peak reached so far to the meters open around it, whose peak is
    the highest of that and their own reading at the end."""

    _open: ClassVar[list[PhaseMeter]] = []  # the meters entered and not yet left, outermost first

    def __init__(self, sample_interval_s: float = 0.02) -> None:
        self.usage = PhaseUsage()
        self._interval = sample_interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wall = 0.0
        self._cpu = 0.0
        self._carried = 0  # the peaks reached before nested meters reset the counter

    def __enter__(self) -> PhaseMeter:
        self.usage.rss_start_bytes = current_rss()
        reached = _peak_rss() if PhaseMeter._open else None
        for outer in PhaseMeter._open:
            outer._carried = max(outer._carried, reached or 0)
        PhaseMeter._open.append(self)
        if _reset_peak():
            self.usage.peak_method = "VmHWM"
        elif self.usage.rss_start_bytes is not None:
            self.usage.peak_method = "sampled"
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        self._wall = time.perf_counter()
        self._cpu = _cpu_time()
        return self

    def _sample(self) -> None:
        peak = 0
        while not self._stop.wait(self._interval):
            rss = current_rss() or 0
            peak = max(peak, rss)
            self.usage.peak_rss_bytes = peak

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.usage.duration_s = round(time.perf_counter() - self._wall, 6)
        self.usage.cpu_s = round(_cpu_time() - self._cpu, 6)
        self.usage.rss_end_bytes = current_rss()
        if self in PhaseMeter._open:
            PhaseMeter._open.remove(self)
        if self.usage.peak_method == "VmHWM":
            self.usage.peak_rss_bytes = _peak_rss()
        elif self._thread is not None:
            self._stop.set()
            self._thread.join()
            ends = [v for v in (self.usage.rss_start_bytes, self.usage.rss_end_bytes) if v]
            self.usage.peak_rss_bytes = max([self.usage.peak_rss_bytes or 0, *ends]) or None
        if self.usage.peak_rss_bytes is not None:
            self.usage.peak_rss_bytes = max(self.usage.peak_rss_bytes, self._carried)
            # the meters around take this peak as read: the kernel's RSS counters are
            # per-thread caches synced now and then (a later reading can fall a few pages
            # under it), and a sampling meter's samples fall at other times than this one's
            for outer in PhaseMeter._open:
                outer._carried = max(outer._carried, self.usage.peak_rss_bytes)


def _cpu_time() -> float:
    times = os.times()
    return times.user + times.system
