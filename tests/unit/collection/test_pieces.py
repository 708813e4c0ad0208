"""Runners in pieces (attest.collection.pieces): computed in any order, joined in key order,
they give the runner's results bit for bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _collect_models import make_spec, stable

from attest.collection.context import CollectContext
from attest.collection.pieces import join_split, piece_seed, reseed, split_of
from attest.collection.runners import measure_capture
from attest.spec import load_spec

RUNNERS = [
    "attest.collection.profile.profiler:run",
    "attest.collection.gradients.runner:run",
    "attest.collection.ig.checks:run",
]


def _captured(spec: Path) -> CollectContext:
    ctx = CollectContext(spec=load_spec(spec))
    measure_capture(ctx)
    return ctx


@pytest.mark.parametrize("runner", RUNNERS, ids=["profile", "gradients", "ig"])
def test_pieces_in_reverse_order_give_the_runners_results(tmp_path: Path, runner: str) -> None:
    spec = make_spec(tmp_path / "m", spec_extra="repeats: 4\nthreads: 1\n")
    split = split_of(runner)
    assert split is not None
    whole = _captured(spec)
    reseed(whole.settings.seed)
    expected = [r.model_dump(mode="json") for r in _runner_function(runner)(whole)]
    ctx = _captured(spec)
    keys = [p.key for p in split.pieces(ctx)]
    assert len(keys) > 2 and keys == sorted(keys)
    outputs = {}
    for key in reversed(keys):  # another order, with random state left by the others
        reseed(ctx.settings.seed)
        outputs[key] = split.run_piece(ctx, key)
    got = [r.model_dump(mode="json") for r in join_split(ctx, split, outputs)]
    assert stable(got) == stable(expected)
    if runner.startswith("attest.collection.ig"):
        assert ctx.ig.attributions == whole.ig.attributions


def _runner_function(runner: str) -> Any:
    module, _, name = runner.partition(":")
    return getattr(__import__(module, fromlist=[name]), name)


def test_a_repeat_compared_with_other_run0_bits_is_run_again_here(tmp_path: Path) -> None:
    spec = make_spec(tmp_path / "m", spec_extra="repeats: 3\nthreads: 1\n")
    runner = RUNNERS[0]
    split = split_of(runner)
    assert split is not None
    expected = [r.model_dump(mode="json") for r in _runner_function(runner)(_captured(spec))]
    ctx = _captured(spec)
    outputs = {p.key: split.run_piece(ctx, p.key) for p in split.pieces(ctx)}
    # as if a worker had compared repeat 1 with a run 0 of other bits, and found it all wrong
    wrong = outputs["repeat/001"]["run"]
    wrong.exact = dict.fromkeys(wrong.exact, False)
    wrong.deviation = dict.fromkeys(wrong.exact, 1.0)
    outputs["repeat/001"] = {"run": wrong, "reference": "0" * 64}
    got = [r.model_dump(mode="json") for r in join_split(ctx, split, outputs)]
    assert stable(got) == stable(expected)


def test_piece_seeds_depend_on_the_seed_and_the_key_only() -> None:
    assert piece_seed(0, "gradcheck/001") == piece_seed(0, "gradcheck/001")
    seeds = {piece_seed(s, k) for s in (0, 1) for k in ("gradcheck/000", "gradcheck/001")}
    assert len(seeds) == 4 and all(0 <= s < 2**53 for s in seeds)  # JSON-safe


def test_ig_checks_read_off_pieces_count_the_pieces_time(tmp_path: Path) -> None:
    spec = make_spec(tmp_path / "m", spec_extra="repeats: 4\nthreads: 1\n")
    runner = RUNNERS[2]
    split = split_of(runner)
    assert split is not None
    ctx = _captured(spec)
    outputs = {p.key: split.run_piece(ctx, p.key) for p in split.pieces(ctx)}
    stages = [o for k, o in outputs.items() if k.startswith("randomization/") and o is not None]
    spent = {
        "ig_randomization": sum(o["duration_s"] for o in stages),
        "ig_determinism": outputs["repeats"]["duration_s"],
    }
    assert all(s > 0 for s in spent.values())
    results = {r.check: r for r in join_split(ctx, split, outputs)}
    for check, pieces in spent.items():
        duration = results[check].duration_s
        assert duration is not None and pieces <= duration < pieces + 5.0, (check, duration)
