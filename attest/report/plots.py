"""Charts for the HTML report: matplotlib on the Agg canvas, rendered to inline SVG text.

Each function takes plain data (lists and arrays, never a file) and returns one ``<svg>``
element as a string, ready to be pasted into the page: no XML prolog, no external
references, text kept as text (``svg.fonttype: none``) so it stays searchable and small.
Figures never touch pyplot's global state, so rendering a report does not disturb a
notebook or another backend the caller uses.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

from attest.report._rows import OperatorSeries

__all__ = [
    "OperatorSeries",
    "figure_to_svg",
    "ig_heatmaps",
    "operator_profile",
    "randomization_curve",
]

_RC: Any = {  # typed loosely: matplotlib stubs want literal rc keys
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dde3ea",
    "grid.linewidth": 0.6,
    "axes.edgecolor": "#8a96a3",
    "axes.axisbelow": True,
}
GOOD = "#2e7d4f"
BAD = "#c62828"
SERIES_A = "#1f5fa8"
SERIES_B = "#e08a1e"
MUTED = "#9aa5b1"
_PROLOG = re.compile(r"^.*?(?=<svg)", re.DOTALL)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)
_ID_ATTR = re.compile(r'\b(id)="([^"]+)"')
_ID_REF = re.compile(r'(url\(|href=")#([^)"]+)')


def figure_to_svg(fig: Figure, name: str) -> str:
    """Render a figure to an inline ``<svg>`` string (deterministic ids salted by ``name``)."""
    FigureCanvasAgg(fig)
    buf = io.StringIO()
    with rc_context({**_RC, "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = _PROLOG.sub("", buf.getvalue(), count=1)
    text = _METADATA.sub("", text, count=1)  # RDF block: namespace URIs, nothing to show
    # matplotlib numbers its element ids per figure (figure_1, axes_1, clip paths...): prefix
    # them with the figure's name so several figures can share one HTML document.
    seen: dict[str, int] = {}

    def unique_id(match: re.Match[str]) -> str:
        # matplotlib derives ids from content, so identical images (colour bars) repeat an id;
        # references resolve to the first, which has the same content, so renaming is safe
        ident = f"{name}-{match.group(2)}"
        seen[ident] = seen.get(ident, 0) + 1
        suffix = f"-{seen[ident]}" if seen[ident] > 1 else ""
        return f'{match.group(1)}="{ident}{suffix}"'

    text = _ID_ATTR.sub(unique_id, text)
    text = _ID_REF.sub(lambda m: f"{m.group(1)}#{name}-{m.group(2)}", text)
    return text.replace("<svg ", f'<svg role="img" aria-label="{name}" ', 1)


def _new_figure(width: float, height: float) -> Figure:
    with rc_context(_RC):
        return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _arr(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def _shortfall(fidelity: np.ndarray, floor: float) -> np.ndarray:
    """100 - fidelity, with exact results (0) drawn at ``floor`` so the log axis can show them."""
    short = 100.0 - fidelity
    return np.where(np.isnan(short), np.nan, np.maximum(short, floor))


def _no_label(_value: float, _pos: float) -> str:
    return ""


def _fidelity_tick(value: float, _pos: float) -> str:
    return f"{100.0 - value:.10g}"


def _bands(ax: Any, groups: list[str]) -> None:
    """Alternate background bands per consecutive module, so a culprit's module is visible
    (one collection per axis, not one patch per module)."""
    spans: list[tuple[float, float]] = []
    start = 0
    shade = False
    for i in range(1, len(groups) + 1):
        if i == len(groups) or groups[i] != groups[start]:
            if shade:
                spans.append((start - 0.5, float(i - start)))
            shade = not shade
            start = i
    if spans:
        low, high = ax.get_ylim()
        ax.broken_barh(spans, (low, high - low), facecolors="#f1f4f8", zorder=0, lw=0)
        ax.set_ylim(low, high)


def _bars(ax: Any, x: np.ndarray, heights: np.ndarray, colors: Any) -> None:
    """Bars for a few points; thin vertical lines (one collection) for many."""
    if len(x) <= 80:
        ax.bar(x, heights, color=colors, width=0.8)
    else:
        ax.vlines(x, 0, heights, colors=colors, lw=max(0.6, 300 / len(x)))


def _outside_legend(ax: Any) -> None:
    """The legend to the right of the axes, where it never hides a data point."""
    ax.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5, frameon=False, borderaxespad=0
    )


def _human_bytes(value: float, _pos: float | None = None) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024.0
    return f"{value:.1f} GiB"


def _human_ns(value: float, _pos: float | None = None) -> str:
    if value <= 0:
        return "0"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} ns"


def _unavailable(ax: Any, what: str) -> None:
    """A panel whose data the evidence does not hold says so instead of drawing nothing."""
    ax.text(
        0.5,
        0.5,
        f"{what} not available in this evidence",
        ha="center",
        va="center",
        transform=ax.transAxes,
        color=MUTED,
    )


def _fidelity_panel(
    ax: Any, x: np.ndarray, series: OperatorSeries, flagged: np.ndarray, threshold: float | None
) -> None:
    """Fidelity, drawn as the shortfall from 100 on a log axis (inverted: up is better),
    because every useful value sits between 99.9 and 100."""
    acc, loc = _arr(series.fidelity), _arr(series.local_fidelity)
    both = np.concatenate([100.0 - acc, 100.0 - loc])
    positive = both[np.isfinite(both) & (both > 0)]
    floor = float(positive.min()) / 10.0 if positive.size else 1e-9
    floor = max(floor, 1e-12)
    if np.isfinite(acc).any() or np.isfinite(loc).any():
        ax.plot(
            x, _shortfall(acc, floor), marker="o", ms=3, lw=1, color=SERIES_A, label="accumulated"
        )
        ax.plot(
            x, _shortfall(loc, floor), marker="s", ms=3, lw=0, color=SERIES_B, label="local (alone)"
        )
        ax.set_yscale("log")
        ax.invert_yaxis()
        ax.yaxis.set_major_formatter(FuncFormatter(_fidelity_tick))
        if threshold is not None and threshold < 100:
            ax.axhline(100.0 - threshold, color=BAD, lw=1, ls="--", label=f"policy {threshold:g} %")
        bad = flagged & (np.isfinite(acc) | np.isfinite(loc))
        if bad.any():
            # circle the worse of the two figures of each operator a failing finding names
            worst = np.fmax(_shortfall(acc, floor), _shortfall(loc, floor))
            ax.scatter(
                x[bad],
                worst[bad],
                s=60,
                facecolors="none",
                edgecolors=BAD,
                lw=1.4,
                zorder=5,
                label="finding",
            )
        ax.yaxis.set_minor_locator(LogLocator(subs=(3.0,)))
        low, high = sorted(ax.get_ylim())
        narrow = high / low < 100  # under two decades: label the 3x ticks too
        ax.yaxis.set_minor_formatter(FuncFormatter(_fidelity_tick if narrow else _no_label))
        _outside_legend(ax)
    else:
        _unavailable(ax, "fidelity")
    ax.set_title(
        "Fidelity against float64 (%; log scale of 100 − fidelity, up is better)", loc="left"
    )
    ax.set_ylabel("fidelity %")


def _stability_panel(
    ax: Any, x: np.ndarray, series: OperatorSeries, threshold: float | None
) -> None:
    """Stability score 0..100, bars below the policy's threshold in red."""
    stab = _arr(series.stability)
    if np.isfinite(stab).any():
        below = stab < (threshold if threshold is not None else 100.0)
        colors = [BAD if b else GOOD for b in below]
        _bars(ax, x, np.nan_to_num(stab, nan=0.0), colors)
        if threshold is not None:
            ax.axhline(threshold, color=BAD, lw=1, ls="--", label=f"policy {threshold:g}")
            _outside_legend(ax)
        ax.set_ylim(0, 105)
    else:
        _unavailable(ax, "stability")
    ax.set_title("Stability score (0–100; 100 = bit-exact in every run)", loc="left")
    ax.set_ylabel("score")


