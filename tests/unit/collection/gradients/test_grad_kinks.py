"""The kinks check: probe values exactly on non-differentiable points, and only those."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from _grad_models import SmallCNN, continuous, make_context
from torch import nn

from attest.collection.gradients import kinks
from attest.collection.gradients.kink_detectors import scan_kinks

T = torch.tensor

# (operator short name, bound arguments, expected count, expected first index)
CASES: list[tuple[str, dict[str, Any], int, list[int] | None]] = [
    ("relu", {"self": T([0.5, 0.0, -1.0, 0.0])}, 2, [1]),
    ("relu", {"self": T([0.5, 1e-30, -1.0])}, 0, None),
    ("threshold", {"self": T([0.1, 0.2, 0.3]), "threshold": 0.2, "value": 0.0}, 1, [1]),
    ("hardtanh", {"self": T([-1.0, 0.0, 1.0, 2.0]), "min_val": -1.0, "max_val": 1.0}, 2, [0]),
    ("leaky_relu", {"self": T([0.0, 1.0]), "negative_slope": 0.01}, 1, [0]),
    ("elu", {"self": T([0.0, 1.0]), "alpha": 1.0}, 0, None),  # C1 at 0 when alpha == 1
    ("abs", {"self": T([0.0, -2.0, 0.0])}, 2, [0]),
    ("sign", {"self": T([3.0, 0.0])}, 1, [1]),
    ("clamp", {"self": T([0.0, 0.5, 1.0]), "min": 0.0, "max": 1.0}, 2, [0]),
    ("clamp_min", {"self": T([0.0, 0.5]), "min": 0.5}, 1, [1]),
    ("maximum", {"self": T([1.0, 2.0, 3.0]), "other": T([1.0, 0.0, 3.0])}, 2, [0]),
    ("max", {"self": T([[1.0, 3.0, 3.0], [1.0, 2.0, 3.0]]), "dim": 1}, 1, [0, 0]),
    ("max", {"self": T([1.0, 2.0])}, 0, None),
    ("amax", {"self": T([[2.0, 2.0], [1.0, 0.0]]), "dim": [1]}, 1, [0, 0]),
    ("amax", {"self": T([[2.0, 2.0], [1.0, 0.0]]), "dim": [0]}, 0, None),
    ("median", {"self": T([[1.0, 1.0, 2.0], [1.0, 2.0, 3.0]]), "dim": 1}, 1, [0, 0]),
    ("sort", {"self": T([1.0, 2.0, 1.0, 3.0]), "dim": -1, "descending": False}, 1, [0]),
    ("topk", {"self": T([1.0, 2.0, 1.0, 3.0]), "k": 2, "dim": -1, "largest": True}, 0, None),
    ("topk", {"self": T([3.0, 2.0, 3.0, 1.0]), "k": 1, "dim": -1, "largest": True}, 1, [0]),
    ("floor", {"self": T([0.5, 1.0, 2.0])}, 2, [1]),
    ("round", {"self": T([0.5, 1.0, 2.5, 2.4])}, 2, [0]),
    ("hardswish", {"self": T([3.0, -3.0, 0.0])}, 2, [0]),
]


@pytest.mark.parametrize(
    "name, bound, count, first", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_detector_counts_exact_hits(
    name: str, bound: dict[str, Any], count: int, first: list[int] | None
) -> None:
    scan = scan_kinks(name, bound)
    if scan is None:  # the detector found no non-differentiable point for these arguments
        assert count == 0
        return
    assert scan.count == count
    assert (scan.first_indices[0] if scan.first_indices else None) == first


def test_max_pool_ties_respect_padding_and_ceil_mode() -> None:
    zeros = torch.zeros(1, 1, 4, 4)
    bound = {
        "self": zeros,
        "kernel_size": [2, 2],
        "stride": [],
        "padding": [1, 1],
        "dilation": [1, 1],
        "ceil_mode": True,
    }
    scan = scan_kinks("max_pool2d_with_indices", bound)
    assert scan is not None
    # 3x3 windows: the 4 corner windows hold one real element (the rest is padding): no tie.
    assert scan.count == 5
    assert F.max_pool2d(zeros, 2, padding=1, ceil_mode=True).shape[-2:] == (3, 3)


def test_adaptive_max_pool_windows() -> None:
    scan = scan_kinks(
        "adaptive_max_pool2d", {"self": torch.zeros(1, 2, 5, 5), "output_size": [2, 2]}
    )
    assert scan is not None and scan.count == 8


def test_ties_that_stay_tied_under_perturbation_are_not_counted() -> None:
    z = torch.randn(1, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    relu = F.relu(z)
    perturbed = F.relu(z.double() + 1e-6 * torch.randn(1, 1, 4, 4, dtype=torch.float64))
    bound = {"self": relu, "kernel_size": [2, 2]}
    raw = scan_kinks("max_pool2d_with_indices", bound)
    live = scan_kinks("max_pool2d_with_indices", bound, {"self": perturbed})
    assert raw is not None and live is not None
    assert raw.count >= 1  # without the perturbation every tie counts
    assert live.count == 0 and live.constant_hits == raw.count


def test_a_hit_that_moves_off_the_kink_counts() -> None:
    x = T([0.0, 1.0, 0.0])
    scan = scan_kinks(
        "relu", {"self": x}, {"self": x.double() + T([1e-7, 0.0, 0.0], dtype=torch.float64)}
    )
    assert scan is not None and scan.count == 1 and scan.constant_hits == 1


class ConstantPadReLU(nn.Module):
    """ReLU on zero padding: the padded zeros are not inputs and never move."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(F.pad(x, (2, 2))).sum(dim=-1, keepdim=True)


