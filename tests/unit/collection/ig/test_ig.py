"""Integrated gradients: exact quadrature, Captum agreement, chunking, adaptive steps, storage."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from attest.collection.context import LoadedSpec, target_scalar
from attest.collection.ig.attribution import (
    METHODS,
    decode_attributions,
    encode_attributions,
    integrated_gradients,
    make_baseline,
    quadrature,
)
from attest.collection.ig.evaluator import CPU_WORKING_SET_BYTES, samples_per_chunk
from attest.errors import InputError

torch.set_num_threads(1)


def _linear64() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Linear(20, 3).double()
    return model, torch.randn(4, 20, dtype=torch.float64)


def _small_cnn() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(
        nn.Conv2d(1, 6, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(6 * 4 * 4, 5),
    ).eval()


def _cnn_inputs(n: int = 3) -> torch.Tensor:
    return torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(2))


# ----------------------------------------------------------------------------- quadrature


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("steps", [2, 7, 50])
def test_weights_are_float64_and_sum_to_one(method: str, steps: int) -> None:
    nodes, weights = quadrature(method, steps)
    assert nodes.dtype == weights.dtype == np.float64
    assert len(nodes) == len(weights) == steps
    assert abs(weights.sum() - 1.0) < 1e-14
    assert ((nodes >= 0) & (nodes <= 1)).all()


def test_trapezoid_nodes_include_both_ends() -> None:
    nodes, weights = quadrature("trapezoid", 5)
    assert nodes.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert weights.tolist() == [0.125, 0.25, 0.25, 0.25, 0.125]


@pytest.mark.parametrize(
    ("method", "steps"), [("trapezoid", 1), ("gausslegendre", 0), ("bogus", 8)]
)
def test_bad_rule_or_steps_is_an_input_error(method: str, steps: int) -> None:
    with pytest.raises(InputError):
        quadrature(method, steps)


@pytest.mark.parametrize("method", METHODS)
def test_linear_float64_model_is_exact_for_every_rule(method: str) -> None:
    model, x = _linear64()
    result = integrated_gradients(model, x, target=1, method=method, steps=7)
    assert result.completeness_rel_error.max() < 1e-12
    expected = x * model.weight[1].detach()  # IG of a linear map, zero baseline
    assert torch.allclose(result.attributions, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("method", METHODS)
def test_polynomial_path_is_integrated_to_rounding_by_gauss_legendre(method: str) -> None:
    # F(x) = sum(x^3): the integrand is a quadratic in t; GL with 2 nodes is exact, the
    # others converge with steps.
    x = torch.linspace(-1, 2, 12, dtype=torch.float64).view(2, 6)

    class Cubic(nn.Module):
        def forward(self, z: torch.Tensor) -> torch.Tensor:
            return (z**3).sum(dim=1, keepdim=True)

    result = integrated_gradients(
        Cubic(), x, target=0, method=method, steps=2 if method == "gausslegendre" else 2000
    )
    bound = 1e-12 if method == "gausslegendre" else 1e-3
    assert result.completeness_rel_error.max() < bound
    if method == "gausslegendre":
        assert torch.allclose(result.attributions, x**3, rtol=1e-12)


# ----------------------------------------------------------------------------- Captum, the peer


@pytest.mark.parametrize(
    "method", ["gausslegendre", "riemann_left", "riemann_right", "riemann_middle"]
)
def test_matches_captum_on_float32_models(method: str) -> None:
    captum = pytest.importorskip("captum.attr")
    model, x = _small_cnn(), _cnn_inputs()
    ours = integrated_gradients(model, x, target=3, method=method, steps=50).attributions
    theirs = (
        captum.IntegratedGradients(model).attribute(x, target=3, method=method, n_steps=50).double()
    )
    assert float((ours - theirs).norm() / theirs.norm()) < 1e-6
    assert torch.allclose(ours, theirs, rtol=1e-6, atol=1e-6 * float(theirs.abs().max()))


@pytest.mark.parametrize("n", [5, 50])
def test_captum_trapezoid_is_short_by_one_over_n_ours_is_exact(n: int) -> None:
    captum = pytest.importorskip("captum.attr")
    model, x = _linear64()
    model, x = model.float(), x.float()
    f_gap = (model(x) - model(torch.zeros_like(x)))[:, 1].double()
    theirs = (
        captum.IntegratedGradients(model)
        .attribute(x, target=1, method="riemann_trapezoid", n_steps=n)
        .double()
    )
    their_error = (theirs.sum(dim=1) - f_gap) / f_gap
    assert torch.allclose(their_error, torch.full_like(their_error, -1.0 / n), atol=1e-5)
    ours = integrated_gradients(model, x, target=1, method="trapezoid", steps=n)
    assert ours.completeness_rel_error.max() < 1e-6  # float32 model: rounding of F only
    # Same nodes, weights that sum to 1 instead of (n-1)/n.
    assert torch.allclose(ours.attributions, theirs * n / (n - 1), rtol=1e-5, atol=1e-7)


# ----------------------------------------------------------------------------- batching and memory


@pytest.mark.parametrize(
    ("per_sample", "budget", "batch", "expected"),
    [
        (1 << 20, 1 << 30, 1, 64),  # a small sample: the 64 MiB working set decides
        (1 << 20, 1 << 30, 4, 64),
        (100 << 20, 1 << 30, 1, 1),  # one sample past the working set, a probe of one
        (100 << 20, 1 << 30, 2, 2),  # ... a probe of two: a pair
        (100 << 20, 1 << 30, 8, 2),  # ... never more than a pair
        (100 << 20, 150 << 20, 2, 1),  # ... and never past the budget
    ],
)
def test_cpu_chunks_hold_a_pair_of_a_real_size_probe(
    per_sample: int, budget: int, batch: int, expected: int
) -> None:
    assert CPU_WORKING_SET_BYTES == 64 << 20
    cpu = torch.device("cpu")
    assert samples_per_chunk(per_sample, budget, cpu, batch) == expected
    assert (
        samples_per_chunk(per_sample, budget, torch.device("meta"), batch) == budget // per_sample
    )


def test_chunks_are_bounded_by_the_memory_budget_and_do_not_change_bits() -> None:
    model, x = _small_cnn(), _cnn_inputs(2)
    steps, budget = 1024, 1 << 19
    batch_sizes: list[int] = []
    handle = model.register_forward_pre_hook(lambda _m, args: batch_sizes.append(args[0].shape[0]))
    small = integrated_gradients(model, x, target=0, steps=steps, memory_budget_bytes=budget)
    handle.remove()
    big = integrated_gradients(model, x, target=0, steps=steps, memory_budget_bytes=1 << 30)
    assert small.chunk_size * small.per_sample_bytes <= budget
    assert 1 < small.chunk_size < 2 * steps // 4  # neither one per step nor everything at once
    assert max(batch_sizes) <= small.chunk_size
    assert len(batch_sizes) >= 2 * steps // small.chunk_size  # it really went in chunks
    assert big.chunk_size > small.chunk_size
    assert torch.equal(small.attributions, big.attributions)  # node order fixed: same bits
    # F(x), F(b): a pass of their own (small budget) or in the path's one chunk (big budget).
    # Bit-equal on most CPUs, but not promised: oneDNN may block a convolution differently for
    # a batch of 2 and one of a thousand (it does on AVX-512 machines), so to float32 rounding.
    np.testing.assert_allclose(small.f_input, big.f_input, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(small.f_baseline, big.f_baseline, rtol=1e-5, atol=1e-6)


def test_argmax_classes_found_with_the_endpoints_in_the_paths_chunk_or_apart() -> None:
    model, x = _small_cnn(), _cnn_inputs(4)
    with torch.no_grad():
        classes = model(x).argmax(dim=1)
    for budget in (1 << 14, 1 << 30):  # endpoints apart / merged into the one chunk
        found = integrated_gradients(model, x, steps=8, memory_budget_bytes=budget)
        given = integrated_gradients(model, x, target=classes, steps=8, memory_budget_bytes=budget)
        assert found.target_classes is not None
        assert found.target_classes.tolist() == classes.tolist()
        assert torch.equal(found.attributions, given.attributions)
        assert np.array_equal(found.f_input, given.f_input)


def test_convolutional_model_runs_channels_last_and_matches_contiguous() -> None:
    model, x = _small_cnn(), _cnn_inputs(2)
    result = integrated_gradients(model, x, target=1, method="gausslegendre", steps=16)
    assert result.model_info["memory_format"] == "channels_last"
    # the same path in the NCHW layout (float64: rounding does not hide a layout mistake)
    model64 = _small_cnn().double()
    ref = integrated_gradients(model64, x.double(), target=1, method="gausslegendre", steps=16)
    assert float((result.attributions - ref.attributions).norm() / ref.attributions.norm()) < 1e-6
    linear = integrated_gradients(nn.Linear(4, 2), torch.rand(2, 4), target=0, steps=4)
    assert linear.model_info["memory_format"] == "contiguous_format"


class _ViewHead(nn.Module):
    """A CNN that flattens with ``view``, which channels-last activations cannot take."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(11)
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 3)

    reshape = False

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(z))
        return self.fc(h.reshape(h.shape[0], -1) if self.reshape else h.view(h.shape[0], -1))


