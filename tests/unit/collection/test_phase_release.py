"""What a collect gives back between its steps (issue #38, memory): the heap a phase freed is
trimmed before the next phase starts, and each of gradcheck's operator groups is trimmed
before the next group allocates, so no step's peak stacks on what an earlier one left."""

from __future__ import annotations

import gc
import importlib
import weakref
from pathlib import Path

import pytest
import torch
from _collect_models import MLP, make_spec
from _grad_models import TanhNet, class_labels, continuous, cross_entropy, make_context

from attest.collection import collect
from attest.collection.context import CollectContext
from attest.evidence.model import GRADIENT_CHECKS, CheckResult


def _runner(name: str, log: list[str]) -> object:
    def run(ctx: CollectContext) -> list[CheckResult]:
        log.append(name)
        return []

    run.__qualname__ = name
    return run


def test_every_phase_is_trimmed_before_the_next_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runners = importlib.import_module("attest.collection.runners")
    log: list[str] = []
    monkeypatch.setattr(runners, "release_memory", lambda: log.append("trim"))
    collect(
        make_spec(tmp_path, MLP),
        runners=[_runner("first", log), _runner("second", log)],  # type: ignore[list-item]
    )
    # the capture (run 0) is trimmed when it ends, and so is each runner's phase
    assert log[-4:] == ["first", "trim", "second", "trim"]
    assert log.index("trim") < log.index("first")


def test_each_gradcheck_group_is_trimmed_even_when_it_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gradients = importlib.import_module("attest.collection.gradients.runner")
    ctx = make_context(TanhNet, continuous(4, 6), class_labels(4), cross_entropy)
    log: list[str] = []

    def group(ctx: CollectContext, index: int) -> list[object]:
        log.append(f"group {index}")
        if index == 1:
            raise ValueError("a group that raises")
        return []

    monkeypatch.setattr(gradients.gradcheck_ops, "check_group", group)
    monkeypatch.setattr(gradients, "release_memory", lambda: log.append("trim"))
    assert gradients.run_piece(ctx, "gradcheck/000")["items"] == []
    assert "a group that raises" in gradients.run_piece(ctx, "gradcheck/001")["error"]
    assert log == ["group 0", "trim", "group 1", "trim"]


def test_each_gradient_check_records_its_own_peak_within_its_phase(tmp_path: Path) -> None:
    evidence = collect(make_spec(tmp_path, MLP), runners=["attest.collection.gradients.runner:run"])
    phase = next(p for p in evidence.phases if p.phase == "gradients")
    assert phase.peak_rss_bytes is not None
    for check_id in GRADIENT_CHECKS:
        peak = evidence.checks[check_id].peak_rss_bytes
        assert peak is not None and 0 < peak <= phase.peak_rss_bytes, check_id


def test_a_capture_holds_no_call_whose_arguments_it_does_not_keep() -> None:
    """The records of a run keep the calls' names, places and output shapes, not the calls:
    a call holds its live arguments and outputs, so holding every call held every activation
    of the run to its end (the kinks check's float64 run: the collect's peak on SwinUNETR)."""
    from attest.collection.capture.capture import ForwardCall
    from attest.collection.capture.run import _RecordObserver
    from attest.collection.capture.tensors import TensorVault

    recorder = _RecordObserver(TensorVault(), keep=lambda op: op == "aten.add.Tensor")
    output = torch.randn(3, 4)
    freed = weakref.ref(output)
    recorder.forward(
        ForwardCall(0, torch.ops.aten.tanh.default, "aten.tanh.default", "act",
                    (torch.randn(3, 4),), {}, [output], 0)
    )  # fmt: skip
    kept_input = torch.randn(2)
    recorder.forward(
        ForwardCall(1, torch.ops.aten.add.Tensor, "aten.add.Tensor", "head",
                    (kept_input, kept_input), {}, [torch.zeros(2, dtype=torch.float64)], 0)
    )  # fmt: skip
    del output
    gc.collect()
    assert freed() is None  # the call's output went with the call
    first, second = recorder.records()
    assert (first.id, first.op, first.module, first.args) == (0, "aten.tanh.default", "act", ())
    assert first.output_shapes == [[3, 4]] and first.output_dtypes == ["float32"]
    assert second.output_dtypes == ["float64"] and len(second.args) == 2  # kept, as before
    assert torch.equal(second.args[0], kept_input)