def _memory_panel(ax: Any, x: np.ndarray, series: OperatorSeries) -> None:
    """Memory saved for backward."""
    mem = _arr(series.memory_bytes)
    if np.isfinite(mem).any():
        _bars(ax, x, np.nan_to_num(mem, nan=0.0), SERIES_A)
        ax.yaxis.set_major_formatter(FuncFormatter(_human_bytes))
    else:
        _unavailable(ax, "memory")
    ax.set_title("Memory saved for backward", loc="left")
    ax.set_ylabel("bytes")


def _time_panel(ax: Any, x: np.ndarray, series: OperatorSeries) -> None:
    """Median time per call, forward and backward; log scale when they span decades."""
    fwd, bwd = _arr(series.forward_ns), _arr(series.backward_ns)
    if (np.isfinite(fwd) & (fwd > 0)).any() or (np.isfinite(bwd) & (bwd > 0)).any():
        for values, marker, color, label in (
            (fwd, "o", SERIES_A, "forward"),
            (bwd, "s", SERIES_B, "backward"),
        ):
            ax.plot(
                x,
                np.where(values > 0, values, np.nan),
                marker=marker,
                ms=3,
                lw=1,
                color=color,
                label=label,
            )
        positive = np.concatenate([fwd[fwd > 0], bwd[bwd > 0]])
        if positive.max() / positive.min() > 20:  # several decades: log; else linear reads better
            ax.set_yscale("log")
        else:
            ax.set_ylim(0, positive.max() * 1.1)
        ax.yaxis.set_major_formatter(FuncFormatter(_human_ns))
        ax.yaxis.set_minor_formatter(FuncFormatter(_no_label))
        _outside_legend(ax)
    else:
        _unavailable(ax, "timings")
    ax.set_title("Median time per call", loc="left")
    ax.set_ylabel("time")


