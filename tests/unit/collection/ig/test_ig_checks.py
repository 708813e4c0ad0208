"""The ig_* checks: each flags its planted defect and passes clean small models."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from attest.collection.context import CheckSettings, CollectContext, LoadedSpec
from attest.collection.ig.analysis import path_behaviour, spearman
from attest.collection.ig.attribution import PathSamples, decode_attributions
from attest.collection.ig.checks import IG_CHECKS, run
from attest.evidence.model import CheckResult

torch.set_num_threads(1)

FAST = {
    "ig_steps": 8,
    "ig_max_steps": 512,
    "ig_repeats": 2,
    "ig_randomization_inputs": 2,
    "ig_randomization_max_layers": 3,
}


def _context(
    build: Callable[[], nn.Module],
    inputs: torch.Tensor,
    *,
    labels: torch.Tensor | None = None,
    target: Any = "argmax",
    baseline: str = "zero",
    **settings: Any,
) -> CollectContext:
    spec = LoadedSpec(
        path=Path("attest.yaml"),
        name="toy",
        version="1",
        factory="toy:build",
        factory_args={},
        build_model=build,
        inputs=inputs,
        labels=labels,
        target=target,
        baseline=baseline,  # type: ignore[arg-type]
        threads=1,
    )
    return CollectContext(spec=spec, settings=CheckSettings(**{**FAST, **settings}))


def _by_check(results: list[CheckResult]) -> dict[str, CheckResult]:
    assert [r.check for r in results] == list(IG_CHECKS)
    return {r.check: r for r in results}


def _statuses(result: CheckResult) -> list[str]:
    return [item.status for item in result.items]


def _cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 10),
    )


def _mlp() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(
        nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 16), nn.GELU(), nn.Linear(16, 4)
    )


IMAGES = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(3))
VECTORS = torch.randn(3, 64, generator=torch.Generator().manual_seed(4))


# ----------------------------------------------------------------------------- clean models


@pytest.mark.parametrize(("build", "inputs"), [(_cnn, IMAGES), (_mlp, VECTORS)], ids=["cnn", "mlp"])
def test_clean_small_models_pass_every_check(
    build: Callable[[], nn.Module], inputs: torch.Tensor
) -> None:
    ctx = _context(build, inputs)
    results = _by_check(run(ctx))
    for check, result in results.items():
        assert result.status == "computed", (check, result.reason)
        assert "fail" not in _statuses(result), (check, [i.message for i in result.items])
        assert result.items
    completeness = results["ig_completeness"]
    # ReLU paths converge slowly: at this test's small step cap an input may be a near miss
    # (warn), never a failure
    bound = ctx.settings.ig_near_miss_factor * ctx.settings.ig_tolerance
    assert all(i.metrics["completeness_rel_error"] <= bound for i in completeness.items)  # type: ignore[operator]
    assert [i.subject.input_index for i in completeness.items] == [0, 1, 2]
    assert results["ig_determinism"].summary["bit_exact"] is True
    assert results["ig_randomization"].summary["max_abs_spearman_final"] < 0.5  # type: ignore[operator]
    curve = results["ig_randomization"].items[0].details["spearman"]
    assert 1 <= len(curve) <= FAST["ig_randomization_max_layers"]
    stored = ctx.ig.attributions
    assert stored is not None
    decoded = decode_attributions(stored)
    assert decoded["attributions"].shape == inputs.shape
    assert decoded["inputs"].shape == inputs.shape


def test_labels_target_without_labels_is_not_computed() -> None:
    results = run(_context(_cnn, IMAGES, target="label"))
    assert {r.status for r in results} == {"not_computed"}
    assert all("target" in (r.reason or "") for r in results)


def test_a_model_that_raises_gives_error_results_not_a_crash() -> None:
    class Broken(nn.Module):
        def forward(self, z: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("shape mismatch in block 3")

    results = run(_context(Broken, IMAGES))
    assert [r.status for r in results] == ["error"] * len(IG_CHECKS)
    assert all("shape mismatch in block 3" in (r.reason or "") for r in results)


# ----------------------------------------------------------------------------- planted defects


class _NanGradient(nn.Module):
    """Linear, plus sqrt(x2 - x2): its value is 0 but its gradient is inf * 0 = NaN at feature 2."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 2)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.linear(z) + torch.sqrt(z[:, 2:3] - z[:, 2:3])


def test_completeness_names_the_first_nan_attribution() -> None:
    torch.manual_seed(5)
    results = _by_check(run(_context(_NanGradient, torch.rand(2, 6) + 0.5)))
    item = results["ig_completeness"].items[1]
    assert item.status == "fail"
    assert item.subject.input_index == 1 and item.subject.indices == [2]
    assert "non-finite attribution at index (2,)" in item.message
    assert item.metrics["nonfinite_attributions"] == 1


