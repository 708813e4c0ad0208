"""The runtime a collection runs under, and the determinism envelope recorded in evidence.

:func:`runtime` fixes the intra-op thread count to the spec's, and on CUDA turns on
deterministic algorithms (``torch.use_deterministic_algorithms``, cuDNN deterministic, no
cuDNN benchmark, no TF32) and sets ``CUBLAS_WORKSPACE_CONFIG`` when it is unset, as PyTorch's
reproducibility notes require; everything is restored afterwards. It yields the envelope:
versions, device and ISA, threads, the flags and the environment variables that decide
whether results are reproducible.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from attest.collection.context import CheckSettings, LoadedSpec

__all__ = ["ENV_VARS", "describe", "hardware_target", "runtime"]

ENV_VARS = (
    "CUBLAS_WORKSPACE_CONFIG",
    "CUDA_LAUNCH_BLOCKING",
    "PYTORCH_CUDA_ALLOC_CONF",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "CUDNN_DETERMINISTIC",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_CBWR",
    "ATEN_CPU_CAPABILITY",
    "KMP_AFFINITY",
    "PYTHONHASHSEED",
)
DETERMINISTIC_CUBLAS_WORKSPACE = ":4096:8"


def _cpu_isa() -> str:
    try:
        return str(torch.backends.cpu.get_cpu_capability()).lower()
    except Exception:  # very old torch
        return "unknown"


def hardware_target(device: str | torch.device) -> str:
    """The affinity tag of a device: ``cpu:x86_64:avx512`` or ``cuda:sm_90``."""
    dev = torch.device(device)
    if dev.type == "cuda":
        major, minor = torch.cuda.get_device_capability(dev)
        return f"cuda:sm_{major}{minor}"
    return f"cpu:{platform.machine() or 'unknown'}:{_cpu_isa()}"


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def describe(spec: LoadedSpec, settings: CheckSettings) -> dict[str, Any]:
    """The determinism envelope of the current process for ``spec`` (call inside runtime())."""
    import numpy

    dev = torch.device(spec.device)
    env: dict[str, Any] = {
        "target": hardware_target(dev),
        "device": str(dev),
        "arch": platform.machine(),
        "isa": _cpu_isa(),
        "cpu": _cpu_model(),
        "os": platform.system(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "precision": spec.precision,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "seed": settings.seed,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "mkldnn_enabled": bool(torch.backends.mkldnn.enabled),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda": torch.version.cuda,
        "cudnn_version": None,
        "cudnn_enabled": None,
        "cudnn_deterministic": None,
        "cudnn_benchmark": None,
        "cudnn_allow_tf32": None,
        "cuda_matmul_allow_tf32": None,
        "gpu": None,
        "compute_capability": None,
        "env": {name: os.environ.get(name) for name in ENV_VARS},
    }
    if dev.type == "cuda":
        major, minor = torch.cuda.get_device_capability(dev)
        env.update(
            {
                "cudnn_version": torch.backends.cudnn.version(),  # type: ignore[no-untyped-call]
                "cudnn_enabled": bool(torch.backends.cudnn.enabled),
                "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
                "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
                "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                "gpu": torch.cuda.get_device_name(dev),
                "compute_capability": f"sm_{major}{minor}",
            }
        )
    return env


@contextmanager
def runtime(spec: LoadedSpec, settings: CheckSettings) -> Iterator[dict[str, Any]]:
    """Fix threads (and on CUDA the deterministic flags) for a collection; yield the envelope.

    ``settings.extra["deterministic_algorithms"]`` (default True) controls the CUDA flags.
    """
    saved_threads = torch.get_num_threads()
    saved_det = torch.are_deterministic_algorithms_enabled()
    saved_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    saved_cudnn = (
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cuda.matmul.allow_tf32,
    )
    saved_workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    cuda = spec.device.startswith("cuda")
    try:
        torch.set_num_threads(spec.threads)
        if cuda:
            torch.cuda.set_device(torch.device(spec.device))
            if bool(settings.extra.get("deterministic_algorithms", True)):
                if saved_workspace is None:
                    # Must be set before the first cuBLAS handle is created to take effect.
                    os.environ["CUBLAS_WORKSPACE_CONFIG"] = DETERMINISTIC_CUBLAS_WORKSPACE
                torch.use_deterministic_algorithms(True, warn_only=True)
                torch.backends.cudnn.deterministic = True
                torch.backends.cudnn.benchmark = False
                torch.backends.cudnn.allow_tf32 = False
                torch.backends.cuda.matmul.allow_tf32 = False
        yield describe(spec, settings)
    finally:
        torch.set_num_threads(saved_threads)
        if cuda:
            torch.use_deterministic_algorithms(saved_det, warn_only=saved_warn)
            (
                torch.backends.cudnn.deterministic,
                torch.backends.cudnn.benchmark,
                torch.backends.cudnn.allow_tf32,
                torch.backends.cuda.matmul.allow_tf32,
            ) = saved_cudnn
            if saved_workspace is None:
                os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
