"""The onnxruntime session settings the certificate covers, shared by certify and verify.

Both sides create sessions here, so the probe on the server runs exactly the configuration
that produced the expected outputs: deterministic compute on, a fixed intra-op thread count,
one inter-op thread, sequential execution, a recorded graph optimization level and
execution provider. Imports onnxruntime lazily and never torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attest.errors import InputError

__all__ = ["OPTIMIZATION_LEVELS", "RuntimeSettings", "create_session", "import_onnxruntime"]

OPTIMIZATION_LEVELS: tuple[str, ...] = ("disabled", "basic", "extended", "all")
_ORT_LEVEL_NAMES = {
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


@dataclass(frozen=True)
class RuntimeSettings:
    """How the deployed session is configured (recorded in the probe bundle and certificate)."""

    intra_op_threads: int = 1
    graph_optimization_level: str = "all"
    execution_provider: str = "CPUExecutionProvider"

    def __post_init__(self) -> None:
        if int(self.intra_op_threads) < 1:
            raise InputError(f"intra-op thread count must be >= 1, got {self.intra_op_threads}")
        if self.graph_optimization_level not in OPTIMIZATION_LEVELS:
            raise InputError(
                f"unknown graph optimization level {self.graph_optimization_level!r}",
                hint=f"use one of {', '.join(OPTIMIZATION_LEVELS)}",
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the bundle and the certificate."""
        return {
            "intra_op_threads": int(self.intra_op_threads),
            "inter_op_threads": 1,
            "execution_mode": "sequential",
            "deterministic_compute": True,
            "graph_optimization_level": self.graph_optimization_level,
            "execution_provider": self.execution_provider,
        }


def import_onnxruntime() -> Any:
    """onnxruntime, or an :class:`InputError` saying how to install it."""
    try:
        return importlib.import_module("onnxruntime")
    except ImportError:
        raise InputError(
            "onnxruntime is not installed; the behavioural probe needs it",
            hint="pip install 'gradient-attest[verify]'",
        ) from None


def create_session(
    model: str | Path | bytes,
    settings: RuntimeSettings,
    *,
    external_data: dict[str, bytes] | None = None,
) -> Any:
    """An ``onnxruntime.InferenceSession`` with the certified, deterministic settings.

    ``model`` is a path or the model's bytes. A model given as bytes whose tensors live in
    external data files needs those files' bytes in ``external_data`` (location -> bytes):
    onnxruntime resolves external data against the model file's folder, so the model and its
    data are written to a fresh private folder (mode 0700, removed afterwards) and loaded
    from there; the files at the original paths are never read.
    A model onnxruntime cannot load raises :class:`InputError` with onnxruntime's reason.
    """
    if isinstance(model, bytes) and external_data:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="attest-probe-") as folder:
            root = Path(folder)
            for location, data in external_data.items():
                target = root / location
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                target.write_bytes(data)
            (root / "model.onnx").write_bytes(model)
            return _session(root / "model.onnx", settings)
    return _session(model, settings)


def _session(model: str | Path | bytes, settings: RuntimeSettings) -> Any:
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.use_deterministic_compute = True
    options.intra_op_num_threads = int(settings.intra_op_threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = getattr(
        ort.GraphOptimizationLevel, _ORT_LEVEL_NAMES[settings.graph_optimization_level]
    )
    options.log_severity_level = 3  # errors only: warnings are not for the server's operator
    # Worker threads sleep instead of spinning between runs; no effect on results.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    available = list(ort.get_available_providers())
    if settings.execution_provider not in available:
        raise InputError(
            f"execution provider {settings.execution_provider} is not available in this "
            f"onnxruntime (available: {', '.join(available) or 'none'})",
            hint="install the onnxruntime build the certificate's deployment envelope names",
        )
    source = model if isinstance(model, bytes) else str(model)
    try:
        return ort.InferenceSession(
            source, sess_options=options, providers=[settings.execution_provider]
        )
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/... types
        where = "the ONNX model" if isinstance(model, bytes) else str(model)
        raise InputError(
            f"onnxruntime cannot load {where}: {type(exc).__name__}: {str(exc).strip()[:500]}",
            hint="check that the file is the exported model and the onnxruntime version supports its opset",
        ) from None