def operator_profile(
    series: OperatorSeries,
    *,
    fidelity_threshold: float | None = None,
    stability_threshold: float | None = None,
    x_title: str = "operator (execution order)",
) -> str:
    """Four aligned panels: fidelity (accumulated, local), stability, saved memory, time."""
    n = len(series.labels)
    x = np.arange(n)
    fig = _new_figure(10.5, 9.2)
    axes = fig.subplots(4, 1, sharex=True)
    flagged = np.array(series.flagged, dtype=bool)
    _fidelity_panel(axes[0], x, series, flagged, fidelity_threshold)
    _stability_panel(axes[1], x, series, stability_threshold)
    _memory_panel(axes[2], x, series)
    _time_panel(axes[3], x, series)
    for ax in axes:
        _bands(ax, series.groups)
        ax.set_xlim(-0.5, max(n - 0.5, 0.5))
    step = max(1, math.ceil(n / 60))
    axes[3].set_xticks(x[::step])
    labels = [t if len(t) <= 28 else t[:27] + "…" for t in series.labels[::step]]
    axes[3].set_xticklabels(labels, rotation=90, fontsize=6.5)
    axes[3].set_xlabel(x_title)
    return figure_to_svg(fig, "operator-profile")


def _image_of(sample: np.ndarray) -> tuple[np.ndarray, str]:
    """A displayable 2-D (or RGB) image of one input; returns (image, how it was reduced)."""
    a = np.asarray(sample, dtype=float)
    note = ""
    while a.ndim > 3:  # volumes (C, D, H, W): the middle slice
        note = f"middle slice of {a.shape[1]}"
        a = a[:, a.shape[1] // 2] if a.shape[0] <= 4 else a[a.shape[0] // 2]
    if a.ndim == 3:
        if a.shape[0] == 3:
            lo, hi = float(a.min()), float(a.max())
            return np.transpose((a - lo) / (hi - lo if hi > lo else 1.0), (1, 2, 0)), note
        if a.shape[0] == 1:
            return a[0], note
        return a.mean(axis=0), (note + "; " if note else "") + f"mean of {a.shape[0]} channels"
    return a, note


def _attribution_map(attr: np.ndarray) -> np.ndarray:
    a = np.asarray(attr, dtype=float)
    while a.ndim > 3:
        a = a[:, a.shape[1] // 2] if a.shape[0] <= 4 else a[a.shape[0] // 2]
    if a.ndim == 3:
        return np.asarray(a.sum(axis=0))  # channels summed: the attribution of the pixel
    return a


def ig_heatmaps(
    inputs: np.ndarray | None,
    attributions: np.ndarray,
    titles: Sequence[str],
    captions: Sequence[str] = (),
    *,
    max_inputs: int = 8,
    pairs_per_row: int = 4,
) -> str:
    """Each probe input beside its integrated-gradients map, a few pairs per row. Colours are
    diverging and symmetric around zero per map (red adds to the target, blue takes away);
    the map's largest magnitude is written under it instead of a colour bar per map."""
    n = min(len(attributions), max_inputs)
    per_pair = 2 if inputs is not None else 1
    per_row = max(1, min(pairs_per_row, n))
    rows = -(-n // per_row)
    with rc_context(_RC):  # a fixed grid: constrained layout costs seconds on many small axes
        fig = Figure(figsize=(1.45 * per_pair * per_row + 0.3 * per_row, 1.9 * rows + 0.1), dpi=100)
    grid = fig.add_gridspec(
        rows,
        per_pair * per_row,
        wspace=0.08,
        hspace=0.45,
        left=0.01,
        right=0.99,
        top=0.9,
        bottom=0.08,
    )
    for i in range(n):
        row, col = divmod(i, per_row)
        first = col * per_pair
        title = titles[i] if i < len(titles) else f"input {i}"
        caption = captions[i] if i < len(captions) else ""
        if inputs is not None:
            ax = fig.add_subplot(grid[row, first])
            img, note = _image_of(inputs[i])
            if img.ndim == 1:
                ax.plot(img, color=SERIES_A, lw=1)
            else:
                ax.imshow(img, cmap="gray" if img.ndim == 2 else None, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(title, fontsize=7.5, loc="left")
            ax.set_xlabel("; ".join(t for t in (caption, note) if t), fontsize=6.5)
        ax = fig.add_subplot(grid[row, first + per_pair - 1])
        attr = _attribution_map(attributions[i])
        limit = float(np.nanmax(np.abs(attr))) if attr.size else 0.0
        if attr.ndim == 1:
            ax.bar(np.arange(attr.size), attr, color=[GOOD if v >= 0 else BAD for v in attr])
        else:
            ax.imshow(
                attr,
                cmap="RdBu_r",
                vmin=-(limit or 1.0),
                vmax=limit or 1.0,
                interpolation="nearest",
            )
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title("attribution" if inputs is not None else title, fontsize=7.5, loc="left")
        ax.set_xlabel(f"red +, blue −; max |a| {limit:.2g}", fontsize=6.5)
    return figure_to_svg(fig, "ig-heatmaps")


def randomization_curve(
    layers: Sequence[str],
    curves: Mapping[str, Sequence[float | None]],
    *,
    threshold: float | None = None,
) -> str:
    """Rank correlation of attributions with the original as the weights are randomized layer
    by layer from the top (one line per probe input); ``threshold`` bounds ``|rho|`` at the end."""
    # Every curve starts at rho = 1 by definition (the original attributions against
    # themselves); drawing that point shows how far each randomization step moves them.
    layers = ["none (original)", *layers]
    curves = {label: [1.0, *values] for label, values in curves.items()}
    n = len(layers)
    x = np.arange(n)
    fig = _new_figure(8.5, 3.6)
    ax = fig.subplots()
    palette = [SERIES_A, SERIES_B, GOOD, "#7b4fa0", "#5b6b7a", "#b0562b", "#2a8fa0", "#8a8a2a"]
    lowest = 0.0
    for k, (label, values) in enumerate(curves.items()):
        y = _arr(values)
        if np.isfinite(y).any():
            lowest = min(lowest, float(np.nanmin(y)))
        ax.plot(x, y, marker="o", ms=4, lw=1.4, color=palette[k % len(palette)], label=label)
        last = y[-1] if y.size else np.nan
        if threshold is not None and np.isfinite(last) and abs(last) >= threshold:
            ax.scatter([x[-1]], [last], s=80, facecolors="none", edgecolors=BAD, lw=1.6, zorder=5)
    if threshold is not None:
        ax.axhline(
            threshold, color=BAD, ls="--", lw=1, label=f"limit |ρ| < {threshold:g} at the end"
        )
        ax.axhline(-threshold, color=BAD, ls="--", lw=1)
    ax.axhline(0, color=MUTED, lw=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels(
        [t if len(t) <= 28 else t[:27] + "…" for t in layers], rotation=40, ha="right", fontsize=7
    )
    ax.set_ylim(min(-0.1, lowest - 0.05), 1.05)
    ax.set_xlabel("randomized down to this layer (cascading, from the output)")
    ax.set_ylabel("Spearman ρ with original")
    ax.set_title(
        "Model-randomization test (Adebayo et al. 2018): attributions should decorrelate",
        loc="left",
    )
    _outside_legend(ax)
    return figure_to_svg(fig, "ig-randomization")
