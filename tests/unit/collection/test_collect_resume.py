"""Resumable collects (attest.collection.workdir): each finished phase saved to the work folder,
reused by ``collect(..., resume=True)``, refused when the inputs changed; the Ray task's retry
resumes. The collect killed for real (SIGKILL) is tests/cli/test_cli_resume.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from _collect_models import MLP, make_spec, stable
from safetensors.torch import load_file, save_file

from attest.collection import collect
from attest.collection.capture.run import ModelFailure
from attest.collection.cluster.bundle import pack_spec
from attest.collection.cluster.ray_dispatch import collect_target, target_work_dir
from attest.collection.context import CheckSettings, CollectContext
from attest.collection.phase_state import decode, encode, reusable
from attest.collection.workdir import WorkFolder, default_work_dir
from attest.errors import CollectError, InputError
from attest.evidence.model import Evidence, PhaseRecord

IG = "attest.collection.ig.checks:run"
TRAINING = "attest.collection.training.runner:run"


def _killed_at(monkeypatch: pytest.MonkeyPatch, runner: str) -> None:
    """The phase of ``runner`` stops the collect (as a kill would: nothing after it runs)."""
    module, _, name = runner.partition(":")

    def stop(ctx: CollectContext) -> list[Any]:
        raise CollectError("stopped here by the test")

    monkeypatch.setattr(f"{module}.{name}", stop)


def _same(a: Evidence, b: Evidence) -> None:
    """Equal evidence, wall-clock figures (times, memory, paths, which phases were reused)
    aside; the same phases in the same order."""
    left, right = a.model_dump(mode="json"), b.model_dump(mode="json")
    assert [p["phase"] for p in left.pop("phases")] == [p["phase"] for p in right.pop("phases")]
    assert stable(left) == stable(right)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    return make_spec(tmp_path / "m", MLP, spec_extra="repeats: 2\nthreads: 1\nexport: onnx\n")


def test_a_collect_stopped_in_training_resumes_with_ig_and_export_reused(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnx")
    whole = collect(spec, out=tmp_path / "whole" / "e.json", output_dir=tmp_path / "whole")
    out = tmp_path / "run" / "e.json"
    work = default_work_dir(out)
    with monkeypatch.context() as patch:
        _killed_at(patch, TRAINING)
        with pytest.raises(CollectError, match="stopped here"):
            collect(spec, out=out, output_dir=out.parent)
    assert sorted(p.name for p in work.iterdir()) == [
        "phase-01-topology.json",
        "phase-02-profile.json",
        "phase-03-gradients.json",
        "phase-04-ig.json",
        "phase-05-export.json",
    ]
    (work / ".phase-06-training.json.k7x_2q.tmp").write_text("{")  # a kill mid-write leaves it
    said: list[str] = []
    resumed = collect(spec, out=out, output_dir=out.parent, resume=True, progress=said.append)
    assert [p.phase for p in resumed.phases if p.reused] == [
        "topology", "profile", "gradients", "ig", "export",
    ]  # fmt: skip
    assert not any(p.reused for p in whole.phases)
    assert any("reusing topology, profile, gradients, ig, export" in m for m in said), said
    assert resumed.attributions is not None and resumed.attributions == whole.attributions
    assert resumed.export is not None and resumed.export.onnx.sha256 == whole.export.onnx.sha256  # type: ignore[union-attr]
    _same(whole, resumed)
    assert json.loads(out.read_text())["phases"][1]["reused"] is True
    assert not work.exists() and not work.parent.exists()  # cleaned once the evidence is written


def test_a_resumed_export_whose_file_changed_runs_again(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnx")
    out = tmp_path / "run" / "e.json"
    with monkeypatch.context() as patch:
        _killed_at(patch, TRAINING)
        with pytest.raises(CollectError):
            collect(spec, out=out, output_dir=out.parent)
    saved = json.loads((default_work_dir(out) / "phase-05-export.json").read_text())["state"]
    assert reusable("export", saved, out.parent) is None
    assert "not in" in str(reusable("export", saved, tmp_path / "elsewhere"))  # another -o
    onnx_file = next(out.parent.glob("*.onnx"))
    onnx_file.write_bytes(onnx_file.read_bytes() + b"\0")
    said: list[str] = []
    resumed = collect(spec, out=out, output_dir=out.parent, resume=True, progress=said.append)
    assert [p.phase for p in resumed.phases if p.reused] == [
        "topology",
        "profile",
        "gradients",
        "ig",
    ]
    assert any("running export again" in m and "changed" in m for m in said), said
    assert resumed.checks["export"].status != "error"


def _stopped(spec: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    with monkeypatch.context() as patch:
        _killed_at(patch, IG)
        with pytest.raises(CollectError):
            collect(spec, out=out, output_dir=out.parent)
    return default_work_dir(out)


def test_resume_refuses_other_weights_or_settings_naming_them(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run" / "e.json"
    work = _stopped(spec, out, monkeypatch)
    with pytest.raises(InputError, match="collect setting gradcheck_directions") as info:
        collect(spec, out=out, resume=True, settings=CheckSettings(gradcheck_directions=2))
    assert "weights" not in info.value.message
    weights = spec.parent / "weights.safetensors"
    tensors = load_file(str(weights))
    save_file({k: v + 1.0 for k, v in tensors.items()}, str(weights))
    with pytest.raises(InputError, match="the weights file's sha256") as info:
        collect(spec, out=out, resume=True)
    assert "spec file" not in info.value.message and "probe" not in info.value.message
    assert sorted(p.name for p in work.iterdir())[:1] == ["phase-01-topology.json"]  # kept


def test_resume_of_a_missing_folder_is_refused_and_a_fresh_collect_starts_over(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InputError, match="no such work folder"):
        collect(spec, out=tmp_path / "e.json", work_dir=tmp_path / "nowhere", resume=True)
    out = tmp_path / "run" / "e.json"
    _stopped(spec, out, monkeypatch)
    said: list[str] = []
    evidence = collect(spec, out=out, output_dir=out.parent, progress=said.append)
    assert any("starting over: removed 3 phase file(s)" in m for m in said), said
    assert not any(p.reused for p in evidence.phases)
    with pytest.raises(InputError, match="budget"):
        collect(spec, out=out, resume=True, budget_s=60.0)


def test_resume_refuses_a_capture_of_other_operators(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run" / "e.json"
    work = _stopped(spec, out, monkeypatch)
    first = work / "phase-01-topology.json"
    data = json.loads(first.read_text())
    data["operators_sha256"] = "0" * 64
    first.write_text(json.dumps(data))
    with pytest.raises(CollectError, match="other operators"):
        collect(spec, out=out, resume=True)


def test_a_retried_ray_task_resumes_from_the_lost_attempts_work_folder(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retry is simulated: the first attempt stops in its IG phase (a lost node leaves its
    folder as it was), the second is the task Ray runs again with the same arguments."""
    bundle = pack_spec(spec)
    work = target_work_dir(tmp_path / "shared", "run1", "cpu")
    assert work == target_work_dir(tmp_path / "shared", "run1", "cpu")  # every attempt's
    with monkeypatch.context() as patch:
        _killed_at(patch, IG)
        with pytest.raises(CollectError):
            collect_target("cpu", bundle, 1, work)
    assert (work / "phase-03-gradients.json").is_file()
    result = collect_target("cpu", bundle, 1, work)
    evidence = Evidence.model_validate_json(result["evidence"])
    assert [p.phase for p in evidence.phases if p.reused] == ["topology", "profile", "gradients"]
    assert not work.exists() and not work.parent.exists()  # the run's folder too, once empty
    # a retry on a node whose environment differs starts over rather than failing the target
    with monkeypatch.context() as patch:
        _killed_at(patch, IG)
        with pytest.raises(CollectError):
            collect_target("cpu", bundle, 1, work)
    first = work / "phase-01-topology.json"
    data = json.loads(first.read_text())
    data["identity"]["environment"]["cpu"] = "another CPU"
    first.write_text(json.dumps(data))
    again = Evidence.model_validate_json(collect_target("cpu", bundle, 1, work)["evidence"])
    assert not any(p.reused for p in again.phases)


