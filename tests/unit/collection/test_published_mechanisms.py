"""Mechanisms of published architectures that once broke a check, each in a few lines of torch.

Found by a sweep of MONAI networks and generic PyTorch building blocks (the models themselves
are in tests/integration/test_published_architectures.py); every test here reproduces one
mechanism in a tiny model and asserts the check handles it, and that the same check still
catches the defect it exists for.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _collect_models import MLP, make_spec
from _grad_models import class_labels, continuous, cross_entropy, make_context
from torch import nn

from attest.collection.context import cast_model
from attest.collection.gradients import runner as gradchecks
from attest.collection.gradients import second_order
from attest.collection.gradients.finite_differences import FiniteDifferenceSettings, check_backward
from attest.collection.ig import checks as ig_checks
from attest.collection.ig.attribution import integrated_gradients
from attest.collection.profile.float64_pass import measure_fidelity
from attest.collection.profile.profiler import capture_reference
from attest.collection.profile.results import fidelity_figures
from attest.errors import InputError
from attest.spec import load_spec

# ---------------------------------------------------------------- model outputs and dtypes


class TupleOutput(nn.Module):
    """Returns (logits, [hidden states]) like MONAI's ViT, or (seg, None) like SegResNetVAE."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        h = torch.tanh(self.fc1(x))
        return self.fc2(h), [h]


def test_integrated_gradients_of_a_model_returning_a_tuple() -> None:
    torch.manual_seed(0)
    model = TupleOutput()
    x = continuous(3, 6)
    result = integrated_gradients(model, x, tolerance=1e-3, method="adaptive")
    assert result.attributions.shape == x.shape
    assert float(result.completeness_rel_error.max()) <= 1e-3


def test_ig_checks_run_on_a_model_returning_a_tuple() -> None:
    ctx = make_context(TupleOutput, continuous(3, 6), class_labels(3), cross_entropy)
    results = ig_checks.run(ctx)
    assert all(r.status == "computed" for r in results), [(r.check, r.reason) for r in results]


class Spectral(nn.Module):
    """An FNO-style Fourier layer with complex weights (rfft2 -> complex product -> irfft2)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(2, 3, dtype=torch.cfloat))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spectrum = torch.fft.rfft2(x)[..., :2, :3] * self.w
        return torch.fft.irfft2(spectrum, s=x.shape[-2:])


def test_cast_model_keeps_complex_parameters_complex() -> None:
    torch.manual_seed(0)
    model = Spectral()
    weight = model.w.detach().clone()
    for dtype, complex_dtype in (
        (torch.float64, torch.complex128),
        (torch.float32, torch.complex64),
    ):
        cast_model(model, "cpu", dtype)
        assert model.w.dtype == complex_dtype
        assert torch.equal(model.w.detach().to(torch.complex64), weight)  # imaginary part kept
    out = model(torch.randn(2, 4, 4))
    assert out.dtype == torch.float32


class SpectralNet(nn.Module):
    """Spectral layer between two real layers: complex parameters in a trainable model."""

    def __init__(self) -> None:
        super().__init__()
        self.lift = nn.Conv2d(1, 1, 1)
        self.spectral = Spectral()
        self.fc = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.tanh(self.spectral(self.lift(x))).flatten(1))


def test_second_order_with_complex_parameters() -> None:
    ctx = make_context(SpectralNet, continuous(3, 1, 4, 4))
    result = second_order.run(ctx)
    assert result.status == "computed" and not result.failed_items, [
        i.message for i in result.failed_items
    ]


class PlainAttributeGrid(nn.Module):
    """Keeps a tensor made at construction as a plain attribute (MONAI's GlobalNet sampling
    grid): ``Module.to`` does not see it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.grid = torch.linspace(-1, 1, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) @ torch.diag(self.grid)


def test_float64_instance_builds_plain_attribute_tensors_in_float64() -> None:
    ctx = make_context(PlainAttributeGrid, continuous(3, 4), capture=False)
    model = ctx.fresh_model(torch.float64)
    assert model.grid.dtype == torch.float64
    assert model(ctx.inputs(torch.float64)).dtype == torch.float64
    assert ctx.fresh_model().grid.dtype == torch.float32
    assert torch.get_default_dtype() == torch.float32  # restored


class InplaceAttention(nn.Module):
    """Scales its softmax output in place in its own code, between two child modules."""

    def __init__(self) -> None:
        super().__init__()
        self.qk = nn.Linear(4, 4)
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        att = (self.qk(x) @ x.transpose(1, 2)).softmax(-1)
        att.mul_(0.5)  # softmax saved its output for backward
        return self.proj(att @ x)


class InplaceAttentionNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = InplaceAttention()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.block(x).mean(1))


