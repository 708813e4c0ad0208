"""ONNX export, the node mapping and the ``export`` check (release side, with torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from _deploy_testkit import keypair, trust_store
from torch import nn

from attest.certificate.statement import build_statement, sign_statement, write_certificate
from attest.collection.capture.run import capture_operators
from attest.collection.context import CheckSettings, CollectContext, LoadedSpec
from attest.collection.export import check as export_check
from attest.collection.export.onnx_export import export_onnx
from attest.core.io import sha256_file
from attest.deployment.probe_bundle import read_probe_bundle
from attest.verification.probe import run_probe
from attest.verification.verifier import verify

torch.set_num_threads(1)


class ConvBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class ConvNet(nn.Module):
    """Conv-BatchNorm-ReLU, pooling and a linear head: the exporter folds bn into conv."""

    def __init__(self) -> None:
        super().__init__()
        self.block = ConvBlock()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.block(x)).flatten(1))


class Gate(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # data-dependent Python control flow
            return x * 2
        return x


class GatedNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.gate = Gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate(self.fc(x))


@torch.library.custom_op("attest_test::opaque", mutates_args=())
def opaque(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@opaque.register_fake
def _opaque_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Opaque(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return opaque(x) + 1


class OpaqueNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.odd = Opaque()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.odd(self.fc(x))


class Raises(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("deliberately broken forward")


def _context(
    factory: Any,
    inputs: torch.Tensor,
    out_dir: Path | None,
    *,
    export: str | None = "onnx",
    **kw: Any,
) -> CollectContext:
    torch.manual_seed(0)
    model = factory()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):  # trained-looking statistics
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
    state = {k: v.clone() for k, v in model.state_dict().items()}

    def build() -> nn.Module:
        fresh = factory()
        fresh.load_state_dict(state)
        return fresh

    spec = LoadedSpec(
        path=Path("attest.yaml"),
        name="test-model",
        version="1.0.0",
        factory="test:build",
        factory_args={},
        build_model=build,
        inputs=inputs,
        labels=None,
        export=export,  # type: ignore[arg-type]
        threads=1,
        **kw,
    )
    return CollectContext(spec=spec, settings=CheckSettings(), output_dir=out_dir)


@pytest.fixture(scope="module")
def conv_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[CollectContext, Any]:
    out = tmp_path_factory.mktemp("export")
    x = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    ctx = _context(ConvNet, x, out)
    ctx.operators, _ = capture_operators(ctx.fresh_model(), ctx.inputs(), ctx.spec, backward=False)
    (result,) = export_check.run(ctx)
    return ctx, result


def test_export_check_within_tolerance(conv_export: tuple[CollectContext, Any]) -> None:
    ctx, result = conv_export
    assert result.check == "export" and result.status == "computed", result.reason
    outputs = [i for i in result.items if i.subject.kind == "output"]
    assert len(outputs) == 1 and outputs[0].status == "pass", outputs[0].message
    metrics = outputs[0].metrics
    assert 0 <= metrics["max_rel_error_vs_eager"] <= 1e-5
    assert 0 <= metrics["max_rel_error_vs_float64"] <= 1e-5
    assert result.summary["onnxruntime_repeat_bit_exact"] is True
    record = ctx.export
    assert record is not None
    assert sha256_file(record.onnx.path) == record.onnx.sha256
    assert sha256_file(record.probe_bundle.path) == record.probe_bundle.sha256
    onnx.checker.check_model(record.onnx.path, full_check=True)
    bundle = read_probe_bundle(record.probe_bundle.path)
    assert bundle.onnx_sha256 == record.onnx.sha256
    assert bundle.inputs[0].tobytes() == ctx.inputs().numpy().tobytes()
    runtime = record.deployment.runtime
    assert runtime["deterministic_compute"] is True and runtime["intra_op_threads"] == 1


def test_fused_conv_bn_node_maps_to_all_absorbed_operators(
    conv_export: tuple[CollectContext, Any],
) -> None:
    ctx, result = conv_export
    assert ctx.export is not None
    nodes = [n.model_dump() for n in ctx.export.onnx_mapping.nodes]
    assert ctx.operators is not None
    by_module: dict[str, list[int]] = {}
    for record in ctx.operators:
        by_module.setdefault(record.module, []).append(record.id)
    convs = [n for n in nodes if n["op_type"] == "Conv"]
    assert len(convs) == 1, "expected batch norm folded into the convolution"
    conv = convs[0]
    assert conv["fused"] is True
    assert set(conv["modules"]) == {"block.conv", "block.bn"}
    assert {s["op"] for s in conv["sources"]} >= {"aten.conv2d.default"}
    assert set(conv["certified_operator_ids"]) == set(
        by_module["block.conv"] + by_module["block.bn"]
    )
    assert not any(n["op_type"] == "BatchNormalization" for n in nodes)
    relu = next(n for n in nodes if n["op_type"] == "Relu")
    assert relu["match"] == "op" and relu["modules"] == ["block.act"]
    gemm = next(n for n in nodes if n["op_type"] == "Gemm")
    assert gemm["modules"] == ["fc"] and set(gemm["certified_operator_ids"]) == set(by_module["fc"])
    covered = {i for n in nodes for i in n["certified_operator_ids"]}
    assert covered == {r.id for r in ctx.operators}, (
        "every certified operator is deployed somewhere"
    )
    assert result.summary["fused_nodes"] >= 1


def test_export_check_fails_when_runtime_deviates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = export_check.create_session

    class Skewed:  # the deployed runtime computes something slightly different
        def __init__(self, session: Any) -> None:
            self.session = session

        def run(self, names: Any, feed: Any) -> list[np.ndarray]:
            return [np.asarray(o) * np.float32(1.01) for o in self.session.run(names, feed)]

    monkeypatch.setattr(export_check, "create_session", lambda *a, **k: Skewed(real(*a, **k)))
    ctx = _context(lambda: nn.Sequential(nn.Linear(4, 3), nn.Tanh()), torch.randn(2, 4), tmp_path)
    (result,) = export_check.run(ctx)
    (output,) = [i for i in result.items if i.subject.kind == "output"]
    assert output.status == "fail"
    assert output.metrics["max_rel_error_vs_eager"] == pytest.approx(0.01, rel=0.05)


def test_spec_without_export_is_not_applicable() -> None:
    ctx = _context(lambda: nn.Linear(4, 3), torch.randn(2, 4), None, export=None)
    (result,) = export_check.run(ctx)
    assert result.status == "not_applicable"
    assert result.reason == "spec does not request export"
    assert ctx.export is None


def test_bfloat16_is_not_computed_with_reason() -> None:
    ctx = _context(lambda: nn.Linear(4, 3), torch.randn(2, 4), None, precision="bfloat16")
    (result,) = export_check.run(ctx)
    assert result.status == "not_computed" and "bfloat16" in (result.reason or "")


def test_data_dependent_control_flow_is_a_finding_naming_the_module(tmp_path: Path) -> None:
    ctx = _context(GatedNet, torch.randn(2, 4), tmp_path)
    (result,) = export_check.run(ctx)
    assert result.status == "computed"
    (item,) = result.items
    assert item.status == "fail"
    assert item.subject.kind == "module" and item.subject.module == "gate"
    assert item.metrics["failure_kind"] == "data_dependent_control_flow"
    assert "x.sum() > 0" in (item.details["location"] or "")
    assert "gate" in item.message and "data-dependent" in item.message
    assert ctx.export is None
    assert not (tmp_path / "model.onnx").exists()


def test_operator_without_onnx_translation_names_the_module(tmp_path: Path) -> None:
    result = export_onnx(OpaqueNet().eval(), torch.randn(2, 4), tmp_path / "m.onnx")
    assert not result.ok and result.failure is not None
    assert result.failure.stage == "onnx translation"
    assert result.failure.module == "odd"
    assert result.failure.kind == "unsupported_operator"
    assert "attest_test.opaque" in result.failure.reason


def test_an_export_with_external_data_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The exporter never writes external data; if it ever did, the certificate would bind
    # the graph without its weights, so export refuses (the guard, seen through a stand-in).
    from attest.deployment.onnx_refs import ExternalReference

    monkeypatch.setattr(
        "attest.collection.export.onnx_export.external_references",
        lambda data: [ExternalReference("fc.weight", "m.onnx.data")],
    )
    result = export_onnx(nn.Linear(4, 3).eval(), torch.randn(2, 4), tmp_path / "m.onnx")
    assert not result.ok and result.failure is not None
    assert result.failure.stage == "save" and "external data" in result.failure.reason


def test_model_raising_in_forward_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    result = export_onnx(Raises().eval(), torch.randn(2, 4), tmp_path / "m.onnx")
    assert not result.ok and result.failure is not None
    assert result.failure.module == "" and "deliberately broken" in result.failure.reason


def test_exported_release_verifies_with_probe(
    conv_export: tuple[CollectContext, Any], tmp_path: Path
) -> None:
    ctx, _ = conv_export
    info = ctx.export
    assert info is not None
    statement = build_statement(
        subjects={info.onnx_mapping.file: info.onnx.sha256, "probe.npz": info.probe_bundle.sha256},
        model={"name": "conv", "version": "1.0.0"},
        policy={"id": "test", "version": "1", "digest": {"sha256": "0" * 64}},
        verdict="pass",
        deployment=info.deployment.model_dump(),
        onnx_mapping=info.onnx_mapping.model_dump(mode="json"),
    )
    key, pem = keypair(tmp_path, "release")
    cert = write_certificate(tmp_path / "cert.json", sign_statement(statement, [key]))
    trust = trust_store(tmp_path / "trust.yaml", pem)
    report = verify(
        cert,
        trust=trust,
        artifacts=[Path(info.onnx.path)],
        probe=Path(info.probe_bundle.path),
        check_environment=True,
    )
    assert report.verified, report.reasons
    assert report.probe is not None and report.probe["mode"] == "bit_exact"
    assert run_probe(info.onnx.path, info.probe_bundle.path).passed


class Float32Only(nn.Module):
    """A model whose code refuses float64 (as custom float32-only kernels do)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError("float32 only")
        return self.fc(x)