def test_model_that_views_its_activations_falls_back_to_contiguous() -> None:
    model, x = _ViewHead().eval(), _cnn_inputs(2)
    with pytest.raises(RuntimeError, match="view"):  # what channels-last does to it
        model(x.to(memory_format=torch.channels_last, copy=True))
    result = integrated_gradients(model, x, target=2, method="gausslegendre", steps=8)
    assert result.model_info["memory_format"] == "contiguous_format"
    twin = _ViewHead().eval()  # the same weights and function, which channels-last can run
    twin.reshape = True
    other = integrated_gradients(twin, x, target=2, method="gausslegendre", steps=8)
    assert other.model_info["memory_format"] == "channels_last"
    rel = (result.attributions - other.attributions).norm() / other.attributions.norm()
    assert float(rel) < 1e-6


def test_model_is_evaluated_in_eval_mode_and_its_mode_restored() -> None:
    torch.manual_seed(3)
    model = nn.Sequential(
        nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Dropout(0.5), nn.ReLU(), nn.Linear(16, 3)
    )
    model.train()
    x = torch.randn(4, 8)
    first = integrated_gradients(model, x, target=0, steps=16)
    second = integrated_gradients(model, x, target=0, steps=16)
    assert torch.equal(first.attributions, second.attributions)  # no dropout noise
    assert model.training and model[2].training
    assert first.model_info["was_training"] is True
    assert first.model_info["has_batchnorm"] is True
    assert first.model_info["has_dropout"] is True
    assert first.model_info["still_training_after_eval"] == []


