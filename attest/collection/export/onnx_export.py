"""Export a model to ONNX with the dynamo exporter and map its nodes to certified operators.

:func:`export_onnx` runs ``torch.export.export`` (non-strict) and then ``torch.onnx.export``
(``dynamo=True``, onnxscript) on the exported program, optimizes with the exporter's own
optimizer, writes the file atomically, runs ``onnx.checker`` and computes the node mapping
(:mod:`attest.collection.export.node_mapping`). Running the two steps apart lets a failure name the
module: a ``torch.export`` failure (data-dependent control flow, unsupported Python) is
located by the innermost module frame in the exception's traceback; a translation failure
(an operator without an ONNX function) by the FX node the exporter names, whose
``nn_module_stack`` says which module called it.

Export failures never raise: they come back as :attr:`ExportResult.failure`, with the
exporter's reason, for the ``export`` check to report as a finding.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import logging
import os
import re
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from torch import nn
from torch.fx.experimental.symbolic_shapes import is_concrete_int

from attest.collection.context import CollectContext, OpRecord
from attest.collection.export.node_mapping import (
    CertifiedOperator,
    NodeMapping,
    map_nodes,
    nodes_from_ir,
    nodes_from_proto,
)
from attest.core.io import default_file_mode, sha256_file
from attest.deployment.onnx_refs import external_references

__all__ = ["ExportFailure", "ExportResult", "export_onnx"]

_TRANSLATING_NODE = re.compile(r"translating node %(\S+)")
_QUIET_LOGGERS = ("torch.onnx", "torch.export", "torch._export", "torch.fx", "torch._dynamo")
_WRAPPER_FRAMES = frozenset({"_call_impl", "_wrapped_call_impl", "__call__"})


@dataclass
class ExportFailure:
    """Why the model could not be exported, and where."""

    stage: str  # torch.export | onnx translation | optimization | save | onnx.checker
    error_type: str
    reason: str  # the exporter's own words (first lines of the root cause)
    module: str | None  # module path whose code failed ("" root), None when unknown
    location: str | None = None  # "file:line: source" of the failing line in that module

    @property
    def kind(self) -> str:
        """``data_dependent_control_flow``, ``unsupported_operator`` or ``export_error``."""
        text = f"{self.error_type} {self.reason}".lower()
        if "datadependent" in text or "data-dependent" in text or "data dependent" in text:
            return "data_dependent_control_flow"
        if "no onnx function found" in text or self.error_type == "DispatchError":
            return "unsupported_operator"
        return "export_error"

    def sentence(self) -> str:
        """A one-line description for findings."""
        where = ""
        if self.module is not None:
            where = f" in module {self.module or '<root>'}"
        at = f" ({self.location})" if self.location else ""
        what = {
            "data_dependent_control_flow": " (data-dependent control flow)",
            "unsupported_operator": " (operator without an ONNX translation)",
        }.get(self.kind, "")
        return (
            f"ONNX export failed{what} at {self.stage}{where}{at}: {self.error_type}: {self.reason}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "stage": self.stage,
            "error_type": self.error_type,
            "reason": self.reason,
            "module": self.module,
            "location": self.location,
        }


@dataclass
class ExportResult:
    """The outcome of :func:`export_onnx`."""

    ok: bool
    onnx_path: Path | None = None
    sha256: str | None = None
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    opset: int | None = None
    dynamic_batch: bool = False
    node_mapping: list[NodeMapping] = field(default_factory=list)
    failure: ExportFailure | None = None
    duration_s: float = 0.0
    exporter: dict[str, str] = field(default_factory=dict)

    def mapping_summary(self) -> dict[str, int]:
        """Counts for the check's summary."""
        return {
            "nodes": len(self.node_mapping),
            "fused_nodes": sum(1 for m in self.node_mapping if m.fused),
            "nodes_without_source": sum(1 for m in self.node_mapping if m.match == "no_source"),
            "nodes_matched_to_certified_operators": sum(
                1 for m in self.node_mapping if m.certified_operator_ids
            ),
        }


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence the exporter's progress prints, logging and deprecation chatter."""
    saved = {name: logging.getLogger(name).level for name in _QUIET_LOGGERS}
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    sink = io.StringIO()
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _root_reason(exc: BaseException) -> tuple[str, str]:
    """(type name, first meaningful lines) of the deepest exception in the chain."""
    root = _exception_chain(exc)[-1]
    text = str(root).strip()
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return type(root).__name__, " ".join(lines[:2])[:600]