def test_float64_reference_that_cannot_run_is_reported_not_crashed(tmp_path: Path) -> None:
    ctx = _context(Float32Only, torch.randn(2, 4), tmp_path)
    (result,) = export_check.run(ctx)
    assert result.status == "computed"
    (output,) = [i for i in result.items if i.subject.kind == "output"]
    assert output.status == "pass"  # judged against eager alone
    assert output.metrics["max_rel_error_vs_float64"] is None
    assert "float32 only" in result.parameters["float64_reference"]
    assert result.summary["max_rel_error_vs_float64"] is None


class FixedBatch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).reshape(2, 3)  # only batch 2 is valid


def test_batch_is_dynamic_only_where_the_model_allows_it(
    tmp_path: Path, conv_export: tuple[CollectContext, Any]
) -> None:
    ctx, result = conv_export
    assert result.parameters["dynamic_batch"] is True
    assert ctx.export is not None
    first = onnx.load(ctx.export.onnx.path).graph.input[0].type.tensor_type.shape.dim[0]
    assert first.HasField("dim_param")
    fixed = export_onnx(FixedBatch().eval(), torch.randn(2, 4), tmp_path / "fixed.onnx")
    assert fixed.ok and fixed.dynamic_batch is False
    dim = onnx.load(str(tmp_path / "fixed.onnx")).graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.HasField("dim_value") and dim.dim_value == 2
