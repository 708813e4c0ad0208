"""False alarms of the training checks on clean models, kept fixed.

1. A model that calls ``torch.utils.checkpoint.checkpoint`` inside its own forward(): the
   operator capture read the saved tensors of the region's autograd nodes, each read ran
   checkpoint's unpack hook, which recomputed the region during the forward pass (and raised
   a CheckpointError the capture swallowed): the block ran 8 times and under float16 a
   parameter lost its gradient ("the autocast pass gives this parameter no gradient").
2. ``mixed_precision`` counted gradient elements that are 0 in float16 because rounding moved
   a ReLU's input across 0 as underflow (a scaled float64 gradient of 21.5 is far above
   float16's smallest normal): 2 elements out of 24,576 made a 1.7 % "underflow share" and a
   fail, at a loss scale inside the check's own safe range.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from _collect_models import make_spec
from _grad_models import make_context
from planted_mp_batch import context, inputs
from safetensors.torch import load_file
from torch import nn
from torch.utils.checkpoint import checkpoint

from attest.collection import collect
from attest.collection.capture.capture import CaptureObserver
from attest.collection.capture.run import run_model
from attest.collection.training import batch_invariance, mixed_precision, recompute, resume
from attest.collection.training.amp_common import (
    AutocastObserver,
    loss_scale_range,
    traced_pass,
    unit_roundoff,
)
from attest.collection.training.mixed_precision import WARN_FACTOR
from attest.evidence.model import CheckResult
from attest.spec.model import TrainingConfig

REPO = Path(__file__).resolve().parents[4]
AMP_SEG = REPO / "examples" / "amp-seg"


def _block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
        nn.GroupNorm(2, c_out),
        nn.ReLU(),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
        nn.GroupNorm(2, c_out),
        nn.ReLU(),
    )


class SelfCheckpointed(nn.Module):
    """Conv stem, a Conv-GroupNorm-ReLU block checkpointed by its own forward(), Linear head.
    ``calls`` receives, per run of the block, the autograd graph task running it (-1: the
    forward pass; else a recomputation in backward). It is not an attribute of the model:
    recompute rightly flags model state written during recomputation."""

    def __init__(self, reentrant: bool, calls: list[int]) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.stem = nn.Conv2d(2, 4, 3, padding=1)
        self.block = _block(4, 4)
        self.head = nn.Linear(4, 3)

        def count(module: nn.Module, args: Any) -> None:
            calls.append(int(torch._C._current_graph_task_id()))

        self.block[0].register_forward_pre_hook(count)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.stem(x))
        h = checkpoint(self.block, h, use_reentrant=self.reentrant)
        return self.head(h.mean(dim=(2, 3)))


class _Saved(CaptureObserver):
    wants_saved = True

    def __init__(self) -> None:
        self.ops: list[int] = []

    def saved(self, op_id: int, tensors: list[torch.Tensor]) -> None:
        self.ops.append(op_id)


def _forward_runs(calls: Sequence[int]) -> int:
    return sum(1 for c in calls if c == -1)


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("autocast", [None, torch.float16])
def test_the_capture_runs_a_checkpointed_block_once_in_the_forward(
    reentrant: bool, autocast: torch.dtype | None
) -> None:
    torch.manual_seed(0)
    calls: list[int] = []
    model = SelfCheckpointed(reentrant, calls).train()
    x = torch.randn(2, 2, 8, 8)
    observer = _Saved()
    outcome = traced_pass(
        model,
        x,
        [observer],
        lambda out: out.float().sum(),
        lambda value: value.backward(),  # type: ignore[no-untyped-call]
        autocast=autocast,
    )
    assert outcome.failure is None
    assert len(calls) == 2 and calls[0] == -1 and calls[1] != -1  # once, then recomputed
    assert [n for n, p in model.named_parameters() if p.grad is None] == []
    assert observer.ops  # the saved tensors outside the region are still read


def test_run_model_leaves_the_saved_tensors_of_a_region_packed() -> None:
    torch.manual_seed(0)
    calls: list[int] = []
    model = SelfCheckpointed(False, calls).train()
    outcome = run_model(model, torch.randn(2, 2, 8, 8), _spec(), [_Saved()])
    assert outcome.failure is None and _forward_runs(calls) == 1
    block = {i for i, (_, module) in enumerate(outcome.ops) if module.startswith("block.")}
    assert outcome.packed_saved and set(outcome.packed_saved) <= block
    assert all(g is not None for g in outcome.param_grads.values())


def _spec() -> Any:
    return make_context(lambda: nn.Identity(), torch.zeros(1), capture=False).spec


SOURCE = """
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.reentrant = reentrant
        self.inp = nn.Linear(8, 16)
        self.block = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
        self.out = nn.Linear(16, 3)

    def forward(self, x):
        h = checkpoint(self.block, torch.relu(self.inp(x)), use_reentrant=self.reentrant)
        return self.out(h)


