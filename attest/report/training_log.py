"""The training-log report: ``attest training report run.jsonl -o training.html``, and the
"Training monitor" section of the certificate report when certify was given a log.

Charts over steps (epoch boundaries marked): the fidelity shortfall ``100 - fidelity`` of the
worst parameter and of all parameters pooled (log scale, with a dashed line 0.1 point beyond
the fitted start: where the half-life is), the bit-exact rate across the two repeats,
gradient norms (all parameters and the modules with the largest), and the forward-to-backward
memory delta. Then the summary.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attest._version import __version__
from attest.core.io import atomic_write_text
from attest.evidence.training_log import SampleRecord, read_training_log
from attest.evidence.training_summary import (
    HALF_LIFE_DROP_PP,
    TrainingSummary,
    series_of,
    summarize_training_log,
)
from attest.report._page import esc, kv_columns, page
from attest.report.plots import BAD, MUTED, SERIES_A, SERIES_B, _arr, _new_figure, figure_to_svg

__all__ = [
    "summary_pairs",
    "training_log_html",
    "training_section_of",
    "write_training_report",
]

Row = Mapping[str, float | int | None]
_MODULES_SHOWN = 6


def _epoch_lines(ax: Any, rows: Sequence[Row]) -> None:
    previous = None
    for row in rows:
        if previous is not None and row["epoch"] != previous:
            ax.axvline(float(row["step"] or 0), color=MUTED, linewidth=0.5, alpha=0.5)
        previous = row["epoch"]


def _fidelity_panel(ax: Any, rows: Sequence[Row], summary: TrainingSummary) -> None:
    steps = _arr([r["step"] for r in rows])
    for key, color, label in (
        ("min_fidelity_pct", BAD, "worst parameter"),
        ("fidelity_pct", SERIES_A, "all parameters"),
    ):
        short = 100.0 - _arr([r[key] for r in rows])
        ax.plot(steps, np.maximum(short, 1e-12), marker=".", color=color, label=label, lw=0.8)
    fid = summary.fidelity
    if fid.start_pct is not None:
        ax.axhline(100.0 - fid.start_pct + HALF_LIFE_DROP_PP, color=MUTED, ls="--", lw=0.8)
    ax.set_yscale("log")
    ax.set_title("fidelity shortfall (100 - fidelity, pp)")
    ax.legend(fontsize=7, loc="upper left")


def _norm_panel(ax: Any, rows: Sequence[Row], modules: Mapping[str, list[float | None]]) -> None:
    steps = _arr([r["step"] for r in rows])
    ax.plot(steps, _arr([r["grad_norm"] for r in rows]), color="black", lw=1.0, label="all")
    for name, values in modules.items():
        ax.plot(steps, _arr(values), lw=0.7, label=name)
    ax.set_yscale("log")
    ax.set_title("gradient norm")
    ax.legend(fontsize=6, loc="best")


def training_plots(
    rows: Sequence[Row], summary: TrainingSummary, modules: Mapping[str, list[float | None]]
) -> str:
    """The four charts as one inline SVG."""
    fig = _new_figure(9.0, 5.2)
    axes = fig.subplots(2, 2, sharex=True)
    steps = _arr([r["step"] for r in rows])
    _fidelity_panel(axes[0][0], rows, summary)
    axes[0][1].plot(steps, _arr([r["bit_exact_rate"] for r in rows]), color=SERIES_B, marker=".")
    axes[0][1].set_ylim(-0.05, 1.05)
    axes[0][1].set_title("bit-exact rate across two repeats")
    _norm_panel(axes[1][0], rows, modules)
    cuda = all(r["allocator_delta_bytes"] is not None for r in rows)
    key = "allocator_delta_bytes" if cuda else "saved_tensor_bytes"
    axes[1][1].plot(steps, _arr([r[key] for r in rows]), color=SERIES_A, marker=".")
    axes[1][1].set_title(f"memory delta ({key}, bytes)")
    for ax in (axes[1][0], axes[1][1]):
        ax.set_xlabel("step (grey lines: epoch boundaries)")
    for row_axes in axes:
        for ax in row_axes:
            _epoch_lines(ax, rows)
    return figure_to_svg(fig, "training-log")


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value)


def summary_pairs(summary: TrainingSummary) -> list[tuple[str, Any]]:
    """The summary's figures as (name, text) pairs for a table."""
    fid = summary.fidelity
    pairs: list[tuple[str, Any]] = [
        ("run", summary.run_id),
        ("samples", summary.samples),
        ("steps", f"{summary.first_step} to {summary.last_step}"),
        ("epochs", f"{summary.first_epoch} to {summary.last_epoch}"),
        ("starts (1 + restarts)", summary.attempts),
        ("fidelity half-life", fid.text()),
        ("fidelity at start (fit)", _fmt(fid.start_pct)),
        ("fidelity latest", _fmt(fid.latest_pct)),
        ("fit slope of ln(shortfall) per epoch", _fmt(fid.slope_per_epoch)),
        ("memory-delta RSD across epochs (%)", _fmt(summary.memory.rsd_pct)),
        ("memory series", summary.memory.series),
        ("first step with non-finite gradients", _fmt(summary.first_nonfinite_step)),
        ("lowest bit-exact rate", _fmt(summary.min_bit_exact_rate)),
        ("gradient-norm growth per epoch", _fmt(summary.grad_norm_trend.growth_per_epoch)),
        ("monitor time, all samples (s)", _fmt(summary.monitor_wall_s)),
        ("mean training step (s)", _fmt(summary.step_wall_s_mean)),
        ("replayed samples dropped", summary.duplicates_dropped),
        ("cut-off last line (bytes)", summary.truncated_tail_bytes),
    ]
    return [(name, str(value)) for name, value in pairs]


