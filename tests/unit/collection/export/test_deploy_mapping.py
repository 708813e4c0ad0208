"""The ONNX node -> certified operator mapping, on hand-made graphs (no torch, no exporter)."""

from __future__ import annotations

from attest.collection.export.node_mapping import (
    CertifiedOperator,
    GraphNode,
    map_nodes,
    source_of,
)


def meta(module: str | None, fx: str, op: str, rule: str | None = None) -> dict[str, str]:
    scopes = [
        "",
        *(["_empty_nn_module_stack_from_metadata_hook"] if module is None else [module]),
        fx,
    ]
    if module == "":
        scopes = ["", fx]
    out = {
        "pkg.torch.onnx.name_scopes": repr(scopes),
        "pkg.torch.onnx.class_hierarchy": repr(["Net", "Cls", op]),
    }
    if rule:
        out["pkg.onnxscript.rewriter.rule_name"] = rule
    return out


def node(name: str, op_type: str, ins: list[str], outs: list[str], md: dict[str, str]) -> GraphNode:
    return GraphNode(name, op_type, "", tuple(ins), tuple(outs), md)


def test_source_of_reads_name_scopes_and_class_hierarchy() -> None:
    s = source_of(meta("block.bn", "bn0", "aten._native_batch_norm_legit_no_training.default"))
    assert s is not None
    assert (s.module, s.fx_node, s.op) == (
        "block.bn",
        "bn0",
        "aten._native_batch_norm_legit_no_training.default",
    )
    root = source_of(meta("", "view", "aten.view.default"))
    assert root is not None and root.module == ""
    nomod = source_of(meta(None, "sym_size_int", "aten.sym_size.int"))
    assert nomod is not None and nomod.module is None
    assert source_of({}) is None
    assert source_of({"pkg.torch.onnx.name_scopes": "__import__('os')"}) is None


def test_source_of_falls_back_to_namespace() -> None:
    s = source_of({"namespace": ": Net/block: Block/block.act: ReLU/relu: aten.relu.default"})
    assert s is not None and (s.module, s.fx_node, s.op) == (
        "block.act",
        "relu",
        "aten.relu.default",
    )


# raw graph: x -> conv -> bn -> relu -> relu(again, same module) -> pool -> pool2 (same module)
# plus a zero-bias constant shared by two convolutions (the exporter caches constants).
RAW = [
    node("c_zero", "Constant", [], ["zero"], meta("conv1", "conv_a", "aten.conv2d.default")),
    node(
        "conv_a",
        "Conv",
        ["x", "w1", "zero"],
        ["c1"],
        meta("conv1", "conv_a", "aten.conv2d.default"),
    ),
    node(
        "bn",
        "BatchNormalization",
        ["c1", "g", "b", "m", "v"],
        ["n1"],
        meta("bn1", "bn0", "aten.bn.default"),
    ),
    node("relu_a", "Relu", ["n1"], ["r1"], meta("act", "relu", "aten.relu.default")),
    node("relu_b", "Relu", ["r1"], ["r2"], meta("act", "relu_1", "aten.relu.default")),
    node(
        "conv_b",
        "Conv",
        ["r2", "w2", "zero"],
        ["c2"],
        meta("conv2", "conv_b", "aten.conv2d.default"),
    ),
    node(
        "pool_a", "MaxPool", ["c2"], ["p1"], meta("pool", "max_pool2d", "aten.max_pool2d.default")
    ),
    node(
        "pool_b", "MaxPool", ["p1"], ["p2"], meta("pool", "max_pool2d_1", "aten.max_pool2d.default")
    ),
]
RAW_BOUNDARY = {"x", "w1", "w2", "g", "b", "m", "v"}
DEPLOYED = [
    node(
        "fused",
        "Conv",
        ["x", "w1f", "b1f"],
        ["n1"],
        meta("bn1", "bn0", "aten.bn.default", "FuseBatchNormIntoConv"),
    ),
    node(
        "relu_m",
        "Relu",
        ["n1"],
        ["r2"],
        meta("act", "relu_1", "aten.relu.default", "FuseSuccessiveRelu"),
    ),
    node(
        "conv_b",
        "Conv",
        ["r2", "w2"],
        ["c2"],
        meta("conv2", "conv_b", "aten.conv2d.default"),
    ),
    node(
        "pool_a", "MaxPool", ["c2"], ["p1"], meta("pool", "max_pool2d", "aten.max_pool2d.default")
    ),
    node(
        "pool_b", "MaxPool", ["p1"], ["p2"], meta("pool", "max_pool2d_1", "aten.max_pool2d.default")
    ),
]
DEPLOYED_BOUNDARY = {"x", "w1f", "b1f", "w2"}  # the optimizer removed the zero bias
CERTIFIED = [
    CertifiedOperator(0, "aten.convolution.default", "conv1"),
    CertifiedOperator(1, "aten.empty.memory_format", "bn1"),
    CertifiedOperator(2, "aten.native_batch_norm.default", "bn1"),
    CertifiedOperator(3, "aten.relu.default", "act"),
    CertifiedOperator(4, "aten.relu.default", "act"),
    CertifiedOperator(5, "aten.convolution.default", "conv2"),
    CertifiedOperator(6, "aten.max_pool2d_with_indices.default", "pool"),
    CertifiedOperator(7, "aten.max_pool2d_with_indices.default", "pool"),
]


