"""``collect(workers=N)``: the runners' pieces split over processes give the same evidence as
one process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _collect_models import make_spec, stable

from attest.collection import CHECK_RUNNERS, collect
from attest.collection.context import CollectContext
from attest.collection.gradients.gradcheck_groups import GROUPS, operator_groups
from attest.collection.parallel import operators_digest, plan_parts, units_of
from attest.collection.runners import measure_capture
from attest.errors import InputError
from attest.spec import load_spec

BATCHNORM = """
from torch import nn

def build():
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
"""


def _pieces_by_worker(evidence: dict[str, Any]) -> dict[str, dict[int | None, list[str]]]:
    """phase -> worker -> the piece keys it ran (joins apart)."""
    found: dict[str, dict[int | None, list[str]]] = {}
    for phase in evidence["phases"]:
        if phase.get("pieces") and phase["pieces"] != ["join"]:
            found.setdefault(phase["phase"], {})[phase["worker"]] = phase["pieces"]
    return found


@pytest.mark.slow
def test_two_workers_give_the_evidence_of_one(tmp_path: Path) -> None:
    spec = make_spec(tmp_path / "m", BATCHNORM, spec_extra="repeats: 4\nthreads: 1\nexport: onnx\n")
    one = collect(spec, output_dir=tmp_path / "one")
    two = collect(spec, output_dir=tmp_path / "two", workers=2)
    a, b = one.model_dump(mode="json"), two.model_dump(mode="json")
    assert {p["worker"] for p in b["phases"]} == {None, 1}
    # the runners were split into pieces, and pieces of one runner ran in both processes
    split = _pieces_by_worker(b)
    assert {"gradients", "ig", "profile"} <= set(split)
    assert any(set(workers) == {None, 1} for workers in split.values()), split
    assert not _pieces_by_worker(a)  # one process: whole runners
    for key in ("phases", "created_at"):
        a.pop(key), b.pop(key)
    assert stable(a) == stable(b)
    # the attributions, every check's items and figures: the same bits
    assert a["attributions"] == b["attributions"] and a["attributions"] is not None
    assert a["checks"]["gradcheck"]["items"] == b["checks"]["gradcheck"]["items"]
    # the exported files came back from the worker that ran the export, byte for byte
    assert two.export is not None and one.export is not None
    assert Path(two.export.onnx.path).read_bytes() == Path(one.export.onnx.path).read_bytes()
    assert two.export.onnx.sha256 == one.export.onnx.sha256


def _captured(tmp_path: Path, extra: str = "repeats: 5\nthreads: 1\n") -> CollectContext:
    ctx = CollectContext(spec=load_spec(make_spec(tmp_path / "m", spec_extra=extra)))
    measure_capture(ctx)
    return ctx


def test_the_plan_spreads_every_runners_pieces_over_the_workers(tmp_path: Path) -> None:
    ctx = _captured(tmp_path)
    runners = [str(r) for r in CHECK_RUNNERS]
    units = units_of(ctx, runners)
    by_runner: dict[str, list[str | None]] = {}
    for unit in units:
        by_runner.setdefault(unit.runner, []).append(unit.key)
    # the profiler's repeats, gradcheck's operator groups, IG's input groups and
    # randomization stages are pieces; export and training run whole
    assert by_runner["attest.collection.profile.profiler:run"] == [
        "fidelity", "repeat/001", "repeat/002", "repeat/003", "repeat/004", "threads",
    ]  # fmt: skip
    assert any(str(k).startswith("gradcheck/") for k in by_runner[runners[2]])
    assert {"inputs/000", "randomization/00", "repeats"} <= set(by_runner[runners[3]])
    assert by_runner[runners[4]] == [None] and by_runner[runners[5]] == [None]
    for workers in (1, 2, 3, 8):
        parts = plan_parts(units, workers)
        assert sorted((u.runner, str(u.key)) for p in parts for u in p) == sorted(
            (u.runner, str(u.key)) for u in units
        )
        assert [u.key for u in parts[0] if u.here] == ["fidelity"]  # it stays here
        assert all(not u.here for p in parts[1:] for u in p)
        assert len(parts) <= workers
    two = plan_parts(units, 2)
    for runner in (runners[1], runners[2], runners[3]):  # each one's pieces in both parts
        assert all(any(u.runner == runner for u in part) for part in two), runner
    with pytest.raises(InputError, match="--workers"):
        plan_parts(units, 0)


def test_the_operator_groups_do_not_depend_on_the_workers(tmp_path: Path) -> None:
    ctx = _captured(tmp_path)
    groups = operator_groups(ctx)
    assert 1 < len(groups) <= GROUPS
    assert [r.id for g in groups for r in g] == [r.id for r in ctx.operators or []]
    again = CollectContext(spec=ctx.spec)
    measure_capture(again)
    assert [[r.id for r in g] for g in operator_groups(again)] == [
        [r.id for r in g] for g in groups
    ]
    assert operators_digest(again) == operators_digest(ctx)


def test_workers_refuse_a_budget(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--workers cannot go with a --budget"):
        collect(make_spec(tmp_path / "m"), workers=2, budget_s=60.0)
