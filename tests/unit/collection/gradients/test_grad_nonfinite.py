"""Issue 33 item 12: a NaN or an infinity on either side of a comparison is a failure that
names the side (attest.collection.nonfinite).

Reproduced first: on main a custom Function whose backward returns NaN passed ``custom_ops``
("max relative error 0.00e+00") because the random-direction error of a NaN analytic side is
NaN and ``max(0.0, nan)`` is 0.0; gradcheck's random directions are the same code. Then a
table feeds NaN, +inf and -inf to each side of each comparison helper, called directly.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from _collect_models import make_spec
from _grad_models import CustomTanhNet, continuous, make_context
from torch import nn

from attest.collection import collect
from attest.collection.context import CheckSettings
from attest.collection.gradients import accumulation, custom_ops
from attest.collection.gradients.finite_differences import (
    FiniteDifferenceSettings,
    check_backward,
    describe,
)
from attest.collection.gradients.hessian_vector import hvp_error
from attest.collection.gradients.second_order_ops import _untracked_gradient_map
from attest.collection.ig.attribution import IGResult
from attest.collection.ig.checks import _completeness
from attest.collection.ig.path_checks import _determinism_item, _randomization_item
from attest.collection.nonfinite import nonfinite, one_sided_nonfinite
from attest.collection.profile.op_metrics import compared_error
from attest.collection.profile.repeat_capture import RunComparison
from attest.collection.training.batch_rows import max_rel, row_deviation
from attest.collection.training.mixed_precision_grads import param_item
from attest.collection.training.tensor_compare import comparison_item

BAD = {"NaN": math.nan, "+inf": math.inf, "-inf": -math.inf}
# gradcheck's settings: forward differences first (random directions)
GRADCHECK = FiniteDifferenceSettings(one_sided=True)


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    custom_ops._unregister_all()
    yield
    custom_ops._unregister_all()


def _backward_times(value: float) -> type[torch.autograd.Function]:
    """tanh whose backward multiplies the gradient by ``value`` (NaN, +inf or -inf)."""

    class BadBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(x)

        @staticmethod
        def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
            return grad.abs() * value  # abs: every element of the kind asked for

    return BadBackward


# -- reproduced, then refused -------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(BAD))
@pytest.mark.parametrize("rows", [8, 16])  # 64 inputs: full Jacobian; 128: random directions
def test_a_non_finite_backward_fails_custom_ops(kind: str, rows: int) -> None:
    function = _backward_times(BAD[kind])
    result = custom_ops.run(make_context(lambda: CustomTanhNet(function), continuous(rows, 6)))
    (item,) = result.items
    assert item.status == "fail", item.message
    # (the full Jacobian's one-hot cotangents add 0 * inf = NaN to an infinite backward)
    assert "non-finite value: the analytic side is" in item.message and kind in item.message
    assert "0.00e+00" not in item.message and "kink" not in item.message  # never excused
    assert item.metrics["nonfinite_side"] == "analytic"
    assert result.summary["failed"] == 1
    mode = "full_jacobian" if rows == 8 else "random_directions"
    assert item.metrics["mode"] == mode


@pytest.mark.parametrize("kind", list(BAD))
def test_a_non_finite_backward_fails_gradchecks_random_directions(kind: str) -> None:
    function = _backward_times(BAD[kind])
    x = torch.randn(200, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    check = check_backward(lambda t: [function.apply(t)], [x], GRADCHECK)
    assert check.mode == "random_directions"
    assert not check.passed
    assert check.nonfinite is not None and list(check.nonfinite.sides) == ["analytic"]
    assert f"the analytic side is {kind}" in describe(check)


def test_collect_fails_a_nan_backward_custom_function(tmp_path: Path) -> None:
    source = """
import torch
from torch import nn

class NaNBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(NaNBackward.apply(self.fc1(x)))

def build():
    return Net()
