"""Activation checkpointing off for the eval-mode checks: every region runs plainly.

``torch.utils.checkpoint`` trades memory for a second forward of each region in backward. The
math is the same either way (the ``recompute`` training check verifies exactly that, region by
region), but the reentrant implementation refuses ``torch.autograd.grad`` and
``backward(inputs=...)``, which the profiler, the gradient checks and integrated gradients all
use, and reading a non-reentrant region's saved tensors (as the capture does, to count them)
runs its recomputation during the forward. So every phase but the training checks runs the
model with checkpointing off: the function of each region is called directly and its
activations are saved as without checkpointing. The price is the memory checkpointing saved,
for the duration of those phases.

``checkpoint`` looks up ``CheckpointFunction`` (reentrant) and
``_checkpoint_without_reentrant_generator`` (non-reentrant) in its module's globals at each
call, so replacing those two names covers every call however the model imported
``checkpoint`` (``checkpoint_sequential`` too); patching ``checkpoint`` itself would miss
``from torch.utils.checkpoint import checkpoint``. The training check ``recompute`` swaps the
same two names for its own measurement (``attest.collection.training.checkpoint_regions``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch.utils.checkpoint as torch_checkpoint

__all__ = ["checkpointing_off"]


class _Plain:
    """Stands in for ``CheckpointFunction``: ``apply`` calls the region's function directly."""

    @staticmethod
    def apply(function: Callable[..., Any], _preserve_rng_state: bool, *args: Any) -> Any:
        return function(*args)


def _plain_generator(*_args: Any, **_kwargs: Any) -> Iterator[None]:
    # checkpoint() calls next() on this before and after running the function itself; a
    # generator that yields once, installing no saved-tensor hooks, leaves it a plain call.
    yield


@contextlib.contextmanager
def checkpointing_off() -> Iterator[None]:
    """Within the block, ``torch.utils.checkpoint.checkpoint`` regions run without
    recomputation; restored on exit (also when the block raises)."""
    real_function = torch_checkpoint.CheckpointFunction
    real_generator = torch_checkpoint._checkpoint_without_reentrant_generator
    torch_checkpoint.CheckpointFunction = _Plain  # type: ignore[misc,assignment]
    torch_checkpoint._checkpoint_without_reentrant_generator = _plain_generator
    try:
        yield
    finally:
        torch_checkpoint.CheckpointFunction = real_function  # type: ignore[misc]
        torch_checkpoint._checkpoint_without_reentrant_generator = real_generator
