"""ig_randomization's stages read only the maps: where F(x) and F(b) would take a forward pass
of their own, a stage leaves it out (issue #38), and its maps are the same bits as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from attest.collection.context import CheckSettings, CollectContext, LoadedSpec
from attest.collection.ig import split
from attest.collection.ig.attribution import integrated_gradients
from attest.collection.ig.fixed import fixed_rule_maps
from attest.collection.profile.profiler import capture_reference

torch.set_num_threads(1)

# a budget that holds one path sample per chunk: F(x), F(b) cannot ride along
ONE_SAMPLE = 4096


class _Net(nn.Module):
    """A small CNN; counts the rows every forward pass sees."""

    rows = 0

    def __init__(self, noisy: bool = False) -> None:
        super().__init__()
        self.noisy = noisy
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.head = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _Net.rows += int(x.shape[0])
        h = torch.relu(self.conv(x))
        if self.noisy:  # draws random numbers in eval mode too
            h = h + 1e-3 * torch.rand_like(h)
        return self.head(h.flatten(1))


def _build(noisy: bool = False) -> nn.Module:
    torch.manual_seed(0)
    return _Net(noisy)


def _context(noisy: bool = False) -> CollectContext:
    inputs = torch.randn(3, 2, 6, 6, generator=torch.Generator().manual_seed(1))
    spec = LoadedSpec(
        path=Path("attest.yaml"),
        name="toy",
        version="1",
        factory="toy:build",
        factory_args={},
        build_model=lambda: _build(noisy),
        inputs=inputs,
        labels=None,
        target=0,
        threads=1,
    )
    return CollectContext(spec=spec, settings=CheckSettings(ig_memory_budget_bytes=ONE_SAMPLE))


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_the_maps_alone_are_integrated_gradients_attributions_bit_for_bit(steps: int) -> None:
    model = _build()
    x = torch.randn(3, 2, 6, 6, generator=torch.Generator().manual_seed(2))
    classes, baseline = torch.tensor([0, 2, 1]), torch.full_like(x, 0.25)
    maps = fixed_rule_maps(model, x, classes, baseline, "gausslegendre", steps, ONE_SAMPLE)
    full = integrated_gradients(model, x, target=classes, baseline=baseline,
                                method="gausslegendre", steps=steps,
                                memory_budget_bytes=ONE_SAMPLE, return_diagnostics=False)  # fmt: skip
    assert maps is not None and torch.equal(maps, full.attributions)
    # where F(x), F(b) ride along in the first chunk, the caller runs integrated_gradients
    assert fixed_rule_maps(model, x, classes, baseline, "gausslegendre", steps, 1 << 30) is None


def _stages(ctx: CollectContext) -> tuple[list[Any], list[int]]:
    """Each randomization stage's maps and the rows it spent (ctx's profile captured)."""
    prepared = split.prepare(ctx)
    assert not isinstance(prepared, str)
    split._group(ctx, prepared, 0)  # measures the probe step the stages' copies take over
    maps, rows = [], []
    for stage in range(1 + ctx.settings.ig_randomization_max_layers):
        split._stage(ctx, prepared, 0)  # the cascade's ordering pass, once per process
        _Net.rows = 0
        out = split._stage(ctx, prepared, stage)
        rows.append(_Net.rows)
        maps.append(None if out is None else out["maps"])
    return maps, rows


def test_a_stage_leaves_out_the_endpoint_pass_and_keeps_its_maps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx = _context()
    capture_reference(ctx)  # run 0: no random operator
    assert split._draws_nothing(ctx)
    settings = ctx.settings
    k = min(settings.ig_randomization_inputs, 3)
    maps, rows = _stages(ctx)
    assert rows[0] == settings.ig_randomization_steps * k  # path samples only
    monkeypatch.setattr(split, "_draws_nothing", lambda _ctx: False)
    before, before_rows = _stages(ctx)  # as every stage ran before: with F(x), F(b)
    assert before_rows[0] == settings.ig_randomization_steps * k + 2 * k
    for new, old in zip(maps, before, strict=True):
        assert (new is None) == (old is None)
        if new is not None:
            assert new.tobytes() == old.tobytes()


def test_a_model_that_draws_random_numbers_keeps_the_endpoint_pass() -> None:
    ctx = _context(noisy=True)
    capture_reference(ctx)
    assert not split._draws_nothing(ctx)  # run 0 called aten.rand_like
    assert not split._draws_nothing(_context())  # no run 0: nothing known, nothing left out
