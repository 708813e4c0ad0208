"""The probe held against a MONAI bundle's ``network_data_format`` (configs/metadata.json).

MONAI describes each network input and output by ``num_channels``, ``spatial_shape``,
``dtype`` and ``value_range``; a spatial size is an int, ``"*"`` (any size) or an expression
in ``n`` and ``p`` (``"16*n"``: a multiple of 16, ``"2**p"``: a power of two), evaluated
with MONAI's own ``safe_eval`` as ``monai.bundle`` does. A probe the network was not made for
certifies a model nobody deploys, so each disagreement is a :class:`~attest.errors.ConfigError`
naming the metadata key (``network_data_format.inputs.image.num_channels``) and both values.

The output is held to its ``num_channels`` and ``dtype`` only, as MONAI's own
``verify_net_in_out`` does: its ``value_range`` describes, in the MONAI Model Zoo, the output
after the bundle's postprocessing (softmax, argmax), not the logits the network returns, and
its ``spatial_shape`` is listed for classification heads that return (N, C); either would
refuse a clean bundle.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attest.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = ["check_inputs", "check_outputs", "size_fits"]

_MAX_P = 64  # exponents tried for "2**p"-style sizes


def size_fits(pattern: Any, size: int) -> bool:
    """Whether ``size`` is a spatial size ``pattern`` allows (some integers p, n >= 1)."""
    if isinstance(pattern, bool):
        raise ValueError(f"{pattern!r} is not a spatial size")
    if isinstance(pattern, int):
        return pattern == size
    if not isinstance(pattern, str):
        raise ValueError(f"{pattern!r} is not a spatial size (an int, '*' or e.g. '16*n')")
    if pattern.strip() == "*":
        return True
    for p in range(1, _MAX_P + 1):
        first, second = _size(pattern, p, 1), _size(pattern, p, 2)
        if first == size:
            return True
        step = second - first
        # linear in n for MONAI's forms ("16*n", "2**p*n"); confirmed by evaluating
        if (
            step > 0
            and size > first
            and (size - first) % step == 0
            and _size(pattern, p, 1 + (size - first) // step) == size
        ):
            return True
        if "p" not in _names(pattern) or first > size:
            break
    return False


def _names(pattern: str) -> set[str]:
    import ast

    try:
        tree = ast.parse(pattern, mode="eval")
    except SyntaxError:
        raise ValueError(f"{pattern!r} is not a spatial size expression") from None
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    if names - {"n", "p"}:
        raise ValueError(f"{pattern!r} uses names other than n and p")
    return names


def _size(pattern: str, p: int, n: int) -> int:
    # MONAI's own evaluator of these expressions, with numpy integers as monai.bundle uses
    # them (no slow big-integer arithmetic from a hostile metadata file)
    import numpy as np
    from monai.utils.safeeval import safe_eval

    _names(pattern)
    try:
        value = safe_eval(pattern, {"p": np.int64(p), "n": np.int64(n)}, rewrite_np=True)
        return int(value)
    except Exception as exc:
        raise ValueError(f"{pattern!r} cannot be evaluated: {exc}") from None


def _where(meta: Path, key: str) -> str:
    return f"{meta}: network_data_format.{key}"


def _section(fmt: Mapping[str, Any], kind: str, meta: Path) -> dict[str, Any]:
    section = fmt.get(kind)
    if not isinstance(section, Mapping) or not section:
        raise ConfigError(
            f"{_where(meta, kind)} is missing or empty: the bundle does not say what its "
            "network takes and returns",
            hint="describe each input and output (num_channels, spatial_shape, dtype, "
            "value_range) as the MONAI bundle specification asks",
        )
    if not all(isinstance(v, Mapping) for v in section.values()):
        raise ConfigError(f"{_where(meta, kind)}: each entry must be a mapping")
    return {str(k): v for k, v in section.items()}


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _torch_dtype(name: str, key: str, meta: Path) -> torch.dtype:
    """The metadata's dtype as MONAI reads it (``get_equivalent_dtype``: numpy's names, so
    ``"float"`` is float64), so that attest and MONAI never disagree on what it means."""
    import torch
    from monai.utils.type_conversion import get_equivalent_dtype

    try:
        found = get_equivalent_dtype(name.removeprefix("torch."), torch.Tensor)  # type: ignore[no-untyped-call]
    except Exception:
        raise ConfigError(f"{_where(meta, key + '.dtype')}: {name!r} is not a dtype") from None
    return found  # type: ignore[no-any-return]


def _check_tensor(
    tensor: torch.Tensor,
    desc: Mapping[str, Any],
    key: str,
    meta: Path,
    what: str,
    *,
    sizes: bool = True,
) -> None:
    """Channels, spatial sizes (with ``sizes``) and dtype of one (N, C, *spatial) tensor
    against ``desc``."""
    shape = tuple(int(s) for s in tensor.shape)
    channels = desc.get("num_channels")
    spatial = desc.get("spatial_shape") if sizes else None
    if channels is not None and (len(shape) < 2 or shape[1] != channels):
        got = shape[1] if len(shape) >= 2 else "none"
        raise ConfigError(
            f"{_where(meta, key + '.num_channels')} is {channels!r}, but the {what} has "
            f"{got} channel(s) (shape {shape}, channels at dim 1)",
            hint=f"store the {what} as (N, {channels}, ...) or fix the metadata",
        )
    if isinstance(spatial, list) and spatial:
        got_spatial = shape[2:] if channels is not None else shape[1:]
        if len(got_spatial) != len(spatial):
            raise ConfigError(
                f"{_where(meta, key + '.spatial_shape')} is {spatial!r} ({len(spatial)} "
                f"spatial dims), but the {what} has shape {shape}",
                hint="a probe is (N, C, *spatial) as the bundle's network takes it",
            )
        for axis, (pattern, size) in enumerate(zip(spatial, got_spatial, strict=True)):
            try:
                fits = size_fits(pattern, size)
            except ValueError as exc:
                raise ConfigError(f"{_where(meta, key + '.spatial_shape')}: {exc}") from None
            if not fits:
                raise ConfigError(
                    f"{_where(meta, key + '.spatial_shape')}[{axis}] is {pattern!r}, but the "
                    f"{what}'s spatial size {axis} is {size} (shape {shape})",
                    hint="crop or pad the probe to a size the network takes ('16*n': a "
                    "multiple of 16, '*': any)",
                )
    dtype = desc.get("dtype")
    if isinstance(dtype, str) and _torch_dtype(dtype, key, meta) != tensor.dtype:
        raise ConfigError(
            f"{_where(meta, key + '.dtype')} is {dtype!r}, but the {what} is "
            f"{_dtype_name(tensor.dtype)}",
            hint=f"store the {what} as {dtype} or fix the metadata",
        )


def _input_for(section: dict[str, Any], named: list[str], meta: Path) -> dict[str, str]:
    """The metadata input each probe tensor is held against: {probe key: metadata key}."""
    if not named:  # the single-input form: model(x)
        if len(section) != 1:
            raise ConfigError(
                f"{_where(meta, 'inputs')} lists {len(section)} inputs "
                f"({', '.join(sorted(section))}), but the probe has one ('x')",
                hint="name the inputs under inputs: in attest.yaml by the metadata's names",
            )
        return {"x": next(iter(section))}
    unknown = [name for name in named if name not in section]
    if unknown:
        raise ConfigError(
            f"{_where(meta, 'inputs')} has no input {unknown[0]!r} (it lists "
            f"{', '.join(sorted(section))})",
            hint="name the spec's inputs as the bundle's metadata does",
        )
    return {name: name for name in named}


def check_inputs(
    fmt: Mapping[str, Any], probe: Mapping[str, torch.Tensor], named: list[str], meta: Path
) -> None:
    """Each probe input against ``network_data_format.inputs``: channels, spatial sizes,
    dtype and value range."""
    section = _section(fmt, "inputs", meta)
    for probe_key, meta_key in _input_for(section, named, meta).items():
        tensor, desc = probe[probe_key], section[meta_key]
        key = f"inputs.{meta_key}"
        _check_tensor(tensor, desc, key, meta, f"probe's {probe_key!r}")
        low_high = desc.get("value_range")
        if isinstance(low_high, list) and len(low_high) == 2 and tensor.numel():
            low, high = low_high
            if isinstance(low, (int, float)) and isinstance(high, (int, float)):
                lo, hi = float(tensor.min()), float(tensor.max())
                if lo < low or hi > high:
                    raise ConfigError(
                        f"{_where(meta, key + '.value_range')} is [{low}, {high}], but the "
                        f"probe's {probe_key!r} spans [{lo:.6g}, {hi:.6g}]",
                        hint="store the probe as the bundle's preprocessing leaves it "
                        "(e.g. intensities scaled to the range)",
                    )


def check_outputs(fmt: Mapping[str, Any], output: Any, meta: Path) -> None:
    """The network's output for one probe example against ``network_data_format.outputs``:
    channels and dtype (a single tensor against the one listed output), what MONAI's own
    ``verify_net_in_out`` checks. Not the output's ``spatial_shape``: the Model Zoo lists one
    for classification heads that return (N, C), and a clean bundle would be refused."""
    import torch

    section = _section(fmt, "outputs", meta)
    if not isinstance(output, torch.Tensor) or len(section) != 1:
        return  # several outputs: which is which is the spec's output:/heads:, not checked here
    name, desc = next(iter(section.items()))
    _check_tensor(output, desc, f"outputs.{name}", meta, "network's output", sizes=False)
