"""The probe bundle (``probe.npz``): probe inputs and the deployed runtime's outputs at certify time.

A plain ``.npz`` (numpy's zip of ``.npy`` arrays), read with ``allow_pickle=False`` so a bundle
can hold numbers only, never code. Layout:

- ``input_<i>`` / ``output_<i>``: the i-th ONNX graph input / output, in graph order;
- ``meta``: UTF-8 JSON bytes (a uint8 array) with the format tag, the input and output names,
  per-output tolerances ``{"rtol", "atol"}``, the sha256 of the ONNX file the outputs came
  from, the runtime settings (:class:`attest.deployment.runtime.RuntimeSettings`) and the
  environment (onnxruntime version, execution provider, CPU ISA, thread count) they were
  produced in.

The bundle is a subject of the certificate: the verifier checks its digest before reading it.
Imports numpy, never torch.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attest.core.io import StrictJSONError, atomic_write_bytes, loads_strict, sha256_bytes
from attest.errors import InputError

__all__ = ["PROBE_FORMAT", "ProbeBundle", "read_probe_bundle", "write_probe_bundle"]

PROBE_FORMAT = "attest-probe/1"
_MAX_META_BYTES = 1 << 20
_ALLOWED_KINDS = frozenset("biuf")  # bool, signed, unsigned, floating


@dataclass
class ProbeBundle:
    """The contents of a probe bundle; names and arrays are in ONNX graph order."""

    input_names: list[str]
    inputs: list[np.ndarray]
    output_names: list[str]
    outputs: list[np.ndarray]
    tolerances: dict[str, dict[str, float]]
    onnx_sha256: str
    runtime: dict[str, Any]
    environment: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)

    def meta(self) -> dict[str, Any]:
        """The JSON metadata stored next to the arrays."""
        return {
            "format": PROBE_FORMAT,
            "input_names": list(self.input_names),
            "output_names": list(self.output_names),
            "tolerances": {k: dict(v) for k, v in self.tolerances.items()},
            "onnx_sha256": self.onnx_sha256,
            "runtime": dict(self.runtime),
            "environment": dict(self.environment),
            "extra": dict(self.extra),
        }


def _encode_meta(meta: dict[str, Any]) -> np.ndarray:
    import json  # meta is unsigned data inside a signed-digest file; plain dumps is enough

    text = json.dumps(meta, sort_keys=True, allow_nan=False, ensure_ascii=False)
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()


def write_probe_bundle(path: str | Path, bundle: ProbeBundle) -> str:
    """Write ``bundle`` atomically to ``path``; returns the file's sha256 (hex)."""
    if len(bundle.inputs) != len(bundle.input_names) or len(bundle.outputs) != len(
        bundle.output_names
    ):
        raise InputError("probe bundle: names and arrays differ in count")
    missing = [name for name in bundle.output_names if name not in bundle.tolerances]
    if missing:
        raise InputError(f"probe bundle: no tolerance for outputs {missing}")
    arrays: dict[str, np.ndarray] = {"meta": _encode_meta(bundle.meta())}
    for i, array in enumerate(bundle.inputs):
        arrays[f"input_{i}"] = np.ascontiguousarray(array)
    for i, array in enumerate(bundle.outputs):
        arrays[f"output_{i}"] = np.ascontiguousarray(array)
    for key, array in arrays.items():
        if array.dtype.kind not in _ALLOWED_KINDS:
            raise InputError(f"probe bundle: array {key} has unsupported dtype {array.dtype}")
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **arrays)
    data = buffer.getvalue()
    atomic_write_bytes(path, data)
    return sha256_bytes(data)


def _malformed(path: Path, what: str) -> InputError:
    return InputError(
        f"probe bundle {path} is malformed: {what}",
        hint="use the probe.npz written by attest certify, unmodified",
    )