def build():
    return Net(REENTRANT)
"""


@pytest.mark.parametrize("reentrant", [False, True])
def test_collect_profiles_a_self_checkpointing_model(tmp_path: Path, reentrant: bool) -> None:
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    spec = make_spec(tmp_path, SOURCE.replace("REENTRANT", str(reentrant)), x=x)
    ev = collect(spec, runners=["attest.collection.profile.profiler:run"])
    for check_id in ("determinism", "fidelity"):
        result = ev.checks[check_id]
        assert result.status == "computed", (check_id, result.reason)
        assert not result.failed_items, [i.message for i in result.failed_items]


def _passes(result: CheckResult) -> list[str]:
    """The items that do not pass (empty for a clean result)."""
    return [
        f"{i.subject.label()}: {i.status}: {i.message}" for i in result.items if i.status != "pass"
    ]


@pytest.mark.parametrize("reentrant", [False, True])
def test_mixed_precision_and_recompute_pass_a_self_checkpointing_model(reentrant: bool) -> None:
    calls: list[int] = []

    def build() -> nn.Module:
        return SelfCheckpointed(reentrant, calls)

    ctx = context(build, inputs(8, 2, 8, 8), autocast="float16", grad_scaler=True)
    result = mixed_precision.run(ctx)
    assert result.status == "computed" and _passes(result) == []
    params = [i for i in result.items if i.subject.kind == "parameter"]
    assert len(params) == len(list(build().parameters()))
    assert all(i.metrics["grad_rel_error"] is not None for i in params)
    # one forward of the block per pass (float64, float32, each autocast pass), no more
    assert _forward_runs(calls) == result.summary["passes"]
    checked = recompute.run(ctx)
    assert checked.status == "computed" and _passes(checked) == []
    regions = [i for i in checked.items if "calls" in i.metrics]
    assert len(regions) == 1 and regions[0].subject.module == "block"
    assert regions[0].metrics["recomputed"] is True
    assert regions[0].metrics["reentrant"] is reentrant


class ReluCNN(nn.Module):
    """Three 3x3 Conv-ReLU layers (default init), global average pooling, a Linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.c3(torch.relu(self.c2(torch.relu(self.c1(x))))))
        return self.fc(h.mean(dim=(2, 3)))


# probe seed 1 under float16 gave conv c3 an "underflow" fail (1.7 % of the gradient norm from
# ReLU sign flips, 0.0 % of the elements subnormal); every seed warned under bfloat16, whose
# smallest normal (1e-38) nothing here comes near
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("autocast", "scaler"), [("float16", True), ("bfloat16", False)])
def test_a_clean_relu_cnn_passes(seed: int, autocast: str, scaler: bool) -> None:
    ctx = context(ReluCNN, inputs(8, 3, 16, 16, seed=seed), autocast=autocast, grad_scaler=scaler)
    result = mixed_precision.run(ctx)
    assert _passes(result) == []
    assert float(result.summary["max_underflow_error_share"]) < 1e-6  # was 1.7e-2 (seed 1)


def _observer(reference: list[torch.Tensor], scale: float) -> AutocastObserver:
    observer = AutocastObserver([("aten.relu.default", "")], {0: list(reference)}, scale)
    observer.stats[0] = mixed_precision.OpStats("aten.relu.default", "", dtype="float16")
    observer.ref_of[0] = 0
    return observer


