"""Compact storage of IG attributions in the evidence file, and its decoder (numpy only, no
torch: the report imports it on machines without torch).

The report draws heat maps beside the inputs from these. Format ``npz+base64``: a compressed
``.npz`` (read back with ``allow_pickle=False``) of float16 arrays normalised per input, with
their float64 scales, base64-encoded so it fits in JSON, and bounded in size.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np

from attest.errors import InputError

__all__ = [
    "ATTRIBUTIONS_FORMAT",
    "DEFAULT_ATTRIBUTION_CAP_BYTES",
    "decode_attributions",
    "encode_attributions",
]

ATTRIBUTIONS_FORMAT = "npz+base64"
DEFAULT_ATTRIBUTION_CAP_BYTES = 1 << 20


def _pool(array: np.ndarray, factor: int, reduce: str) -> np.ndarray:
    """Pool the trailing spatial dims (dims >= 2; dim 1 of a (N, D) batch) by ``factor``."""
    first = 1 if array.ndim == 2 else 2
    out = array
    for dim in range(first, array.ndim):
        size = out.shape[dim] // factor * factor
        if size == 0:
            continue
        out = np.take(out, np.arange(size), axis=dim)
        shape = (*out.shape[:dim], size // factor, factor, *out.shape[dim + 1 :])
        out = out.reshape(shape)
        out = out.sum(axis=dim + 1) if reduce == "sum" else out.mean(axis=dim + 1)
    return out


def _pack(arrays: dict[str, np.ndarray]) -> str:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, allow_pickle=False, **arrays)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def encode_attributions(
    attributions: np.ndarray,
    inputs: np.ndarray,
    *,
    input_indices: list[int] | None = None,
    max_bytes: int = DEFAULT_ATTRIBUTION_CAP_BYTES,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Attributions and their inputs as compact JSON-safe data for the evidence file.

    float16 after dividing each input's attributions (and inputs) by its largest magnitude
    (the scales are stored in float64), in a compressed npz, base64. While the text is over
    ``max_bytes``, spatial dims are pooled by 2 (sum for attributions, which keeps their
    total, mean for inputs), then inputs are dropped from the end. Decode with
    :func:`decode_attributions`.
    """
    attr = np.asarray(attributions, dtype=np.float64)
    x = np.asarray(inputs, dtype=np.float64)
    indices = list(range(attr.shape[0])) if input_indices is None else list(input_indices)
    factor = 1
    while True:
        a, xi = (attr, x) if factor == 1 else (_pool(attr, factor, "sum"), _pool(x, factor, "mean"))
        a, xi = a[: len(indices)], xi[: len(indices)]
        a_scale = np.abs(a).reshape(len(a), -1).max(axis=1, initial=0.0)
        x_scale = np.abs(xi).reshape(len(xi), -1).max(axis=1, initial=0.0)
        shape = (-1,) + (1,) * (a.ndim - 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            a_norm = np.where(a_scale.reshape(shape) > 0, a / a_scale.reshape(shape), 0.0)
            x_norm = np.where(x_scale.reshape(shape) > 0, xi / x_scale.reshape(shape), 0.0)
        data = _pack(
            {
                "attributions": a_norm.astype(np.float16),
                "attribution_scale": a_scale,
                "inputs": x_norm.astype(np.float16),
                "input_scale": x_scale,
                "input_indices": np.asarray(indices, dtype=np.int64),
            }
        )
        if len(data) <= max_bytes or len(indices) == 0:
            break
        spatial = a.shape[1:] if a.ndim == 2 else a.shape[2:]
        if max(spatial, default=1) >= 4:
            factor *= 2
        else:
            indices = indices[:-1]
    return {
        "format": ATTRIBUTIONS_FORMAT,
        "dtype": "float16",
        "shape": list(a.shape),
        "original_shape": list(attr.shape),
        "pooling": factor,
        "input_indices": indices,
        "data": data,
        **(extra or {}),
    }


def decode_attributions(stored: dict[str, Any] | None) -> dict[str, np.ndarray]:
    """The arrays of :func:`encode_attributions` (``Evidence.attributions``), float64.

    Returns ``attributions`` and ``inputs`` (N, ...) rescaled to their stored values (pooled
    when ``stored["pooling"] > 1``) and ``input_indices`` (N,). Empty when nothing is stored.
    """
    if not stored:
        return {}
    if stored.get("format") != ATTRIBUTIONS_FORMAT:
        raise InputError(
            f"unknown attribution format {stored.get('format')!r}; expected {ATTRIBUTIONS_FORMAT!r}"
        )
    try:
        raw = base64.b64decode(stored["data"], validate=True)
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (KeyError, ValueError, OSError) as exc:
        raise InputError(f"stored attributions are unreadable: {exc}") from None
    shape = (-1,) + (1,) * (arrays["attributions"].ndim - 1)
    return {
        "attributions": arrays["attributions"].astype(np.float64)
        * arrays["attribution_scale"].reshape(shape),
        "inputs": arrays["inputs"].astype(np.float64) * arrays["input_scale"].reshape(shape),
        "input_indices": arrays["input_indices"],
    }
