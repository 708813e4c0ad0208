"""The batch_invariance check: each example's output and input gradient as alone, at every
declared batch size, and no non-finite values that appear only in larger batches."""

from __future__ import annotations

import pytest
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

from attest.collection import collect
from attest.collection.training import batch_invariance
from attest.evidence.model import CheckResult


def _by_size(result: CheckResult) -> dict[int, str]:
    return {
        int(i.metrics["batch_size"] or 0): i.status
        for i in result.items
        if i.subject.kind == "model"
    }


def test_a_batchnorm_cnn_in_eval_mode_passes_at_1_8_and_32() -> None:
    ctx = context(BatchNormCNN, inputs(8, 1, 6, 6), batch_sizes=[1, 8, 32])
    result = batch_invariance.run(ctx)
    assert result.status == "computed"
    assert _by_size(result) == {1: "pass", 8: "pass", 32: "pass"}
    item = result.items[2]
    assert float(item.metrics["output_max_deviation"] or 1) < float(
        item.metrics["output_tolerance"] or 0
    )
    assert 0.0 <= float(item.metrics["input_grad_bit_exact_rate"] or 0) <= 1.0
    # every example alone twice, then one pass per batch size above 1
    assert result.summary["passes"] == 2 * 8 + 2
    assert result.summary["examples"] == 2 * 8 + 8 + 32


def test_a_batchnorm_left_in_training_mode_fails_naming_the_batchnorm() -> None:
    ctx = context(TrainModeBatchNormCNN, inputs(8, 1, 6, 6), batch_sizes=[1, 8, 32])
    result = batch_invariance.run(ctx)
    assert _by_size(result) == {1: "pass", 8: "fail", 32: "fail"}
    assert result.summary["smallest_interacting_batch_size"] == 8
    assert result.summary["first_interacting_operator"] == "aten.native_batch_norm.default @ norm"
    (op,) = [i for i in result.items if i.subject.kind == "operator"]
    assert op.status == "fail" and op.subject.module == "norm"
    assert "interact" in result.items[1].message


def test_a_batch_mean_subtraction_fails_where_the_mean_is_taken() -> None:
    result = batch_invariance.run(context(BatchCentered, inputs(8, 6), batch_sizes=[1, 8]))
    assert _by_size(result) == {1: "pass", 8: "fail"}
    assert result.summary["first_interacting_operator"] == "aten.mean.dim @ <root>"


def test_nan_above_a_batch_size_fails_naming_the_operator_and_the_smallest_size() -> None:
    result = batch_invariance.run(context(NaNAboveSixteen, inputs(8, 6), batch_sizes=[1, 8, 32]))
    assert _by_size(result) == {1: "pass", 8: "pass", 32: "fail"}
    assert result.summary["smallest_nonfinite_batch_size"] == 32
    assert result.summary["first_nonfinite_operator"] == "aten.sqrt.default @ <root>"
    (op,) = [i for i in result.items if i.subject.op == "aten.sqrt.default"]
    assert op.status == "fail" and op.metrics["batch_size"] == 32


@pytest.mark.parametrize("build", [MLP])
def test_a_clean_mlp_and_the_underflow_defect_pass(build: type[MLP]) -> None:
    for loss in (None, tiny_loss):
        ctx = context(build, inputs(8, 6), loss, autocast="float16", batch_sizes=[1, 2, 8])
        result = batch_invariance.run(ctx)
        assert set(_by_size(result).values()) == {"pass"}, [i.message for i in result.items]


def test_fewer_probe_examples_than_the_batch_are_repeated() -> None:
    result = batch_invariance.run(context(MLP, inputs(3, 6), batch_sizes=[4, 8]))
    assert _by_size(result) == {4: "pass", 8: "pass"}
    assert result.parameters["examples_alone"] == 3 and result.summary["passes"] == 2 * 3 + 2


def test_without_batch_sizes_it_is_not_applicable() -> None:
    result = batch_invariance.run(context(MLP, inputs(4, 6), autocast="bfloat16"))
    assert result.status == "not_applicable" and "batch_sizes" in (result.reason or "")


def test_through_collect_with_the_training_runner() -> None:
    ctx = context(
        TrainModeBatchNormCNN,
        inputs(4, 1, 6, 6),
        autocast="bfloat16",
        batch_sizes=[1, 4],
    )
    ctx.spec.repeats = 1
    evidence = collect(ctx.spec, runners=["attest.collection.training.runner:run"])
    checks = evidence.checks
    assert checks["batch_invariance"].status == "computed"
    assert any(i.status == "fail" for i in checks["batch_invariance"].items)
    assert checks["mixed_precision"].status == "computed"
    assert not [i for i in checks["mixed_precision"].items if i.status == "fail"]
