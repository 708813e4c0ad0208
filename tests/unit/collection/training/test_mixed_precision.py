"""The mixed_precision check: autocast gradients (with and without a loss scaler) against float64."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from planted_mp_batch import (
    MLP,
    BatchCentered,
    BatchNormCNN,
    NaNAboveSixteen,
    TrainModeBatchNormCNN,
    context,
    inputs,
    tiny_loss,
)

from attest.collection.training import mixed_precision
from attest.evidence.model import CheckItem, CheckResult


def _model_item(result: CheckResult) -> CheckItem:
    (item,) = [i for i in result.items if i.subject.kind == "model"]
    return item


def _failed(result: CheckResult) -> list[str]:
    return [f"{i.subject.label()}: {i.message}" for i in result.items if i.status == "fail"]


def test_float16_without_a_scaler_whose_gradients_underflow_fails() -> None:
    result = mixed_precision.run(context(MLP, inputs(8, 6), tiny_loss, autocast="float16"))
    assert result.status == "computed"
    model = _model_item(result)
    assert model.status == "fail" and "grad_scaler: true" in model.message
    assert model.metrics["loss_scale"] == 1.0
    low = model.metrics["safe_loss_scale_log2_min"]
    assert isinstance(low, int) and low > 0  # scale 1 is below the safe range
    params = {i.subject.name: i for i in result.items if i.subject.kind == "parameter"}
    assert params["fc1.weight"].status == "fail"
    assert float(params["fc1.weight"].metrics["zeroed_fraction"] or 0) > 0.5
    ops = [i for i in result.items if i.subject.kind == "operator" and i.status == "fail"]
    assert any(i.subject.op == "aten.addmm.default" for i in ops)
    assert all(float(i.metrics["underflow_error_share"] or 0) > 0.03 for i in ops)


def test_the_same_model_with_the_grad_scaler_passes() -> None:
    ctx = context(MLP, inputs(8, 6), tiny_loss, autocast="float16", grad_scaler=True)
    result = mixed_precision.run(ctx)
    assert _failed(result) == []
    model = _model_item(result)
    assert model.metrics["loss_scale"] == 65536.0
    assert model.metrics["scaler_settle_scale"] == 65536.0
    assert model.metrics["loss_scale_in_safe_range"] is True
    assert model.metrics["scaler_settle_source"] == "measured"
    assert result.summary["passes"] == 3


@pytest.mark.parametrize(
    ("autocast", "scaler"), [("bfloat16", False), ("float16", True), ("float16", False)]
)
def test_a_clean_mlp_passes(autocast: str, scaler: bool) -> None:
    result = mixed_precision.run(context(MLP, inputs(8, 6), autocast=autocast, grad_scaler=scaler))
    assert _failed(result) == [] and result.summary["warned"] == 0
    assert float(result.summary["max_grad_rel_error"] or 1) < 0.02
    assert result.parameters["unit_roundoff"] == (2.0**-8 if autocast == "bfloat16" else 2.0**-11)
    addmm = [i for i in result.items if i.subject.op == "aten.addmm.default"]
    assert addmm and all(i.metrics["dtype"] == autocast for i in addmm)


def test_a_batchnorm_cnn_passes_and_the_bias_before_batchnorm_is_not_held_to_a_tolerance() -> None:
    ctx = context(BatchNormCNN, inputs(8, 1, 6, 6), autocast="float16", grad_scaler=True)
    result = mixed_precision.run(ctx)
    assert _failed(result) == []
    (bias,) = [i for i in result.items if i.subject.name == "conv.bias"]
    assert bias.metrics["cancelled"] is True  # train-mode BatchNorm cancels its gradient


def test_the_scaler_backs_off_when_the_scaled_gradients_overflow() -> None:
    def big_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return 50.0 * F.cross_entropy(output, target.long())

    ctx = context(MLP, inputs(8, 6), big_loss, autocast="float16", grad_scaler=True)
    result = mixed_precision.run(ctx)
    model = _model_item(result)
    assert model.metrics["grads_overflow_at_initial_scale"] is True
    backoffs = int(model.metrics["scaler_backoffs"] or 0)
    assert backoffs >= 1
    assert model.metrics["scaler_settle_scale"] == 65536.0 / 2**backoffs
    assert model.metrics["grads_nonfinite"] is False
    assert _failed(result) == []
    assert int(result.summary["passes"] or 0) <= 10


def test_without_autocast_it_is_not_applicable() -> None:
    result = mixed_precision.run(context(MLP, inputs(4, 6), batch_sizes=[1, 2]))
    assert result.status == "not_applicable" and "autocast" in (result.reason or "")
    ctx = context(MLP, inputs(4, 6))
    ctx.spec.training = None
    assert mixed_precision.run(ctx).status == "not_applicable"


@pytest.mark.parametrize("build", [BatchCentered, NaNAboveSixteen])
def test_batch_defects_are_not_mixed_precision_failures(build: type[MLP]) -> None:
    result = mixed_precision.run(context(build, inputs(8, 6), autocast="bfloat16"))
    assert _failed(result) == []


def test_a_train_mode_batchnorm_is_not_a_mixed_precision_failure() -> None:
    ctx = context(TrainModeBatchNormCNN, inputs(8, 1, 6, 6), autocast="float16", grad_scaler=True)
    assert _failed(mixed_precision.run(ctx)) == []
