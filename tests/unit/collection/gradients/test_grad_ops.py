"""The gradcheck check: every captured ATen operator's backward vs finite differences."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from _grad_models import make_context
from torch import nn

from attest.collection.context import OpRecord
from attest.collection.gradients import gradcheck as gradcheck_ops
from attest.collection.gradients.finite_differences import FiniteDifferenceSettings
from attest.errors import AttestError

SETTINGS = FiniteDifferenceSettings()


def _record(func: Any, *args: Any, **kwargs: Any) -> OpRecord:
    out = func(*args, **kwargs)
    outs = [
        o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor)
    ]
    return OpRecord(
        id=0,
        op=str(func),
        module="m",
        func=func,
        args=args,
        kwargs=kwargs,
        output_shapes=[list(o.shape) for o in outs],
        output_dtypes=[str(o.dtype) for o in outs],
    )


def _x(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@torch.library.custom_op("attest_test::two_percent_tanh", mutates_args=())
def two_percent_tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh as a registered operator whose autograd formula is 2 % too large."""
    return torch.tanh(x)


@two_percent_tanh.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _setup(ctx: Any, inputs: Any, output: torch.Tensor) -> None:
    ctx.save_for_backward(output)


def _wrong_backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    return 1.02 * grad * (1 - y * y)


two_percent_tanh.register_autograd(_wrong_backward, setup_context=_setup)


@pytest.mark.parametrize("shape", [(3, 4), (6, 200)])
def test_planted_operator_wrong_by_two_percent_fails(shape: tuple[int, ...]) -> None:
    item = gradcheck_ops.check_operator(
        _record(torch.ops.attest_test.two_percent_tanh.default, _x(*shape)), SETTINGS
    )
    assert item.status == "fail", item.message
    assert 0.015 < float(item.metrics["max_rel_error"] or 0) < 0.025
    assert item.subject.op == "attest_test.two_percent_tanh.default"


SKIPPED = [
    (torch.ops.aten.argmax.default, (_x(4, 5),), {}),
    (torch.ops.aten.gt.Scalar, (_x(4, 5), 0.0), {}),
    (torch.ops.aten.bernoulli.default, (torch.rand(4, 5),), {}),
    (torch.ops.aten._to_copy.default, (_x(4, 5),), {"dtype": torch.int64}),
    (torch.ops.aten.empty.memory_format, ([2, 3],), {"dtype": torch.float32}),
    (torch.ops.aten.detach.default, (_x(4, 5),), {}),
]


@pytest.mark.parametrize("func, args, kwargs", SKIPPED, ids=[str(f) for f, _, _ in SKIPPED])
def test_not_differentiable_operators_are_skipped_with_a_reason(
    func: Any, args: Any, kwargs: Any
) -> None:
    item = gradcheck_ops.check_operator(_record(func, *args, **kwargs), SETTINGS)
    assert item.status == "not_computed" and item.metrics["skipped"] is True
    assert item.message.startswith("skipped (not differentiable)")


def test_batch_norm_running_statistics_are_held_fixed_and_named() -> None:
    x, w, b = _x(4, 3, 5, 5), _x(3, seed=1), _x(3, seed=2)
    mean, var = _x(3, seed=3), torch.rand(3) + 0.5
    record = _record(
        torch.ops.aten._native_batch_norm_legit_no_training.default, x, w, b, mean, var, 0.1, 1e-5
    )
    item = gradcheck_ops.check_operator(record, SETTINGS)
    assert item.status == "pass", item.message
    assert item.details["differentiated_inputs"] == ["input", "weight", "bias"]
    assert any("running_mean" in f for f in item.details["fixed_inputs"])


