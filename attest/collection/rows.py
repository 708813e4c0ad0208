"""Evidence assembly: per-operator rows (with the spread of their timings across runs), the
per-module roll-up, model metrics, artifacts.

Plain data out of the profiler's measurements (docs/metrics.md); every figure comes from
``metrics.py`` through ``checks.py``, so a row and the check items agree by construction.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from attest.annotations import annotation_of
from attest.collection.context import CollectContext, LoadedSpec
from attest.collection.profile.measures import Profile, median_or_none
from attest.collection.profile.results import (
    UNINITIALIZED_NOTE,
    _finite_or_none,
    determinism_figures,
    fidelity_figures,
)
from attest.core.io import sha256_file
from attest.evidence.model import CheckResult, CompileRecord, Metric, ModelFailure, OperatorRow
from attest.evidence.rollup import module_rows

__all__ = [
    "artifact_digests",
    "failure_of",
    "model_annotations",
    "model_metrics",
    "model_section",
    "module_rows",
    "operator_rows",
    "timing_spread",
]


def model_section(spec: LoadedSpec, folder: dict[str, Any] | None = None) -> dict[str, Any]:
    """Identity and settings of the model line (the ``model`` field of evidence); ``folder``:
    the model folder's :func:`folder_record`, taken when the collect started (default: now)."""
    weights = spec.artifacts.get("weights")
    return {
        "name": spec.name,
        "version": spec.version,
        "factory": spec.factory,
        "factory_args": spec.factory_args,
        "digest": sha256_file(weights) if weights else None,
        "precision": spec.precision,
        "device": spec.device,
        "threads": spec.threads,
        "repeats": spec.repeats,
        "target": spec.target,
        "loss": spec.loss,
        "baseline": spec.baseline,
        "export": spec.export,
        "probe_shape": list(spec.inputs.shape),
        # named inputs, output path, heads (docs/spec.md); absent in the single-input form
        **({"call": spec.call.describe()} if spec.call is not None else {}),
        # a MONAI bundle or Hugging Face folder: its card and its manifest, as bound
        **({"folder": folder or folder_record(spec)} if spec.folder is not None else {}),
    }


def folder_record(spec: LoadedSpec) -> dict[str, Any]:
    """The model folder as the evidence records it: kind, name, card, and its manifest (every
    file hashed in parallel, :func:`attest.certificate.folder_manifest.folder_manifest`) with
    the manifest's root digest, the folder's subject digest; certify hashes it once more and
    refuses a folder that changed since."""
    from attest.certificate.folder_manifest import folder_manifest
    from attest.certificate.format import CERTIFICATE_NAME

    folder = spec.folder
    assert folder is not None
    ignore = (CERTIFICATE_NAME,) if folder.ignore is None else folder.ignore
    manifest = folder_manifest(folder.root, name=folder.name, ignore=ignore)
    return {
        **folder.record(),
        "root_digest": manifest.root_digest,
        "manifest": manifest.predicate(),
    }


def compile_record(spec: LoadedSpec) -> CompileRecord | None:
    """``Evidence.compile``: what of the model was torch.compile'd and how (None: nothing)."""
    info = spec.compiled
    if info is None:
        return None
    return CompileRecord(
        compiled=info.compiled,
        modules=list(info.modules),
        backend=info.backend,
        mode=info.mode,
        fullgraph=info.fullgraph,
        dynamic=info.dynamic,
        stripped_keys=info.stripped_keys,
        note=info.note(),
    )


def artifact_digests(spec: LoadedSpec) -> dict[str, dict[str, Any]]:
    """sha256 of the spec, weights and probe files, keyed by role."""
    out: dict[str, dict[str, Any]] = {}
    base = spec.path.parent if spec.path else None
    for role in sorted(spec.artifacts):
        path = Path(spec.artifacts[role])
        try:
            rel = str(path.relative_to(base)) if base else path.name
        except ValueError:
            rel = str(path)
        out[role] = {
            "name": path.name,
            "path": rel,
            "sha256": sha256_file(path),
            "bytes": path.stat().st_size,
        }
    return out


