"""``collect(workers=N)``: the runners split over processes give the same evidence as one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _collect_models import make_spec

from attest.collection import CHECK_RUNNERS, collect
from attest.collection.context import CheckSettings
from attest.collection.parallel import plan_parts
from attest.errors import InputError
from attest.spec import load_spec

BATCHNORM = """
from torch import nn

def build():
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
"""
# what differs between two runs of the same work: wall-clock figures, where files were put
_VOLATILE = ("_ns", "duration_s", "peak_rss_bytes", "created_at", "path", "cpu_s")


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _stable(v)
            for k, v in value.items()
            if not any(k.endswith(s) or k == s for s in _VOLATILE) and "_ns_" not in k
        }
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


@pytest.mark.slow
def test_two_workers_give_the_evidence_of_one(tmp_path: Path) -> None:
    spec = make_spec(tmp_path / "m", BATCHNORM, spec_extra="repeats: 3\nthreads: 1\nexport: onnx\n")
    one = collect(spec, output_dir=tmp_path / "one")
    two = collect(spec, output_dir=tmp_path / "two", workers=2)
    a, b = one.model_dump(mode="json"), two.model_dump(mode="json")
    assert {p["worker"] for p in b["phases"]} == {None, 1}
    for key in ("phases", "created_at"):
        a.pop(key), b.pop(key)
    assert _stable(a) == _stable(b)
    # the exported files came back from the worker that ran the export, byte for byte
    assert two.export is not None and one.export is not None
    assert Path(two.export.onnx.path).read_bytes() == Path(one.export.onnx.path).read_bytes()
    assert two.export.onnx.sha256 == one.export.onnx.sha256


def test_the_plan_puts_every_runner_once_and_the_profiler_here(tmp_path: Path) -> None:
    loaded = load_spec(make_spec(tmp_path / "m"))
    runners = [str(r) for r in CHECK_RUNNERS]
    for workers in (1, 2, 3, 8):
        parts = plan_parts(runners, workers, CheckSettings(), loaded)
        assert "attest.collection.profile.profiler:run" in parts[0]
        assert all(p[0] == "attest.collection.profile.topology:run" for p in parts)
        rest = [r for p in parts for r in p[1:]]
        assert sorted(rest) == sorted(runners[1:])
        assert len(parts) <= workers
    with pytest.raises(InputError, match="--workers"):
        plan_parts(runners, 0, CheckSettings(), loaded)


def test_workers_refuse_a_budget(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--workers cannot go with a --budget"):
        collect(make_spec(tmp_path / "m"), workers=2, budget_s=60.0)
