"""Reading the files a spec names: the trained weights (a state_dict) and the probe inputs.

Weights are safetensors, or a ``.pt`` state_dict read with ``torch.load(weights_only=True)``
(never a pickled module); probe inputs are safetensors / npz / pt with ``"x"`` and an optional
``"target"``. Every problem is an :class:`~attest.errors.InputError` naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attest.errors import InputError

__all__ = [
    "check_finite",
    "check_target",
    "existing_file",
    "first_line",
    "read_probe",
    "read_probe_tensors",
    "read_state_dict",
]


def existing_file(spec_dir: Path, rel: str, *, what: str, spec_path: Path) -> Path:
    path = Path(rel)
    if not path.is_absolute():
        path = spec_dir / path
    if not path.exists():
        raise InputError(
            f"{what} file {path} (named in {spec_path}) does not exist",
            hint="check the path; paths are relative to the spec file",
        )
    if not path.is_file():
        raise InputError(f"{what} {path} (named in {spec_path}) is not a file")
    return path


def read_state_dict(
    path: Path, spec_path: Path, *, unwrap: tuple[str, ...] = ("state_dict",)
) -> dict[str, Any]:
    """The weights file's state_dict; a checkpoint holding one under a key of ``unwrap`` is
    unwrapped (MONAI's CheckpointSaver keeps the network's under ``model``)."""
    import torch

    suffix = path.suffix.lower()
    try:
        if suffix == ".safetensors":
            from safetensors.torch import load_file

            state: Any = load_file(str(path), device="cpu")
        elif suffix in (".pt", ".pth", ".bin", ".ckpt"):
            state = torch.load(str(path), map_location="cpu", weights_only=True)
        else:
            raise InputError(
                f"weights {path} (named in {spec_path}): unsupported file type {suffix or '(none)'!r}",
                hint="use .safetensors or a .pt state_dict saved with torch.save(model.state_dict(), ...)",
            )
    except InputError:
        raise
    except Exception as exc:
        raise InputError(
            f"weights {path} (named in {spec_path}) cannot be read: {type(exc).__name__}: {first_line(exc)}",
            hint="save plain tensors: torch.save(model.state_dict(), path) or safetensors; "
            "a pickled module is never loaded",
        ) from None
    for key in unwrap:
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
            break
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise InputError(
            f"weights {path} (named in {spec_path}) is not a state_dict (a mapping of names to tensors)",
            hint="save model.state_dict(), not the module or a training checkpoint object",
        )
    if not state:
        raise InputError(f"weights {path} (named in {spec_path}) holds no tensors")
    for key, tensor in state.items():
        if tensor.is_floating_point() or tensor.is_complex():
            bad = ~torch.isfinite(tensor)
            if bool(bad.any()):
                first = [int(i) for i in bad.nonzero()[0].tolist()]
                kind = "NaN" if bool(torch.isnan(tensor).any()) else "Inf"
                raise InputError(
                    f"weights {path}: tensor {key!r} holds {int(bad.sum())} non-finite value(s) "
                    f"({kind}), first at index {tuple(first)}",
                    hint="a certificate is about trained, finite weights; fix the training run",
                )
    # The mapping itself, not a dict() copy: torch.save keeps the state_dict's ``_metadata``
    # (each module's state-dict version), which load_state_dict hands to modules that convert
    # older layouts (torchvision's MNASNet refuses to load without it).
    return state


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def read_probe_tensors(path: Path, spec_path: Path) -> dict[str, Any]:
    """Every tensor of the probe file by key (safetensors, npz without pickles, or a .pt of
    tensors); a bare tensor is ``{"x": tensor}``."""
    import numpy as np
    import torch

    suffix = path.suffix.lower()
    try:
        if suffix == ".safetensors":
            from safetensors.torch import load_file

            raw: Any = load_file(str(path), device="cpu")
        elif suffix == ".npz":
            with np.load(str(path), allow_pickle=False) as npz:
                raw = {}
                for key in npz.files:
                    arr = npz[key]
                    if arr.dtype.kind not in "fiub":
                        raise InputError(
                            f"probe {path}: array {key!r} has unsupported dtype {arr.dtype}"
                        )
                    raw[key] = torch.from_numpy(np.ascontiguousarray(arr))
        elif suffix in (".pt", ".pth"):
            raw = torch.load(str(path), map_location="cpu", weights_only=True)
        else:
            raise InputError(
                f"probe {path} (named in {spec_path}): unsupported file type {suffix or '(none)'!r}",
                hint="use .safetensors, .npz or .pt holding tensors 'x' and optionally 'target'",
            )
    except InputError:
        raise
    except Exception as exc:
        raise InputError(
            f"probe {path} (named in {spec_path}) cannot be read: {type(exc).__name__}: {first_line(exc)}"
        ) from None
    if isinstance(raw, torch.Tensor):
        raw = {"x": raw}
    if not isinstance(raw, dict) or not all(isinstance(v, torch.Tensor) for v in raw.values()):
        raise InputError(
            f"probe {path} (named in {spec_path}) is not a mapping of names to tensors",
            hint="store the probe batch as tensors, e.g. 'x' with shape (N, ...) and 'target' (N,)",
        )
    return raw


def check_finite(path: Path, key: str, tensor: Any) -> None:
    """A floating probe tensor with a NaN or Inf is an InputError naming the first one."""
    import torch

    if not tensor.is_floating_point():
        return
    bad = ~torch.isfinite(tensor)
    if bool(bad.any()):
        first = [int(i) for i in bad.nonzero()[0].tolist()]
        raise InputError(
            f"probe {path}: {key!r} holds non-finite values, first at index {tuple(first)}"
        )


def check_target(path: Path, target: Any, n: int) -> Any:
    """The probe's ``target``: (N,) labels or (N, ...) label maps, float targets or soft
    labels, as stored (integers as int64); whether float targets fit the spec's loss is
    decided by load_spec."""
    import torch

    if not isinstance(target, torch.Tensor):
        raise InputError(f"probe {path}: 'target' is not a tensor")
    if target.is_complex() or target.dtype == torch.bool:
        raise InputError(
            f"probe {path}: 'target' has dtype {str(target.dtype).removeprefix('torch.')}, "
            "expected integer class labels or float targets"
        )
    # (N,) class labels, or (N, *spatial) label maps for a segmentation loss
    if target.dim() < 1 or target.shape[0] != n:
        raise InputError(
            f"probe {path}: 'target' has shape {tuple(target.shape)}, expected ({n},) "
            f"or ({n}, ...) to match the inputs"
        )
    check_finite(path, "target", target)
    # Negative labels are a loss's "ignore" marker (cross_entropy's ignore_index, -100 by
    # default): kept for the loss; load_spec refuses them as classes for target: label.
    if target.is_floating_point():
        return target.contiguous()
    return target.to(torch.long).contiguous()


def read_probe(path: Path, spec_path: Path) -> tuple[Any, Any]:
    """The single-input probe: ``x`` (N, ...) floating point and the optional ``target``."""
    raw = read_probe_tensors(path, spec_path)
    if "x" not in raw:
        raise InputError(
            f"probe {path} (named in {spec_path}) has no tensor 'x'",
            hint="store the probe batch as 'x' with shape (N, ...) and labels as 'target' (N,), "
            "or name the model's inputs under inputs: (docs/spec.md)",
        )
    x = raw["x"]
    if not x.is_floating_point():
        raise InputError(
            f"probe {path}: 'x' has dtype {str(x.dtype).removeprefix('torch.')}, expected floating point",
            hint="store the inputs as float32; integer token ids and masks are named inputs "
            "with role: embedded or role: fixed (docs/spec.md)",
        )
    if x.dim() < 1 or x.shape[0] < 1:
        raise InputError(
            f"probe {path}: 'x' has shape {tuple(x.shape)}; expected (N, ...) with N >= 1"
        )
    check_finite(path, "x", x)
    target = raw.get("target")
    if target is not None:
        target = check_target(path, target, int(x.shape[0]))
    return x.contiguous(), target
