"""The training-log summary without torch: the half-life fit on series with known answers,
memory consistency, the first non-finite step, and the reader's tolerance of a cut last line."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from attest.errors import InputError
from attest.evidence.training_log import SampleRecord, read_training_log
from attest.evidence.training_summary import fit_half_life, summarize_training_log


def _geometric(
    start: float, rate: float, epochs: int, noise: float, seed: int
) -> tuple[list[float], list[float]]:
    """Shortfall ``start * exp(rate * epoch)`` with lognormal noise, four points per epoch."""
    rng = random.Random(seed)
    xs, fid = [], []
    for e in range(epochs):
        for _ in range(4):
            xs.append(float(e))
            fid.append(100.0 - start * math.exp(rate * e + rng.gauss(0.0, noise)))
    return xs, fid


def test_the_half_life_of_a_known_decay_is_found_within_its_uncertainty() -> None:
    """Over 200 noisy series with a known half-life, the stated uncertainty (two standard
    errors) covers the true value about 95 % of the time, and the estimate is unbiased."""
    start, rate = 1e-5, 0.8
    exact = math.log1p(0.1 / start) / rate  # 11.5 epochs
    errors = []
    for seed in range(200):
        result = fit_half_life(*_geometric(start, rate, 16, noise=0.5, seed=seed))
        assert result.status == "reached" and result.half_life_epochs is not None
        assert result.uncertainty_epochs is not None and result.uncertainty_epochs < 1.0
        errors.append((result.half_life_epochs - exact) / result.uncertainty_epochs)
    covered = sum(abs(e) <= 1.0 for e in errors) / len(errors)
    assert 0.9 <= covered <= 0.99
    assert abs(sum(errors) / len(errors)) < 0.15


def test_one_noisy_point_does_not_make_a_half_life() -> None:
    xs, fid = _geometric(1e-5, 0.0, 10, noise=0.3, seed=1)
    fid[17] = 99.5  # one spike of half a percentage point
    result = fit_half_life(xs, fid)
    assert result.status == "not reached" and result.half_life_epochs is None


def test_a_decay_not_yet_reached_is_projected() -> None:
    xs, fid = _geometric(1e-5, 0.8, 8, noise=0.2, seed=2)
    result = fit_half_life(xs, fid)
    assert result.status == "not reached"
    assert result.projected_half_life_epochs == pytest.approx(math.log1p(1e4) / 0.8, rel=0.15)


def test_too_few_points_is_insufficient_data() -> None:
    assert fit_half_life([0.0, 0.0], [99.9, 99.9]).status == "insufficient data"
    assert fit_half_life([], []).status == "insufficient data"


def _sample(step: int, epoch: int, **over: object) -> str:
    record = {
        "run_id": "r",
        "attempt": 0,
        "step": step,
        "epoch": epoch,
        "time": "2026-01-01T00:00:00Z",
        "loss": 1.0,
        "fidelity_pct": 99.99999,
        "min_fidelity_pct": 99.99999,
        "bit_exact_rate": 1.0,
        "grad_norm": 1.0,
        "nonfinite": 0,
        "saved_tensor_bytes": 1000,
        "monitor_wall_s": 0.01,
        **over,
    }
    return SampleRecord.model_validate(record).model_dump_json() + "\n"


def test_memory_consistency_nonfinite_step_and_a_cut_line(tmp_path: Path) -> None:
    lines = [_sample(s, s // 4, saved_tensor_bytes=1000 + 10 * (s // 4 % 2)) for s in range(12)]
    lines[9] = _sample(9, 2, nonfinite=3, grad_norm=None)
    lines.append(lines[5])  # a replayed step
    log = tmp_path / "run.jsonl"
    log.write_text("".join(lines) + _sample(12, 3)[:40])
    read = read_training_log(log)
    assert read.truncated_tail_bytes == 40 and read.duplicates == 1
    summary = summarize_training_log(read)
    assert summary.samples == 12 and summary.first_nonfinite_step == 9
    means = [1000.0, 1010.0, 1000.0]
    expected = 100 * (sum((m - 1003.333333) ** 2 for m in means) / 3) ** 0.5 / 1003.333333
    assert summary.memory.rsd_pct == pytest.approx(expected, rel=1e-5)


def test_a_malformed_middle_line_names_its_number(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    log.write_text(
        _sample(0, 0) + json.dumps({"kind": "sample", "step": -1}) + "\n" + _sample(1, 0)
    )
    with pytest.raises(InputError, match="line 2"):
        read_training_log(log)
