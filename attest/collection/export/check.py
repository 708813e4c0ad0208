"""The ``export`` check: the exported ONNX graph under onnxruntime against eager PyTorch.

With ``export: onnx`` in the spec this check exports the model (:func:`export_onnx`), runs the
file with onnxruntime in the certified deterministic configuration on the probe inputs and
compares each output with eager PyTorch in the deployed precision and with a float64 eager
run. It writes the ONNX file and the probe bundle and leaves, in ``ctx.export`` (an
:class:`~attest.evidence.model.ExportRecord`, which the collector puts into the evidence), what
the certify pipeline binds into the certificate (see :func:`run`).

Errors are normwise: ``max_abs_error`` is the largest elementwise difference and
``max_rel_error`` that divided by the largest magnitude of the reference output. An output
passes when its error against eager is within ``rtol`` (1e-4 in float32, 1e-2 in float16;
``CheckSettings.extra["export_rtol"]`` overrides) and its error against float64 is within
``rtol`` plus eager's own error against float64 (the triangle-inequality bound: the
deployed graph may not be further from the exact answer than eager plus the allowed gap).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch
from torch.utils import _pytree as pytree

from attest.collection.context import CollectContext
from attest.collection.export.deployed_call import eager_call, input_names
from attest.collection.export.onnx_export import ExportResult, export_onnx
from attest.deployment.environment import (
    COMPARED_KEYS,
    DEFAULT_FATAL,
    deployment_envelope,
    local_environment,
)
from attest.deployment.probe_bundle import ProbeBundle, write_probe_bundle
from attest.deployment.runtime import RuntimeSettings, create_session
from attest.errors import AttestError
from attest.evidence.model import (
    CheckItem,
    CheckResult,
    CheckStatus,
    ExportDeployment,
    ExportedFile,
    ExportRecord,
    OnnxMapping,
    OnnxNode,
    Subject,
)

__all__ = ["DEFAULT_RTOL", "ONNX_FILE_NAME", "PROBE_FILE_NAME", "run"]

CHECK_ID: Final = "export"
ONNX_FILE_NAME = "model.onnx"
PROBE_FILE_NAME = "probe.npz"
DEFAULT_RTOL: dict[str, float] = {"float32": 1e-4, "float16": 1e-2}
_NUMPY_DTYPES = {torch.float32, torch.float16, torch.float64}


def _output_dir(ctx: CollectContext) -> Path:
    """Where model.onnx and probe.npz go: ``ctx.output_dir`` or ``settings.extra["output_dir"]``
    when the caller names one, else a new temporary folder (recorded in the evidence;
    ``attest certify`` copies the files next to the certificate)."""
    chosen = ctx.output_dir or ctx.settings.extra.get("output_dir")
    if chosen:
        return Path(chosen)
    return Path(tempfile.mkdtemp(prefix="attest-export-"))


def _probe_file_name(ctx: CollectContext) -> str:
    """``probe.npz``, unless the spec's own probe inputs already carry that name (both become
    certificate subjects, and the output folder may be the spec's)."""
    inputs_file = ctx.spec.artifacts.get("probe")
    if inputs_file is not None and Path(inputs_file).name == PROBE_FILE_NAME:
        return "probe_bundle.npz"
    return PROBE_FILE_NAME