"""
    ev = collect(
        make_spec(tmp_path, source, spec_extra="repeats: 2\n"),
        runners=[
            "attest.collection.profile.topology:run",
            "attest.collection.profile.profiler:run",
            "attest.collection.gradients.runner:run",
        ],
    )
    result = ev.checks["custom_ops"]
    assert result.status == "computed"
    (item,) = result.items
    assert item.status == "fail"
    assert item.subject.name is not None and item.subject.name.endswith("NaNBackward")
    assert "non-finite value: the analytic side is NaN" in (item.message or "")
    assert item.metrics["nonfinite_side"] == "analytic"


# -- clean cases stay clean ---------------------------------------------------------------------


@pytest.mark.parametrize("n", [8, 200])
def test_log_of_a_mask_is_not_a_false_alarm(n: int) -> None:
    """-inf outputs are left out; the 0/0 their backward makes is held at 0 with them."""
    mask = torch.rand(n, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) > 0.3
    check = check_backward(lambda t: [torch.log(t)], [mask.double()], GRADCHECK)
    assert check.passed and check.nonfinite is None and check.nonfinite_left_out > 0


def test_both_sides_non_finite_at_the_same_place_is_not_a_difference() -> None:
    a = torch.tensor([1.0, math.nan, -math.inf])
    assert one_sided_nonfinite({"run 1": a, "run 2": a.clone()}) is None
    assert compared_error([(a.float(), a.double())], ("float32", "float64")) == (None, None)
    # float32 rounds 1e300 to +inf as IEEE overflow does: agreement, not a one-sided infinity
    big = torch.tensor([1.0, 1e300], dtype=torch.float64)
    assert compared_error([(big.float(), big)], ("float32", "float64"))[1] is None
    # the batch-invariance scale ignores a row one precision alone made infinite
    low, wide = torch.tensor([[1.0], [math.inf]]), torch.tensor([[1.0], [2.0]])
    assert max_rel(low, wide) == 0.0


# -- the table: every helper, every side, NaN, +inf and -inf -------------------------------------

Outcome = tuple[bool, str]  # (failed, message)


def _fd(mode: str, side: str, value: float) -> Outcome:
    """check_backward in ``mode``; the analytic side bad through the backward, the numeric
    one through a forward that is ``value`` everywhere but at the checked point."""
    n = 8 if mode == "full_jacobian" else 200
    x = torch.linspace(-1.0, 1.0, n, dtype=torch.float64)
    if side == "analytic":
        function = _backward_times(value)

        def fn(t: torch.Tensor) -> list[torch.Tensor]:
            return [function.apply(t)]

    else:

        def fn(t: torch.Tensor) -> list[torch.Tensor]:
            return [torch.where(t == x, torch.tanh(t), torch.full_like(t, value))]

    check = check_backward(fn, [x], GRADCHECK, mode=mode)  # type: ignore[arg-type]
    return not check.passed, describe(check)


def _hvp(side: str, value: float) -> Outcome:
    hv, fd = (value, 1.0) if side == "analytic" else (1.0, value)
    error, bad = hvp_error(hv, fd, abs(hv - fd), 1e-6)
    return error > 1e-3, bad.describe() if bad is not None else ""


def _gradient_map(side: str, value: float) -> Outcome:
    x = torch.linspace(-1.0, 1.0, 6, dtype=torch.float64)

    def vjp(t: torch.Tensor) -> list[torch.Tensor]:  # linear, but bad at or off the point
        at = torch.full_like(t, 2.0) if side == "numeric" else torch.full_like(t, value)
        off = torch.full_like(t, value) if side == "numeric" else torch.full_like(t, 2.0)
        return [torch.where(t == x, at, off)]

    ok, why, _ = _untracked_gradient_map(vjp, [x], FiniteDifferenceSettings())
    return not ok, why


def _accumulation(side: str, value: float) -> Outcome:
    torch.manual_seed(0)
    model = nn.Linear(3, 1).double()
    params = list(model.named_parameters())
    x, y = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 1, dtype=torch.float64)

    def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        bad = side == accumulation.CANDIDATE and out.shape[0] < 4  # the micro-batches only
        return ((out - target) ** 2).mean() * (value if bad else 1.0)

    full = accumulation._loss_gradients(model, params, loss, x, y)
    if side == accumulation.REFERENCE:
        full = [torch.full_like(g, value) for g in full]
        bad = nonfinite({accumulation.REFERENCE: full})
        assert bad is not None
        item = accumulation.nonfinite_item(accumulation.Subject(kind="model"), bad)
    else:
        norm = math.sqrt(sum(float(g.norm()) ** 2 for g in full))
        item = accumulation._FullBatch(model, params, loss, x, y, full, norm).item(2, 1e-6)
    return item.status == "fail", item.message or ""


def _completeness_item(side: str, value: float) -> Outcome:
    attributions = torch.ones(1, 4, dtype=torch.float64)
    f_x, f_b = np.array([4.0]), np.array([0.0])
    if side == "attributions":
        attributions[0, 2] = value
    elif side == "F(x)":
        f_x = np.array([value])
    else:
        f_b = np.array([value])
    total = attributions.sum(dim=1).numpy()
    with np.errstate(invalid="ignore"):
        abs_error = np.abs(total - (f_x - f_b))
        rel = abs_error / np.abs(f_x - f_b)
    main = IGResult(
        attributions=attributions,
        baseline=torch.zeros(1, 4, dtype=torch.float64),
        method="gausslegendre",
        f_input=f_x,
        f_baseline=f_b,
        attribution_sum=total,
        completeness_abs_error=abs_error,
        completeness_rel_error=rel,
        steps_used=np.array([8]),
        evaluations=np.array([8]),
        converged=np.array([False]),
        target_classes=None,
        tolerance=1e-3,
    )
    (item,) = _completeness(main, CheckSettings(), {}, 0.0).items
    return item.status == "fail", item.message or ""


def _randomization(side: str, value: float) -> Outcome:
    original, randomized = np.arange(1.0, 7.0), np.arange(6.0, 0.0, -1.0)
    (original if side == "original" else randomized)[3] = value
    curve = [
        {"layers_randomized": 1, "last_layer": "fc", "spearman": [None], "spearman_abs": [None]}
    ]
    item = _randomization_item(0, original, randomized, curve, 1, CheckSettings())
    return item.status == "fail", item.message or ""


def _ig_determinism(side: str, value: float) -> Outcome:
    runs = [np.ones((1, 2, 3)), np.ones((1, 2, 3))]
    runs[0 if side == "repeat 1" else 1][0, 1, 2] = value
    values = [np.ones((1, 2)), np.ones((1, 2))]
    item = _determinism_item(0, runs, values, 2)
    return item.status == "fail", item.message or ""


def _fidelity(side: str, value: float) -> Outcome:
    low, ref = torch.ones(4), torch.ones(4, dtype=torch.float64)
    (low if side.startswith("deployed") else ref)[1] = value
    error, bad = compared_error([(low, ref)], ("deployed-precision (float32)", "float64"))
    return error == math.inf and bad is not None, bad.describe() if bad is not None else ""


def _determinism(side: str, value: float) -> Outcome:
    run0, this = torch.ones(4), torch.ones(4)
    (run0 if side == "run 0" else this)[2] = value
    observer = RunComparison([])
    deviation = observer._deviation(0, "output", this, run0)
    return deviation == math.inf, observer.nonfinite.get(0, "")


def _mixed_precision(side: str, value: float) -> Outcome:
    grads = {
        k: torch.ones(3, dtype=d)
        for k, d in (
            ("autocast (bfloat16)", torch.bfloat16),
            ("float32", torch.float32),
            ("float64", torch.float64),
        )
    }
    grads[side][1] = value
    item = param_item(
        "fc.weight", grads["autocast (bfloat16)"], grads["float64"], grads["float32"], 2.0**-8
    )
    return item.status == "fail", item.message or ""


def _tensor_compare(side: str, value: float) -> Outcome:
    a, b = {"w": torch.ones(3)}, {"w": torch.ones(3)}
    (a if side == "uninterrupted run" else b)["w"][0] = value
    item = comparison_item(
        "parameters after resume",
        a,
        b,
        1e-3,
        same="equal",
        differ="parameters differ",
        sides=("uninterrupted run", "resumed run"),
    )
    return item.status == "fail", item.message or ""


def _batch_rows(side: str, value: float) -> Outcome:
    got, want = torch.ones(2, 3), torch.ones(2, 3)
    (got if side == "batched" else want)[1, 0] = value
    found = row_deviation(got, want)
    assert found is not None
    bad = one_sided_nonfinite({"batched": got, "alone": want})
    return float(found[0].max()) == math.inf, bad.describe() if bad is not None else ""


HELPERS: dict[str, tuple[Callable[[str, float], Outcome], tuple[str, ...]]] = {
    "gradcheck full Jacobian": (lambda s, v: _fd("full_jacobian", s, v), ("analytic", "numeric")),
    "gradcheck random directions": (
        lambda s, v: _fd("random_directions", s, v),
        ("analytic", "numeric"),
    ),
    "second_order Hv": (_hvp, ("analytic", "numeric")),
    "second_order gradient map": (_gradient_map, ("gradient", "numeric")),
    "accumulation": (_accumulation, (accumulation.REFERENCE, accumulation.CANDIDATE)),
    "ig_completeness": (_completeness_item, ("attributions", "F(x)", "F(b)")),
    "ig_randomization": (_randomization, ("original", "randomized")),
    "ig_determinism": (_ig_determinism, ("repeat 1", "repeat 2")),
    "fidelity": (_fidelity, ("deployed-precision (float32)", "float64")),
    "determinism": (_determinism, ("run 0", "this run")),
    "mixed_precision": (_mixed_precision, ("autocast (bfloat16)", "float32", "float64")),
    "resume/recompute": (_tensor_compare, ("uninterrupted run", "resumed run")),
    "batch_invariance": (_batch_rows, ("batched", "alone")),
}
TABLE = [
    pytest.param(helper, side, kind, id=f"{helper}-{side}-{kind}")
    for helper, (_, sides) in HELPERS.items()
    for side in sides
    for kind in BAD
]


@pytest.mark.parametrize(("helper", "side", "kind"), TABLE)
def test_table_a_non_finite_side_fails_and_is_named(helper: str, side: str, kind: str) -> None:
    run, _ = HELPERS[helper]
    failed, message = run(side, BAD[kind])
    assert failed, message
    assert f"the {side} side is" in message, message
    if (helper, side) not in DERIVED:
        assert f"the {side} side is {kind}" in message or kind in message, message


# Sides whose value is computed from the one fed (differences of infinities are NaN, a loss
# times infinity has gradients of both signs): the side is named, its kind may differ.
DERIVED = {
    ("gradcheck full Jacobian", "numeric"),
    ("gradcheck random directions", "numeric"),
    ("second_order gradient map", "numeric"),
    ("accumulation", accumulation.CANDIDATE),
}


def test_nonfinite_describes_every_side_and_kind() -> None:
    bad = nonfinite({"analytic": [1.0, math.nan, math.inf], "numeric": 2.0})
    assert bad is not None and bad.label == "analytic"
    assert bad.describe() == "non-finite value: the analytic side is NaN and +inf"
    assert nonfinite({"a": np.array([1.0]), "b": torch.ones(2), "c": None}) is None
    both = dataclasses.replace(bad, sides={"x": ("-inf",), "y": ("NaN",)})
    assert both.label == "x and y"