class _StepAlongPath(nn.Module):
    """A classifier with a jump: +4 to class 0 once the image's mean passes 0.25."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(6)
        self.body = _cnn()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out = self.body(z)
        jump = 4.0 * (z.mean(dim=(1, 2, 3)) > 0.25).to(z.dtype)
        return (
            out
            + torch.nn.functional.one_hot(torch.zeros_like(jump, dtype=torch.long), 10)
            * jump[:, None]
        )


def test_monotonicity_and_convergence_flag_a_jump_along_the_path() -> None:
    bright = IMAGES * 0.5 + 0.5  # means above 0.25: the path from zero crosses the jump
    results = _by_check(run(_context(_StepAlongPath, bright, target=0)))
    monotonicity = results["ig_monotonicity"]
    assert _statuses(monotonicity) == ["fail"] * 3
    item = monotonicity.items[0]
    assert item.metrics["max_jump_ratio"] > 0.5  # type: ignore[operator]
    low, high = item.details["jump_interval"]
    crossing = 0.25 / float(bright[0].mean())  # where the path's mean passes 0.25
    # float32 inputs: the model crosses where the rounded path point does (within ~1e-7)
    assert low - 1e-6 <= crossing <= high + 1e-6 and high - low < 1e-6
    assert _statuses(results["ig_convergence"]) == ["fail"] * 3
    assert _statuses(results["ig_completeness"]) == ["fail"] * 3


class _BiasedToClassZero(nn.Module):
    """A classifier that reads a black image as class 0 with near certainty."""

    def __init__(self) -> None:
        super().__init__()
        self.body = _cnn()
        with torch.no_grad():
            self.body[-1].bias.zero_()
            self.body[-1].bias[0] = 12.0

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.body(z)


def test_baseline_check_flags_a_baseline_the_model_reads_as_the_target() -> None:
    results = _by_check(run(_context(_BiasedToClassZero, IMAGES, target=0)))
    baseline = results["ig_baseline"]
    assert _statuses(baseline) == ["fail"] * 3
    assert baseline.items[0].metrics["baseline_target_probability"] > 0.99  # type: ignore[operator]
    assert baseline.items[0].metrics["baseline_entropy_ratio"] < 0.01  # type: ignore[operator]
    # the clean CNN, same inputs: near-uniform softmax at the zero baseline
    clean = _by_check(run(_context(_cnn, IMAGES, target=0)))["ig_baseline"]
    assert _statuses(clean) == ["pass"] * 3


class _FixedEdgeDetector(nn.Module):
    """Attributions from a fixed (buffer) Laplacian; the only parameters are an output offset
    and a scale that the ranking does not see: randomizing the weights changes nothing."""

    def __init__(self) -> None:
        super().__init__()
        kernel = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]])
        self.register_buffer("kernel", kernel.view(1, 1, 3, 3))
        self.offset = nn.Linear(1, 10)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        edges = torch.nn.functional.conv2d(z, self.kernel, padding=1)
        energy = (edges**2).sum(dim=(1, 2, 3), keepdim=False)
        return energy[:, None] * self.offset.weight.abs().view(1, 10) + self.offset.bias


def test_randomization_flags_attributions_that_ignore_the_weights() -> None:
    results = _by_check(run(_context(_FixedEdgeDetector, IMAGES, target=0)))
    randomization = results["ig_randomization"]
    assert randomization.status == "computed"
    assert _statuses(randomization) == ["fail"] * 2
    assert randomization.items[0].metrics["spearman_final"] > 0.99  # type: ignore[operator]
    assert randomization.parameters["cascade"] == ["offset"]
    assert randomization.summary["max_abs_spearman_final"] > 0.99  # type: ignore[operator]


class _NoisyForward(nn.Module):
    """Gradients that change from run to run (an unseeded random op in forward)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = _mlp()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.body(z * (1.0 + 1e-3 * torch.rand_like(z)))


def test_determinism_flags_attributions_that_vary_between_repeats() -> None:
    results = _by_check(run(_context(_NoisyForward, VECTORS)))
    determinism = results["ig_determinism"]
    assert _statuses(determinism) == ["fail"] * 3
    assert determinism.summary["bit_exact"] is False
    item = determinism.items[0]
    assert item.metrics["bit_exact"] is False and item.subject.indices is not None
    assert item.metrics["max_abs_diff"] > 0  # type: ignore[operator]


def test_determinism_fixes_threads_and_restores_them() -> None:
    before = torch.get_num_threads()
    ctx = _context(_mlp, VECTORS)
    ctx.spec.threads = 2
    results = _by_check(run(ctx))
    assert results["ig_determinism"].parameters["threads"] == 2
    assert torch.get_num_threads() == before


# ----------------------------------------------------------------------------- the readings


def test_spearman_matches_scipy_with_ties() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, size=200).astype(float)
    b = a + rng.normal(size=200)
    expected = stats.spearmanr(a, b).statistic
    assert spearman(a, b) == pytest.approx(expected, abs=1e-12)
    assert spearman(a, -a) == pytest.approx(-1.0)
    assert spearman(np.ones(5), np.arange(5.0)) is None


