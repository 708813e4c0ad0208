"""The resume check: a plain-attribute running statistic and an optimizer keeping its state
outside state_dict() are named; SGD with momentum and Adam resume bit for bit on CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import planted_recompute_resume as planted
import pytest
import torch
from _collect_models import make_spec

from attest.collection.context import CollectContext
from attest.collection.training import recompute, resume
from attest.spec import load_spec


def context(folder: Path, source: str, training: str | None = None, loss: bool = True) -> Any:
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 1, 2, 1, 0, 2, 1, 0])
    extra = ("loss: model:loss\n" if loss else "") + "repeats: 2\n"
    if training is not None:
        extra += "training:\n" + training
    path = make_spec(folder, source, x=x, target=y, spec_extra=extra)
    return CollectContext(spec=load_spec(path))


@pytest.mark.parametrize("factory", ["make_optimizer", "make_adam"])
def test_sgd_momentum_and_adam_resume_bit_for_bit(tmp_path: Path, factory: str) -> None:
    result = resume.run(context(tmp_path, planted.MLP, f"  optimizer: model:{factory}\n"))
    assert result.status == "computed"
    assert [i.subject.name for i in result.items] == [
        "parameters after resume",
        "gradients after resume",
    ]
    for item in result.items:
        assert item.status == "pass" and item.metrics["bit_exact"] is True
        assert item.metrics["max_relative_deviation"] == 0.0 and item.metrics["rtol"] == 0.0
    assert result.summary["losses_equal"] is True and result.summary["unrestored_state"] == 0
    losses = result.items[0].details["losses_resumed"]
    assert len(losses) == 3 and losses == result.items[0].details["losses_uninterrupted"]


def test_a_plain_attribute_running_statistic_is_named(tmp_path: Path) -> None:
    ctx = context(tmp_path, planted.PLAIN_ATTRIBUTE, "  optimizer: model:make_optimizer\n")
    result = resume.run(ctx)
    assert result.items[0].status == "fail" and result.items[1].status == "fail"
    (lost,) = result.items[2:]
    assert lost.status == "fail" and lost.subject.name == "running"
    assert lost.subject.module == "" and lost.metrics["kind"] == "plain attribute"
    assert "register_buffer" in lost.message and "not restored" in lost.message
    assert recompute.run(ctx).status == "not_applicable"  # the other check does not flag it


def test_optimizer_state_outside_state_dict_is_named(tmp_path: Path) -> None:
    training = "  optimizer: model:make_attribute_optimizer\n"
    ctx = context(tmp_path, planted.ATTRIBUTE_OPTIMIZER, training)
    result = resume.run(ctx)
    assert result.items[0].status == "fail"
    (lost,) = result.items[2:]
    assert lost.status == "fail" and lost.subject.name == "optimizer.momentum_buf"
    assert lost.metrics["kind"] == "optimizer attribute"
    assert "dict of 4 at the save point, dict of 0" in lost.message
    assert "Optimizer.state_dict()" in lost.message
    assert recompute.run(ctx).status == "not_applicable"


def test_the_loss_scaler_is_saved_and_restored(tmp_path: Path) -> None:
    training = "  optimizer: model:make_adam\n  autocast: bfloat16\n  grad_scaler: true\n"
    result = resume.run(context(tmp_path, planted.MLP, training))
    assert result.parameters["grad_scaler"] is True
    assert result.summary["failed"] == 0 and result.summary["unrestored_state"] == 0


def test_passes_are_three_times_the_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = context(tmp_path, planted.MLP, "  optimizer: model:make_optimizer\n  steps: 2\n")
    calls = []
    loss = ctx.spec.loss_fn

    def counted(output: torch.Tensor, target: torch.Tensor) -> Any:
        calls.append(1)
        return loss(output, target)

    monkeypatch.setattr(ctx.spec, "loss_fn", counted)
    result = resume.run(ctx)
    assert len(calls) == 6 and result.parameters["steps"] == 2


def test_without_optimizer_or_loss_it_is_not_applicable(tmp_path: Path) -> None:
    no_optimizer = resume.run(context(tmp_path / "a", planted.MLP, "  steps: 2\n"))
    assert no_optimizer.status == "not_applicable" and "optimizer" in (no_optimizer.reason or "")
    no_loss = resume.run(
        context(tmp_path / "b", planted.MLP, "  optimizer: model:make_optimizer\n", loss=False)
    )
    assert no_loss.status == "not_applicable" and "loss" in (no_loss.reason or "")


def test_without_targets_it_is_not_computed(tmp_path: Path) -> None:
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    extra = "loss: model:loss\ntraining:\n  optimizer: model:make_optimizer\n"
    spec = load_spec(make_spec(tmp_path, planted.MLP, x=x, spec_extra=extra))
    result = resume.run(CollectContext(spec=spec))
    assert result.status == "not_computed" and "target" in (result.reason or "")
