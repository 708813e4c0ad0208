"""The preflight: a model that cannot run one forward and backward of its probe in float32
and float64 is refused in seconds, before any check, naming the module, the shapes, the error
and the way out (exit 2)."""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import pytest
import torch
from _collect_models import MLP, make_spec

from attest.collection import collect
from attest.collection.context import CollectContext
from attest.collection.preflight import preflight
from attest.errors import CollectError
from attest.spec import load_spec

NO_CHECKS: list[str] = []  # collect with no runner: only the preflight and the capture run


def context(path: Path) -> CollectContext:
    return CollectContext(spec=load_spec(path))


def test_a_clean_model_passes_in_both_precisions(tmp_path: Path) -> None:
    took = preflight(context(make_spec(tmp_path, MLP)))
    assert len(took) == 2 and all(t >= 0 for t in took)


FLOAT32_CONSTANT = """
import torch
from torch import nn

class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.ones(4, dtype=torch.float32)  # a plain attribute: .to() misses it
    def forward(self, x):
        return x @ torch.diag(self.scale)

def build():
    return nn.Sequential(nn.Linear(8, 4), Scale(), nn.Linear(4, 2))
"""


def test_a_model_that_runs_only_in_float32_is_refused_in_float64(tmp_path: Path) -> None:
    with pytest.raises(CollectError) as info:
        preflight(context(make_spec(tmp_path, FLOAT32_CONSTANT)))
    error = info.value
    assert "the model cannot run its probe (4, 8) in float64: forward raised" in error.message
    assert "in module '1' (Scale) given (4, 4)" in error.message
    assert error.hint is not None and "register_buffer" in error.hint


def test_a_target_the_model_does_not_have_is_named(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, MLP, spec_extra="target: 7\n")
    with pytest.raises(CollectError) as info:
        collect(spec, runners=NO_CHECKS)
    assert "float32: the target raised" in info.value.message
    assert info.value.hint is not None and "target:" in info.value.hint


BACKWARD_RAISES = """
import torch
from torch import nn

class NoBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()
    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError("no backward for the lookup table")

class Lookup(nn.Module):
    def forward(self, x):
        return NoBackward.apply(x)

def build():
    return nn.Sequential(nn.Linear(8, 6), nn.Sequential(nn.Tanh(), Lookup()), nn.Linear(6, 2))
"""


def test_a_backward_that_raises_names_the_module_whose_backward_ran(tmp_path: Path) -> None:
    with pytest.raises(CollectError) as info:
        preflight(context(make_spec(tmp_path, BACKWARD_RAISES)))
    message = info.value.message
    assert "in float32: backward raised NotImplementedError in module '1.1' (Lookup)" in message
    assert "given (4, 6)" in message and "no backward for the lookup table" in message
    assert info.value.hint is not None and "fix the module's backward" in info.value.hint


def test_swin_unetr_too_small_for_its_bottleneck_fails_in_seconds(tmp_path: Path) -> None:
    """MONAI SwinUNETR at 32^3: its bottleneck InstanceNorm gets a 1x1x1 volume. Before the
    preflight every check errored after minutes and collect exited 0."""
    pytest.importorskip("monai")
    pytest.importorskip("einops")
    source = (
        "from monai.networks.nets import SwinUNETR\n"
        "def build():\n"
        "    return SwinUNETR(in_channels=1, out_channels=2, feature_size=12, spatial_dims=3)\n"
    )
    spec = make_spec(tmp_path, source, x=torch.randn(1, 1, 32, 32, 32), spec_extra="target: 1\n")
    started = time.perf_counter()
    with pytest.raises(CollectError) as info:
        collect(spec)  # every runner: none of them starts
    assert time.perf_counter() - started < 60
    message = info.value.message
    assert "the model cannot run its probe (1, 1, 32, 32, 32) in float32" in message
    assert "module 'encoder10.layer.norm1' (InstanceNorm3d) given (1, 192, 1, 1, 1)" in message
    assert "Expected more than 1 spatial element" in message
    assert info.value.hint is not None and "spatial size large enough" in info.value.hint


HUNGRY = """
import torch
from torch import nn

class Hungry(nn.Module):
    def forward(self, x):
        if x.dtype == torch.float64:
            raise RuntimeError(
                "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: "
                "you tried to allocate 99999999999 bytes"
            )
        return x

def build():
    return nn.Sequential(nn.Linear(8, 2), Hungry())
"""


def test_out_of_memory_is_said_as_such_not_blamed_on_the_model(tmp_path: Path) -> None:
    with pytest.raises(CollectError) as info:
        preflight(context(make_spec(tmp_path, HUNGRY)))
    assert "the preflight's float64 forward" in info.value.message
    assert "cannot run its probe" not in info.value.message


def test_collect_lets_run_0_stand_for_the_float32_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run 0 is a forward and backward in the spec's precision: on a model that runs it, the
    preflight's own pass in that precision would repeat it, so only float64 runs plainly."""
    module = importlib.import_module("attest.collection.preflight")
    ran: list[str] = []
    real = module._run_once

    def counting(ctx: CollectContext, precision: str) -> object:
        ran.append(precision)
        return real(ctx, precision)

    monkeypatch.setattr(module, "_run_once", counting)
    monkeypatch.setattr(module, "release_memory", lambda: ran.append("trim"))
    collect(make_spec(tmp_path, MLP), runners=NO_CHECKS)
    assert ran == ["trim", "float64"]  # the heap run 0 freed is given back first
    ran.clear()  # a model whose run 0 fails: the float32 pass runs to say where
    with pytest.raises(CollectError, match="in float32: backward raised"):
        collect(make_spec(tmp_path / "b", BACKWARD_RAISES), runners=NO_CHECKS)
    assert ran == ["trim", "float32"]


PROFILE_ONLY = ["attest.collection.profile.topology:run", "attest.collection.profile.profiler:run"]


def test_the_fidelity_pass_stands_for_the_float64_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profiler's float64 fidelity pass is the same forward and backward in float64: on a
    model that runs it, the preflight's plain float64 pass would repeat it (issue #38)."""
    module = importlib.import_module("attest.collection.preflight")
    ran: list[str] = []
    real = module._run_once

    def counting(ctx: CollectContext, precision: str) -> object:
        ran.append(precision)
        return real(ctx, precision)

    monkeypatch.setattr(module, "_run_once", counting)
    evidence = collect(make_spec(tmp_path, MLP), runners=PROFILE_ONLY)
    assert ran == []
    fidelity = evidence.checks["fidelity"]
    assert fidelity.status == "computed"
    # with --workers or a budget the pass runs before the checks, as before
    collect(make_spec(tmp_path / "b", MLP), runners=PROFILE_ONLY, budget_s=3600.0)
    assert ran == ["float64"]


def test_a_model_that_fails_in_float64_is_still_refused_naming_where(tmp_path: Path) -> None:
    """The fidelity pass fails on it, and the plain float64 pass then says where (exit 2)."""
    lines: list[str] = []
    with pytest.raises(CollectError) as info:
        collect(make_spec(tmp_path, FLOAT32_CONSTANT), runners=PROFILE_ONLY, progress=lines.append)
    assert any("float64 fidelity" in line for line in lines)  # it failed there first
    assert not any("preflight" in line for line in lines)
    assert "the model cannot run its probe (4, 8) in float64: forward raised" in info.value.message
    assert "in module '1' (Scale) given (4, 4)" in info.value.message