def operator_rows(profile: Profile, ctx: CollectContext, target: str) -> list[OperatorRow]:
    """One :class:`OperatorRow` per operator of the reference run."""
    blocked = None if ctx.topology_ok else (ctx.topology_reason or "topology failed")
    nonfinite = profile.extra.get("nonfinite_ops", set())
    rows: list[OperatorRow] = []
    for m in profile.ops:
        not_computed: dict[str, str] = {}
        det = determinism_figures(m, profile.precision)
        fid = fidelity_figures(m)
        if blocked:
            det = dict.fromkeys(det)
            fid = dict.fromkeys(fid)
            not_computed["determinism"] = blocked
            not_computed["fidelity"] = blocked
        elif m.uninitialized:
            for key in ("determinism", "fidelity", "local_fidelity"):
                not_computed[key] = UNINITIALIZED_NOTE
        else:
            if det["bit_exact_rate"] is None:
                not_computed["determinism"] = "fewer than two runs (repeats < 2)"
            if fid["fidelity_pct"] is None:
                not_computed["fidelity"] = "no floating-point output or no float64 counterpart"
            if fid["local_fidelity_pct"] is None:
                not_computed["local_fidelity"] = (
                    m.local_out_failed
                    or m.local_grad_failed
                    or "nothing to re-run in floating point"
                )
        forward_spread = timing_spread(m.forward_ns)
        backward_spread = timing_spread(m.backward_ns)
        rows.append(
            OperatorRow(
                id=m.id,
                op=m.op,
                module=m.module,
                output_shapes=m.output_shapes,
                output_dtypes=m.output_dtypes,
                has_backward=m.grad_inputs is not None,
                random=m.random,
                bit_exact_rate=_f(det["bit_exact_rate"]),
                stability_score=_f(det["stability_score"]),
                max_relative_deviation=_f(det["max_relative_deviation"]),
                nondeterminism_origin=None
                if blocked or m.runs_compared == 0
                else m.origin_runs > 0,
                fidelity_pct=_f(fid["fidelity_pct"]),
                output_fidelity_pct=_f(fid["output_fidelity_pct"]),
                grad_fidelity_pct=_f(fid["grad_fidelity_pct"]),
                local_fidelity_pct=_f(fid["local_fidelity_pct"]),
                local_output_fidelity_pct=_f(fid["local_output_fidelity_pct"]),
                local_grad_fidelity_pct=_f(fid["local_grad_fidelity_pct"]),
                memory_delta_bytes=m.memory_delta_bytes if m.memory_delta_bytes is not None else 0,
                saved_activation_bytes=m.saved_activation_bytes or 0,
                saved_parameter_bytes=m.saved_parameter_bytes or 0,
                allocator_delta_bytes=m.allocator_delta_bytes,
                hardware_affinity_mask=[target],
                forward_ns=median_or_none(m.forward_ns),
                backward_ns=median_or_none(m.backward_ns),
                forward_ns_iqr=forward_spread[0],
                forward_ns_p95=forward_spread[1],
                backward_ns_iqr=backward_spread[0],
                backward_ns_p95=backward_spread[1],
                output_sha256=m.output_sha256,
                grad_sha256=m.grad_sha256,
                thread_sensitive=None if blocked else m.thread_changed,
                nonfinite=m.id in nonfinite,
                not_computed=not_computed,
            )
        )
    return rows


def timing_spread(values: list[int]) -> tuple[int | None, int | None]:
    """The interquartile range and 95th percentile of one operator's timings across runs
    (nanoseconds): ``forward_ns_iqr``, ``forward_ns_p95`` and the backward pair of a row.

    Quartiles and the 95th percentile interpolate linearly between the sorted timings
    (``statistics.quantiles(method="inclusive")``, numpy's default), so with few runs the p95
    lies between the two slowest. Below two timings there is no spread: both are None.
    """
    if len(values) < 2:
        return None, None
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    p95 = statistics.quantiles(values, n=20, method="inclusive")[18]
    return round(q3 - q1), round(p95)


