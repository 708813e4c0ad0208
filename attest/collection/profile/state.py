"""What the profiler hands the checks built after it: :class:`ProfileState`, held by the
context as ``ctx.profile``. Data types only (the profiler fills it), so the context holds it
without importing the profiler.
"""

from __future__ import annotations

from dataclasses import dataclass

from attest.collection.capture.run import ModelFailure
from attest.collection.profile.measures import Profile

__all__ = ["ProfileState"]


@dataclass
class ProfileState:
    """The reference run's :class:`Profile` (None until ``capture_reference`` ran) and, when
    the model raised in it, where (``failure``: ``topology`` reports it instead of running)."""

    profile: Profile | None = None
    failure: ModelFailure | None = None
