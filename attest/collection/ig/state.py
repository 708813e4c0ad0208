"""What the integrated-gradient checks hand the collector: :class:`IGState`, held by the
context as ``ctx.ig``. Data types only, so the context holds it without importing the checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["IGState"]


@dataclass
class IGState:
    """``attributions``: the probe inputs' attributions, compressed and bounded
    (:func:`attest.evidence.attributions.encode_attributions`), for the collector to copy into
    ``Evidence.attributions``; None until the IG checks computed them."""

    attributions: dict[str, Any] | None = None
