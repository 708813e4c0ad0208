"""The behavioural probe, verifier side: run the certified ONNX file on the probe inputs here.

``attest verify --probe probe.npz`` calls :func:`run_probe` after it has checked that both the
ONNX file and the probe bundle are subjects of the certificate. The probe runs onnxruntime with
the certified settings (:mod:`attest.deployment.runtime`) and compares its outputs with the ones
recorded at certify time:

- bit-exact (raw bytes) when this machine's runtime matches the certified environment
  (onnxruntime version, execution provider, CPU architecture, ISA level and features);
- otherwise within the certified tolerance, elementwise ``|actual - expected| <= atol + rtol *
  |expected|`` (numpy's ``allclose`` rule, with ``atol`` fixed at certify time).

Either way the outcome reports the largest error, in which output and at which index.
Imports numpy and onnxruntime only, never torch (a test runs this module in a fresh
interpreter and asserts it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from attest.core.files import read_bytes_checked
from attest.core.io import sha256_bytes
from attest.deployment.environment import (
    EnvironmentDifference,
    compare_environment,
    local_environment,
)
from attest.deployment.probe_bundle import ProbeBundle, read_probe_bundle
from attest.deployment.runtime import RuntimeSettings, create_session
from attest.errors import InputError

__all__ = ["BIT_EXACT_KEYS", "OutputComparison", "ProbeOutcome", "run_probe"]

# The environment keys that must all match for bit-exact comparison. The thread count is not
# among them: the probe always runs with the certified thread count.
BIT_EXACT_KEYS: tuple[str, ...] = (
    "onnxruntime_version",
    "execution_provider",
    "cpu_arch",
    "cpu_isa",
    "cpu_features",
)
ProbeMode = Literal["bit_exact", "tolerance"]
# An ONNX file is one protobuf message, which cannot exceed 2 GiB (larger models keep their
# weights in external data files).
MAX_ONNX_BYTES = 2**31


@dataclass
class OutputComparison:
    """How one output of the ONNX file on this machine compares with the certified one."""

    name: str
    passed: bool
    bit_exact: bool
    max_abs_error: float
    max_rel_error: float  # max_abs_error relative to the largest expected magnitude
    worst_index: list[int] | None  # where the largest (tolerance-scaled) error occurred
    expected_at_worst: float | None
    actual_at_worst: float | None
    rtol: float
    atol: float
    problem: str | None = None  # shape or dtype mismatch, or missing output

    def sentence(self) -> str:
        """A one-line description for reports."""
        if self.problem:
            return f"output {self.name!r}: {self.problem}"
        where = f" at index {tuple(self.worst_index)}" if self.worst_index is not None else ""
        values = ""
        if self.expected_at_worst is not None:
            values = f" (certified {self.expected_at_worst!r}, here {self.actual_at_worst!r})"
        return (
            f"output {self.name!r}: largest error {self.max_abs_error:.3g}{where}{values}, "
            f"relative {self.max_rel_error:.3g}; tolerance rtol={self.rtol:g} atol={self.atol:.3g}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "name": self.name,
            "passed": self.passed,
            "bit_exact": self.bit_exact,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "worst_index": self.worst_index,
            "expected_at_worst": self.expected_at_worst,
            "actual_at_worst": self.actual_at_worst,
            "rtol": self.rtol,
            "atol": self.atol,
            "problem": self.problem,
        }


@dataclass
class ProbeOutcome:
    """The result of the behavioural probe on this machine."""

    passed: bool
    mode: ProbeMode
    outputs: list[OutputComparison] = field(default_factory=list)
    environment_differences: list[EnvironmentDifference] = field(default_factory=list)
    runtime: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # a mismatch that is not about output values
    wall_s: float = 0.0

    @property
    def largest_error(self) -> OutputComparison | None:
        """The output with the largest tolerance-scaled error (failed outputs first)."""
        if not self.outputs:
            return None
        return max(
            self.outputs,
            key=lambda o: (not o.passed, o.problem is not None, o.max_rel_error, o.max_abs_error),
        )

    @property
    def message(self) -> str:
        """The sentence behind a ``PROBE_MISMATCH`` (or the summary of a pass)."""
        if self.problem:
            return self.problem
        worst = self.largest_error
        detail = worst.sentence() if worst is not None else "no outputs"
        if self.passed:
            how = "bit-exact" if self.mode == "bit_exact" else "within the certified tolerance"
            return f"probe outputs match {how}; {detail}"
        how = (
            "are not bit-exact although the runtime environment matches the certified one"
            if self.mode == "bit_exact"
            else "differ beyond the certified tolerance"
        )
        return f"probe outputs {how}: {detail}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "passed": self.passed,
            "mode": self.mode,
            "message": self.message,
            "outputs": [o.to_dict() for o in self.outputs],
            "environment_differences": [d.to_dict() for d in self.environment_differences],
            "runtime": self.runtime,
            "wall_s": self.wall_s,
        }


def _scalar(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _magnitude(array: np.ndarray) -> float:
    """The largest finite absolute value in ``array`` (0 when there is none)."""
    values = np.abs(array.astype(np.float64))
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else 0.0


def _first_bit_difference(actual: np.ndarray, expected: np.ndarray) -> list[int] | None:
    a = np.ascontiguousarray(actual).reshape(-1).view(np.uint8)
    e = np.ascontiguousarray(expected).reshape(-1).view(np.uint8)
    diff = np.flatnonzero(a != e)
    if diff.size == 0:
        return None
    flat = int(diff[0]) // max(1, expected.dtype.itemsize)
    return [int(i) for i in np.unravel_index(flat, expected.shape)] if expected.shape else []


def compare_output(
    name: str, actual: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float, exact: bool
) -> OutputComparison:
    """Compare one output: raw bytes when ``exact``, else ``|a - e| <= atol + rtol * |e|``."""
    base = {"name": name, "rtol": rtol, "atol": atol}
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return OutputComparison(
            passed=False,
            bit_exact=False,
            max_abs_error=float("inf"),
            max_rel_error=float("inf"),
            worst_index=None,
            expected_at_worst=None,
            actual_at_worst=None,
            problem=(
                f"shape/dtype {tuple(actual.shape)} {actual.dtype} here, certified "
                f"{tuple(expected.shape)} {expected.dtype}"
            ),
            **base,  # type: ignore[arg-type]
        )
    bit_exact = actual.tobytes() == expected.tobytes()
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(a - e)
        # NaN in the same place on both sides, or the same infinity, is no error.
        same = (a == e) | (np.isnan(a) & np.isnan(e))
        err = np.where(same, 0.0, err)
        err = np.where(np.isnan(err), np.inf, err)
        allowed = atol + rtol * np.abs(np.where(np.isfinite(e), e, 0.0))
        scaled = np.where(
            err == 0, 0.0, np.divide(err, allowed, where=allowed > 0, out=np.full_like(err, np.inf))
        )
    max_abs = float(err.max()) if err.size else 0.0
    scale = _magnitude(e)
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    within = bool(np.all(scaled <= 1.0))
    passed = bit_exact if exact else within
    worst: list[int] | None = None
    if err.size and max_abs > 0:
        flat = int(np.argmax(scaled if not within else err))
        worst = [int(i) for i in np.unravel_index(flat, e.shape)]
    elif not bit_exact:  # equal values, different bytes (-0.0 vs 0.0, NaN payloads)
        worst = _first_bit_difference(actual, expected)
    exp_v = _scalar(expected[tuple(worst)]) if worst is not None else None
    act_v = _scalar(actual[tuple(worst)]) if worst is not None else None
    return OutputComparison(
        passed=passed,
        bit_exact=bit_exact,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        worst_index=worst,
        expected_at_worst=exp_v,
        actual_at_worst=act_v,
        **base,  # type: ignore[arg-type]
    )


def _session_inputs(session: Any, bundle: ProbeBundle) -> str | None:
    names = [i.name for i in session.get_inputs()]
    if names != bundle.input_names:
        return f"the ONNX file's inputs {names} are not the probe's inputs {bundle.input_names}"
    out_names = [o.name for o in session.get_outputs()]
    if out_names != bundle.output_names:
        return (
            f"the ONNX file's outputs {out_names} are not the probe's outputs {bundle.output_names}"
        )
    return None


def run_probe(
    onnx: str | Path | bytes,
    probe: str | Path | bytes,
    *,
    certified_env: dict[str, Any] | None = None,
    tolerance: float | None = None,
    onnx_sha256: str | None = None,
    external_data: dict[str, bytes] | None = None,
) -> ProbeOutcome:
    """Run the ONNX model ``onnx`` on the probe bundle's inputs and compare with the certified
    outputs.

    ``onnx`` and ``probe`` are the files' bytes (the verifier passes exactly the bytes it
    hashed, so nothing is re-read from a path that may have changed since) or paths (read
    once here). ``external_data`` maps each external-data location the model names to its
    (hashed) bytes. ``certified_env`` is the deployment runtime from the (verified)
    certificate; the environment recorded in the bundle (itself a certificate subject) takes
    precedence for the keys it records, since that is where the expected outputs were
    produced. ``tolerance``, if given, replaces every output's certified ``rtol`` (and
    ``atol`` becomes ``tolerance`` times the largest certified magnitude of that output).
    ``onnx_sha256`` skips hashing bytes the caller already hashed.

    A bundle or model that cannot be read raises :class:`InputError`; a mismatch is a
    :class:`ProbeOutcome` with ``passed=False``.
    """
    started = time.perf_counter()
    onnx_name = "the ONNX model" if isinstance(onnx, bytes) else Path(onnx).name
    model = (
        onnx
        if isinstance(onnx, bytes)
        else read_bytes_checked(onnx, what="ONNX model", max_bytes=MAX_ONNX_BYTES)
    )
    bundle = read_probe_bundle(probe)
    digest = onnx_sha256 or sha256_bytes(model)
    certified = {**(certified_env or {}), **bundle.environment}
    runtime = bundle.runtime
    try:
        threads = int(runtime.get("intra_op_threads", 1))
        settings = RuntimeSettings(
            intra_op_threads=threads,
            graph_optimization_level=str(runtime.get("graph_optimization_level", "all")),
            execution_provider=str(runtime.get("execution_provider", "CPUExecutionProvider")),
        )
    except (TypeError, ValueError):
        raise InputError(f"probe bundle: invalid runtime settings {runtime}") from None
    local = local_environment(threads=threads, execution_provider=settings.execution_provider)
    differences = compare_environment(
        {k: v for k, v in certified.items() if k in BIT_EXACT_KEYS}, local, fatal=()
    )
    mode: ProbeMode = "tolerance" if differences else "bit_exact"
    if digest != bundle.onnx_sha256:
        return ProbeOutcome(
            passed=False,
            mode=mode,
            environment_differences=differences,
            runtime=settings.to_dict(),
            problem=(
                f"the probe bundle was produced from an ONNX file with sha256 "
                f"{bundle.onnx_sha256[:16]}..., not {onnx_name} ({digest[:16]}...)"
            ),
            wall_s=time.perf_counter() - started,
        )
    if local["execution_provider"] is None:
        # The certified provider is missing here; run on the CPU and compare within tolerance.
        settings = RuntimeSettings(
            intra_op_threads=threads,
            graph_optimization_level=settings.graph_optimization_level,
        )
    session = create_session(model, settings, external_data=external_data)
    problem = _session_inputs(session, bundle)
    if problem is not None:
        return ProbeOutcome(
            passed=False,
            mode=mode,
            environment_differences=differences,
            runtime=settings.to_dict(),
            problem=problem,
            wall_s=time.perf_counter() - started,
        )
    try:
        actual = session.run(None, dict(zip(bundle.input_names, bundle.inputs, strict=True)))
    except Exception as exc:  # onnxruntime's pybind error types share no public base
        raise InputError(
            f"onnxruntime failed to run {onnx_name} on the probe inputs: "
            f"{type(exc).__name__}: {str(exc).strip()[:500]}"
        ) from None
    comparisons: list[OutputComparison] = []
    for name, got, want in zip(bundle.output_names, actual, bundle.outputs, strict=True):
        tol = bundle.tolerances[name]
        rtol, atol = tol["rtol"], tol["atol"]
        if tolerance is not None:
            rtol, atol = float(tolerance), float(tolerance) * _magnitude(want)
        comparisons.append(
            compare_output(
                name, np.asarray(got), want, rtol=rtol, atol=atol, exact=mode == "bit_exact"
            )
        )
    return ProbeOutcome(
        passed=all(c.passed for c in comparisons),
        mode=mode,
        outputs=comparisons,
        environment_differences=differences,
        runtime=settings.to_dict(),
        wall_s=time.perf_counter() - started,
    )