# ----------------------------------------------------------------------------- adaptive steps


def _smooth_mlp() -> nn.Module:
    torch.manual_seed(4)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2)).double()


@pytest.mark.parametrize("method", METHODS)
def test_adaptive_steps_double_until_the_tolerance(method: str) -> None:
    model = _smooth_mlp()
    x = torch.randn(3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) * 3
    tolerance = 1e-4 if method in ("riemann_left", "riemann_right") else 1e-7  # first-order rules
    result = integrated_gradients(
        model, x, target=1, method=method, steps=4, tolerance=tolerance, max_steps=1 << 14
    )
    assert result.converged.all()
    assert (result.completeness_rel_error <= tolerance).all()
    assert len(result.error_curve) >= 2
    first_errors = result.error_curve[0]["rel_error"]
    assert max(e for e in first_errors if e is not None) > tolerance
    if method in ("riemann_left", "riemann_right", "trapezoid"):
        # nested rules re-use every earlier evaluation
        assert (result.evaluations == result.steps_used).all()
    else:
        assert (result.evaluations > result.steps_used).all()


def test_adaptive_steps_stop_at_the_cap_and_say_so() -> None:
    class Step(nn.Module):  # a jump no gradient sees: no step count integrates it
        def forward(self, z: torch.Tensor) -> torch.Tensor:
            return (z.sum(dim=1) + 5.0 * (z.sum(dim=1) > 1.0).to(z.dtype)).unsqueeze(1)

    x = torch.ones(2, 4, dtype=torch.float64)
    result = integrated_gradients(
        Step(), x, target=0, method="trapezoid", steps=8, tolerance=1e-3, max_steps=64
    )
    assert not result.converged.any()
    assert result.steps_used.max() <= 64
    assert [level["steps"] for level in result.error_curve] == [
        8,
        15,
        29,
        57,
    ]  # trapezoid cells doubled