def _f(value: Metric) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def model_metrics(profile: Profile, checks: dict[str, CheckResult]) -> dict[str, Metric]:
    """Model-level figures (docs/metrics.md, ``model_metrics``)."""
    det = checks.get("determinism")
    fid = checks.get("fidelity")
    ratios = [
        b / f
        for f, b in zip(profile.forward_memory_bytes, profile.backward_memory_bytes, strict=False)
        if f
    ]
    ratio = statistics.median(ratios) if ratios else None
    spread = (
        (max(ratios) - min(ratios)) / abs(ratio) if ratios and ratio else (0.0 if ratios else None)
    )
    saved_activation = sum(m.memory_delta_bytes or 0 for m in profile.ops)
    metrics: dict[str, Metric] = {
        "operators": len(profile.ops),
        "operators_with_backward": sum(1 for m in profile.ops if m.grad_inputs is not None),
        "runs": profile.runs,
        "bit_exact_reproducibility": det.summary.get("bit_exact_reproducibility") if det else None,
        "min_bit_exact_rate": det.summary.get("min_bit_exact_rate") if det else None,
        "min_stability_score": det.summary.get("min_stability_score") if det else None,
        "random_operators": sum(1 for m in profile.ops if m.random),
        "min_fidelity_pct": fid.summary.get("min_fidelity_pct") if fid else None,
        "min_local_fidelity_pct": fid.summary.get("min_local_fidelity_pct") if fid else None,
        "thread_sensitive": profile.thread_model_changed,
        "thread_sensitive_operators": sum(1 for m in profile.ops if m.thread_changed),
        "nonfinite_operators": len(profile.extra.get("nonfinite_ops", ())),
        "saved_activation_bytes": saved_activation,
        "saved_parameter_bytes": _unique_parameter_bytes(profile),
        "peak_memory_bytes": profile.peak_memory_bytes,
        "forward_memory_delta_bytes": median_or_none(profile.forward_memory_bytes),
        "backward_memory_delta_bytes": median_or_none(profile.backward_memory_bytes),
        "memory_delta_ratio": _finite_or_none(ratio),
        "memory_delta_ratio_spread": _finite_or_none(spread),
        "memory_runs": len(profile.forward_memory_bytes),
        "fragmentation_index": profile.fragmentation,
        "forward_ns": median_or_none(profile.model_forward_ns),
        "backward_ns": median_or_none(profile.model_backward_wall_ns or profile.model_backward_ns),
        "model_failed": profile.failure is not None,
    }
    return metrics


def _unique_parameter_bytes(profile: Profile) -> int:
    # A parameter saved by several operators is one storage: the reference run counts each once.
    value = profile.extra.get("saved_parameter_bytes_total", 0)
    return int(value) if isinstance(value, int) else 0


def model_annotations(ctx: CollectContext) -> list[dict[str, Any]]:
    """``@attest.unstable_grad`` annotations on the model's modules: {module, reason, checks}."""
    model = ctx.spec.build_model()
    found: list[dict[str, Any]] = []
    for name, module in model.named_modules():
        note = annotation_of(module)
        if note is not None:
            found.append(
                {"module": name, "reason": note.get("reason"), "checks": note.get("checks")}
            )
    return found


def failure_of(profile: Profile) -> ModelFailure | None:
    """The model failure of the reference run, as evidence data."""
    if profile.failure is None:
        return None
    f = profile.failure
    return ModelFailure(
        phase="backward" if f.phase == "backward" else "forward",
        module=f.module,
        operator_id=f.operator_id,
        op=f.op,
        error_type=f.error_type,
        message=f.message,
    )
