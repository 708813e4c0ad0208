"""Integrated-gradients figures of the report: heat maps beside the probe inputs, and the
model-randomization curve. Each function returns an ``<svg>`` string, or a sentence saying
why the figure is not available (never raises on a missing or odd section)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attest.errors import AttestError
from attest.evidence.model import CheckResult
from attest.report import plots
from attest.report._rows import numeric_metric
from attest.report._source import ReportSource

_ATTR_KEYS = ("attributions", "attribution", "attr", "ig")
_INPUT_KEYS = ("inputs", "input", "x", "probe")
_TARGET_KEYS = ("targets", "target", "labels")


def _decoder() -> Callable[[dict[str, Any]], dict[str, Any]] | str:
    """``decode_attributions`` (:mod:`attest.evidence.attributions`, numpy only, no torch), or why it
    is not available."""
    try:
        from attest.evidence.attributions import decode_attributions
    except ImportError as exc:
        return f"the evidence holds attributions, but they cannot be decoded here ({exc})"
    return decode_attributions


def _decode(raw: dict[str, Any]) -> dict[str, np.ndarray] | str:
    decode = _decoder()
    if isinstance(decode, str):
        return decode
    try:
        decoded = decode(raw)
    except AttestError as exc:
        return f"the attributions in this input cannot be decoded: {exc.message}"
    except (ValueError, KeyError, TypeError) as exc:
        return f"the attributions in this input cannot be decoded: {exc}"
    return {str(k): np.asarray(v) for k, v in decoded.items()}


def _pick(arrays: dict[str, np.ndarray], keys: tuple[str, ...]) -> np.ndarray | None:
    for key in keys:
        if key in arrays:
            return arrays[key]
    return None


def _completeness_by_input(check: CheckResult | None) -> dict[int, float]:
    out: dict[int, float] = {}
    if check is None:
        return out
    for item in check.items:
        idx = item.subject.input_index
        err = numeric_metric(item.metrics, "completeness_rel_error", "relative", "error")
        if idx is not None and err is not None:
            out[idx] = err
    return out


def heatmaps_svg(src: ReportSource, max_inputs: int = 8) -> str:
    """Probe inputs beside their attribution maps, or why they cannot be shown."""
    if not src.attributions:
        if src.evidence_path is not None:
            return f"the evidence {src.evidence_path} holds no integrated-gradient attributions"
        hint = (
            " (give --evidence evidence.json: certificates do not carry the maps)"
            if src.kind != "evidence"
            else ""
        )
        return "integrated-gradient attributions are not available in this input" + hint
    decoded = _decode(src.attributions)
    if isinstance(decoded, str):
        return decoded
    attributions = _pick(decoded, _ATTR_KEYS)
    if attributions is None and len(decoded) == 1:
        attributions = next(iter(decoded.values()))
    if attributions is None or attributions.ndim < 2:
        return f"no attribution array among the decoded entries {sorted(decoded)}"
    inputs = _pick(decoded, _INPUT_KEYS)
    if inputs is not None and inputs.shape[0] != attributions.shape[0]:
        inputs = None
    targets = _pick(decoded, _TARGET_KEYS)
    stored_targets = src.attributions.get("target_classes")
    if targets is None and isinstance(stored_targets, list):
        targets = np.asarray(stored_targets)
    indices = decoded.get("input_indices")
    errors = _completeness_by_input(src.checks.get("ig_completeness"))
    titles: list[str] = []
    captions: list[str] = []
    for i in range(min(len(attributions), max_inputs)):
        index = int(indices[i]) if indices is not None and i < len(indices) else i
        title = f"input {index}"
        if targets is not None and i < len(targets):  # targets follow the analysed inputs
            title += f" · target {targets[i]}"
        titles.append(title)
        captions.append(f"completeness error {errors[index]:.1e}" if index in errors else "")
    svg = plots.ig_heatmaps(inputs, attributions, titles, captions, max_inputs=max_inputs)
    shown = min(len(attributions), max_inputs)
    if shown < len(attributions):
        svg += f'<p class="na">showing {shown} of {len(attributions)} probe inputs</p>'
    return svg


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _curves(check: CheckResult) -> tuple[list[str], dict[str, list[float | None]]]:
    """(layer labels, {series label: correlations}) from the check's items.

    Layout of attest's own check: one item per probe input whose ``details`` hold the curve
    (``layers`` and ``spearman`` lists). Otherwise: one item per randomized layer with a
    correlation metric, drawn as a single curve.
    """
    layers: list[str] = []
    curves: dict[str, list[float | None]] = {}
    for item in check.items:
        names, values = item.details.get("layers"), item.details.get("spearman")
        if isinstance(names, list) and isinstance(values, list) and len(names) == len(values):
            layers = layers or [str(n) for n in names]
            if [str(n) for n in names] == layers:
                index = item.subject.input_index
                curves[f"input {index}" if index is not None else item.subject.label()] = [
                    _number(v) for v in values
                ]
    if curves:
        return layers, curves
    single: list[float | None] = []
    for item in check.items:
        value = numeric_metric(item.metrics, "spearman", "corr", "rho")
        if value is not None:
            s = item.subject
            layers.append(s.module or s.name or s.label())
            single.append(value)
    return layers, ({"rank correlation": single} if single else {})


def randomization_svg(src: ReportSource) -> str:
    """The cascading-randomization curve from the ``ig_randomization`` check, or why not."""
    check = src.checks.get("ig_randomization")
    if check is None:
        return "the ig_randomization check is not available in this input"
    if check.status != "computed":
        return f"ig_randomization was {check.status}: {check.reason or 'no reason given'}"
    layers, curves = _curves(check)
    if not curves:
        return "the ig_randomization check recorded no rank correlations"
    threshold = None
    for key, val in check.parameters.items():
        named = "threshold" in key or ("max" in key and ("corr" in key or "spearman" in key))
        if named and _number(val) is not None:
            threshold = float(val)
            break
    return plots.randomization_curve(layers, curves, threshold=threshold)
