"""Map each node of the deployed ONNX graph to the certified operators and modules it carries.

The dynamo exporter writes, on every node it translates from an FX node, the metadata
``pkg.torch.onnx.name_scopes`` (``['', 'block', 'block.bn', '<fx node>']``: the module path is
the entry before the FX node name), ``pkg.torch.onnx.class_hierarchy`` (its last entry is the
ATen operator, ``aten.conv2d.default``) and ``namespace`` (both in one string). The
optimizer that runs afterwards (onnxscript's rewriter: batch norm folded into the preceding
convolution, successive ReLUs merged, constant folding) keeps the metadata of only one of the
nodes it replaces, so reading the deployed file's metadata alone would lose the convolution a
fused node carries.

So the mapping is computed by dataflow between the graph before optimization (``raw``) and
the deployed graph: a deployed node absorbed every raw node on the paths into its outputs
that stop at values the deployed graph still has (its other values, graph inputs and
initializers). Value names survive optimization, which makes this exact for the rewrites
the exporter performs; a deployed node whose outputs are new names falls back to its own
metadata. Pure Python, no torch.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "CertifiedOperator",
    "GraphNode",
    "NodeMapping",
    "SourceOperator",
    "map_nodes",
    "nodes_from_ir",
    "nodes_from_proto",
    "source_of",
]

NAME_SCOPES_KEY = "pkg.torch.onnx.name_scopes"
CLASS_HIERARCHY_KEY = "pkg.torch.onnx.class_hierarchy"
NAMESPACE_KEY = "namespace"
RULE_KEY = "pkg.onnxscript.rewriter.rule_name"
# torch.export's marker for nodes that no module called (shape arithmetic on inputs).
_NO_MODULE_MARKERS = frozenset({"_empty_nn_module_stack_from_metadata_hook"})
MatchKind = Literal["op", "module", "none", "no_source"]


@dataclass(frozen=True)
class GraphNode:
    """One ONNX node, reduced to what the mapping needs."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    metadata: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class SourceOperator:
    """An exporter-level operator (one FX node) that a deployed ONNX node computes."""

    op: str  # ATen overload as the exporter saw it, e.g. "aten.conv2d.default"
    module: str | None  # module path ("" for the root module); None when no module called it
    fx_node: str

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "module": self.module, "fx_node": self.fx_node}


@dataclass(frozen=True)
class CertifiedOperator:
    """A profiled operator of the certificate (``OpRecord`` reduced to id, op, module)."""

    id: int
    op: str
    module: str