def _str_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _tolerances(value: Any, outputs: list[str]) -> dict[str, dict[str, float]] | None:
    if not isinstance(value, dict) or set(value) != set(outputs):
        return None
    out: dict[str, dict[str, float]] = {}
    for name, tol in value.items():
        if not isinstance(tol, dict) or set(tol) != {"rtol", "atol"}:
            return None
        rtol, atol = tol["rtol"], tol["atol"]
        if isinstance(rtol, bool) or isinstance(atol, bool):
            return None
        if not isinstance(rtol, int | float) or not isinstance(atol, int | float):
            return None
        if rtol < 0 or atol < 0:
            return None
        out[name] = {"rtol": float(rtol), "atol": float(atol)}
    return out


def read_probe_bundle(source: str | Path | bytes) -> ProbeBundle:
    """Read a bundle (a path, or the file's bytes) with ``allow_pickle=False``; anything
    unexpected is an :class:`InputError`."""
    p = Path("<bytes>") if isinstance(source, bytes) else Path(source)
    try:
        npz = np.load(io.BytesIO(source) if isinstance(source, bytes) else p, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"probe bundle {p} does not exist", hint="check the path") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise _malformed(p, f"not a numpy .npz file ({exc})") from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise _malformed(p, "a single .npy array, expected an .npz bundle")
    try:
        with npz:
            keys = set(npz.files)
            if "meta" not in keys:
                raise _malformed(p, "no 'meta' entry")
            meta_array = npz["meta"]
            if meta_array.dtype != np.uint8 or meta_array.ndim != 1:
                raise _malformed(p, "'meta' is not a byte array")
            if meta_array.size > _MAX_META_BYTES:
                raise _malformed(p, "'meta' is too large")
            try:
                meta = loads_strict(meta_array.tobytes())
            except StrictJSONError as exc:
                raise _malformed(p, f"'meta' is not valid JSON ({exc})") from None
            if not isinstance(meta, dict) or meta.get("format") != PROBE_FORMAT:
                raise _malformed(p, f"'meta' format is not {PROBE_FORMAT}")
            input_names = _str_list(meta.get("input_names"))
            output_names = _str_list(meta.get("output_names"))
            if input_names is None or output_names is None or not output_names:
                raise _malformed(p, "input or output names missing")
            tolerances = _tolerances(meta.get("tolerances"), output_names)
            if tolerances is None:
                raise _malformed(p, "tolerances missing or invalid")
            onnx_sha = meta.get("onnx_sha256")
            runtime = meta.get("runtime")
            environment = meta.get("environment")
            if not isinstance(onnx_sha, str) or not isinstance(runtime, dict):
                raise _malformed(p, "ONNX digest or runtime settings missing")
            if not isinstance(environment, dict):
                raise _malformed(p, "environment missing")
            expected_keys = {"meta"}
            expected_keys |= {f"input_{i}" for i in range(len(input_names))}
            expected_keys |= {f"output_{i}" for i in range(len(output_names))}
            if keys != expected_keys:
                raise _malformed(p, f"entries {sorted(keys ^ expected_keys)} unexpected or missing")
            inputs = [npz[f"input_{i}"] for i in range(len(input_names))]
            outputs = [npz[f"output_{i}"] for i in range(len(output_names))]
    except InputError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as exc:
        # ValueError covers object arrays refused by allow_pickle=False and corrupt headers.
        raise _malformed(p, f"{type(exc).__name__}: {exc}") from None
    for key, array in [
        *zip(input_names, inputs, strict=True),
        *zip(output_names, outputs, strict=True),
    ]:
        if array.dtype.kind not in _ALLOWED_KINDS:
            raise _malformed(p, f"array {key!r} has unsupported dtype {array.dtype}")
    extra = meta.get("extra")
    return ProbeBundle(
        input_names=input_names,
        inputs=inputs,
        output_names=output_names,
        outputs=outputs,
        tolerances=tolerances,
        onnx_sha256=onnx_sha,
        runtime=runtime,
        environment=environment,
        extra=extra if isinstance(extra, dict) else {},
    )