def test_an_exact_zero_whose_scaled_reference_is_representable_is_a_kink_not_underflow() -> None:
    scale = 1024.0
    g64 = torch.tensor([21.5 / scale, 1e-12, 0.25], dtype=torch.float64)
    low = torch.tensor([0.0, 0.0, 0.25 * scale], dtype=torch.float16)  # a sign flip, a flush
    observer = _observer([g64], scale)
    observer.grads(0, [low], [])
    stats = observer.stats[0]
    assert (stats.underflow, stats.kink_zeros, stats.nonzero) == (1, 1, 3)
    assert stats.lost_sq == pytest.approx(1e-24)  # only the flushed element: its own magnitude


def test_an_operator_underflows_only_at_a_scale_outside_the_safe_range() -> None:
    """The operator verdict and the model's safe range agree: at every power-of-two scale the
    range admits, the measured underflow share stays within the tolerance the range uses,
    kinks (representable elements 0 under autocast) included."""
    gen = torch.Generator().manual_seed(0)
    g64 = torch.randn(4096, generator=gen, dtype=torch.float64) * torch.exp2(
        torch.randint(-40, 0, (4096,), generator=gen).double()
    )
    kinks = g64.abs().topk(4).indices
    tolerance = WARN_FACTOR * unit_roundoff(torch.float16)
    admitted = 0
    for k in range(-8, 40):
        scale = 2.0**k
        low = (g64 * scale).to(torch.float16)
        low[kinks] = 0.0  # ReLU inputs crossed 0 at a few of the largest elements
        observer = _observer([g64], scale)
        observer.stats[0].grad_dtype = "float16"
        observer.grads(0, [low], [])
        k_lo, k_hi = loss_scale_range(
            observer.stats, {0: [g64]}, observer.ref_of, torch.float16, tolerance
        )
        share = (observer.stats[0].lost_sq / observer.stats[0].ref_sq) ** 0.5
        if k_lo <= k <= k_hi:
            admitted += 1
            assert share <= tolerance, (k, share)
        elif k < k_lo:
            assert share > 0
    assert admitted > 0


def _amp_seg() -> Any:
    """examples/amp-seg/model.py, loaded from its file (the example is not a package)."""
    spec = importlib.util.spec_from_file_location("_amp_seg_model", AMP_SEG / "model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _relu_unet(amp: Any) -> Callable[[], nn.Module]:
    """amp-seg's U-Net with ReLU for SiLU, checkpointing enc2 and dec1 inside its own forward()
    (the shipped model is checkpointed from outside), with the shipped trained weights."""
    weights = load_file(str(AMP_SEG / "weights.safetensors"))

    class ReluUNet(amp.TinyUNet):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            w = amp.WIDTH
            self.enc1, self.enc2, self.dec1 = _block(1, w), _block(w, 2 * w), _block(3 * w, w)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s1 = self.enc1(x)
            s2 = checkpoint(self.enc2, self.pool(s1), use_reentrant=False)
            up = torch.cat([self.up(s2), s1], dim=1)
            return self.head(checkpoint(self.dec1, up, use_reentrant=False))  # type: ignore[no-any-return]

    def build() -> nn.Module:
        model = ReluUNet()
        model.load_state_dict(weights)
        return model

    return build


def test_amp_seg_with_relu_and_self_checkpointing_passes_the_training_checks() -> None:
    amp = _amp_seg()
    probe = load_file(str(AMP_SEG / "probe.safetensors"))
    ctx = make_context(_relu_unet(amp), probe["x"], probe["target"], amp.loss, capture=False)
    ctx.spec.target = 1
    ctx.spec.training = TrainingConfig(
        optimizer="model:make_optimizer",
        make_optimizer=amp.make_optimizer,
        autocast="float16",
        grad_scaler=True,
        batch_sizes=[1, 4],
        steps=2,
    )
    results = {
        c.__name__: c.run(ctx) for c in (mixed_precision, recompute, batch_invariance, resume)
    }
    for result in results.values():
        assert result.status == "computed", (result.check, result.reason)
        assert _passes(result) == [], result.check
    recomputed = results[recompute.__name__].items
    assert {i.subject.module for i in recomputed if "calls" in i.metrics} == {"enc2", "dec1"}