def _module_frame(exc: BaseException, modules: dict[int, str]) -> tuple[str, str | None] | None:
    """The innermost frame running a module's own code in the exception's tracebacks."""
    found: tuple[str, str | None] | None = None
    for link in reversed(_exception_chain(exc)):  # root cause first
        tb: TracebackType | None = link.__traceback__
        innermost: tuple[str, str | None] | None = None
        while tb is not None:
            frame = tb.tb_frame
            code = frame.f_code
            # The module is the method's first argument, whatever it is called.
            owner = frame.f_locals.get(code.co_varnames[0]) if code.co_argcount else None
            if (
                isinstance(owner, nn.Module)
                and id(owner) in modules
                and code.co_name not in _WRAPPER_FRAMES
            ):
                filename = code.co_filename
                line = linecache.getline(filename, tb.tb_lineno).strip()
                location = f"{os.path.basename(filename)}:{tb.tb_lineno}: {line}"
                innermost = (modules[id(owner)], location)
            tb = tb.tb_next
        if innermost is not None:
            found = innermost
            break
    return found


def _translation_module(exc: BaseException, program: Any) -> str | None:
    """The module that called the FX node the exporter failed to translate."""
    for link in _exception_chain(exc):
        match = _TRANSLATING_NODE.search(str(link))
        if match is None:
            continue
        for node in program.graph.nodes:
            if node.name == match.group(1):
                stack = node.meta.get("nn_module_stack") or {}
                if stack:
                    path, _cls = list(stack.values())[-1]
                    return str(path).split("@", 1)[0]
                return ""
    return None


def _failure(
    stage: str, exc: BaseException, module: str | None, location: str | None = None
) -> ExportFailure:
    error_type, reason = _root_reason(exc)
    return ExportFailure(
        stage=stage, error_type=error_type, reason=reason, module=module, location=location
    )


def _as_tuple(inputs: Any) -> tuple[Any, ...]:
    return tuple(inputs) if isinstance(inputs, tuple | list) else (inputs,)


def _batch_dynamic_shapes(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        {0: torch.export.Dim.AUTO} if isinstance(a, torch.Tensor) and a.dim() >= 1 else None
        for a in args
    )


def _torch_export(
    model: nn.Module, args: tuple[Any, ...], modules: dict[int, str]
) -> tuple[Any | None, bool, ExportFailure | None]:
    """``torch.export.export`` with a dynamic batch dimension, else static shapes."""
    failure: ExportFailure | None = None
    for dynamic in (True, False):
        try:
            program = torch.export.export(
                model,
                args,
                dynamic_shapes=_batch_dynamic_shapes(args) if dynamic else None,
                strict=False,
            )
            if dynamic and not _batch_stayed_symbolic(program):
                # Dim.AUTO specialized the batch (the model fixes it somewhere). Export with
                # static shapes, so the file states that batch instead of a symbol in name only.
                continue
            return program, dynamic, None
        except Exception as exc:  # torch.export raises many unrelated types
            located = _module_frame(exc, modules)
            failure = _failure(
                "torch.export",
                exc,
                located[0] if located else None,
                located[1] if located else None,
            )
    return None, False, failure


def _batch_stayed_symbolic(program: Any) -> bool:
    """Whether every tensor user input of an exported program kept a symbolic batch size."""
    user_inputs = set(program.graph_signature.user_inputs)
    found = False
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and value.dim() >= 1:
            if is_concrete_int(value.shape[0]):  # an int, or a SymInt pinned to one value
                return False
            found = True
    return found


def _batch_is_symbolic(graph: Any) -> bool:
    dims = [i.type.tensor_type.shape.dim for i in graph.input if i.type.HasField("tensor_type")]
    return bool(dims) and all(
        len(d) > 0 and d[0].HasField("dim_param") and not d[0].dim_param.isdigit() for d in dims
    )


def _certified(operators: list[OpRecord] | None) -> list[CertifiedOperator] | None:
    if operators is None:
        return None
    return [CertifiedOperator(id=r.id, op=r.op, module=r.module) for r in operators]


def _boundary(graph: Any) -> set[str]:
    names = {str(v.name) for v in graph.inputs}
    names.update(str(n) for n in graph.initializers)
    return names