def _flat_tensors(output: Any) -> list[torch.Tensor]:
    leaves, _spec = pytree.tree_flatten(output)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _errors(actual: np.ndarray, reference: np.ndarray) -> tuple[float, float, list[int] | None]:
    """(max abs error, max abs error / max |reference|, index of the max abs error)."""
    a = actual.astype(np.float64)
    r = reference.astype(np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.abs(a - r)
    diff = np.where(np.isnan(a) & np.isnan(r), 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    if diff.size == 0:
        return 0.0, 0.0, None
    flat = int(np.argmax(diff))
    max_abs = float(diff.reshape(-1)[flat])
    finite = np.abs(r[np.isfinite(r)])
    scale = float(finite.max()) if finite.size else 0.0
    rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    index = [int(i) for i in np.unravel_index(flat, r.shape)] if r.shape else []
    return max_abs, rel, index


def _not_computed(
    reason: str, started: float, *, status: CheckStatus = "not_computed", **parameters: Any
) -> list[CheckResult]:
    return [
        CheckResult(
            check=CHECK_ID,
            status=status,
            reason=reason,
            parameters=parameters,
            duration_s=time.perf_counter() - started,
        )
    ]


def _failure_result(
    result: ExportResult, parameters: dict[str, Any], started: float
) -> CheckResult:
    failure = result.failure
    assert failure is not None
    subject = (
        Subject(kind="module", module=failure.module)
        if failure.module is not None
        else Subject(kind="model")
    )
    item = CheckItem(
        subject=subject,
        status="fail",
        metrics={"exported": False, "failure_kind": failure.kind},
        message=failure.sentence(),
        details=failure.to_dict(),
    )
    return CheckResult(
        check=CHECK_ID,
        status="computed",
        parameters=parameters,
        summary={"exported": False, "failure_kind": failure.kind},
        items=[item],
        duration_s=time.perf_counter() - started,
    )


def _runtime_failure(message: str, parameters: dict[str, Any], started: float) -> CheckResult:
    return CheckResult(
        check=CHECK_ID,
        status="computed",
        parameters=parameters,
        summary={"exported": True, "onnxruntime_ok": False},
        items=[
            CheckItem(
                subject=Subject(kind="model"),
                status="fail",
                metrics={"exported": True, "onnxruntime_ok": False},
                message=message,
            )
        ],
        duration_s=time.perf_counter() - started,
    )


@dataclass
class _Runs:
    """The probe inputs and what eager PyTorch and onnxruntime computed from them."""

    feed: list[np.ndarray]
    eager: list[torch.Tensor]
    exact: list[torch.Tensor | None]  # float64 eager; None each when that run raised
    float64_problem: str | None
    ort_outputs: list[np.ndarray]
    repeat_bit_exact: bool


class _RuntimeProblem(Exception):
    """A run of the exported model or of eager PyTorch that cannot be compared: the message
    becomes the check's failing item."""


def run(ctx: CollectContext) -> list[CheckResult]:
    """Export, compare and write the deployment artifacts; see the module docstring.

    On success ``ctx.export`` holds the :class:`~attest.evidence.model.ExportRecord` (the
    collector copies it into :attr:`Evidence.export <attest.evidence.model.Evidence.export>`):
    the ONNX file and the probe bundle (name, path, sha256), the deployment envelope
    (``targets``, ``runtime`` = the environment and session settings, ``fatal_differences``)
    and the node mapping (file, digest, opset, inputs, outputs, exporter versions, tolerances
    and one entry per deployed node). When the model could not be exported or probed it stays
    None and the check's items say why.
    """
    started = time.perf_counter()
    spec = ctx.spec
    if spec.export != "onnx":
        return _not_computed("spec does not request export", started, status="not_applicable")
    precision = spec.precision
    if precision not in DEFAULT_RTOL:
        return _not_computed(
            f"precision {precision} cannot be probed: numpy and onnxruntime's CPU provider "
            "have no bfloat16 support; deploy in float32 or float16",
            started,
            precision=precision,
        )
    rtol = float(ctx.settings.extra.get("export_rtol", DEFAULT_RTOL[precision]))
    settings = RuntimeSettings(intra_op_threads=max(1, int(spec.threads)))
    parameters: dict[str, Any] = {
        "precision": precision,
        "rtol": rtol,
        "error_norm": "max abs error / max |reference|",
        "runtime": settings.to_dict(),
        "probe_examples": int(spec.inputs.shape[0]),
    }
    out_dir = _output_dir(ctx)
    onnx_path = out_dir / ONNX_FILE_NAME
    deployed, args = eager_call(ctx)
    names = input_names(ctx) if ctx.spec.call is not None and ctx.spec.call.flat else None
    result = export_onnx(deployed, args, onnx_path, operators=ctx.operators, input_names=names)
    parameters["exporter"] = result.exporter
    if not result.ok and spec.signatures is not None and result.failure is not None:
        # ``dynamic:`` (packed sequences, per-length paths): a graph the exporter cannot
        # trace for every length is not offered; the certificate says why, binds no ONNX
        # file, and no server-side probe is written (docs/spec.md, "Variable shapes").
        return _not_computed(
            "the model with dynamic inputs could not be exported for every shape signature "
            f"({result.failure.sentence()}); the certificate binds no ONNX model and offers "
            "no server-side probe",
            started,
            status="not_applicable",
            **parameters,
        )
    if not result.ok:
        return [_failure_result(result, parameters, started)]
    parameters["opset"] = result.opset
    parameters["dynamic_batch"] = result.dynamic_batch
    try:
        runs = _run_models(ctx, result, onnx_path, settings, parameters)
    except _RuntimeProblem as problem:
        return [_runtime_failure(str(problem), parameters, started)]

    items, tolerances, worst_eager, worst_exact = _compare_outputs(
        result, runs, rtol=rtol, precision=precision
    )
    if len(tolerances) != len(runs.ort_outputs):  # an output's shape differs: nothing to probe
        return [
            CheckResult(
                check=CHECK_ID,
                status="computed",
                parameters=parameters,
                summary={"exported": True, "outputs": len(runs.ort_outputs)},
                items=items,
                duration_s=time.perf_counter() - started,
            )
        ]
    items.append(_repeatability_item(runs.repeat_bit_exact))
    ctx.export = _write_release(ctx, result, runs, tolerances, settings, out_dir)
    summary: dict[str, Any] = {
        "exported": True,
        "outputs": len(runs.ort_outputs),
        "max_rel_error_vs_eager": worst_eager,
        "max_rel_error_vs_float64": worst_exact if runs.float64_problem is None else None,
        "onnxruntime_repeat_bit_exact": runs.repeat_bit_exact,
        **result.mapping_summary(),
    }
    return [
        CheckResult(
            check=CHECK_ID,
            status="computed",
            parameters=parameters,
            summary=summary,
            items=items,
            duration_s=time.perf_counter() - started,
        )
    ]


def _run_models(
    ctx: CollectContext,
    result: ExportResult,
    onnx_path: Path,
    settings: RuntimeSettings,
    parameters: dict[str, Any],
) -> _Runs:
    """Eager PyTorch in the deployed precision and in float64, and the ONNX file twice with
    onnxruntime, on the probe inputs. A float64 run that raises is recorded in ``parameters``
    (the outputs are then judged against eager alone); any other failure raises
    :class:`_RuntimeProblem`."""
    model, args = eager_call(ctx)
    try:
        with torch.no_grad():
            eager = _flat_tensors(model(*args))
    except Exception as exc:  # the model's own code: report, never crash the collection
        raise _RuntimeProblem(
            f"eager PyTorch raised on the probe inputs: {type(exc).__name__}: {exc}"
        ) from exc
    exact: list[torch.Tensor | None]
    float64_problem: str | None = None
    try:
        with torch.no_grad():
            model64, args64 = eager_call(ctx, torch.float64)
            exact = list(_flat_tensors(model64(*args64)))
    except Exception as exc:  # e.g. a custom kernel without a float64 implementation
        float64_problem = f"the float64 reference run raised {type(exc).__name__}: {exc}"
        exact = [None] * len(eager)
    if float64_problem is not None:
        parameters["float64_reference"] = float64_problem
    feed = [a.detach().cpu().numpy() for a in args]
    if len(result.input_names) != len(feed):
        raise _RuntimeProblem(
            f"the ONNX graph takes {len(result.input_names)} inputs, the probe has {len(feed)}"
        )
    ort_outputs, repeat = _run_onnxruntime(onnx_path, settings, result.input_names, feed)
    if len(ort_outputs) != len(eager) or len(eager) != len(exact):
        raise _RuntimeProblem(
            f"the ONNX graph has {len(ort_outputs)} outputs, eager PyTorch {len(eager)}"
        )
    repeat_bit_exact = all(
        a.tobytes() == b.tobytes() for a, b in zip(ort_outputs, repeat, strict=True)
    )
    return _Runs(feed, eager, exact, float64_problem, ort_outputs, repeat_bit_exact)


def _run_onnxruntime(
    onnx_path: Path, settings: RuntimeSettings, input_names: list[str], feed: list[np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Two runs of the ONNX file with the certified settings (their outputs, to compare)."""
    try:
        session = create_session(onnx_path, settings)
        first = [
            np.asarray(o) for o in session.run(None, dict(zip(input_names, feed, strict=True)))
        ]
        repeat = [
            np.asarray(o) for o in session.run(None, dict(zip(input_names, feed, strict=True)))
        ]
    except AttestError as exc:
        raise _RuntimeProblem(exc.message) from exc
    except Exception as exc:  # onnxruntime's pybind error types share no public base
        raise _RuntimeProblem(
            f"onnxruntime failed on the exported model: {type(exc).__name__}: {exc}"
        ) from exc
    return first, repeat


def _compare_outputs(
    result: ExportResult, runs: _Runs, *, rtol: float, precision: str
) -> tuple[list[CheckItem], dict[str, dict[str, float]], float, float]:
    """One item per output (onnxruntime against eager and against float64), the probe
    bundle's tolerances of the outputs whose shapes match, and the worst relative errors
    (against eager, against float64)."""
    items: list[CheckItem] = []
    tolerances: dict[str, dict[str, float]] = {}
    worst_eager = 0.0
    worst_exact = 0.0
    for index, (name, got, ref, ref64) in enumerate(
        zip(result.output_names, runs.ort_outputs, runs.eager, runs.exact, strict=True)
    ):
        ref_np = (
            ref.detach().cpu().float().numpy()
            if ref.dtype not in _NUMPY_DTYPES
            else ref.detach().cpu().numpy()
        )
        ref64_np = ref64.detach().cpu().double().numpy() if ref64 is not None else None
        if got.shape != ref_np.shape:
            items.append(
                CheckItem(
                    subject=Subject(kind="output", name=name, input_index=None),
                    status="fail",
                    metrics={"shape_matches": False},
                    message=f"output {name}: onnxruntime shape {got.shape}, eager {tuple(ref_np.shape)}",
                )
            )
            continue
        abs_eager, rel_eager, where = _errors(got, ref_np)
        abs_exact: float | None = None
        rel_exact: float | None = None
        rel_eager_exact: float | None = None
        ok = rel_eager <= rtol
        if ref64_np is not None:
            abs_exact, rel_exact, _ = _errors(got, ref64_np)
            _, rel_eager_exact, _ = _errors(ref_np, ref64_np)
            ok = ok and rel_exact <= rtol + rel_eager_exact
            worst_exact = max(worst_exact, rel_exact)
        worst_eager = max(worst_eager, rel_eager)
        finite = np.abs(got[np.isfinite(got)].astype(np.float64))
        magnitude = float(finite.max()) if finite.size else 0.0
        tolerances[name] = {"rtol": rtol, "atol": rtol * magnitude}
        items.append(
            CheckItem(
                subject=Subject(kind="output", name=name, indices=where),
                status="pass" if ok else "fail",
                metrics={
                    "max_abs_error_vs_eager": abs_eager,
                    "max_rel_error_vs_eager": rel_eager,
                    "max_abs_error_vs_float64": abs_exact,
                    "max_rel_error_vs_float64": rel_exact,
                    "eager_rel_error_vs_float64": rel_eager_exact,
                    "rtol": rtol,
                },
                message=(
                    f"output {index} ({name}): onnxruntime vs eager {precision} rel {rel_eager:.3g}, "
                    + (
                        f"vs float64 rel {rel_exact:.3g} (eager vs float64 {rel_eager_exact:.3g}); "
                        if rel_exact is not None
                        else f"vs float64 not computed ({runs.float64_problem}); "
                    )
                    + f"tolerance {rtol:g}"
                ),
                details={"shape": list(got.shape), "dtype": str(got.dtype)},
            )
        )
    return items, tolerances, worst_eager, worst_exact


def _repeatability_item(repeat_bit_exact: bool) -> CheckItem:
    return CheckItem(
        subject=Subject(kind="model", name="onnxruntime repeatability"),
        status="pass" if repeat_bit_exact else "fail",
        metrics={"onnxruntime_repeat_bit_exact": repeat_bit_exact},
        message=(
            "two onnxruntime runs with the certified settings are bit-exact"
            if repeat_bit_exact
            else "two onnxruntime runs with the certified settings differ: the probe cannot be bit-exact"
        ),
    )


def _write_release(
    ctx: CollectContext,
    result: ExportResult,
    runs: _Runs,
    tolerances: dict[str, dict[str, float]],
    settings: RuntimeSettings,
    out_dir: Path,
) -> ExportRecord:
    """Write the probe bundle next to the ONNX file and describe both for the certificate:
    the deployment envelope (the certified runtime and the environment the probe outputs were
    produced in) and the node mapping."""
    spec = ctx.spec
    fatal = [str(k) for k in ctx.settings.extra.get("environment_fatal", DEFAULT_FATAL)]
    deployment = deployment_envelope(
        settings.to_dict(),
        local_environment(
            threads=settings.intra_op_threads, execution_provider=settings.execution_provider
        ),
        fatal,
    )
    environment = {k: v for k, v in deployment["runtime"].items() if k in (*COMPARED_KEYS, "os")}
    assert result.sha256 is not None
    onnx_path = out_dir / ONNX_FILE_NAME
    probe_path = out_dir / _probe_file_name(ctx)
    probe_sha = write_probe_bundle(
        probe_path,
        ProbeBundle(
            input_names=list(result.input_names),
            inputs=runs.feed,
            output_names=list(result.output_names),
            outputs=runs.ort_outputs,
            tolerances=tolerances,
            onnx_sha256=result.sha256,
            runtime=settings.to_dict(),
            environment=environment,
            extra={"model": spec.name, "version": spec.version, "precision": spec.precision},
        ),
    )
    # In the evidence, which (unlike the context) outlives collect() and may be certified on
    # another machine.
    return ExportRecord(
        onnx=ExportedFile(name=ONNX_FILE_NAME, path=str(onnx_path.resolve()), sha256=result.sha256),
        probe_bundle=ExportedFile(
            name=probe_path.name, path=str(probe_path.resolve()), sha256=probe_sha
        ),
        deployment=ExportDeployment.model_validate(deployment),
        onnx_mapping=OnnxMapping(
            file=ONNX_FILE_NAME,
            sha256=result.sha256,
            probe=probe_path.name,
            opset=result.opset,
            dynamic_batch=result.dynamic_batch,
            inputs=list(result.input_names),
            outputs=list(result.output_names),
            exporter=dict(result.exporter),
            tolerances=tolerances,
            nodes=[OnnxNode.model_validate(m.to_dict()) for m in result.node_mapping],
        ),
    )
