"""benchmarks/bench_certify.py's quick mode, end to end on its tiny plain-torch model (a real
``attest collect`` child and two bare children), and its targets' arithmetic."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def _load_bench() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))  # the script imports real_models beside it
    try:
        spec = importlib.util.spec_from_file_location(
            "bench_certify_under_test", BENCHMARKS / "bench_certify.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _load_bench()


def test_floors_come_from_the_shipped_clinical_strict_policy(bench: ModuleType) -> None:
    from attest.policy.model import load_policy

    rules = {r.id: r.threshold for r in load_policy("clinical-strict").rules}
    floors = bench.policy_floors()
    assert floors == {
        "repeats": rules["min_repeats"],
        "probe_examples": rules["min_probe_examples"],
    }
    assert floors["repeats"] >= 100


def _result(model: str, wall_s: float, f_s: float, rss_ratio: float) -> dict[str, Any]:
    return {"model": model, "collect": {"wall_s": wall_s}, "f_s": f_s, "rss_ratio": rss_ratio}


def test_targets_in_f_or_in_seconds(bench: ModuleType) -> None:
    # SwinUNETR: 180 F; at F = 3 s, 540 s passes and 541 s misses
    assert [t["passed"] for t in bench.targets(_result("swinunetr", 540, 3.0, 2.9))] == [True, True]
    assert [t["passed"] for t in bench.targets(_result("swinunetr", 541, 3.0, 3.1))] == [
        False,
        False,
    ]
    # resnet18: 160 F
    assert not bench.targets(_result("resnet18", 170, 1.0, 1.0))[0]["passed"]
    # a model whose F is under 0.5 s meets the wall target within 60 s, whatever that is in F
    cheap = bench.targets(_result("vit", 59, 0.2, 1.0))[0]
    assert cheap["passed"] and cheap["value"] == "59 s"
    assert not bench.targets(_result("vit", 61, 0.2, 1.0))[0]["passed"]


def test_quick_run_measures_a_real_collect(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    assert bench.main(["--quick", "--models", "tiny", "--json", str(out)]) == 0
    (result,) = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert result["model"] == "tiny" and result["quick"]
    # the spec's repeats reached the collect: the determinism check counted them
    assert result["repeats"] == bench.QUICK_REPEATS == result["determinism_runs"]
    assert result["probe_examples"] == bench.TINY_SHAPE[0]
    assert len(result["f_passes_s"]) == 4 and min(result["f_passes_s"]) > 0
    assert result["collect"]["wall_s"] > result["f_s"] > 0
    assert result["collect"]["cpu_s"] > 0
    assert result["bare"]["peak_rss_bytes"] > 0
    assert result["rss_ratio"] >= 1.0  # the collect builds the same model and runs it more
    phases = {p["phase"] for p in result["phases"]}
    assert {"capture", "profile", "gradients", "ig"} <= phases
    assert sum(p["duration_s"] for p in result["phases"]) < result["collect"]["wall_s"]
    assert result["checks"]["determinism"]["status"] == "computed"
    assert isinstance(result["failed_items"], list)
    for line in (
        "targets: wall",
        "peak RSS",
        "| profile |",
        "| determinism |",
        "failed or errored",
    ):
        assert line in printed
    assert "PASS" in printed or "MISS" in printed