def _path(
    t: np.ndarray, f: Callable[[np.ndarray], np.ndarray], slope: Callable[[np.ndarray], np.ndarray]
) -> PathSamples:
    return PathSamples(
        t=t,
        f=f(t),
        slope=slope(t),
        f_start=float(f(np.array([0.0]))[0]),
        f_end=float(f(np.array([1.0]))[0]),
    )


def test_a_kink_is_not_a_jump_but_a_discontinuity_is() -> None:
    t = np.linspace(0.01, 0.99, 40)
    relu = _path(t, lambda s: np.maximum(0.0, s - 0.503), lambda s: (s > 0.503).astype(float))
    reading = path_behaviour(relu, flip_tolerance=0.1)
    assert reading["max_jump_ratio"] < 1e-12 and reading["max_spike_share"] < 1e-12
    step = _path(t, lambda s: s + 2.0 * (s > 0.503), lambda s: np.ones_like(s))
    reading = path_behaviour(step, flip_tolerance=0.1)
    assert reading["max_jump_ratio"] > 0.5
    low, high = reading["jump_interval"]
    assert low < 0.503 < high


def test_spikes_and_sign_flips() -> None:
    t = np.linspace(0.0, 1.0, 41)
    spike_slope = np.ones_like(t)
    spike_slope[20] = 30.0  # a narrow spike F does not show
    reading = path_behaviour(
        PathSamples(t=t, f=t.copy(), slope=spike_slope, f_start=0.0, f_end=1.0), flip_tolerance=0.1
    )
    # 29 above its neighbours over a cell of 1/40, against V = 1 + 29/40: 42 % of the integral
    assert reading["max_spike_share"] == pytest.approx(29 / 40 / (1 + 29 / 40))
    assert reading["spike_step"] == 20 and reading["spike_t"] == 0.5
    wave = _path(
        np.linspace(0, 1, 37),
        lambda s: np.sin(4 * np.pi * s),
        lambda s: 4 * np.pi * np.cos(4 * np.pi * s),
    )
    reading = path_behaviour(wave, flip_tolerance=0.1)
    assert reading["sign_flips"] == reading["sign_flips_beyond_tolerance"] == 4
    assert reading["nonmonotone_fraction"] > 0.9
    assert reading["max_jump_ratio"] < 0.05  # smooth: no jump


def test_nonfinite_path_values_are_reported() -> None:
    t = np.linspace(0, 1, 5)
    slope = np.ones(5)
    slope[3] = np.nan
    reading = path_behaviour(
        PathSamples(t=t, f=t.copy(), slope=slope, f_start=0.0, f_end=1.0), flip_tolerance=0.1
    )
    assert reading["nonfinite_nodes"] == 1 and reading["first_nonfinite_t"] == 0.75


def test_randomization_leaves_the_context_model_untouched() -> None:
    model = _cnn()
    state = copy.deepcopy(model.state_dict())
    ctx = _context(lambda: copy.deepcopy(model), IMAGES)
    run(ctx)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_baseline_probability_limit_is_class_count_aware() -> None:
    from attest.collection.ig.checks import target_probability_limit

    assert target_probability_limit(0.5, 2) == pytest.approx(0.75)
    assert target_probability_limit(0.5, 3) == pytest.approx(2 / 3)
    assert target_probability_limit(0.5, 10) == pytest.approx(0.55)
    # a binary classifier whose baseline sits near its decision boundary is neutral enough
    assert target_probability_limit(0.5, 2) > 0.6
    # a baseline read confidently as the target is not
    assert target_probability_limit(0.5, 2) <= 0.9


class _Reweighted(nn.Module):
    """sum(x * w) for two classes: IG with a zero baseline is exactly x * w. Randomizing the
    layer sets w to ``after`` (``reset_parameters`` is what the cascade calls)."""

    def __init__(self, before: list[float], after: list[float]) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(before))
        self.after = torch.tensor(after)

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.w.copy_(self.after)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        score = (z * self.w).sum(dim=1, keepdim=True)
        return torch.cat([score, -score], dim=1)


ONES = torch.ones(2, 6)


def test_randomization_passes_attributions_whose_order_the_randomization_reversed() -> None:
    # signed Spearman -1 (the order reversed), magnitudes reordered: the map changed
    reversed_order = [3.0, 2.0, 0.5, -1.0, -2.5, -4.0]
    build = lambda: _Reweighted([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], reversed_order)  # noqa: E731
    randomization = _by_check(run(_context(build, ONES, target=0)))["ig_randomization"]
    assert _statuses(randomization) == ["pass"] * 2
    item = randomization.items[0]
    assert item.metrics["spearman_final"] == pytest.approx(-1.0)
    assert abs(item.metrics["spearman_abs_final"]) < 0.5  # type: ignore[arg-type]


def test_randomization_flags_the_same_map_with_its_signs_flipped() -> None:
    build = lambda: _Reweighted([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [-2.0, -4, -6, -8, -10, -12])  # noqa: E731
    randomization = _by_check(run(_context(build, ONES, target=0)))["ig_randomization"]
    assert _statuses(randomization) == ["fail"] * 2
    assert "signs flipped" in randomization.items[0].message
