"""GradientAssuranceCallback with the real lightning package: a tiny CPU fit with and without
the callback, in a subprocess (lightning's import is heavy and process-wide)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import lightning.pytorch as pl
    import torch
    import torch.nn.functional as F
    from torch import nn
    from attest.integrations.lightning import GradientAssuranceCallback

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(0.1), nn.Linear(16, 3))
        def forward(self, x):
            return self.net(x)
        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self(x), y)
        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-2)

    def fit(callbacks):
        pl.seed_everything(0, verbose=False)
        model = Tiny()
        gen = torch.Generator().manual_seed(1)
        x, y = torch.randn(64, 6, generator=gen), torch.randint(0, 3, (64,), generator=gen)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
        trainer = pl.Trainer(max_epochs=3, accelerator="cpu", devices=1, callbacks=callbacks,
                             enable_progress_bar=False, logger=False, enable_checkpointing=False,
                             enable_model_summary=False)
        trainer.fit(model, loader)
        return model, (x[:4], y[:4])

    plain, probe = fit([])
    watched, _ = fit([GradientAssuranceCallback(loss_fn=F.cross_entropy, probe=probe, every=4,
                                                log=sys.argv[1])])
    same = all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(),
                                                 watched.state_dict().values()))
    print(json.dumps({"bit_identical": same}))
    """
)


@pytest.mark.slow
def test_the_callback_logs_a_lightning_fit_without_changing_it(tmp_path: Path) -> None:
    from attest.evidence.training_log import read_training_log

    log = tmp_path / "run.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(log)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"bit_identical": True}
    samples = read_training_log(log).samples
    assert [s.step for s in samples] == [0, 4, 8, 12, 16, 20]  # 24 optimizer steps, every 4
    assert [s.epoch for s in samples] == [0, 0, 1, 1, 2, 2]
    assert all(s.min_fidelity_pct is not None and s.min_fidelity_pct > 99.99 for s in samples)


def test_the_module_imports_without_lightning_and_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import attest.integrations.lightning as integration
    from attest.errors import InputError

    monkeypatch.setitem(sys.modules, "lightning", None)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    monkeypatch.delitem(integration.__dict__, "GradientAssuranceCallback", raising=False)
    with pytest.raises(InputError, match="not installed") as info:
        _ = integration.GradientAssuranceCallback
    assert "pip install 'gradient-attest[lightning]'" in info.value.diagnostics()
