"""The second_order check: Hessian-vector products and twice-differentiable operators."""

from __future__ import annotations

import torch
from _grad_models import TanhNet, class_labels, continuous, cross_entropy, make_context
from torch import nn
from torch.autograd.function import once_differentiable

from attest.collection.gradients import custom_ops, second_order
from attest.collection.gradients import flow as gradient_flow
from attest.collection.gradients import runner as gradchecks
from attest.collection.gradients.finite_differences import FiniteDifferenceSettings


class OnceSoftplus(torch.autograd.Function):
    """softplus whose backward cannot be differentiated (``@once_differentiable``)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    @once_differentiable
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return grad * torch.sigmoid(x)


class NoGradBackward(torch.autograd.Function):
    """softplus whose backward runs under no_grad: double backward silently sees a constant."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        with torch.no_grad():
            return grad * torch.sigmoid(x)


def _net(function: type[torch.autograd.Function]) -> type[nn.Module]:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(6, 8)
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(function.apply(self.fc1(x)))  # type: ignore[no-untyped-call]

    return Net


def test_smooth_model_hvp_agrees_and_records_its_parameters() -> None:
    ctx = make_context(TanhNet, continuous(6, 6), class_labels(6), cross_entropy)
    result = second_order.run(ctx)
    model_items = [i for i in result.items if i.subject.kind == "model"]
    assert len(model_items) == ctx.settings.second_order_directions
    for item in model_items:
        assert item.status == "pass", item.message
        assert float(item.metrics["max_rel_error"] or 1) < 1e-6
        assert {"eps", "seed", "rtol", "atol", "direction", "hv_norm"} <= set(item.metrics)
    # Every operator's double backward ran inside the products: none is probed alone.
    assert not [i for i in result.items if i.subject.kind == "operator"]
    assert result.parameters["operators_probed"] == "custom Functions only"


def test_operator_probe_on_request_names_every_distinct_operator() -> None:
    ctx = make_context(TanhNet, continuous(6, 6), class_labels(6), cross_entropy)
    ctx.settings.extra["second_order_operator_probe"] = True
    result = second_order.run(ctx)
    ops = [i for i in result.items if i.subject.kind == "operator"]
    assert len({i.subject.op for i in ops}) == len(ops) >= 3  # t, addmm, tanh
    assert all(i.status in ("pass", "not_computed") for i in ops), [i.message for i in ops]
    assert any(i.metrics.get("twice_differentiable") for i in ops)


def test_once_differentiable_function_is_named() -> None:
    ctx = make_context(_net(OnceSoftplus), continuous(6, 6), class_labels(6), cross_entropy)
    custom_ops.run(ctx)  # shares the captured custom calls, as in collect
    result = second_order.run(ctx)
    assert "OnceSoftplus" in str(result.summary["not_twice_differentiable"])
    custom = next(i for i in result.items if i.subject.kind == "custom_op")
    assert custom.status == "fail" and "not twice differentiable" in custom.message
    model = [i for i in result.items if i.subject.kind == "model"]
    assert model and all(i.status == "fail" for i in model)


def test_backward_under_no_grad_is_not_twice_differentiable() -> None:
    x = torch.randn(20, dtype=torch.float64)
    ok, why = second_order.twice_differentiable(
        lambda t: [NoGradBackward.apply(t)], [x], FiniteDifferenceSettings()
    )
    assert not ok and "not (correctly) differentiable" in why
    ok, why = second_order.twice_differentiable(
        lambda t: [t * 3.0], [x], FiniteDifferenceSettings()
    )
    assert ok, why
    ok, why = second_order.twice_differentiable(
        lambda t: [OnceSoftplus.apply(t)], [x], FiniteDifferenceSettings()
    )
    assert not ok, why


def test_kink_on_the_probe_point_is_recognised() -> None:
    x = continuous(6, 6)
    x[:, :3] = 0.0
    ctx = make_context(
        lambda: nn.Sequential(nn.ReLU(), nn.Linear(6, 3)), x, class_labels(6), cross_entropy
    )
    result = second_order.run(ctx)
    model = [i for i in result.items if i.subject.kind == "model"]
    assert all(i.status == "pass" for i in model), [i.message for i in model]
    assert any(i.metrics["on_kink"] for i in model)