def test_targets_agree_with_the_collect_contract() -> None:
    model, x = _small_cnn(), _cnn_inputs(4)
    labels = torch.tensor([0, 1, 2, 3])
    spec = LoadedSpec(
        path=__file__,
        name="t",
        version="1",
        factory="m:b",
        factory_args={},  # type: ignore[arg-type]
        build_model=lambda: model,
        inputs=x,
        labels=labels,
    )
    for target in ("argmax", "label", 2):
        spec.target = target  # type: ignore[assignment]
        result = integrated_gradients(model, x, target=target, labels=labels, steps=4)
        with torch.no_grad():
            expected = target_scalar(model(x), spec, labels).double().numpy()
        # to float32 rounding: the IG pass and this one batch differently (oneDNN may block
        # a convolution differently per batch size, as on AVX-512 machines)
        assert np.allclose(result.f_input, expected, rtol=1e-5, atol=1e-6)


def test_segmentation_target_sums_the_class_channel() -> None:
    torch.manual_seed(6)
    model = nn.Conv2d(1, 3, 3, padding=1).double()
    x = torch.rand(2, 1, 5, 5, dtype=torch.float64)
    result = integrated_gradients(model, x, target=2, method="gausslegendre", steps=3)
    assert result.completeness_rel_error.max() < 1e-12
    with torch.no_grad():
        assert np.allclose(result.f_input, model(x)[:, 2].sum(dim=(1, 2)).numpy())


# ----------------------------------------------------------------------------- baselines and storage


def test_baselines() -> None:
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(7))
    assert torch.equal(make_baseline("zero", x), torch.zeros_like(x, dtype=torch.float64))
    mean = make_baseline("mean", x)
    assert torch.allclose(mean[:, :, 0, 0], x.double().mean(dim=(2, 3)))
    blur = make_baseline("blur", x)
    assert blur.shape == x.shape and blur.std() < x.double().std()
    assert torch.allclose(blur.mean(dim=(2, 3)), x.double().mean(dim=(2, 3)), atol=0.05)
    noise = make_baseline("uniform", x, seed=3)
    assert torch.equal(noise, make_baseline("uniform", x, seed=3))
    assert not torch.equal(noise, make_baseline("uniform", x, seed=4))
    assert float(noise.min()) >= float(x.min()) and float(noise.max()) <= float(x.max())
    with pytest.raises(InputError):
        make_baseline("median", x)


def test_stored_attributions_round_trip_and_stay_bounded() -> None:
    rng = np.random.default_rng(0)
    attr, x = rng.normal(size=(3, 1, 8, 8)), rng.random((3, 1, 8, 8))
    stored = encode_attributions(attr, x)
    decoded = decode_attributions(stored)
    assert decoded["attributions"].shape == attr.shape and stored["pooling"] == 1
    assert np.allclose(decoded["attributions"], attr, rtol=1e-3, atol=1e-3 * np.abs(attr).max())
    assert np.allclose(decoded["inputs"], x, atol=1e-3)
    big_attr, big_x = rng.normal(size=(4, 3, 256, 256)), rng.random((4, 3, 256, 256))
    cap = 200_000
    stored = encode_attributions(big_attr, big_x, max_bytes=cap)
    assert len(stored["data"]) <= cap and stored["pooling"] > 1
    decoded = decode_attributions(stored)
    # sum-pooling keeps each input's total attribution (completeness survives downsampling)
    kept = len(stored["input_indices"])
    assert np.allclose(
        decoded["attributions"].sum(axis=(1, 2, 3)),
        big_attr[:kept].sum(axis=(1, 2, 3)),
        rtol=0.05,
        atol=1.0,
    )
    assert decode_attributions(None) == {}
    with pytest.raises(InputError):
        decode_attributions({"format": "npz+base64", "data": "not base64!"})


def test_a_model_writing_into_its_input_still_differentiates() -> None:
    torch.manual_seed(8)
    model = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(5, 2)).double()
    x = torch.randn(3, 5, dtype=torch.float64)
    before = x.clone()
    result = integrated_gradients(model, x, target=0, method="gausslegendre", steps=8)
    # relu(t x) = t relu(x) for t >= 0: F is linear along the path, so the rule is exact
    assert result.completeness_rel_error.max() < 1e-12
    expected = torch.relu(x) * model[1].weight[0].detach()
    assert torch.allclose(result.attributions, expected, rtol=1e-12, atol=1e-15)
    assert torch.equal(x, before)  # the caller's inputs are untouched