def test_inplace_write_is_attributed_to_the_module_whose_code_wrote() -> None:
    results = gradchecks.run(make_context(InplaceAttentionNet, continuous(3, 5, 4)))
    (result,) = [r for r in results if r.check == "gradient_flow"]
    messages = [i.message for i in result.failed_items if i.subject.kind == "module"]
    assert messages and all("module 'block' modifies" in m for m in messages), messages


class AuxiliaryHead(nn.Module):
    """An auxiliary classifier called in training only (Inception's aux logits, the VAE branch
    of MONAI's SegResNetVAE), and a layer that forward never calls (a real dead parameter)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.head = nn.Linear(8, 3)
        self.aux = nn.Linear(8, 3)
        self.unused = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.body(x))
        if self.training:
            return self.head(h) + 0.0 * self.aux(h)
        return self.head(h)


def test_a_training_only_branch_is_a_warning_a_never_called_layer_fails() -> None:
    results = gradchecks.run(make_context(AuxiliaryHead, continuous(3, 6)))
    (flow,) = [r for r in results if r.check == "gradient_flow"]
    status = {i.subject.name: (i.status, i.message) for i in flow.items}
    assert status["aux.weight"][0] == "warn" and "training mode" in status["aux.weight"][1]
    assert status["unused.weight"][0] == "fail" and "never called" in status["unused.weight"][1]
    assert status["head.weight"][0] == "pass"


class DeepSupervision(nn.Module):
    """MONAI DynUNet's deep supervision: the side head runs in every mode (its result kept on
    the module), and joins the output only in training; a branch computed and discarded in
    every mode stays a dead branch."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.head = nn.Linear(8, 3)
        self.side_head = nn.Linear(8, 3)
        self.discarded = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.body(x))
        side = self.side_head(h)
        _ = self.discarded(h)
        out = self.head(h)
        return torch.stack([out, side], dim=1) if self.training else out


def test_a_head_that_joins_the_output_in_training_only_is_a_warning() -> None:
    results = gradchecks.run(make_context(DeepSupervision, continuous(3, 6)))
    (flow,) = [r for r in results if r.check == "gradient_flow"]
    status = {i.subject.name: (i.status, i.message) for i in flow.items}
    for name in ("side_head.weight", "side_head.bias"):
        assert status[name][0] == "warn" and "training mode it does" in status[name][1]
    assert (
        status["discarded.weight"][0] == "fail" and "dead branch" in status["discarded.weight"][1]
    )
    assert status["head.weight"][0] == "pass"


# ---------------------------------------------------------------- gradcheck engine

_SETTINGS = FiniteDifferenceSettings()


class TwoPercentOffComplexScale(torch.autograd.Function):
    """z * (2 + i) whose backward is 2 % too large."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, z: torch.Tensor) -> torch.Tensor:
        return z * (2 + 1j)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        return 1.02 * grad * (2 - 1j)


def test_backward_check_of_complex_operators() -> None:
    x = torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    spectrum = torch.fft.rfft2(x)
    for fn, inputs in (
        (lambda a: [torch.fft.rfft2(a)], [x]),
        (lambda z: [torch.fft.irfft2(z, s=(6, 8))], [spectrum]),
        (lambda a, b: [torch.complex(a, b)], [x, x.flip(0)]),
    ):
        check = check_backward(fn, inputs, _SETTINGS)
        assert check.passed, check
    for z in (spectrum[:2, :3], spectrum):  # full Jacobian, random directions
        check = check_backward(
            lambda a: [TwoPercentOffComplexScale.apply(a)],  # type: ignore[no-untyped-call]
            [z],
            _SETTINGS,
        )
        assert not check.passed and 0.01 < check.max_rel_error < 0.03


def test_backward_check_leaves_out_infinite_outputs() -> None:
    """A padding mask writes -inf into attention scores: no derivative there to check."""
    x = torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    mask = torch.zeros(4, 6, dtype=torch.bool)
    mask[:, -2:] = True
    check = check_backward(lambda a: [a.masked_fill(mask, float("-inf"))], [x], _SETTINGS)
    assert check.passed and check.nonfinite_left_out == 8
    big = torch.randn(16, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

    class Off(torch.autograd.Function):
        @staticmethod
        def forward(ctx: torch.autograd.function.FunctionCtx, a: torch.Tensor) -> torch.Tensor:
            return a.masked_fill(a > 1, float("-inf"))

        @staticmethod
        def backward(ctx: torch.autograd.function.FunctionCtx, g: torch.Tensor) -> torch.Tensor:
            return 1.02 * g

    check = check_backward(lambda a: [Off.apply(a)], [big], _SETTINGS)  # type: ignore[no-untyped-call]
    assert not check.passed and check.nonfinite_left_out > 0


# ---------------------------------------------------------------- fidelity against float64


def _fidelity(build: type[nn.Module], inputs: torch.Tensor) -> dict[str, dict[str, object]]:
    ctx = make_context(build, inputs, capture=False)
    profile = capture_reference(ctx)
    measure_fidelity(ctx, profile)
    return {f"{m.id} {m.op} @ {m.module}": fidelity_figures(m) for m in profile.ops}


def _below(figures: dict[str, dict[str, object]], pct: float = 99.9) -> list[str]:
    return [
        f"{name}: {key}={value}"
        for name, row in figures.items()
        for key, value in row.items()
        if isinstance(value, float) and value < pct
    ]


class StableSoftmax(nn.Module):
    """Attention with a hand-written stable softmax: the gradient into the row max is 0 in
    exact arithmetic, rounding in either precision."""

    def __init__(self) -> None:
        super().__init__()
        self.qk = nn.Linear(4, 8)
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.qk(x)
        s = q @ q.transpose(1, 2)
        s = s - s.max(dim=-1, keepdim=True)[0]
        a = s.exp()
        a = a / a.sum(-1, keepdim=True)
        return self.fc((a @ x).mean(1))


class ShiftedLogSoftmax(nn.Module):
    """log_softmax(z + logsumexp(h)): a shift the log-softmax cancels (gradient 0 into it)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.fc1(x))
        return torch.log_softmax(self.fc2(h) + torch.logsumexp(h, dim=1, keepdim=True), dim=1)