def test_the_phase_state_codec_keeps_what_json_lacks() -> None:
    failure = ModelFailure("backward", "layer.0", 3, "aten.index", "RuntimeError", "boom")
    value = {
        "inf": math.inf,
        "ninf": -math.inf,
        "tuple": (1, 2),
        "ids": {3, 1, 2},
        "failure": failure,
        "nested": [{"x": 0.5}, None, "s", True],
    }
    data = json.loads(json.dumps(encode(value), allow_nan=False))
    back = decode(data)
    assert back == value
    assert math.isnan(decode(encode(math.nan)))
    with pytest.raises(TypeError):
        encode(torch.zeros(1))


def test_a_phase_that_cannot_be_saved_stops_the_saving_and_says_so(tmp_path: Path) -> None:
    said: list[str] = []
    ident = {"files": {}, "attest_version": "x", "settings": {}, "environment": {}}
    work = WorkFolder(tmp_path / "w", ident, ["a", "b"], resume=False, progress=said.append)
    record = PhaseRecord(phase="a", duration_s=0.0, cpu_s=0.0)
    work.save(0, "a", [], record, lambda: {"model": encode(torch.zeros(1))})
    work.save(1, "b", [], record.model_copy(update={"phase": "b"}), dict)
    assert not (tmp_path / "w").exists()  # neither, so no resume skips the unsaved phase
    assert said == ["phase a is not saved for --resume (it holds a Tensor value)"]