def _by_name() -> dict[str, dict[str, object]]:
    mapping = map_nodes(RAW, RAW_BOUNDARY, DEPLOYED, DEPLOYED_BOUNDARY, CERTIFIED)
    return {m.node: m.to_dict() for m in mapping}


def test_fused_node_carries_every_absorbed_operator() -> None:
    fused = _by_name()["fused"]
    assert fused["fused"] is True and fused["rewrite_rules"] == ["FuseBatchNormIntoConv"]
    assert fused["modules"] == ["conv1", "bn1"]  # execution order
    assert fused["certified_operator_ids"] == [0, 1, 2]
    assert fused["match"] == "module"  # conv2d vs convolution: matched through the module


def test_shared_constant_is_not_attributed_to_the_other_module() -> None:
    # The exporter made one zero-bias constant (tagged with conv1, its first user) for both
    # convolutions; the optimizer removed it. Walking back from conv_b reaches it, but it is
    # shared with conv_a, so conv_b must not be mapped to conv1.
    nodes = _by_name()
    assert nodes["conv_b"]["modules"] == ["conv2"]
    assert nodes["conv_b"]["certified_operator_ids"] == [5]


def test_merged_relus_map_to_both_calls() -> None:
    relu = _by_name()["relu_m"]
    assert relu["certified_operator_ids"] == [3, 4] and relu["match"] == "op"
    assert relu["fused"] is True


def test_reused_module_maps_each_call_to_its_own_operators() -> None:
    nodes = _by_name()
    assert nodes["pool_a"]["certified_operator_ids"] == [6]
    assert nodes["pool_b"]["certified_operator_ids"] == [7]
    assert nodes["pool_a"]["match"] == "module"


def test_without_profiler_the_mapping_still_names_modules() -> None:
    mapping = map_nodes(RAW, RAW_BOUNDARY, DEPLOYED, DEPLOYED_BOUNDARY, None)
    assert all(m.certified_operator_ids == [] and m.match == "none" for m in mapping)
    assert mapping[0].modules == ["conv1", "bn1"]


def test_node_without_metadata_or_raw_counterpart() -> None:
    orphan = node("new", "Identity", ["p2"], ["fresh_name"], {})
    (m,) = map_nodes(RAW, RAW_BOUNDARY, [orphan], DEPLOYED_BOUNDARY | {"p2"}, CERTIFIED)
    assert m.match == "no_source" and m.sources == []