def test_float16_model_accumulates_in_float64() -> None:
    torch.manual_seed(9)
    model = nn.Linear(6, 2).half()
    x = torch.rand(2, 6).half()
    result = integrated_gradients(model, x, target=1, steps=4)
    assert result.attributions.dtype == torch.float64
    assert result.model_info["dtype"] == "float16"
    expected = x.double() * model.weight[1].detach().double()  # fp16 weights, exact products
    assert torch.allclose(result.attributions, expected, rtol=1e-12)


# ----------------------------------------------------------------------------- adaptive panels


class _EpsTransition(nn.Module):
    """F(t x) = sum(t x) / sqrt(t^2 |x|^2 + eps): smooth, but steep within t ~ 1e-4 of 0 (a
    normalisation layer's epsilon transition), then flat."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        norm = (z * z).sum(dim=1, keepdim=True)
        return z.sum(dim=1, keepdim=True) / torch.sqrt(norm + 1e-8) + 0.1 * z.sum(
            dim=1, keepdim=True
        )


def test_adaptive_resolves_a_steep_smooth_start_where_uniform_doubling_cannot() -> None:
    from attest.collection.ig.analysis import path_behaviour

    x = torch.linspace(0.5, 1.5, 6, dtype=torch.float64).view(1, 6)
    fixed = integrated_gradients(
        _EpsTransition(), x, target=0, method="trapezoid", steps=8, tolerance=1e-6, max_steps=1024
    )
    adaptive = integrated_gradients(
        _EpsTransition(), x, target=0, steps=8, tolerance=1e-6, max_steps=1024
    )
    assert adaptive.method == "adaptive"
    assert not fixed.converged.all()
    assert adaptive.converged.all() and adaptive.completeness_rel_error[0] <= 1e-6
    assert adaptive.evaluations[0] < 1024
    assert adaptive.panels is not None and adaptive.panels[0].summary()["min_width"] < 1e-4
    assert adaptive.path is not None
    reading = path_behaviour(adaptive.path[0], flip_tolerance=0.1)
    assert reading["max_jump_ratio"] == 0.0


def test_adaptive_keeps_a_true_jump_and_monotonicity_names_it() -> None:
    from attest.collection.ig.adaptive import MIN_PANEL_WIDTH
    from attest.collection.ig.analysis import path_behaviour

    class Step(nn.Module):  # torch.where threshold crossed at t = 0.3 along the path
        def forward(self, z: torch.Tensor) -> torch.Tensor:
            s = z.sum(dim=1, keepdim=True)
            return torch.where(s > 1.2, s + 5.0, s)

    x = torch.ones(1, 4, dtype=torch.float64)
    result = integrated_gradients(Step(), x, target=0, steps=8, tolerance=1e-3, max_steps=1024)
    assert not result.converged.any()
    assert result.evaluations[0] <= 1024
    assert result.path is not None
    reading = path_behaviour(result.path[0], flip_tolerance=0.1)
    assert reading["max_jump_ratio"] > 0.5
    low, high = reading["jump_interval"]
    assert low <= 0.3 <= high and high - low <= 2 * MIN_PANEL_WIDTH


def test_adaptive_is_exact_on_a_linear_model_and_independent_of_memory() -> None:
    torch.manual_seed(0)
    model = nn.Linear(10, 3).double()
    x = torch.randn(3, 10, dtype=torch.float64)
    result = integrated_gradients(model, x, target=1, steps=8, tolerance=1e-9)
    assert (result.completeness_rel_error < 1e-12).all()
    # a vector budget too small to keep panel sums: split panels are evaluated again
    lean = integrated_gradients(model, x, target=1, steps=8, tolerance=1e-9, memory_budget_bytes=8)
    assert torch.allclose(lean.attributions, result.attributions, rtol=0, atol=1e-12)


def test_decoding_attributions_does_not_load_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from attest.evidence.attributions import decode_attributions; "
        "import attest.report._ig; print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