@dataclass
class NodeMapping:
    """Which certified operators and modules one deployed ONNX node carries.

    ``match`` says how ``certified_operator_ids`` were found: ``op`` (same ATen operator in
    the same module), ``module`` (the exporter kept a composite operator, e.g. ``aten.linear``,
    that the profiler saw decomposed, e.g. ``aten.addmm`` + ``aten.t``: every certified
    operator of that module), ``none`` (no certified operator in those modules, e.g. shape
    arithmetic) or ``no_source`` (the node carries no exporter metadata).
    """

    node: str
    op_type: str
    domain: str
    fused: bool
    rewrite_rules: list[str]
    sources: list[SourceOperator]
    certified_operator_ids: list[int]
    match: MatchKind

    @property
    def modules(self) -> list[str]:
        """Module paths of the sources, in order, without repeats."""
        seen: dict[str, None] = {}
        for s in self.sources:
            if s.module is not None:
                seen.setdefault(s.module, None)
        return list(seen)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as it goes into the certificate."""
        return {
            "node": self.node,
            "op_type": self.op_type,
            "domain": self.domain,
            "fused": self.fused,
            "rewrite_rules": list(self.rewrite_rules),
            "modules": self.modules,
            "sources": [s.to_dict() for s in self.sources],
            "certified_operator_ids": list(self.certified_operator_ids),
            "match": self.match,
        }


def nodes_from_proto(graph: Any) -> list[GraphNode]:
    """Top-level nodes of an ``onnx.GraphProto``."""
    return [
        GraphNode(
            name=str(node.name),
            op_type=str(node.op_type),
            domain=str(node.domain),
            inputs=tuple(str(i) for i in node.input),
            outputs=tuple(str(o) for o in node.output),
            metadata={str(p.key): str(p.value) for p in node.metadata_props},
        )
        for node in graph.node
    ]


def nodes_from_ir(graph: Any) -> list[GraphNode]:
    """Top-level nodes of an ``onnx_ir.Graph`` (the exporter's in-memory model)."""
    return [
        GraphNode(
            name=str(node.name or ""),
            op_type=str(node.op_type),
            domain=str(node.domain or ""),
            inputs=tuple(str(v.name or "") if v is not None else "" for v in node.inputs),
            outputs=tuple(str(v.name or "") for v in node.outputs),
            metadata={str(k): str(v) for k, v in node.metadata_props.items()},
        )
        for node in graph
    ]


def _literal_list(text: str | None) -> list[str] | None:
    if not text:
        return None
    try:
        value = ast.literal_eval(text)  # the exporter writes Python list reprs
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    return None


def _module_name(scope: str) -> str | None:
    if scope in _NO_MODULE_MARKERS:
        return None
    # torch.export suffixes repeated calls of one module with "@<n>".
    return scope.split("@", 1)[0]


def source_of(metadata: dict[str, str]) -> SourceOperator | None:
    """The exporter-level operator behind a node, from its metadata (None when absent)."""
    scopes = _literal_list(metadata.get(NAME_SCOPES_KEY))
    classes = _literal_list(metadata.get(CLASS_HIERARCHY_KEY))
    if scopes and classes:
        module = _module_name(scopes[-2]) if len(scopes) >= 2 else ""
        return SourceOperator(op=classes[-1], module=module, fx_node=scopes[-1])
    namespace = metadata.get(NAMESPACE_KEY)
    if namespace:
        # ": __main__.Net/block: __main__.Block/relu: aten.relu.default"
        parts = [p.split(": ", 1) for p in namespace.split("/")]
        if parts and all(len(p) == 2 for p in parts):
            fx_node, op = parts[-1]
            module = _module_name(parts[-2][0]) if len(parts) >= 2 else ""
            return SourceOperator(op=op, module=module, fx_node=fx_node)
    return None


def _absorbed(
    node: GraphNode,
    producers: dict[str, GraphNode],
    consumers: dict[int, set[int]],
    cut: set[str],
) -> list[GraphNode]:
    """Raw nodes on the paths into ``node``'s outputs, stopping at values in ``cut``.

    A raw node whose result also feeds nodes outside this slice is shared, not absorbed: the
    exporter reuses one constant (a zero bias, say) across many operators, and attributing it
    to every consumer would map one module's node to another module. Pruned to a fixpoint,
    since a constant that only fed a shared node is shared as well.
    """
    seen: dict[int, GraphNode] = {}
    stack = [o for o in node.outputs if o]
    visited_values: set[str] = set()
    while stack:
        value = stack.pop()
        if value in visited_values:
            continue
        visited_values.add(value)
        producer = producers.get(value)
        if producer is None or id(producer) in seen:
            continue
        seen[id(producer)] = producer
        for inp in producer.inputs:
            if inp and inp not in cut:
                stack.append(inp)
    roots = {id(producers[o]) for o in node.outputs if o in producers}
    kept = set(seen)
    changed = True
    while changed:
        changed = False
        for key in list(kept):
            if key not in roots and not consumers.get(key, set()) <= kept:
                kept.discard(key)
                changed = True
    return [seen[key] for key in kept]


def _period(ops: Sequence[str]) -> int:
    """The shortest period of a sequence (its length when it does not repeat)."""
    n = len(ops)
    for p in range(1, n + 1):
        if n % p == 0 and all(ops[i] == ops[i % p] for i in range(n)):
            return p
    return n


class _Matcher:
    """Finds the certified operators of one exporter-level operator.

    Both sides list a module's operators in execution order. A module called several times
    (one ReLU or pooling module reused) repeats its operator sequence once per call on both
    sides; the k-th call on one side is the k-th call on the other, so each exporter node is
    matched to its own call's operators, not to every call's.
    """

    def __init__(
        self, exporter_ops: Sequence[SourceOperator], certified: Sequence[CertifiedOperator]
    ) -> None:
        self.fx: dict[str, list[SourceOperator]] = {}
        for source in exporter_ops:
            if source.module is not None:
                self.fx.setdefault(source.module, []).append(source)
        self.certified: dict[str, list[CertifiedOperator]] = {}
        for op in sorted(certified, key=lambda c: c.id):
            self.certified.setdefault(op.module, []).append(op)

    def match(self, source: SourceOperator) -> tuple[list[CertifiedOperator], MatchKind]:
        if source.module is None:
            return [], "none"
        candidates = self.certified.get(source.module, [])
        fx = self.fx.get(source.module, [])
        position = next((i for i, f in enumerate(fx) if f.fx_node == source.fx_node), None)
        exact = [c for c in candidates if c.op == source.op]
        if exact:
            same_fx = [f for f in fx if f.op == source.op]
            if position is not None and len(same_fx) == len(exact):
                return [exact[same_fx.index(fx[position])]], "op"
            return exact, "op"
        if not candidates:
            return [], "none"
        if position is not None and fx:
            fx_period = _period([f.op for f in fx])
            calls = len(fx) // fx_period
            if calls > 1 and len(candidates) % calls == 0:
                size = len(candidates) // calls
                if _period([c.op for c in candidates]) == size:
                    call = position // fx_period
                    return candidates[call * size : (call + 1) * size], "module"
        return candidates, "module"


def _match(
    sources: Sequence[SourceOperator], matcher: _Matcher | None
) -> tuple[list[int], MatchKind]:
    if not sources:
        return [], "no_source"
    if matcher is None:
        return [], "none"
    ids: dict[int, None] = {}
    kinds: set[str] = set()
    for source in sources:
        chosen, kind = matcher.match(source)
        if chosen:
            kinds.add(kind)
        for c in chosen:
            ids.setdefault(c.id, None)
    if not ids:
        return [], "none"
    return sorted(ids), ("module" if "module" in kinds else "op")


def map_nodes(
    raw_nodes: Sequence[GraphNode],
    raw_boundary: Iterable[str],
    deployed_nodes: Sequence[GraphNode],
    deployed_boundary: Iterable[str],
    certified: Sequence[CertifiedOperator] | None = None,
) -> list[NodeMapping]:
    """The mapping of every deployed node.

    ``raw_boundary`` / ``deployed_boundary`` are the graph input and initializer names of the
    graph before optimization and of the deployed graph. ``certified`` is the profiler's
    operator list (None when the profiler has not run: the mapping then names exporter-level
    operators and modules only).
    """
    order = {id(raw): index for index, raw in enumerate(raw_nodes)}  # raw graphs are topological
    producers: dict[str, GraphNode] = {}
    for raw in raw_nodes:
        for out in raw.outputs:
            if out:
                producers[out] = raw
    consumers: dict[int, set[int]] = {}
    for raw in raw_nodes:
        for inp in raw.inputs:
            if inp in producers:
                consumers.setdefault(id(producers[inp]), set()).add(id(raw))
    exporter_ops: dict[str, SourceOperator] = {}
    for raw in raw_nodes:
        found = source_of(raw.metadata)
        if found is not None:
            exporter_ops.setdefault(found.fx_node, found)
    matcher = None if certified is None else _Matcher(list(exporter_ops.values()), certified)
    deployed_values: set[str] = set(deployed_boundary) | set(raw_boundary)
    for node in deployed_nodes:
        deployed_values.update(v for v in (*node.inputs, *node.outputs) if v)
    mappings: list[NodeMapping] = []
    for node in deployed_nodes:
        cut = deployed_values - set(node.outputs)
        absorbed = sorted(
            _absorbed(node, producers, consumers, cut), key=lambda n: order.get(id(n), -1)
        )
        sources_by_key: dict[tuple[str, str | None, str], SourceOperator] = {}
        for raw in absorbed or [node]:
            source = source_of(raw.metadata)
            if source is not None:
                sources_by_key.setdefault((source.op, source.module, source.fx_node), source)
        if not sources_by_key and absorbed:
            own = source_of(node.metadata)
            if own is not None:
                sources_by_key[(own.op, own.module, own.fx_node)] = own
        sources = list(sources_by_key.values())
        rules = [r.strip() for r in node.metadata.get(RULE_KEY, "").split(",") if r.strip()]
        ids, kind = _match(sources, matcher)
        mappings.append(
            NodeMapping(
                node=node.name,
                op_type=node.op_type,
                domain=node.domain,
                fused=len({s.fx_node for s in sources}) > 1,
                rewrite_rules=rules,
                sources=sources,
                certified_operator_ids=ids,
                match=kind,
            )
        )
    return mappings