def test_padding_zeros_are_not_counted() -> None:
    ctx = make_context(ConstantPadReLU, continuous(4, 6))
    result = kinks.run(ctx)
    relu = next(i for i in result.items if i.subject.op == "aten.relu.default")
    assert relu.status == "pass" and relu.metrics["count"] == 0
    assert relu.metrics["locally_constant_hits"] == 4 * 4


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_relu_cnn_on_continuous_inputs_has_no_kinks(seed: int) -> None:
    ctx = make_context(SmallCNN, continuous(6, 1, 6, 6, seed=seed), seed=seed)
    result = kinks.run(ctx)
    assert result.status == "computed"
    assert result.summary["total_count"] == 0, [
        i.message for i in result.items if i.status == "fail"
    ]
    assert {i.subject.op for i in result.items} >= {
        "aten.relu.default",
        "aten.max_pool2d_with_indices.default",
    }


def test_exact_zero_inputs_to_relu_are_counted_with_indices() -> None:
    x = continuous(3, 6)
    x[1, 2] = 0.0
    x[2, 0] = 0.0
    ctx = make_context(lambda: nn.Sequential(nn.ReLU(), nn.Linear(6, 2)), x)
    result = kinks.run(ctx)
    item = next(i for i in result.items if i.subject.op == "aten.relu.default")
    assert item.status == "fail" and item.metrics["count"] == 2
    assert item.details["first_indices"] == [[1, 2], [2, 0]]
    assert item.subject.indices == [1, 2] and item.subject.module == "0"
    assert "convention" in item.message


def test_without_the_capture_kinks_is_not_computed() -> None:
    ctx = make_context(SmallCNN, continuous(2, 1, 6, 6), capture=False)
    assert kinks.run(ctx).status == "not_computed"


@pytest.mark.parametrize(
    "size, kernel, stride, padding, dilation, ceil_mode",
    [(7, 2, 2, 0, 1, False), (7, 3, 2, 1, 1, True), (8, 3, 1, 1, 2, False), (9, 2, 3, 1, 1, True)],
)
def test_unfolded_windows_match_gathered_windows_and_pool_shape(
    size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool
) -> None:
    from attest.collection.gradients.kink_pooling import (
        _gather_windows,
        _unfold_windows,
        _window_positions,
    )

    x = torch.randn(2, 3, size, size, dtype=torch.float64)
    per_dim = [_window_positions(size, kernel, stride, padding, dilation, ceil_mode)] * 2
    unfolded = _unfold_windows(x, per_dim, [stride] * 2, [padding] * 2, [dilation] * 2, -math.inf)
    gathered = _gather_windows(x, per_dim, -math.inf)
    assert torch.equal(unfolded, gathered)
    pooled = F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
    assert unfolded.shape[2:4] == pooled.shape[2:]
    assert torch.equal(unfolded.amax(dim=(-2, -1)), pooled)


