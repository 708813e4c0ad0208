"""The shipped example models are what their train.py produces, and score what they claim.

Each ``examples/*/train.py`` runs in a subprocess (it sets torch's global thread count and
deterministic mode). Scoring the shipped weights is quick; retraining is marked slow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
# example folder -> the held-out metric its README reports, and the least acceptable value
EXAMPLES = {
    "amp-seg": ("test_dice", 0.8),
    "digits": ("test_accuracy", 0.95),
    "phantom-seg": ("test_dice", 0.8),
    "volume3d": ("test_dice", 0.9),
    "unstable": ("test_accuracy_float16", 0.9),
}


def run_train(example: str, *args: str) -> dict[str, float]:
    script = REPO / "examples" / example / "train.py"
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, float] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_shipped_weights_score_what_metrics_json_says(example: str) -> None:
    metric, floor = EXAMPLES[example]
    folder = REPO / "examples" / example
    claimed = json.loads((folder / "metrics.json").read_text())
    scored = run_train(example, "--evaluate", str(folder))
    assert scored[metric] == claimed[metric]
    assert scored[metric] >= floor
    assert f"{claimed[metric]}" in (folder / "README.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_retraining_reproduces_the_shipped_model(example: str, tmp_path: Path) -> None:
    metric, _ = EXAMPLES[example]
    folder = REPO / "examples" / example
    metrics = run_train(example, "--out", str(tmp_path))
    claimed = json.loads((folder / "metrics.json").read_text())
    # Same torch build and CPU: bit-identical. Elsewhere the last bits may differ, not the score.
    assert metrics[metric] == pytest.approx(claimed[metric], abs=0.01)
    assert (tmp_path / "probe.safetensors").read_bytes() == (
        folder / "probe.safetensors"
    ).read_bytes()
    for name in ("weights.safetensors", "probe.safetensors", "metrics.json"):
        assert (tmp_path / name).stat().st_size > 0
