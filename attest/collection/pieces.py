"""Independent pieces of a check runner: the unit that ``attest collect --workers N`` spreads.

A runner module (``attest.collection.gradients.runner``...) may declare, next to its
``run(ctx)``, how its work falls into independent pieces:

- ``pieces(ctx) -> list[Piece]``: the pieces, each with a key (its name, unique in the runner)
  and an estimated cost; computed from the spec, the settings and the reference capture only,
  never from the number of workers, so every process finds the same pieces;
- ``run_piece(ctx, key) -> Any``: one piece's output, plain picklable data. It depends only on
  the spec, the settings, the capture, its key and random state seeded from them: every
  piece starts from :func:`reseed` (never from what an earlier piece left), and a piece that
  draws random numbers of its own seeds them from :func:`piece_seed`;
- ``join(ctx, outputs) -> list[CheckResult]``: the runner's results from every piece's output,
  read in key order (:func:`in_key_order`).

The runner's own ``run(ctx)`` is :func:`run_split` over those three, so one process computes
the very pieces a split collect computes in several and joins them with the same code: the
two give the same results, bit for bit where the backend is deterministic
(tests/unit/collection/test_pieces.py). A piece marked ``here`` writes state the evidence is
assembled from (the profiler's per-operator measurements) and runs in the collecting process.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attest.collection.context import CollectContext
    from attest.evidence.model import CheckResult

__all__ = [
    "Piece",
    "Split",
    "in_key_order",
    "join_split",
    "piece_seed",
    "reseed",
    "run_split",
    "split_of",
]


@dataclass(frozen=True)
class Piece:
    """One independent piece of a runner: ``key`` (sorts in join order), its estimated cost in
    forward+backward units (:mod:`attest.collection.budget`), and whether it must run in the
    collecting process (``here``)."""

    key: str
    cost: float
    here: bool = False


@dataclass(frozen=True)
class Split:
    """A runner's three piece functions (see the module docstring)."""

    pieces: Callable[[CollectContext], list[Piece]]
    run_piece: Callable[[CollectContext, str], Any]
    join: Callable[[CollectContext, dict[str, Any]], list[CheckResult]]


def reseed(seed: int) -> None:
    """Every runner, and every piece of one, starts from the same random state, whichever ran
    before it (so a collect split over workers, :mod:`attest.collection.parallel`, gives the
    same figures, and so does one resumed after a kill, :mod:`attest.collection.workdir`,
    whose earlier phases did not run in its process): Python's, torch's (every device's) and
    numpy's global generators."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)  # numpy takes 32-bit seeds


def piece_seed(seed: int, key: str) -> int:
    """The seed of a piece's own random draws: from the collect's seed and the piece's key only
    (53 bits of sha256: the evidence records it, and JSON's safe integers end at 2^53), so no
    piece's draws depend on how many were drawn before it."""
    digest = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 11


def in_key_order(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The outputs sorted by key: the order every join reads them in."""
    return {key: outputs[key] for key in sorted(outputs)}


def run_split(ctx: CollectContext, split: Split) -> list[CheckResult]:
    """A runner in one process: every piece in key order, each from :func:`reseed`, then the
    join (what a collect split over workers does across processes)."""
    outputs: dict[str, Any] = {}
    for piece in sorted(split.pieces(ctx), key=lambda p: p.key):
        reseed(ctx.settings.seed)
        outputs[piece.key] = split.run_piece(ctx, piece.key)
    return join_split(ctx, split, outputs)


def join_split(ctx: CollectContext, split: Split, outputs: Mapping[str, Any]) -> list[CheckResult]:
    """The runner's results from its pieces' outputs, wherever they were computed: the join
    starts from :func:`reseed` too and reads them in key order."""
    reseed(ctx.settings.seed)
    return split.join(ctx, in_key_order(outputs))


def split_of(runner: str) -> Split | None:
    """The piece functions of the runner named ``"module:function"``, or None when its module
    declares none (the runner then runs whole, in one process)."""
    module = importlib.import_module(runner.partition(":")[0])
    pieces, run_piece, join = (getattr(module, n, None) for n in ("pieces", "run_piece", "join"))
    if not (callable(pieces) and callable(run_piece) and callable(join)):
        return None
    return Split(pieces, run_piece, join)
