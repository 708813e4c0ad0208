"""``Evidence.compile``: how the model the factory builds was compiled (``torch.compile``), and
whether its weights were saved from a compiled module (:mod:`attest.spec.compiled` reads it).

The checks run the original eager module with the same weights; this record tells a reviewer
that the deployed model runs compiled, with which backend and mode, so that a difference
between the compiled and the eager gradients (a backend's fused kernels) is a known gap of
the certificate, not a surprise.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["CompileRecord"]


class CompileRecord(BaseModel):
    """``compiled``: some module was compiled (``modules`` names them, "" the model itself);
    ``backend``/``mode``/``fullgraph``/``dynamic``: torch.compile's arguments as far as torch
    keeps them (None: not recoverable); ``stripped_keys``: weight keys whose ``_orig_mod.``
    segment was removed to load them; ``note``: the sentence the report shows."""

    model_config = ConfigDict(extra="forbid")

    compiled: bool
    modules: list[str]
    backend: str | None = None
    mode: str | None = None
    fullgraph: bool | None = None
    dynamic: bool | None = None
    stripped_keys: int = 0
    note: str
