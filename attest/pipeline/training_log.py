"""A training log (``run.jsonl`` of :class:`attest.TrainingMonitor`) read once for certify: its
digest, summary and series, as the evidence records them."""

from __future__ import annotations

from pathlib import Path

from attest.core.files import read_bytes_checked
from attest.core.io import sha256_bytes
from attest.evidence.model import TrainingLogRecord
from attest.evidence.training_log import MAX_LOG_BYTES, parse_training_log
from attest.evidence.training_summary import series_of, summarize_training_log

__all__ = ["training_log_record"]


def training_log_record(path: str | Path) -> TrainingLogRecord:
    """A training log read once: its digest, summary and series for the evidence (subject
    name: the file's base name)."""
    p = Path(path)
    data = read_bytes_checked(p, what="training log", max_bytes=MAX_LOG_BYTES)
    log = parse_training_log(data, p)
    summary = summarize_training_log(log)
    return TrainingLogRecord(
        log=p.name, sha256=sha256_bytes(data), summary=summary, series=series_of(log.run())
    )