def test_underivable_arguments_found_once_are_dropped_up_front(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x, w, b = _x(4, 3, 5, 5), _x(3, seed=1), _x(3, seed=2)
    mean, var = _x(3, seed=3), torch.rand(3) + 0.5
    record = _record(torch.ops.aten.native_batch_norm.default, x, w, b, mean, var, False, 0.1, 1e-5)
    attempts: list[int] = []
    real = gradcheck_ops.check_backward

    def counting(fn: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(len(inputs))
        return real(fn, inputs, *args, **kwargs)

    monkeypatch.setattr(gradcheck_ops, "check_backward", counting)
    known: dict[str, set[str]] = {}
    first = gradcheck_ops.check_operator(record, SETTINGS, underivable=known)
    assert attempts == [5, 4, 3]  # running_mean, then running_var, refused by autograd
    assert known[record.op] == {"running_mean", "running_var"}
    attempts.clear()
    again = gradcheck_ops.check_operator(record, SETTINGS, underivable=known)
    assert attempts == [3]
    assert first.status == again.status == "pass", again.message
    assert again.details["fixed_inputs"] == first.details["fixed_inputs"]
    assert again.details["differentiated_inputs"] == ["input", "weight", "bias"]


def test_relu_and_max_pool_on_exact_kinks_are_nudged_not_failed() -> None:
    x = F.relu(_x(2, 3, 8, 8))  # about half exact zeros, many tied max-pool windows
    pool = gradcheck_ops.check_operator(
        _record(torch.ops.aten.max_pool2d_with_indices.default, x, [2, 2]), SETTINGS
    )
    assert pool.status == "pass", pool.message
    assert int(pool.metrics["kink_values_nudged"] or 0) > 0
    relu = gradcheck_ops.check_operator(_record(torch.ops.aten.relu.default, x), SETTINGS)
    assert relu.status == "pass" and int(relu.metrics["kink_values_nudged"] or 0) > 0


def test_grid_sample_on_pixel_centres_is_nudged_not_failed() -> None:
    # An identity affine grid samples exactly at pixel centres, bilinear's seams: central
    # differences across a seam average two slopes; the backward returns one of them.
    theta = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).expand(2, 2, 3)
    grid = F.affine_grid(theta, [2, 1, 8, 8], align_corners=False)
    record = _record(torch.ops.aten.grid_sampler_2d.default, _x(2, 1, 8, 8), grid, 0, 0, False)
    item = gradcheck_ops.check_operator(record, SETTINGS)
    assert item.status == "pass", item.message
    assert int(item.metrics["kink_values_nudged"] or 0) == grid.numel()
    assert "interpolation's seams" in item.message


def test_large_pointwise_operator_gets_a_sliced_full_jacobian_that_says_so() -> None:
    item = gradcheck_ops.check_operator(
        _record(torch.ops.aten.mul.Tensor, _x(8, 50), _x(50, seed=1)), SETTINGS
    )
    assert item.status == "pass"
    assert item.metrics["full_jacobian_on_slice"] is True
    cases = [c["case"] for c in item.details["checks"]]
    assert cases == ["captured input", "representative slice"]
    assert item.details["checks"][1]["mode"] == "full_jacobian"
    assert item.details["checks"][1]["torch_gradcheck"] is True
    assert all(
        n <= SETTINGS.full_jacobian_max_numel for n in [item.details["checks"][1]["input_numel"]]
    )
    assert "slice" in item.message
    assert (
        item.details["checks"][0]["mode"] == "random_directions"
    )  # no full Jacobian on the large input


def test_one_sliced_full_jacobian_per_pointwise_function_not_per_rank() -> None:
    done: set[str] = set()
    relu = torch.ops.aten.relu.default
    first = gradcheck_ops.check_operator(_record(relu, _x(2, 4, 8, 8)), SETTINGS, done)
    again = gradcheck_ops.check_operator(_record(relu, _x(8, 32, seed=1)), SETTINGS, done)
    assert first.metrics["full_jacobian_on_slice"] is True
    assert again.metrics["full_jacobian_on_slice"] is False  # same elementwise function
    assert again.status == "pass"
    # With broadcasting the ranks decide the slice: each layout gets its own.
    mul = torch.ops.aten.mul.Tensor
    a = gradcheck_ops.check_operator(_record(mul, _x(8, 50), _x(50, seed=1)), SETTINGS, done)
    b = gradcheck_ops.check_operator(_record(mul, _x(4, 8, 50), _x(50, seed=2)), SETTINGS, done)
    assert a.metrics["full_jacobian_on_slice"] is True
    assert b.metrics["full_jacobian_on_slice"] is True


def test_in_place_operator_is_checked_on_a_copy() -> None:
    x = _x(4, 30)
    item = gradcheck_ops.check_operator(_record(torch.ops.aten.relu_.default, x.clone()), SETTINGS)
    assert item.status == "pass", item.message


class BuiltinZoo(nn.Module):
    """Most built-in operators of conv nets, segmentation nets and small transformers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.gn = nn.GroupNorm(2, 4)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.ln = nn.LayerNorm(8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn(self.conv(x)))
        h = F.max_pool2d(h, 2) + F.avg_pool2d(h, 2)
        h = self.gn(F.gelu(h))
        h = torch.cat([self.up(h), F.interpolate(h, scale_factor=2.0, mode="nearest")], dim=1)
        h = F.silu(F.pad(h, (1, 1, 1, 1))) * torch.sigmoid(h.mean(dim=1, keepdim=True)).mean()
        tokens = F.adaptive_avg_pool2d(h, (2, 2)).flatten(2).transpose(1, 2)  # (N, 4, 8)
        tokens = self.ln(tokens)
        attended, _ = self.attn(tokens, tokens, tokens, need_weights=False)
        z = torch.tanh(attended).sum(dim=1) / 4 + F.leaky_relu(tokens).amax(dim=1)
        z = F.hardtanh(z) + torch.exp(-z.pow(2)) + torch.sqrt(z * z + 1)
        return (
            F.log_softmax(self.fc(z), dim=-1) + F.softmax(self.fc(z), dim=-1).clamp(min=1e-6).log()
        )


def test_every_builtin_operator_of_a_conv_net_passes() -> None:
    ctx = make_context(BuiltinZoo, _x(2, 2, 8, 8, seed=5))
    result = gradcheck_ops.run(ctx)
    assert result.status == "computed"
    failed = [(i.subject.label(), i.message) for i in result.items if i.status == "fail"]
    unusable = [
        (i.subject.label(), i.message)
        for i in result.items
        if i.status == "not_computed" and not i.metrics.get("skipped")
    ]
    assert not failed and not unusable, (failed, unusable)
    checked_ops = {i.subject.op for i in result.items if i.status == "pass"}
    for expected in (
        "aten.convolution.default",
        "aten.max_pool2d_with_indices.default",
        "aten.addmm.default",
        "aten.native_layer_norm.default",
        "aten.gelu.default",
        "aten.cat.default",
        "aten.upsample_bilinear2d.default",
        "aten._softmax.default",
        "aten.upsample_nearest2d.default",
        "aten.native_group_norm.default",
        "aten._scaled_dot_product_flash_attention_for_cpu.default",
    ):
        assert expected in checked_ops, sorted(checked_ops)
    assert result.summary["failed"] == 0 and result.parameters["directions"] == 4
    assert result.parameters["difference"] == "forward, central where it fails"
    decided = {
        c["difference"]
        for i in result.items
        for c in i.details.get("checks", [])
        if c.get("mode") == "random_directions"
    }
    assert "forward" in decided, decided


def test_gradcheck_difference_is_a_setting_and_a_bad_value_says_what_is_allowed() -> None:
    ctx = make_context(BuiltinZoo, _x(1, 2, 8, 8))
    ctx.settings.extra["gradcheck_difference"] = "central"
    assert not gradcheck_ops.fd_settings(ctx).one_sided
    ctx.settings.extra["gradcheck_difference"] = "backward"
    with pytest.raises(AttestError, match=r"gradcheck_difference .* 'forward'"):
        gradcheck_ops.fd_settings(ctx)


def test_without_the_capture_the_check_says_not_computed() -> None:
    ctx = make_context(BuiltinZoo, _x(1, 2, 8, 8), capture=False)
    result = gradcheck_ops.run(ctx)
    assert result.status == "not_computed" and "capture" in (result.reason or "")


def test_bound_call_rebuilds_list_and_keyword_arguments() -> None:
    from attest.collection.capture.aten_args import BoundCall

    a, b = torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)
    cat = BoundCall.of(torch.ops.aten.cat.default, ([a, b], 1), {})
    assert cat.names == ["tensors", "tensors"]
    (out,) = cat.function([1])(torch.ones(2, 3, dtype=torch.float64))
    assert torch.equal(out, torch.cat([a, torch.ones(2, 3, dtype=torch.float64)], 1))
    assert cat.args[0][1] is b  # the captured call is left as it was
    norm = BoundCall.of(
        torch.ops.aten.native_layer_norm.default,
        (a, [3]),
        {"weight": b[0], "bias": None, "eps": 1e-5},
    )
    replaced = torch.full((3,), 2.0, dtype=torch.float64)
    out, _, _ = norm.function([1])(replaced)
    expected = torch.nn.functional.layer_norm(a, [3], weight=replaced, eps=1e-5)
    assert torch.allclose(out, expected)


def test_flat_calls_are_bound_without_a_pytree_walk_and_rebuilt_exactly() -> None:
    from attest.collection.capture.aten_args import BoundCall, to_float64

    a = torch.randn(2, 3)
    b = torch.randn(4, 3)
    call = BoundCall.of(torch.ops.aten.cat.default, to_float64(([a, b], 0)), {})
    assert call._places is not None and call.names == ["tensors", "tensors"]
    assert all(t.dtype == torch.float64 for t in call.tensors)
    replaced = torch.ones(4, 3, dtype=torch.float64)
    (out,) = call.function([1])(replaced)
    assert torch.equal(out, torch.cat([a.double(), replaced]))
    # positional arguments of their own take the fast path; keyword ones the general one
    add = BoundCall.of(torch.ops.aten.add.Tensor, (a.double(), b[:2].double()), {"alpha": 2})
    (summed,) = add.function([0, 1])(a.double(), a.double())
    assert torch.equal(summed, a.double() * 3)
    # a namedtuple argument is not flat: the pytree path binds and rebuilds it
    from collections import namedtuple

    Pair = namedtuple("Pair", "x y")
    assert to_float64(Pair(a, 1)).x.dtype == torch.float64

    class Opaque(tuple):  # type: ignore[type-arg]  # no pytree node: a leaf, left as it is
        pass

    opaque = Opaque((a,))
    assert to_float64([opaque])[0] is opaque


class _TwinBlocks(nn.Module):
    """Two blocks of the same shapes (their ATen calls identical but for the values), then
    the registered two-percent-off tanh twice on tensors of one shape."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.b(torch.tanh(self.a(x))))
        return two_percent_tanh(two_percent_tanh(h))


def test_an_aten_call_identical_to_an_earlier_one_takes_its_verdict() -> None:
    ctx = make_context(_TwinBlocks, _x(3, 6, seed=2))
    result = gradcheck_ops.run(ctx)
    first = {i.subject.operator_id: i for i in result.items}
    inherited = [i for i in result.items if "identical_to_operator" in i.metrics]
    # b's weight transpose, addmm and the tanh after it repeat a's: the same dtypes, shapes,
    # strides and arguments, other values
    assert [(i.subject.module, i.subject.op) for i in inherited] == [
        ("b", "aten.t.default"),
        ("b", "aten.addmm.default"),
        ("", "aten.tanh.default"),
    ]
    for item in inherited:
        earlier = first[item.metrics["identical_to_operator"]]
        assert earlier.subject.operator_id < item.subject.operator_id
        assert earlier.subject.op == item.subject.op
        assert "identical_to_operator" not in earlier.metrics
        assert item.status == earlier.status == "pass"
        assert item.message.startswith(f"identical to operator #{earlier.subject.operator_id}")
    # a registered operator's backward is the user's code: each call is checked on its own
    custom = [i for i in result.items if i.subject.op == "attest_test.two_percent_tanh.default"]
    assert len(custom) == 2
    assert all(i.status == "fail" and "identical_to_operator" not in i.metrics for i in custom)
    summary = result.summary
    assert summary["identical_calls"] == len(inherited) >= 2
    assert summary["checked"] == len(result.items) - len(inherited) - summary["skipped"]
    assert "identical_calls" in result.parameters


def test_a_failing_verdict_is_taken_by_the_identical_calls_too() -> None:
    from attest.collection.gradients.gradcheck_items import identical_item, inherit_identical
    from attest.evidence.model import CheckItem, Subject

    record = _record(torch.ops.aten.tanh.default, _x(2, 3))
    later = OpRecord(**{**record.__dict__, "id": 7, "module": "later"})
    checked = CheckItem(
        subject=Subject(kind="operator", operator_id=0, op=record.op, module="m"),
        status="fail",
        metrics={"max_rel_error": 0.02},
        message="captured input: relative error 0.02",
    )
    placeholder = identical_item(later, 0)
    assert placeholder.status == "not_computed"  # until the groups are joined
    joined = inherit_identical([checked, placeholder])
    assert joined[0] is checked
    assert joined[1].status == "fail" and joined[1].subject.module == "later"
    assert joined[1].metrics == {"max_rel_error": 0.02, "identical_to_operator": 0}
    assert "relative error 0.02" in joined[1].message
    # a placeholder whose first call has no item stays not computed, and says so
    (alone,) = inherit_identical([placeholder])
    assert alone.status == "not_computed" and "was not found" in alone.message