def test_fidelity_of_a_gradient_that_cancels_to_zero() -> None:
    assert not _below(_fidelity(StableSoftmax, continuous(3, 6, 4)))
    assert not _below(_fidelity(ShiftedLogSoftmax, continuous(3, 6)))


class BiLSTM(nn.Module):
    """On CPU, float32 runs one fused mkldnn_rnn_layer per layer and direction, float64 the
    decomposed cell: same module, other operators."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 8, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.fc(out.mean(1))


def test_fidelity_does_not_compare_operators_of_different_kernels() -> None:
    figures = _fidelity(BiLSTM, continuous(3, 6, 4))
    assert not _below(figures)
    assert any(row["fidelity_pct"] is not None for name, row in figures.items() if "@ fc" in name)


def test_fidelity_compares_complex_gradients() -> None:
    """The gradients flowing into an FFT's complex output are compared as complex numbers
    (a cast to real discards the imaginary part, and warns inside backward)."""
    figures = _fidelity(SpectralNet, continuous(3, 1, 4, 4))
    assert not _below(figures)
    (rfft,) = [row for name, row in figures.items() if "_fft_r2c" in name]
    assert isinstance(rfft["grad_fidelity_pct"], float) and rfft["grad_fidelity_pct"] > 99.99


class NaiveVariance(nn.Module):
    """Variance as E[h^2] - E[h]^2 of activations offset by 3000: float32 cancels away what
    float64 keeps (a real precision loss, and partial cancellation, not exact)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x) + 3000.0
        var = (h * h).mean(-1, keepdim=True) - h.mean(-1, keepdim=True) ** 2
        return self.fc2(var)


def test_a_real_precision_loss_is_still_caught() -> None:
    assert _below(_fidelity(NaiveVariance, continuous(3, 6)))


# ---------------------------------------------------------------- probe labels


def test_negative_labels_are_a_loss_ignore_marker_not_a_class(tmp_path: Path) -> None:
    """cross_entropy's ignore_index (-100 by default) marks labels a segmentation loss skips:
    the probe keeps them for the loss; only target: label needs every label to be a class."""
    labels = torch.tensor([0, -100, 2, 1])
    spec = load_spec(make_spec(tmp_path / "loss", MLP, target=labels, spec_extra="target: 1\n"))
    assert spec.labels is not None and torch.equal(spec.labels, labels)
    path = make_spec(tmp_path / "label", MLP, target=labels, spec_extra="target: label\n")
    with pytest.raises(InputError, match="negative labels"):
        load_spec(path)


def test_a_float32_plain_attribute_gets_a_hint_in_the_float64_checks() -> None:
    # MONAI's GlobalNet keeps its sampling grid as a plain attribute made with an explicit
    # dtype: Module.to(float64) leaves it float32, and every float64 check says how to fix it
    from _grad_models import continuous, make_context

    from attest.collection.capture.run import MIXED_PRECISION_HINT
    from attest.collection.gradients import runner as gradchecks

    class PlainGrid(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.grid = torch.eye(4, dtype=torch.float32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x) @ self.grid  # matmul does not promote: a dtype mismatch

    ctx = make_context(PlainGrid, continuous(3, 4))
    results = {r.check: r for r in gradchecks.run(ctx)}
    flow = results["gradient_flow"]
    assert any(MIXED_PRECISION_HINT in i.message for i in flow.items), flow.items
