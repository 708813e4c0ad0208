"""The training log (``run.jsonl``) that :class:`attest.TrainingMonitor` appends to, as plain data.

One JSON object per line: a ``start`` record each time a monitor opens the log (the first start
and every restart), and a ``sample`` record per sample point. The file is the contract between
the monitor (release side, torch) and the readers that summarise, report, certify and export
it (no torch, no numpy).

Crash safety: each record is one ``write`` of a whole line ending in ``\\n``, flushed and
``fsync``'d before the monitor returns, so a killed run leaves every finished record readable.
A line cut short (no final newline: the process died inside the write) is ignored by
:func:`read_training_log` and cut off by :class:`TrainingLogWriter` before it appends again.
A restart continues the same ``run_id``; a sample whose ``(run_id, step)`` is already in the
log (a step replayed after resuming from an older checkpoint) is dropped, by the writer and
again by the reader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from attest.core.files import read_bytes_checked
from attest.core.io import StrictJSONError, loads_strict
from attest.core.validation import validation_problems
from attest.errors import InputError

__all__ = [
    "LOG_FORMAT",
    "MAX_LOG_BYTES",
    "SampleRecord",
    "StartRecord",
    "TrainingLog",
    "TrainingLogWriter",
    "parse_training_log",
    "read_training_log",
]

LOG_FORMAT = "attest.training-log/v1"
MAX_LOG_BYTES = 512 * 1024 * 1024
_MAX_LINE_BYTES = 4 * 1024 * 1024


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StartRecord(_Strict):
    """A monitor opened the log: the first start of a run (``attempt`` 0) or a restart."""

    kind: Literal["start"] = "start"
    format: Literal["attest.training-log/v1"] = "attest.training-log/v1"
    run_id: str = Field(min_length=1, max_length=128)
    attempt: int = Field(ge=0)
    started_at: str
    every: int = Field(ge=1)
    model: str
    parameters: int = Field(ge=0)
    device: str
    torch: str
    probe: dict[str, Any] = Field(default_factory=dict)
    last_logged_step: int | None = None  # the run's last sample before this (re)start


class SampleRecord(_Strict):
    """One sample point: the figures of docs/training-monitor.md on the fixed probe.

    Values that are not finite (a NaN loss, an infinite norm) are written as null; the
    ``nonfinite`` counts say where they came from.
    """

    kind: Literal["sample"] = "sample"
    run_id: str = Field(min_length=1, max_length=128)
    attempt: int = Field(ge=0)
    step: int = Field(ge=0)
    epoch: int = Field(ge=0)
    time: str
    loss: float | None
    fidelity_pct: float | None  # every trainable parameter's gradient pooled, vs float64
    min_fidelity_pct: float | None  # the worst parameter
    param_fidelity_pct: dict[str, float | None] = Field(default_factory=dict)
    bit_exact_rate: float = Field(ge=0.0, le=1.0)  # parameters whose gradient repeats bit-exactly
    grad_norm: float | None  # 2-norm over every parameter's gradient
    grad_norms: dict[str, float | None] = Field(default_factory=dict)  # per module
    nonfinite: int = Field(ge=0)  # non-finite gradient elements, all parameters
    nonfinite_params: dict[str, int] = Field(default_factory=dict)  # only those with any
    saved_tensor_bytes: int = Field(ge=0)  # what the forward saved for the backward
    allocator_delta_bytes: int | None = None  # CUDA: allocated after forward minus before
    loss_scale: float | None = None  # the GradScaler's scale, when one was given
    step_wall_s: float | None = None  # the training step before this call (monitor excluded)
    monitor_wall_s: float = Field(ge=0.0)  # what this sample point cost


Record = Annotated[StartRecord | SampleRecord, Field(discriminator="kind")]
_RECORD = TypeAdapter(Record)


@dataclass
class TrainingLog:
    """A log as read: every start, the samples of each run (deduplicated, ordered by step)."""

    path: Path
    starts: list[StartRecord] = field(default_factory=list)
    samples: list[SampleRecord] = field(default_factory=list)  # all runs, in file order
    duplicates: int = 0  # replayed samples dropped
    truncated_tail_bytes: int = 0  # a last line cut short (no newline), ignored

    @property
    def run_ids(self) -> list[str]:
        """The runs in the order they first appear."""
        seen: dict[str, None] = {}
        for run_id in [r.run_id for r in self.starts] + [s.run_id for s in self.samples]:
            seen.setdefault(run_id, None)
        return list(seen)

    def run(self, run_id: str | None = None) -> list[SampleRecord]:
        """The samples of ``run_id`` (default: the last run in the log), ordered by step."""
        runs = self.run_ids
        wanted = run_id if run_id is not None else (runs[-1] if runs else None)
        return sorted((s for s in self.samples if s.run_id == wanted), key=lambda s: s.step)

    def last_step(self, run_id: str) -> int | None:
        steps = [s.step for s in self.samples if s.run_id == run_id]
        return max(steps) if steps else None


def _parse_line(raw: bytes, path: Path, number: int) -> StartRecord | SampleRecord:
    try:
        data = loads_strict(raw, max_bytes=_MAX_LINE_BYTES)
        return _RECORD.validate_python(data)
    except StrictJSONError as exc:
        problem = str(exc)
    except ValidationError as exc:
        problem = validation_problems(exc)
    raise InputError(
        f"training log {path}, line {number}: not a training-log record: {problem}",
        hint="give the run.jsonl that attest.TrainingMonitor wrote",
    )


def read_training_log(path: str | Path) -> TrainingLog:
    """Read a training log. A last line without its newline (a run killed mid-write) is
    ignored; any other malformed line is an :class:`InputError` naming the line."""
    p = Path(path)
    return parse_training_log(
        read_bytes_checked(p, what="training log", max_bytes=MAX_LOG_BYTES), p
    )


def parse_training_log(data: bytes, path: Path) -> TrainingLog:
    """:func:`read_training_log` of bytes already read (``path`` names them in messages)."""
    p = path
    whole, _, tail = data.rpartition(b"\n")
    log = TrainingLog(path=p, truncated_tail_bytes=len(tail))
    seen: set[tuple[str, int]] = set()
    for number, raw in enumerate(whole.split(b"\n") if whole else [], start=1):
        if not raw.strip():
            continue
        record = _parse_line(raw, p, number)
        if isinstance(record, StartRecord):
            log.starts.append(record)
            continue
        key = (record.run_id, record.step)
        if key in seen:
            log.duplicates += 1
            continue
        seen.add(key)
        log.samples.append(record)
    if not log.starts and not log.samples:
        raise InputError(
            f"training log {p} holds no complete record",
            hint="a monitor writes its first line when it starts; check the path",
        )
    return log


class TrainingLogWriter:
    """Appends records to a log: one whole line per ``write``, flushed and fsync'd.

    Opening cuts off a last line left incomplete by a killed run (so the next record starts
    on a line of its own) and reads which ``(run_id, step)`` pairs are already there, so a
    replayed step is not written twice.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.existing: TrainingLog | None = None
        try:
            if self.path.exists() and self.path.stat().st_size > 0:
                self._cut_incomplete_tail()
                if self.path.stat().st_size > 0:
                    self.existing = read_training_log(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(
                f"cannot open training log {self.path} for appending: {exc.strerror or exc}",
                hint="choose a writable path for log=",
            ) from None
        self._logged: set[tuple[str, int]] = {
            (s.run_id, s.step) for s in (self.existing.samples if self.existing else [])
        }

    def _cut_incomplete_tail(self) -> None:
        with open(self.path, "r+b") as fh:
            size = fh.seek(0, os.SEEK_END)
            keep = size
            while keep > 0:
                start = max(0, keep - 65536)
                fh.seek(start)
                chunk = fh.read(keep - start)
                at = chunk.rfind(b"\n")
                if at >= 0:
                    keep = start + at + 1
                    break
                keep = start
            if keep != size:
                fh.truncate(keep)
                fh.flush()
                os.fsync(fh.fileno())

    def logged(self, run_id: str, step: int) -> bool:
        """Whether the log already holds this run's sample at ``step``."""
        return (run_id, step) in self._logged

    def append(self, record: StartRecord | SampleRecord) -> bool:
        """Write ``record`` as one line (durable on return); False for a replayed sample."""
        if isinstance(record, SampleRecord):
            key = (record.run_id, record.step)
            if key in self._logged:
                return False
            self._logged.add(key)
        line = record.model_dump_json(exclude_none=False).encode("utf-8") + b"\n"
        view = memoryview(line)
        while view:  # os.write may write less than asked (a signal, a full pipe)
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)
        return True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # pragma: no cover - a monitor that was never closed
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            os.close(fd)
