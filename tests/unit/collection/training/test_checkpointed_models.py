"""A model that checkpoints its own blocks (reentrant and not) gets the eval-mode checks of any
other model: checkpointing is off outside the training checks (attest/collection/checkpointing.py)."""

from __future__ import annotations

from pathlib import Path

import planted_recompute_resume as planted
import pytest
import torch
import torch.utils.checkpoint as torch_checkpoint
from _collect_models import make_spec

from attest.collection import collect
from attest.collection.checkpointing import checkpointing_off

CORE = [
    "attest.collection.profile.topology:run",
    "attest.collection.profile.profiler:run",
    "attest.collection.gradients.runner:run",
]


def test_checkpointing_off_runs_regions_plainly_and_restores() -> None:
    real = (
        torch_checkpoint.CheckpointFunction,
        torch_checkpoint._checkpoint_without_reentrant_generator,
    )
    layer = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4, requires_grad=True)
    calls = []

    def body(h: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return torch.tanh(layer(h))

    for reentrant in (True, False):
        calls.clear()
        with checkpointing_off():
            out = torch_checkpoint.checkpoint(body, x, use_reentrant=reentrant)
            (grad,) = torch.autograd.grad(out.sum(), [x])  # refused by reentrant checkpoint
        assert len(calls) == 1  # no recomputation in backward
        expected = torch.autograd.grad(torch.tanh(layer(x)).sum(), [x])[0]
        assert torch.equal(grad, expected)
    assert (
        torch_checkpoint.CheckpointFunction,
        torch_checkpoint._checkpoint_without_reentrant_generator,
    ) == real
    with pytest.raises(ZeroDivisionError), checkpointing_off():
        raise ZeroDivisionError
    assert torch_checkpoint.CheckpointFunction is real[0]


def test_a_self_checkpointing_model_passes_the_core_checks(tmp_path: Path) -> None:
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 1, 2, 1, 0, 2, 1, 0])
    spec = make_spec(
        tmp_path, planted.CHECKPOINTED, x=x, target=y, spec_extra="loss: model:loss\nrepeats: 3\n"
    )
    ev = collect(spec, runners=CORE)
    for check_id in (
        "topology",
        "determinism",
        "fidelity",
        "gradcheck",
        "gradient_flow",
        "accumulation",
    ):
        result = ev.checks[check_id]
        assert result.status == "computed", (check_id, result.reason)
        assert not result.failed_items, (check_id, [i.message for i in result.failed_items])


def test_batch_invariance_runs_a_reentrant_checkpointed_model(tmp_path: Path) -> None:
    from attest.collection.context import CollectContext
    from attest.collection.training import runner
    from attest.spec import load_spec

    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 1, 2, 1])
    extra = "loss: model:loss\nrepeats: 2\ntraining:\n  batch_sizes: [1, 4]\n"
    spec = make_spec(tmp_path, planted.CHECKPOINTED, x=x, target=y, spec_extra=extra)
    results = {r.check: r for r in runner.run(CollectContext(spec=load_spec(spec)))}
    result = results["batch_invariance"]
    assert result.status == "computed", result.reason
    assert not result.failed_items, [i.message for i in result.failed_items]
