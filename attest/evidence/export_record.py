"""``Evidence.export``: what the ``export`` check wrote for deployment (the ONNX file, the probe
bundle, the deployment envelope) and which certified operators each ONNX node carries;
``attest certify`` binds it into the certificate (docs/deployment.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ExportDeployment",
    "ExportRecord",
    "ExportedFile",
    "OnnxMapping",
    "OnnxNode",
    "OnnxNodeSource",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)  # as attest.evidence.model's


class ExportedFile(_Strict):
    """A file the export check wrote: its name as a certificate subject, where it was written
    (``attest certify`` copies it next to the certificate) and its sha256."""

    name: str
    path: str
    sha256: str


class ExportDeployment(_Strict):
    """The deployment envelope of the export (the certificate's ``predicate.deployment``,
    ``attest.certificate.statement.DeploymentEnvelope``): the CPU target, the onnxruntime
    settings with the environment the probe outputs were produced in, and which keys are fatal
    when they differ on a server."""

    targets: list[str] = Field(default_factory=list)
    runtime: dict[str, Any] = Field(default_factory=dict)
    fatal_differences: list[str] = Field(default_factory=list)


class OnnxNodeSource(_Strict):
    """An exporter-level operator (one FX node) that a deployed ONNX node computes."""

    op: str
    module: str | None
    fx_node: str


class OnnxNode(_Strict):
    """Which certified operators and modules one node of the ONNX file carries (docs/deployment.md)."""

    node: str
    op_type: str
    domain: str
    fused: bool
    rewrite_rules: list[str] = Field(default_factory=list)
    modules: list[str] = Field(default_factory=list)
    sources: list[OnnxNodeSource] = Field(default_factory=list)
    certified_operator_ids: list[int] = Field(default_factory=list)
    match: Literal["op", "module", "none", "no_source"]


class OnnxMapping(_Strict):
    """The certificate's ``predicate.onnx_mapping``: the ONNX file and probe bundle names, the
    file's digest, opset, inputs and outputs, exporter versions, per-output tolerances and one
    entry per node."""

    file: str
    sha256: str
    probe: str
    opset: int | None = None
    dynamic_batch: bool = False
    inputs: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    exporter: dict[str, str] = Field(default_factory=dict)
    tolerances: dict[str, dict[str, float]] = Field(default_factory=dict)
    nodes: list[OnnxNode] = Field(default_factory=list)


class ExportRecord(_Strict):
    """What the ``export`` check wrote for deployment, which ``attest certify`` binds into the
    certificate: the ONNX file, the probe bundle, the deployment envelope and the node mapping.
    Present in :attr:`Evidence.export` only when the model was exported and probed."""

    onnx: ExportedFile
    probe_bundle: ExportedFile
    deployment: ExportDeployment
    onnx_mapping: OnnxMapping
