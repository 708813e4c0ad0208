"""Connecting to a Ray cluster (``--ray ADDRESS``), shared by the per-target dispatch and the
split of one collect over Ray tasks (:mod:`attest.collection.parallel`). Ray is optional (the
``ray`` extra): it is imported here, when a command asks for it, and its absence is a clear
error naming the extra."""

from __future__ import annotations

import importlib
from typing import Any

from attest.errors import InputError

__all__ = ["connect"]


def _import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise InputError(
            "--ray needs Ray, which is not installed",
            hint="pip install 'gradient-attest[ray]' (or pip install ray)",
        ) from None


def connect(address: str) -> Any:
    """``ray`` connected to the cluster at ``address`` (``auto``, ``HOST:PORT``, ``local``)."""
    ray = _import_ray()
    try:
        ray.init(address=address, namespace="attest", log_to_driver=False, configure_logging=False)
    except Exception as exc:
        raise InputError(
            f"cannot connect to the Ray cluster at {address!r}: {type(exc).__name__}: {exc}",
            hint="start one with `ray start --head`, or pass --ray local",
        ) from None
    return ray
