"""The collect orchestrator: runners, missing modules, errors, annotations, schema, determinism."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import torch
from _collect_models import MLP, make_spec

from attest.collection import CHECK_RUNNERS, collect
from attest.collection.context import CollectContext
from attest.evidence.merge import merge_evidence
from attest.evidence.model import CHECK_IDS, CheckResult, Evidence

MINE = ["attest.collection.profile.topology:run", "attest.collection.profile.profiler:run"]
SCHEMA = Path(__file__).resolve().parents[3] / "schemas" / "evidence.schema.json"
TIMING_KEYS = {
    "created_at",
    "forward_ns",
    "backward_ns",
    "duration_s",
    "per_target",
    "phases",  # wall, CPU and memory of each phase: measured, not reproducible
    "peak_rss_bytes",
}


def _strip_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_timings(v)
            for k, v in value.items()
            if k not in TIMING_KEYS and "_ns_" not in k  # and the timings' spread (_ns_p95...)
        }
    if isinstance(value, list):
        return [_strip_timings(v) for v in value]
    return value


def test_other_engineers_runners_are_listed() -> None:
    names = [r for r in CHECK_RUNNERS if isinstance(r, str)]
    assert names[:2] == MINE
    assert (
        "attest.collection.gradients.runner:run" in names
        and "attest.collection.ig.checks:run" in names
    )


def test_missing_runner_module_is_not_implemented_and_raising_runner_is_error(
    tmp_path: Path,
) -> None:
    def boom(ctx: CollectContext) -> list[CheckResult]:
        raise ZeroDivisionError("planted")

    def fine(ctx: CollectContext) -> list[CheckResult]:
        assert ctx.operators and ctx.operators[0].op == "aten.t.default"
        assert ctx.operators[1].args[0].shape == (16,)  # addmm(bias, x, w.t())
        return [CheckResult(check="export", status="not_computed", reason="no export")]

    ev = collect(
        make_spec(tmp_path, MLP, spec_extra="repeats: 2\n"),
        runners=["attest.collection.no_such_module_xyz:run", boom, fine],
    )
    assert set(ev.checks) == set(CHECK_IDS)
    assert ev.checks["export"].status == "not_computed"
    assert ev.checks["topology"].status == "not_implemented"  # nobody produced it
    for check_id in CHECK_IDS:
        assert ev.checks[check_id].status != "computed" or check_id == "export"
    # a runner that raises names where; its checks (unknown for a bare callable) are not passes
    assert all(c.status in ("not_implemented", "error", "not_computed") for c in ev.checks.values())


def test_raising_named_runner_reports_error_for_its_checks(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import attest.collection.profile.topology as topology

    def broken(ctx: CollectContext) -> list[CheckResult]:
        raise KeyError("planted failure")

    monkeypatch.setattr(topology, "run", broken)
    ev = collect(make_spec(tmp_path, MLP, spec_extra="repeats: 2\n"), runners=MINE)
    topo = ev.checks["topology"]
    assert topo.status == "error" and "planted failure" in (topo.reason or "")
    assert "attest.collection.profile.topology:run" in (topo.reason or "")
    assert ev.checks["determinism"].status == "computed"  # the others still ran


def test_evidence_validates_against_schema_and_is_deterministic(tmp_path: Path) -> None:
    path = make_spec(tmp_path, MLP, spec_extra="repeats: 2\n")
    a = collect(path, runners=MINE, out=tmp_path / "a.json")
    b = collect(path, runners=MINE)
    data = json.loads((tmp_path / "a.json").read_text())
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    assert Evidence.model_validate(data) == a
    assert _strip_timings(a.model_dump(mode="json")) == _strip_timings(b.model_dump(mode="json"))
    assert set(a.artifacts) == {"spec", "weights", "probe"}
    assert all(len(v["sha256"]) == 64 for v in a.artifacts.values())
    assert a.model["digest"] == a.artifacts["weights"]["sha256"]
    assert a.environment["target"].startswith("cpu:")
    assert a.operators[0].hardware_affinity_mask == [a.environment["target"]]
    assert [m.module for m in a.modules] == ["0", "1", "2", "3", "4"]
    assert sum(m.operators for m in a.modules) == len(a.operators)


ANNOTATED = """
import torch
from torch import nn
from attest.annotations import unstable_grad

@unstable_grad(reason="sorting network: gradient defined almost everywhere", checks=("kinks",))
class Sorter(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=1).values

def build():
    return nn.Sequential(nn.Linear(8, 8), Sorter(), nn.Linear(8, 3))
"""


def test_unstable_grad_annotations_are_recorded(tmp_path: Path) -> None:
    ev = collect(make_spec(tmp_path, ANNOTATED, spec_extra="repeats: 2\n"), runners=MINE)
    assert ev.annotations == [
        {
            "module": "1",
            "reason": "sorting network: gradient defined almost everywhere",
            "checks": ["kinks"],
        }
    ]
    row = next(m for m in ev.modules if m.module == "1")
    assert row.annotation is not None and "sorting network" in row.annotation


def test_merge_unions_affinity_and_keeps_each_target(tmp_path: Path) -> None:
    ev = collect(make_spec(tmp_path, MLP, spec_extra="repeats: 2\n"), runners=MINE)
    other = ev.model_copy(deep=True)
    other.targets = ["cuda:sm_90"]
    other.environment = {**other.environment, "target": "cuda:sm_90"}
    for row in other.operators:
        row.hardware_affinity_mask = ["cuda:sm_90"]
        row.stability_score = 50.0
    merged = merge_evidence([ev, other])
    assert merged.targets == [ev.targets[0], "cuda:sm_90"]
    first = merged.operators[0]
    assert first.hardware_affinity_mask == [ev.targets[0], "cuda:sm_90"]
    assert first.stability_score == 50.0  # worst over targets
    assert first.per_target["cuda:sm_90"]["stability_score"] == 50.0
    assert first.per_target[ev.targets[0]]["stability_score"] == 100.0
    targets = {i.details["target"] for i in merged.checks["determinism"].items}
    assert targets == {ev.targets[0], "cuda:sm_90"}
    assert set(merged.environment["targets"]) == {ev.targets[0], "cuda:sm_90"}
    jsonschema.validate(merged.model_dump(mode="json"), json.loads(SCHEMA.read_text()))


def test_probe_inputs_stay_unchanged(tmp_path: Path) -> None:
    from attest.spec import load_spec

    spec = load_spec(make_spec(tmp_path, MLP, spec_extra="repeats: 2\n"))
    before = spec.inputs.clone()
    collect(spec, runners=MINE)
    assert torch.equal(spec.inputs, before)
