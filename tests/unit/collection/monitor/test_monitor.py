"""attest.TrainingMonitor on real (small) CPU training loops: bit-identical training, a
decaying and a stable fidelity series, crash safety and resuming without duplicates."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from _monitor_loops import decaying_run, mlp, stable_run
from torch import nn

import attest
from attest.collection.monitor import TrainingMonitor
from attest.errors import InputError
from attest.evidence.training_log import read_training_log
from attest.evidence.training_summary import summarize_training_log


def test_training_is_bit_identical_with_and_without_the_monitor(tmp_path: Path) -> None:
    plain = stable_run(None)
    watched = stable_run(tmp_path / "run.jsonl")
    for (name, a), (_, b) in zip(
        plain.state_dict().items(), watched.state_dict().items(), strict=True
    ):
        assert a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8)), name
    assert len(read_training_log(tmp_path / "run.jsonl").samples) == 18  # 36 steps, every 2


def test_the_model_mode_and_rng_are_left_as_they_were(tmp_path: Path) -> None:
    model = mlp()
    model.train()
    model[2].eval()  # one module deliberately in eval mode: kept so
    monitor = TrainingMonitor(
        model, F.cross_entropy, (torch.randn(4, 6), torch.zeros(4).long()), log=tmp_path / "r.jsonl"
    )
    state = torch.random.get_rng_state()
    record = monitor.step(epoch=0, step=0)
    monitor.close()
    assert record is not None and record.min_fidelity_pct is not None
    assert torch.equal(torch.random.get_rng_state(), state)
    assert [m.training for m in model.modules()] == [True, True, True, False, True]
    assert all(p.grad is None for p in model.parameters())


def test_a_decaying_run_has_a_finite_half_life_at_the_right_epoch(tmp_path: Path) -> None:
    decaying_run(tmp_path / "run.jsonl")
    log = read_training_log(tmp_path / "run.jsonl")
    fid = summarize_training_log(log).fidelity
    assert fid.status == "reached" and fid.half_life_epochs is not None
    assert fid.uncertainty_epochs is not None and fid.uncertainty_epochs < 2.0
    # the right epoch, read off the measurements themselves: the first epoch whose median
    # shortfall is 0.1 pp beyond the start's; the fit must put the half-life there, within
    # its stated uncertainty and the one-epoch width of an epoch
    shortfall: dict[int, list[float]] = {}
    for s in log.samples:
        assert s.min_fidelity_pct is not None
        shortfall.setdefault(s.epoch, []).append(100.0 - s.min_fidelity_pct)
    median = {e: sorted(v)[len(v) // 2] for e, v in shortfall.items()}
    crossed = [e for e in sorted(median) if median[e] >= median[0] + 0.1]
    assert crossed, median
    assert abs(fid.half_life_epochs - crossed[0]) <= fid.uncertainty_epochs + 1.0


def test_a_stable_run_reports_not_reached(tmp_path: Path) -> None:
    stable_run(tmp_path / "run.jsonl", epochs=8)
    summary = summarize_training_log(read_training_log(tmp_path / "run.jsonl"))
    assert summary.fidelity.status == "not reached"
    assert summary.fidelity.half_life_epochs is None
    assert summary.first_nonfinite_step is None
    assert summary.memory.rsd_pct == 0.0  # the same probe saves the same tensors each time
    assert summary.min_bit_exact_rate == 1.0


def test_restart_appends_without_duplicates(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    model = stable_run(log, epochs=3)
    # a restart from a checkpoint taken at epoch 2 replays epoch 2's steps into the same log
    stable_run(log, epochs=5, start_epoch=2, model=model)
    read = read_training_log(log)
    samples = read.run()
    assert [s.step for s in samples] == list(range(0, 30, 2))
    assert len(read.run_ids) == 1 and [s.attempt for s in read.starts] == [0, 1]
    assert read.starts[1].last_logged_step == 16
    assert summarize_training_log(read).attempts == 2


_KILLED = textwrap.dedent(
    """
    import sys, torch, torch.nn.functional as F
    from torch import nn
    from attest.collection.monitor import TrainingMonitor
    model = nn.Linear(4, 2)
    monitor = TrainingMonitor(model, F.cross_entropy, (torch.randn(4, 4), torch.zeros(4).long()),
                              every=1, log=sys.argv[1])
    step = 0
    while True:
        monitor.step(epoch=step // 10, step=step)
        step += 1
    """
)


def test_a_killed_run_leaves_a_readable_log_and_resumes(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(log)], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            not log.exists() or log.read_bytes().count(b"\n") < 4
        ):
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(read_training_log(log).samples) >= 3
    # a line cut in the middle (the process died inside the write): read up to the last whole line
    data = log.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    log.write_bytes(whole + b'{"kind": "sample", "run_id": "x", "ste')
    cut = read_training_log(log)
    assert cut.truncated_tail_bytes > 0 and len(cut.samples) == whole.count(b"\n") - 1
    # the next monitor cuts the fragment off and appends on a line of its own
    monitor = TrainingMonitor(
        nn.Linear(4, 2),
        F.cross_entropy,
        (torch.randn(4, 4), torch.zeros(4).long()),
        every=1,
        log=log,
    )
    monitor.step(epoch=99, step=10_000)
    monitor.close()
    again = read_training_log(log)
    assert again.truncated_tail_bytes == 0 and again.samples[-1].step == 10_000


def test_bad_arguments_are_attest_errors(tmp_path: Path) -> None:
    model = nn.Linear(2, 2)
    with pytest.raises(InputError, match="every"):
        TrainingMonitor(
            model, F.mse_loss, (torch.zeros(1, 2), torch.zeros(1, 2)), every=0, log=tmp_path / "a"
        )
    with pytest.raises(InputError, match="'target'"):
        TrainingMonitor(model, F.mse_loss, {"x": torch.zeros(1, 2)}, log=tmp_path / "b")
    monitor = TrainingMonitor(
        model, F.mse_loss, (torch.zeros(1, 2), torch.zeros(1, 2)), log=tmp_path / "d"
    )
    with pytest.raises(InputError, match="step=-1"):
        monitor.step(epoch=0, step=-1)
    monitor.close()
    (tmp_path / "c").write_text("not json\n")
    with pytest.raises(InputError, match="line 1"):
        TrainingMonitor(
            model, F.mse_loss, (torch.zeros(1, 2), torch.zeros(1, 2)), log=tmp_path / "c"
        )


def test_public_name() -> None:
    assert attest.TrainingMonitor is TrainingMonitor


class _Masked(nn.Module):
    """Token ids and a padding mask by keyword (a BERT-style call)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 8, padding_idx=0)
        self.head = nn.Linear(8, 2)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        assert input_ids.dtype == torch.int64 and attention_mask.dtype == torch.bool
        keep = attention_mask.unsqueeze(-1).to(self.head.weight.dtype)
        return self.head((self.embed(input_ids) * keep).sum(1) / keep.sum(1))


def test_keyword_inputs_are_passed_as_keywords_and_never_cast(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = _Masked()
    ids = torch.randint(1, 20, (4, 6))
    mask = torch.arange(6)[None] < torch.tensor([6, 4, 5, 3])[:, None]
    inputs = {"input_ids": ids, "attention_mask": mask}
    monitor = TrainingMonitor(
        model, F.cross_entropy, (inputs, torch.tensor([0, 1, 0, 1])), log=tmp_path / "run.jsonl"
    )
    record = monitor.sample(epoch=0, step=0)  # a float64 pass: the ids and mask stay as they are
    monitor.close()
    assert record.loss is not None
    start = read_training_log(tmp_path / "run.jsonl").starts[0]
    assert start.probe["x"]["input_ids"]["dtype"] == "int64"
