"""The verifier's rollback state: the highest release version verified per model name.

A JSON file ``{"version": 1, "models": {name: {"version", "certificate_id", "recorded_at"}}}``,
read strictly, replaced atomically and, on POSIX, updated under an exclusive ``flock`` so two
verifications at once cannot lose a raise. A damaged file is an error, never a silent reset:
forgetting it would re-open rollback.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from attest.certificate.format import compare_versions
from attest.core.io import atomic_write_json, read_json_file
from attest.core.times import format_timestamp
from attest.errors import InputError

__all__ = ["highest_verified", "is_rollback", "record_verified"]

_FORMAT = 1


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"version": _FORMAT, "models": {}}
    state = read_json_file(path, what="rollback state file")
    models = state.get("models") if isinstance(state, dict) else None
    if not (
        isinstance(state, dict)
        and state.get("version") == _FORMAT
        and isinstance(models, dict)
        and all(isinstance(v, dict) and isinstance(v.get("version"), str) for v in models.values())
    ):
        raise InputError(
            f"rollback state file {path} is not in the expected format",
            hint="restore it from a backup; deleting it forgets which versions were seen",
        )
    return state


def highest_verified(path: str | Path, model_name: str) -> str | None:
    """The highest version of ``model_name`` verified so far, or ``None``."""
    seen = _read(Path(path))["models"].get(model_name)
    return None if seen is None else str(seen["version"])


def is_rollback(path: str | Path, model_name: str, version: str) -> str | None:
    """The higher version already verified if ``version`` is lower than it, else ``None``."""
    seen = highest_verified(path, model_name)
    if seen is None:
        return None
    try:
        return seen if compare_versions(version, seen) < 0 else None
    except ValueError as exc:
        raise InputError(f"rollback state file {path}: {exc}") from None


def record_verified(
    path: str | Path, model_name: str, version: str, certificate_id: str, at: datetime
) -> None:
    """Raise the recorded version of ``model_name`` to ``version`` if it is higher."""
    p = Path(path)
    lock_fd: int | None = None
    try:
        import fcntl
    except ImportError:  # not POSIX: the atomic replace still keeps the file whole
        fcntl = None  # type: ignore[assignment]
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        if fcntl is not None:
            lock_fd = os.open(p.with_name(p.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
    except OSError as exc:
        raise InputError(f"cannot lock rollback state file {p}: {exc.strerror}") from None
    try:
        state = _read(p)
        seen = state["models"].get(model_name)
        if seen is None or compare_versions(version, seen["version"]) > 0:
            state["models"][model_name] = {
                "version": version,
                "certificate_id": certificate_id,
                "recorded_at": format_timestamp(at),
            }
            atomic_write_json(p, state)
    finally:
        if lock_fd is not None:
            os.close(lock_fd)
