"""The recompute check: planted defects (dropout without its RNG state, BatchNorm recomputed,
a hand-written recomputation) are named; clean checkpointed models pass bit for bit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import planted_recompute_resume as planted
import pytest
import torch
from _collect_models import make_spec

from attest.collection import collect
from attest.collection.context import CollectContext
from attest.collection.training import recompute, resume
from attest.evidence.model import CheckItem, CheckResult
from attest.spec import load_spec

TRAINING = "loss: model:loss\nrepeats: 2\ntraining:\n  optimizer: model:make_optimizer\n"


def context(folder: Path, source: str, training: str = "") -> CollectContext:
    """A spec folder with 8 probe examples and labels, loaded into a collect context."""
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 1, 2, 1, 0, 2, 1, 0])
    path = make_spec(folder, source, x=x, target=y, spec_extra=TRAINING + training)
    return CollectContext(spec=load_spec(path))


def items(result: CheckResult, keep: Callable[[CheckItem], bool]) -> list[CheckItem]:
    return [i for i in result.items if keep(i)]


def test_checkpointed_blocks_with_preserved_rng_pass_bit_for_bit(tmp_path: Path) -> None:
    result = recompute.run(context(tmp_path, planted.CHECKPOINTED))
    assert result.status == "computed"
    assert all(i.status == "pass" for i in result.items), [i.message for i in result.items]
    gradient = result.items[0]
    assert gradient.metrics["bit_exact"] is True and gradient.metrics["max_relative_deviation"] == 0
    regions = {i.subject.module: i.metrics for i in result.items if "calls" in i.metrics}
    assert regions["blocks.0"]["reentrant"] is True and regions["blocks.1"]["reentrant"] is False
    for metrics in regions.values():
        assert metrics["recomputed"] is True and metrics["preserve_rng_state"] is True
        assert metrics["saved_bytes_without"] > metrics["saved_bytes_with"] > 0
        assert metrics["saved_bytes_freed"] > 0 and metrics["recompute_forward_s"] > 0
    random_ops = items(result, lambda i: i.subject.kind == "operator")
    assert {i.subject.module for i in random_ops} == {"blocks.0.drop", "blocks.1.drop"}
    assert result.summary["failed"] == 0 and result.summary["saved_bytes_freed"] > 0
    plan = result.parameters["adaptive_recompute"]
    assert {p["module"] for p in plan} == {"blocks.0", "blocks.1"}
    assert all(p["checkpointed"] for p in plan)
    assert result.parameters["rtol"] == 0.0 and result.parameters["deterministic_backend"]


def test_dropout_without_its_rng_state_fails_naming_region_and_operator(tmp_path: Path) -> None:
    ctx = context(tmp_path, planted.DROPOUT_RNG_LOST)
    result = recompute.run(ctx)
    assert result.items[0].status == "fail"  # the gradients differ
    (bad,) = items(result, lambda i: i.subject.kind == "operator" and i.status == "fail")
    assert bad.subject.op == "aten.bernoulli_.float" and bad.subject.module == "blocks.1.drop"
    assert bad.metrics["region"] == "blocks.1:Block.body" and not bad.metrics["rng_restored"]
    region = next(i for i in result.items if i.subject.module == "blocks.1")
    assert region.status == "fail" and region.metrics["preserve_rng_state"] is False
    assert "aten.bernoulli_.float" in region.message and "not restored" in region.message
    other = next(i for i in result.items if i.subject.module == "blocks.0")
    assert other.status == "pass"
    assert resume.run(ctx).summary["failed"] == 0  # the other check does not flag it


def test_batchnorm_in_a_checkpointed_block_fails_naming_module_and_state(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path, planted.BATCHNORM_RECOMPUTED)
    result = recompute.run(ctx)
    assert result.items[0].status == "pass"  # the gradients agree; the state does not
    writes = {
        i.subject.name: i
        for i in items(result, lambda i: "writes_recompute" in i.metrics)
        if i.subject.module == "blocks.0.bn"
    }
    assert set(writes) == {"running_mean", "running_var", "num_batches_tracked"}
    for item in writes.values():
        assert item.status == "fail"
        assert item.metrics["writes_forward"] == 1 and item.metrics["writes_recompute"] == 1
    assert "native_batch_norm" in str(writes["running_mean"].metrics["operator"])
    assert "aten.add_" in str(writes["num_batches_tracked"].metrics["operator"])
    assert "updated twice" in writes["running_mean"].message
    region = next(i for i in result.items if i.subject.module == "blocks.0")
    assert region.status == "fail" and "running_mean" in region.message
    assert resume.run(ctx).summary["failed"] == 0


def test_declared_modules_are_checkpointed_by_the_check(tmp_path: Path) -> None:
    training = '  checkpoint: ["encoder.*", "decoder"]\n'
    result = recompute.run(context(tmp_path, planted.ENCODER, training))
    regions = {i.subject.module: i for i in result.items if "calls" in i.metrics}
    assert set(regions) == {"encoder.0", "encoder.1"}
    assert all(i.status == "pass" and i.metrics["declared"] for i in regions.values())
    assert result.items[0].status == "pass" and result.items[0].metrics["bit_exact"]
    (unmatched,) = items(result, lambda i: i.subject.name == "decoder")
    assert unmatched.status == "warn"


def test_a_hand_written_recomputation_that_draws_new_numbers_is_named(tmp_path: Path) -> None:
    result = recompute.run(context(tmp_path, planted.HANDWRITTEN))
    assert result.items[0].status == "not_computed"  # nothing to switch off: not a pass
    (bad,) = items(result, lambda i: i.status == "fail")
    assert bad.subject.module == "blocks.0.drop" and bad.metrics["region"] is None
    assert "outside torch.utils.checkpoint" in bad.message


def test_without_regions_or_declared_modules_it_is_not_applicable(tmp_path: Path) -> None:
    result = recompute.run(context(tmp_path, planted.MLP))
    assert result.status == "not_applicable" and "torch.utils.checkpoint" in (result.reason or "")


def test_two_forward_backward_passes_and_the_patch_is_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = context(tmp_path, planted.CHECKPOINTED)
    calls = []
    loss = ctx.spec.loss_fn
    assert loss is not None

    def counted(output: torch.Tensor, target: torch.Tensor) -> Any:
        calls.append(1)
        return loss(output, target)

    monkeypatch.setattr(ctx.spec, "loss_fn", counted)
    real = torch.utils.checkpoint.CheckpointFunction
    recompute.run(ctx)
    assert len(calls) == 2
    assert torch.utils.checkpoint.CheckpointFunction is real


def test_through_collect_with_the_training_runner(tmp_path: Path) -> None:
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 1, 2, 1, 0, 2, 1, 0])
    path = make_spec(tmp_path, planted.DROPOUT_RNG_LOST, x=x, target=y, spec_extra=TRAINING)
    evidence = collect(path, runners=["attest.collection.training.runner:run"])
    result = evidence.checks["recompute"]
    assert result.status == "computed" and result.summary["random_ops_not_restored"] == 1
    assert evidence.checks["resume"].status == "computed"
    assert evidence.checks["resume"].summary["failed"] == 0
