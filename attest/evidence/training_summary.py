"""The summary of a training log (``attest training summary``): plain Python, no torch, no numpy.

- **Fidelity half-life**: epochs until the worst parameter's gradient fidelity
  (``min_fidelity_pct``) has dropped :data:`HALF_LIFE_DROP_PP` (0.1) percentage points below its
  level at the start. Read from a fit over the whole series, not from one noisy point: the
  shortfall ``L = 100 - fidelity`` is fitted as ``ln L = a + k * epoch`` by least squares
  (float32 rounding error compounds as weights grow, so it grows geometrically; a stable run
  fits ``k`` near 0). The start level is the fit's value at the first epoch; the half-life is
  where the fitted shortfall reaches that level plus 0.1. It is ``reached`` only when that
  point lies within the epochs the log covers; otherwise "not reached", with a projection when
  the fit's slope is positive by more than two standard errors. The uncertainty is two
  standard errors of the half-life, propagated from the fit's covariance (delta method).
- **Memory-delta consistency**: the relative standard deviation (population, in %) of the
  per-epoch mean forward-to-backward memory delta (the CUDA allocator's figure where every
  sample has one, else the saved-tensor bytes).
- **First non-finite step**: the first sample step with a NaN or Inf in any gradient.
- **Gradient-norm trends**: per module, the growth factor per epoch of the gradient norm
  (``exp`` of the least-squares slope of ``ln norm`` over epochs).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from attest.errors import InputError
from attest.evidence.training_log import SampleRecord, TrainingLog

__all__ = [
    "HALF_LIFE_DROP_PP",
    "SERIES_FIELDS",
    "FidelityHalfLife",
    "MemoryConsistency",
    "NormTrend",
    "TrainingSummary",
    "fit_half_life",
    "series_of",
    "summarize_training_log",
]

HALF_LIFE_DROP_PP = 0.1
_FLOOR_PP = 1e-12  # a shortfall of exactly 0 (bit-exact against float64) fits as this
_SIGMAS = 2.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FidelityHalfLife(_Strict):
    """The half-life fit of one fidelity series (see the module doc)."""

    series: str = "min_fidelity_pct"
    status: Literal["reached", "not reached", "insufficient data"]
    half_life_epochs: float | None = None  # when reached
    uncertainty_epochs: float | None = None  # two standard errors of the half-life
    projected_half_life_epochs: float | None = None  # not reached, but decaying significantly
    start_pct: float | None = None  # the fit's level at the first epoch
    latest_pct: float | None = None  # the last sample's value
    lowest_pct: float | None = None
    slope_per_epoch: float | None = None  # k of ln(shortfall) = a + k * epoch
    slope_stderr: float | None = None
    r2: float | None = None
    points: int = 0
    epochs_covered: float = 0.0

    def text(self) -> str:
        """One line: the half-life with its uncertainty, the projection, or the status."""
        if self.status == "reached":
            return (
                f"{self.half_life_epochs:.3g} epochs "
                f"(± {self.uncertainty_epochs:.2g}, two standard errors)"
            )
        if self.projected_half_life_epochs is not None:
            return f"not reached (the fit projects {self.projected_half_life_epochs:.3g} epochs)"
        return self.status


class MemoryConsistency(_Strict):
    series: Literal["allocator_delta_bytes", "saved_tensor_bytes"]
    epoch_means: dict[str, float] = Field(default_factory=dict)
    rsd_pct: float | None = None  # None with fewer than two epochs


class NormTrend(_Strict):
    first: float | None
    last: float | None
    growth_per_epoch: float | None  # exp(slope of ln norm per epoch); None below two epochs


class TrainingSummary(_Strict):
    """What ``attest training summary --json`` prints and certify puts into the evidence."""

    run_id: str
    samples: int
    attempts: int  # starts of this run (1 + restarts)
    first_step: int
    last_step: int
    first_epoch: int
    last_epoch: int
    duplicates_dropped: int
    truncated_tail_bytes: int
    fidelity: FidelityHalfLife
    memory: MemoryConsistency
    first_nonfinite_step: int | None
    min_bit_exact_rate: float | None
    grad_norm_trend: NormTrend
    module_grad_norm_trends: dict[str, NormTrend] = Field(default_factory=dict)
    latest: dict[str, float | int | None] = Field(default_factory=dict)
    monitor_wall_s: float = 0.0
    step_wall_s_mean: float | None = None

    def metrics(self) -> dict[str, float | int | bool | None]:
        """The headline figures by name (policies, OpenMetrics)."""
        return {
            "fidelity_half_life_reached": self.fidelity.status == "reached",
            "fidelity_half_life_epochs": self.fidelity.half_life_epochs,
            "fidelity_half_life_uncertainty_epochs": self.fidelity.uncertainty_epochs,
            "fidelity_projected_half_life_epochs": self.fidelity.projected_half_life_epochs,
            "fidelity_start_pct": self.fidelity.start_pct,
            "fidelity_latest_pct": self.fidelity.latest_pct,
            "memory_delta_rsd_pct": self.memory.rsd_pct,
            "first_nonfinite_step": self.first_nonfinite_step,
            "min_bit_exact_rate": self.min_bit_exact_rate,
            "grad_norm_growth_per_epoch": self.grad_norm_trend.growth_per_epoch,
            "samples": self.samples,
        }


# the per-sample figures the report charts and the evidence keeps (one row per sample)
SERIES_FIELDS = (
    "step",
    "epoch",
    "loss",
    "fidelity_pct",
    "min_fidelity_pct",
    "bit_exact_rate",
    "grad_norm",
    "nonfinite",
    "saved_tensor_bytes",
    "allocator_delta_bytes",
    "loss_scale",
    "step_wall_s",
    "monitor_wall_s",
)


def series_of(samples: Sequence[SampleRecord]) -> list[dict[str, float | int | None]]:
    """The headline figures of each sample, as plain rows."""
    return [{name: getattr(s, name) for name in SERIES_FIELDS} for s in samples]


def _least_squares(
    xs: Sequence[float], ys: Sequence[float]
) -> tuple[float, float, float, float, float, float] | None:
    """``(a, k, var_a, var_k, r2, x_mean)`` of ``y = a + k (x - x_mean)``; None if degenerate."""
    n = len(xs)
    if n < 3:
        return None
    x_mean, y_mean = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - x_mean) ** 2 for x in xs)
    if sxx == 0.0:
        return None
    k = sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, ys, strict=True)) / sxx
    a = y_mean  # centred: a and k are uncorrelated
    residual = sum((y - a - k * (x - x_mean)) ** 2 for x, y in zip(xs, ys, strict=True))
    total = sum((y - y_mean) ** 2 for y in ys)
    sigma2 = residual / (n - 2)
    r2 = 1.0 - residual / total if total > 0 else 1.0
    return a, k, sigma2 / n, sigma2 / sxx, r2, x_mean


def _crossing(a: float, k: float, x0: float, x_mean: float) -> float:
    """Epochs from ``x0`` until ``exp(a + k (x - x_mean))`` is 0.1 above its value at ``x0``."""
    start = math.exp(a + k * (x0 - x_mean))
    if k <= 0.0:
        return math.inf
    return math.log1p(HALF_LIFE_DROP_PP / start) / k


def fit_half_life(epochs: Sequence[float], fidelity_pct: Sequence[float]) -> FidelityHalfLife:
    """The fidelity half-life of one series (see the module doc for the model)."""
    pairs = [(x, f) for x, f in zip(epochs, fidelity_pct, strict=True) if math.isfinite(f)]
    if not pairs:
        return FidelityHalfLife(status="insufficient data")
    xs = [float(x) for x, _ in pairs]
    x0, x_last = min(xs), max(xs)
    common: dict[str, Any] = {
        "latest_pct": pairs[-1][1],
        "lowest_pct": min(f for _, f in pairs),
        "points": len(pairs),
        "epochs_covered": x_last - x0,
    }
    ys = [math.log(max(100.0 - f, _FLOOR_PP)) for _, f in pairs]
    fit = _least_squares(xs, ys)
    if fit is None:
        return FidelityHalfLife(status="insufficient data", **common)
    a, k, var_a, var_k, r2, x_mean = fit
    start_pct = 100.0 - math.exp(a + k * (x0 - x_mean))
    half_life = _crossing(a, k, x0, x_mean)
    described: dict[str, Any] = {
        "start_pct": start_pct,
        "slope_per_epoch": k,
        "slope_stderr": math.sqrt(var_k),
        "r2": r2,
        **common,
    }
    significant = k > _SIGMAS * math.sqrt(var_k)
    if not math.isfinite(half_life) or not significant:
        return FidelityHalfLife(status="not reached", **described)
    # delta method: d(half_life)/d(a) and /d(k) by central differences
    ha, hk = 1e-6 * max(1.0, abs(a)), 1e-6 * max(abs(k), 1e-12)
    da = (_crossing(a + ha, k, x0, x_mean) - _crossing(a - ha, k, x0, x_mean)) / (2 * ha)
    dk = (_crossing(a, k + hk, x0, x_mean) - _crossing(a, k - hk, x0, x_mean)) / (2 * hk)
    stderr = math.sqrt(da * da * var_a + dk * dk * var_k)
    if x0 + half_life <= x_last:
        return FidelityHalfLife(
            status="reached",
            half_life_epochs=half_life,
            uncertainty_epochs=_SIGMAS * stderr,
            **described,
        )
    return FidelityHalfLife(status="not reached", projected_half_life_epochs=half_life, **described)


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    x_mean, y_mean = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - x_mean) ** 2 for x in xs)
    if len(xs) < 2 or sxx == 0.0:
        return None
    return sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, ys, strict=True)) / sxx


def _norm_trend(points: list[tuple[int, float | None]]) -> NormTrend:
    values = [(float(e), v) for e, v in points if v is not None and v > 0 and math.isfinite(v)]
    first = points[0][1] if points else None
    last = points[-1][1] if points else None
    if len({e for e, _ in values}) < 2:
        return NormTrend(first=first, last=last, growth_per_epoch=None)
    slope = _slope([e for e, _ in values], [math.log(v) for _, v in values])
    growth = math.exp(slope) if slope is not None and abs(slope) < 700 else None
    return NormTrend(first=first, last=last, growth_per_epoch=growth)


def _memory(samples: list[SampleRecord]) -> MemoryConsistency:
    cuda = all(s.allocator_delta_bytes is not None for s in samples)
    per_epoch: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        value = s.allocator_delta_bytes if cuda else s.saved_tensor_bytes
        per_epoch[s.epoch].append(float(value or 0))
    means = {e: statistics.fmean(v) for e, v in sorted(per_epoch.items())}
    rsd: float | None = None
    if len(means) >= 2:
        centre = statistics.fmean(means.values())
        spread = statistics.pstdev(means.values())
        rsd = 0.0 if spread == 0.0 else (100.0 * spread / centre if centre > 0 else math.inf)
    return MemoryConsistency(
        series="allocator_delta_bytes" if cuda else "saved_tensor_bytes",
        epoch_means={str(e): m for e, m in means.items()},
        rsd_pct=rsd if rsd is None or math.isfinite(rsd) else None,
    )


def summarize_training_log(log: TrainingLog, run_id: str | None = None) -> TrainingSummary:
    """The summary of one run of ``log`` (default: its last run)."""
    samples = log.run(run_id)
    chosen = samples[0].run_id if samples else (run_id or (log.run_ids or ["?"])[-1])
    if not samples:
        raise InputError(
            f"training log {log.path} has no sample of run {chosen!r}",
            hint="the monitor samples every `every` steps; train for longer or lower every=",
        )
    fid = [(s.epoch, s.min_fidelity_pct) for s in samples if s.min_fidelity_pct is not None]
    modules = sorted({m for s in samples for m in s.grad_norms})
    nonfinite = [s.step for s in samples if s.nonfinite > 0]
    walls = [s.step_wall_s for s in samples if s.step_wall_s is not None]
    last = samples[-1]
    return TrainingSummary(
        run_id=chosen,
        samples=len(samples),
        attempts=max(1, sum(1 for s in log.starts if s.run_id == chosen)),
        first_step=samples[0].step,
        last_step=last.step,
        first_epoch=min(s.epoch for s in samples),
        last_epoch=max(s.epoch for s in samples),
        duplicates_dropped=log.duplicates,
        truncated_tail_bytes=log.truncated_tail_bytes,
        fidelity=fit_half_life([e for e, _ in fid], [f for _, f in fid]),
        memory=_memory(samples),
        first_nonfinite_step=nonfinite[0] if nonfinite else None,
        min_bit_exact_rate=min(s.bit_exact_rate for s in samples),
        grad_norm_trend=_norm_trend([(s.epoch, s.grad_norm) for s in samples]),
        module_grad_norm_trends={
            m: _norm_trend([(s.epoch, s.grad_norms.get(m)) for s in samples if m in s.grad_norms])
            for m in modules
        },
        latest=series_of([last])[0],
        monitor_wall_s=sum(s.monitor_wall_s for s in samples),
        step_wall_s_mean=statistics.fmean(walls) if walls else None,
    )