def training_log_html(
    rows: Sequence[Row],
    summary: TrainingSummary,
    modules: Mapping[str, list[float | None]] | None = None,
    *,
    heading: str = "h2",
) -> str:
    """The charts and the summary table of one run (an HTML fragment)."""
    return "".join(
        [
            f'<{heading} id="training-monitor">Training monitor</{heading}>',
            '<p class="sub">Sampled during training by attest.TrainingMonitor on a fixed probe '
            "(docs/training-monitor.md): the fidelity half-life is read from a fit over the "
            "series, not from one point.</p>",
            training_plots(rows, summary, modules or {}),
            kv_columns(summary_pairs(summary), columns=2),
        ]
    )


def _largest_modules(samples: Sequence[SampleRecord]) -> dict[str, list[float | None]]:
    peak: dict[str, float] = {}
    for s in samples:
        for name, value in s.grad_norms.items():
            if value is not None:
                peak[name] = max(peak.get(name, 0.0), value)
    shown = sorted(peak, key=lambda n: -peak[n])[:_MODULES_SHOWN]
    return {name: [s.grad_norms.get(name) for s in samples] for name in sorted(shown)}


def training_section_of(record: Mapping[str, Any] | None) -> str:
    """The certificate report's section from the evidence's ``training_log`` (empty without)."""
    if not record:
        return ""
    summary = TrainingSummary.model_validate(record["summary"])
    rows = [r for r in record.get("series", []) if isinstance(r, Mapping)]
    note = (
        f'<p class="sub">log <code>{esc(record.get("log"))}</code>, sha256 '
        f"<code>{esc(record.get('sha256'))}</code> (a subject of the certificate)</p>"
    )
    return training_log_html(rows, summary) + note


def write_training_report(log_path: str | Path, out: str | Path, run_id: str | None = None) -> Path:
    """Write the self-contained HTML report of one run of a training log."""
    log = read_training_log(log_path)
    summary = summarize_training_log(log, run_id)
    samples = log.run(summary.run_id)
    written = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = f"Training log report: {Path(log_path).name}"
    body = "".join(
        [
            f"<header><h1>{esc(title)}</h1>",
            f'<p class="sub">run <code>{esc(summary.run_id)}</code> · report written {written}</p>',
            "</header>",
            training_log_html(series_of(samples), summary, _largest_modules(samples)),
            f"<footer>gradient-attest {esc(__version__)} · self-contained report</footer>",
        ]
    )
    return atomic_write_text(out, page(title, body))