def export_onnx(
    ctx_or_model: CollectContext | nn.Module,
    inputs: torch.Tensor | tuple[Any, ...] | None,
    out_path: str | Path,
    *,
    operators: list[OpRecord] | None = None,
    input_names: list[str] | None = None,
) -> ExportResult:
    """Export to ``out_path`` (atomically) and map the nodes; failures come back, never raise.

    With a :class:`CollectContext`, the model is a fresh copy in the deployed precision,
    ``inputs`` default to the probe inputs and ``operators`` to the profiler's capture.
    ``input_names`` names the graph's inputs (default: the exporter's, from ``forward``).
    """
    import onnx  # the collect side's dependency; imported here to keep module import cheap

    started = time.perf_counter()
    if isinstance(ctx_or_model, CollectContext):
        model = ctx_or_model.fresh_model()
        if inputs is None:
            inputs = ctx_or_model.inputs()
        if operators is None:
            operators = ctx_or_model.operators
    else:
        model = ctx_or_model.eval()
        if inputs is None:
            raise ValueError("export_onnx needs inputs when given a bare module")
    args = _as_tuple(inputs)
    out = Path(out_path)
    versions = {"torch": torch.__version__, "onnx": str(onnx.__version__)}
    try:
        import onnxscript

        versions["onnxscript"] = str(onnxscript.__version__)
    except ImportError:  # pragma: no cover - torch.onnx needs it; reported below if missing
        pass

    def done(**kwargs: Any) -> ExportResult:
        return ExportResult(duration_s=time.perf_counter() - started, exporter=versions, **kwargs)

    modules = {id(m): name for name, m in model.named_modules()}
    with _quiet_exporter(), torch.no_grad():
        program, dynamic, failure = _torch_export(model, args, modules)
        if program is None:
            return done(ok=False, failure=failure)
        try:
            onnx_program = torch.onnx.export(
                program, args, dynamo=True, optimize=False, verbose=False, input_names=input_names
            )
        except Exception as exc:  # the exporter wraps translation errors in its own types
            return done(
                ok=False,
                failure=_failure("onnx translation", exc, _translation_module(exc, program)),
            )
        if onnx_program is None:  # pragma: no cover - dynamo=True always returns a program
            return done(
                ok=False, failure=ExportFailure("onnx translation", "None", "no program", None)
            )
        raw_graph = onnx_program.model.graph
        raw_nodes = nodes_from_ir(raw_graph)
        raw_boundary = _boundary(raw_graph)
        try:
            onnx_program.optimize()
        except Exception as exc:
            return done(ok=False, failure=_failure("optimization", exc, None))
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
            os.close(fd)
            try:
                onnx_program.save(tmp_name, external_data=False)
                # mkstemp made it 0600; model.onnx is a public output like the certificate
                os.chmod(tmp_name, default_file_mode(out))
                os.replace(tmp_name, out)
            finally:
                if os.path.exists(tmp_name):
                    os.unlink(tmp_name)
        except Exception as exc:
            return done(ok=False, failure=_failure("save", exc, None))
    try:
        onnx.checker.check_model(str(out), full_check=True)
    except Exception as exc:  # onnx.checker.ValidationError and shape-inference errors
        return done(ok=False, onnx_path=out, failure=_failure("onnx.checker", exc, None))
    deployed = onnx.load(str(out), load_external_data=False)
    if external_references(out.read_bytes()):  # the verifier's own reading of the file
        # The exporter saves with external_data=False, so this never happens today; if it
        # ever did, the certificate would bind the graph without its weights (the verifier
        # refuses such a model unless every data file is a subject): refuse here instead.
        return done(
            ok=False,
            onnx_path=out,
            failure=ExportFailure(
                "save",
                "ExternalData",
                "the exported model keeps tensors in external data files, which certify "
                "does not bind; export a model under the 2 GiB protobuf limit",
                None,
            ),
        )
    graph = deployed.graph
    deployed_boundary = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    mapping = map_nodes(
        raw_nodes, raw_boundary, nodes_from_proto(graph), deployed_boundary, _certified(operators)
    )
    opset = next(
        (int(o.version) for o in deployed.opset_import if o.domain in ("", "ai.onnx")), None
    )
    return done(
        ok=True,
        onnx_path=out,
        sha256=sha256_file(out),
        input_names=[i.name for i in graph.input],
        output_names=[o.name for o in graph.output],
        opset=opset,
        # Dim.AUTO may still specialize the batch (a model that reshapes to a fixed batch):
        # the file itself says whether the deployed graph takes any batch size.
        dynamic_batch=dynamic and _batch_is_symbolic(graph),
        node_mapping=mapping,
    )