class TinyAttention(nn.Module):
    """One self-attention layer through F.scaled_dot_product_attention (a fused kernel on CPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(4, 12)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = (t.view(b, s, 2, 2).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        attended = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.head(attended.transpose(1, 2).reshape(b, s, 4).mean(dim=1))


def test_fused_attention_without_double_backward_is_checked_on_the_math_backend() -> None:
    torch.manual_seed(0)
    result = second_order.run(make_context(TinyAttention, continuous(3, 5, 4)))
    assert result.status == "computed"
    assert not [i for i in result.items if i.status == "fail"], [i.message for i in result.items]
    model_items = [i for i in result.items if i.subject.kind == "model"]
    assert model_items and all(i.status == "pass" for i in model_items)
    assert result.parameters.get("attention_backend"), "the fused CPU kernel should have run"
    fused = [i for i in result.items if i.subject.kind == "operator"]
    assert fused and all(i.status == "warn" for i in fused)
    assert all("scaled_dot_product" in (i.subject.op or "") for i in fused)


def test_gradient_flow_hands_its_graph_to_second_order_with_the_same_result() -> None:
    ctx = make_context(TanhNet, continuous(6, 6), class_labels(6), cross_entropy)
    ctx.settings.second_order_batch = None  # the products use the whole batch, as flow does
    alone = second_order.run(ctx)  # builds its own model and gradient graph
    ctx.gradients.keep_graph = True
    gradient_flow.run(ctx)
    shared = ctx.gradients.graph
    assert shared is not None
    assert all(g is not None and g.requires_grad for g in shared.grads)
    handed = second_order.run(ctx)
    assert ctx.gradients.graph is None  # taken: the graph is freed with the check
    model = [i.metrics for i in handed.items if i.subject.kind == "model"]
    assert model == [i.metrics for i in alone.items if i.subject.kind == "model"]
    # The full-batch gradient kept for accumulation carries no graph.
    kept = ctx.gradients.full_batch_loss_gradients
    assert kept is not None
    assert all(g is not None and not g.requires_grad for g in kept.values())


def test_gradchecks_run_drops_the_hand_off_and_keeps_the_result_order() -> None:
    torch.manual_seed(0)
    ctx = make_context(TinyAttention, continuous(3, 5, 4))
    results = gradchecks.run(ctx)
    assert [r.check for r in results] == [c for c, _ in gradchecks.CHECKS]
    assert ctx.gradients.graph is None and not ctx.gradients.keep_graph
    assert ctx.gradients.output is None
    # The handed-over graph has no double backward for the fused kernel: the products are
    # redone on the math backend, as when second_order runs alone.
    so = results[-1]
    assert so.parameters.get("attention_backend")
    assert all(i.status == "pass" for i in so.items if i.subject.kind == "model")


def test_products_run_on_a_sub_batch_and_flow_keeps_no_graph_for_them() -> None:
    ctx = make_context(TanhNet, continuous(6, 6), class_labels(6), cross_entropy)
    ctx.gradients.keep_graph = True
    gradient_flow.run(ctx)
    # The products use 1 of the 6 examples: a full-batch double-backward graph is not built.
    assert ctx.gradients.graph is None and ctx.gradients.output is not None
    result = second_order.run(ctx)
    assert result.parameters["batch"] == 1
    model = [i for i in result.items if i.subject.kind == "model"]
    assert len(model) == ctx.settings.second_order_directions
    assert all(i.status == "pass" for i in model), [i.message for i in model]
    assert all(i.metrics["difference"] == "forward" for i in model)
    ctx.settings.second_order_batch = 6
    assert second_order.run(ctx).parameters["batch"] == 6


class BatchOfSix(nn.Module):
    """A model that assumes the batch size (a fixed reshape): a sub-batch cannot run."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(x)).reshape(6, 3)


def test_a_model_that_needs_the_whole_batch_gets_it() -> None:
    ctx = make_context(BatchOfSix, continuous(6, 6), class_labels(6), cross_entropy)
    result = second_order.run(ctx)
    assert result.parameters["batch"] == 6 and "could not stand" in result.parameters["batch_note"]
    assert all(i.status == "pass" for i in result.items if i.subject.kind == "model")


def test_a_sub_batch_whose_labels_are_all_ignored_falls_back_to_the_batch() -> None:
    def ignoring(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(output, target.long(), ignore_index=-1)

    labels = torch.tensor([-1, 0, 1, 2, 1, 0])  # the first example's label is ignored
    ctx = make_context(TanhNet, continuous(6, 6), labels, ignoring)
    result = second_order.run(ctx)
    assert result.parameters["batch"] == 6, result.parameters
    assert all(i.status == "pass" for i in result.items if i.subject.kind == "model")