class UntrainedNormBetweenReLUs(nn.Module):
    """ReLU -> fresh BatchNorm (weight 1, bias 0, running stats 0/1: identity in eval) -> ReLU.

    The second ReLU sees the first one's exact zeros: on its kink because of the parameter
    values, not because of any probe input (DenseNet's norm-relu-conv layers at init)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 8)
        self.act1 = nn.ReLU()
        self.norm = nn.BatchNorm1d(8)
        self.act2 = nn.ReLU()
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act2(self.norm(self.act1(self.fc(x)))))


def test_kinks_held_by_parameter_values_warn_and_input_kinks_fail() -> None:
    torch.manual_seed(0)
    result = kinks.run(make_context(UntrainedNormBetweenReLUs, continuous(8, 6)))
    by_module = {i.subject.module: i for i in result.items}
    assert by_module["act1"].status == "pass"  # continuous inputs: no exact zero
    second = by_module["act2"]
    assert second.status == "warn", second.message
    assert second.metrics["count"] == 0 and int(second.metrics["parameter_hits"] or 0) > 0
    assert "parameter values" in second.message

    class ReluOnInput(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.relu(x))

    x = continuous(8, 6)
    x[0, 2] = 0.0  # an exact zero in the probe input itself
    flagged = kinks.run(make_context(ReluOnInput, x))
    (item,) = [i for i in flagged.items if i.status != "pass"]
    assert item.status == "fail" and item.metrics["count"] == 1


def test_locally_constant_ties_need_one_perturbed_run_and_input_kinks_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs: list[bool] = []
    real = kinks.perturbed_records

    def counted(ctx: Any, *, parameters: bool = True, ops: Any = None) -> Any:
        runs.append(parameters)
        return real(ctx, parameters=parameters, ops=ops)

    monkeypatch.setattr(kinks, "perturbed_records", counted)
    x = continuous(6, 1, 6, 6, seed=1)
    result = kinks.run(make_context(SmallCNN, x, seed=1))
    pool = next(i for i in result.items if "max_pool" in (i.subject.op or ""))
    assert pool.metrics["locally_constant_hits"] > 0 and result.summary["total_count"] == 0
    assert runs == [True], "zero ties that stay put need only the joint run"
    runs.clear()
    x = continuous(3, 6)
    x[1, 2] = 0.0
    result = kinks.run(make_context(lambda: nn.Sequential(nn.ReLU(), nn.Linear(6, 2)), x))
    assert result.summary["total_count"] == 1
    assert runs == [True, False], "a hit that moves needs the inputs-only run to be counted"


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation", "ceil_mode"),
    [
        (2, 2, 0, 1, False),
        (3, 3, 0, 1, True),
        (2, 3, 0, 1, False),
        (3, 2, 1, 1, False),
        (2, 2, 1, 1, False),
        (2, 2, 0, 2, False),
    ],
)
def test_max_pool_tie_masks_agree_on_every_window_layout(
    kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool
) -> None:
    # Disjoint windows write their flags through a window view; the others gather indices.
    from attest.collection.gradients import kink_pooling as kd

    x = torch.relu(torch.randn(2, 3, 9, 10, generator=torch.Generator().manual_seed(0)))
    x = x.round(decimals=1).double()  # many exact ties
    bound = {
        "self": x,
        "kernel_size": [kernel] * 2,
        "stride": [stride] * 2,
        "padding": [padding] * 2,
        "dilation": [dilation] * 2,
        "ceil_mode": ceil_mode,
    }
    scan = scan_kinks("max_pool2d", bound)
    assert scan is not None and scan.raw_hits > 0
    per_dim = [
        kd._window_positions(x.shape[2 + i], kernel, stride, padding, dilation, ceil_mode)
        for i in range(2)
    ]
    w = kd._unfold_windows(x, per_dim, [stride] * 2, [padding] * 2, [dilation] * 2, -math.inf)
    top = w.amax(dim=(-2, -1), keepdim=True)
    eq = (w >= top) & torch.isfinite(top)
    tied = eq & (eq.sum(dim=(-2, -1)) >= 2)[..., None, None]
    assert torch.equal(scan.masks["self"], kd._window_elements(tied, per_dim, x.shape))


def _grid_case(grid: torch.Tensor, mode: int = 0, align: bool = False) -> dict[str, Any]:
    n, h, w = grid.shape[0], grid.shape[1], grid.shape[2]
    x = torch.randn(n, 1, h, w, generator=torch.Generator().manual_seed(0))
    return {
        "input": x,
        "grid": grid,
        "interpolation_mode": mode,
        "padding_mode": 0,
        "align_corners": align,
    }


def _identity_grid(size: int, align: bool) -> torch.Tensor:
    theta = T([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).expand(2, 2, 3)
    return F.affine_grid(theta, [2, 1, size, size], align_corners=align)


@pytest.mark.parametrize("size, align", [(8, False), (28, False), (8, True), (28, True)])
def test_an_identity_affine_grid_samples_on_the_bilinear_seams(size: int, align: bool) -> None:
    # A spatial transformer at its usual initialization samples at the pixel centres, where
    # bilinear interpolation is not differentiable in the sampling position (28 is not a
    # power of two: the positions are whole only up to rounding, within the step's reach).
    grid = _identity_grid(size, align)
    scan = scan_kinks("grid_sampler_2d", _grid_case(grid, 0, align), tolerance=1e-5, step_only=True)
    assert scan is not None and scan.count == grid.numel()
    assert scan.index_space == "input grid" and scan.first_indices[0] == [0, 0, 0, 0]
    assert scan.masks["grid"].shape == grid.shape
    nearest = scan_kinks(
        "grid_sampler_2d", _grid_case(grid, 1, align), tolerance=1e-5, step_only=True
    )
    assert nearest is not None and nearest.count == 0  # centres are far from its jumps
    # The kinks check does not count seams (continuous inputs land on them by rounding).
    assert scan_kinks("grid_sampler_2d", _grid_case(grid, 0, align)) is None


def test_grid_sample_seams_only_where_they_are() -> None:
    rand = torch.rand(2, 6, 6, 2, generator=torch.Generator().manual_seed(1)) * 2 - 1
    scan = scan_kinks("grid_sampler_2d", _grid_case(rand), tolerance=1e-5, step_only=True)
    assert scan is not None and scan.count == 0
    bicubic = scan_kinks(
        "grid_sampler_2d", _grid_case(rand, mode=2), tolerance=1e-5, step_only=True
    )
    assert bicubic is None  # Keys' cubic kernel has a continuous derivative
    # nearest jumps half-way between pixels: x = -0.75 is pixel 0.5 on an 8-wide input
    half = torch.zeros(1, 8, 8, 2)
    half[..., 0] = -0.75
    half[..., 1] = 0.1
    scan = scan_kinks("grid_sampler_2d", _grid_case(half, mode=1), tolerance=1e-5, step_only=True)
    assert scan is not None and scan.count == 64  # the x coordinate of every position


def test_kinks_check_is_silent_on_a_spatial_transformer_at_identity() -> None:
    class STN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.loc = nn.Linear(64, 6)
            nn.init.zeros_(self.loc.weight)
            self.loc.bias.data = T([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])
            self.head = nn.Linear(64, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            theta = self.loc(x.flatten(1)).view(-1, 2, 3)
            grid = F.affine_grid(theta, list(x.shape), align_corners=False)
            return self.head(F.grid_sample(x, grid, align_corners=False).flatten(1))

    ctx = make_context(STN, continuous(4, 1, 8, 8))
    result = kinks.run(ctx)
    assert result.status == "computed"
    assert all(i.status == "pass" for i in result.items), [i.message for i in result.items]


def test_the_perturbed_runs_keep_only_the_hit_operators_arguments_and_judge_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The perturbed float64 run names and places every operator (the alignment needs them)
    but keeps the arguments of the hit operators only; the items are those of a run that keeps
    every operator's arguments."""
    x = continuous(3, 6)
    x[1, 2] = 0.0

    def model() -> nn.Module:
        return nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.ReLU(), nn.Linear(6, 2))

    x_in = x.clone()
    ctx = make_context(lambda: nn.Sequential(nn.ReLU(), model()), x_in)
    records, _ = kinks.perturbed_records(ctx, ops=frozenset({"aten.relu.default"}))
    kept = {r.op for r in records.values() if r.args}
    assert kept == {"aten.relu.default"}
    assert len(records) == len(ctx.operators or [])  # every operator still aligned
    filtered = kinks.run(ctx)
    real = kinks.perturbed_records

    def keep_all(ctx: Any, *, parameters: bool = True, ops: Any = None) -> Any:
        return real(ctx, parameters=parameters, ops=None)

    monkeypatch.setattr(kinks, "perturbed_records", keep_all)
    everything = kinks.run(make_context(lambda: nn.Sequential(nn.ReLU(), model()), x.clone()))
    assert filtered.summary == everything.summary and filtered.summary["total_count"] == 1
    assert [i.model_dump() for i in filtered.items] == [i.model_dump() for i in everything.items]


class _GradInForward(nn.Module):
    """Differentiates inside its own forward (a physics-style penalty): needs saved tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.lin(x))
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        return y + 0.0 * g.sum()


def test_the_perturbed_run_drops_saved_tensors_and_reruns_a_model_that_needs_them() -> None:
    saved: list[int] = []
    x = continuous(3, 6)
    ctx = make_context(lambda: nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2)), x)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(1) or t, lambda t: t):
        records, note = kinks.perturbed_records(ctx)
    assert records and saved == [], "the run's own hooks drop what autograd saves"
    x = continuous(3, 6)
    x[1, 2] = 0.0
    ctx = make_context(_GradInForward, x)
    records, note = kinks.perturbed_records(ctx)
    assert records and "raised" not in note, note
