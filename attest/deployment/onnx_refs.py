"""The external data files an ONNX model refers to, read from its bytes without ``onnx``.

An ONNX file may keep its weights outside the graph: a ``TensorProto`` with
``data_location = EXTERNAL`` names a file (``external_data`` entry ``location``) relative to
the model's folder, and onnxruntime reads that file when the session is created. A signature
over ``model.onnx`` alone then does not bind the weights. The verifier must therefore know
every such reference before it trusts or runs a model file.

Hand-written because the plain verifier installs neither ``onnx`` nor ``protobuf`` (it must
start fast and stay small on inference servers), and because it must read the very bytes it
hashed. It is a walk over protobuf's wire format restricted to the ONNX messages that can hold
tensors (field numbers from onnx.proto, IR version 10):

- ModelProto: graph 7, training_info 20, functions 25;
- TrainingInfoProto: initialization 1, algorithm 2;
- FunctionProto: node 7, attribute_proto 11;
- GraphProto: node 1, initializer 5, sparse_initializer 15;
- NodeProto: attribute 5;
- AttributeProto: t 5, g 6, tensors 10, graphs 11, sparse_tensor 22, sparse_tensors 23;
- SparseTensorProto: values 1, indices 2;
- TensorProto: external_data 13 (StringStringEntryProto: key 1, value 2), data_location 14.

Every other field is skipped by its wire type. The walk is iterative (no recursion) with a
bound on nesting; anything that is not well-formed protobuf is a :class:`OnnxFormatError`,
which the verifier treats as a rejection (it cannot tell what the file refers to).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

__all__ = ["ExternalReference", "OnnxFormatError", "external_references", "resolve_location"]

MAX_NESTING = 64  # graphs inside attributes inside nodes inside graphs ...
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL

# message kind -> {field number: message kind of that field}
_SCHEMA: dict[str, dict[int, str]] = {
    "model": {7: "graph", 20: "training", 25: "function"},
    "training": {1: "graph", 2: "graph"},
    "function": {7: "node", 11: "attribute"},
    "graph": {1: "node", 5: "tensor", 15: "sparse"},
    "node": {5: "attribute"},
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 22: "sparse", 23: "sparse"},
    "sparse": {1: "tensor", 2: "tensor"},
}


class OnnxFormatError(ValueError):
    """The bytes are not a well-formed ONNX ModelProto."""


@dataclass(frozen=True)
class ExternalReference:
    """One tensor stored outside the model file."""

    tensor: str  # the tensor's name ("" when it has none)
    location: str  # as written in the model, relative to the model's folder


def _varint(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise OnnxFormatError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: memoryview, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(field number, wire type, value or payload start, payload end) of one message."""
    out = []
    pos = start
    while pos < end:
        tag, pos = _varint(data, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise OnnxFormatError("field number 0")
        if wire == 0:
            value, pos = _varint(data, pos, end)
            out.append((number, wire, value, pos))
        elif wire == 2:
            length, pos = _varint(data, pos, end)
            if length > end - pos:
                raise OnnxFormatError("a field runs past the end of its message")
            out.append((number, wire, pos, pos + length))
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > end:
                raise OnnxFormatError("truncated fixed-width field")
        else:  # 3/4: groups, never used by ONNX; 6/7 do not exist
            raise OnnxFormatError(f"wire type {wire} is not used by ONNX")
    return out


def _text(data: memoryview, start: int, end: int) -> str:
    try:
        return bytes(data[start:end]).decode("utf-8")
    except UnicodeDecodeError:
        raise OnnxFormatError("a string field is not UTF-8") from None


def _tensor_reference(data: memoryview, start: int, end: int) -> ExternalReference | None:
    name, location, external = "", None, False
    for number, wire, a, b in _fields(data, start, end):
        if number == 8 and wire == 2:  # TensorProto.name
            name = _text(data, a, b)
        elif number == 14 and wire == 0:
            external = a == _EXTERNAL
        elif number == 13 and wire == 2:
            entry = {n: _text(data, x, y) for n, w, x, y in _fields(data, a, b) if w == 2}
            if entry.get(1) == "location":
                location = entry.get(2, "")
    if not external:
        return None
    if not location:
        raise OnnxFormatError(f"tensor {name!r} is stored externally but names no location")
    return ExternalReference(name, location)


def external_references(data: bytes) -> list[ExternalReference]:
    """Every externally stored tensor of the ONNX model ``data``, in file order.

    Raises :class:`OnnxFormatError` when ``data`` is not well-formed protobuf or nests deeper
    than :data:`MAX_NESTING`.
    """
    view = memoryview(data)
    found: list[ExternalReference] = []
    stack: list[tuple[str, int, int, int]] = [("model", 0, len(data), 0)]
    while stack:
        kind, start, end, depth = stack.pop()
        if kind == "tensor":
            ref = _tensor_reference(view, start, end)
            if ref is not None:
                found.append(ref)
            continue
        if depth > MAX_NESTING:
            raise OnnxFormatError(f"graphs nested deeper than {MAX_NESTING} levels")
        children = _SCHEMA[kind]
        for number, wire, a, b in reversed(_fields(view, start, end)):
            child = children.get(number)
            if child is not None:
                if wire != 2:
                    raise OnnxFormatError(f"field {number} of a {kind} is not a message")
                stack.append((child, a, b, depth + 1))
    return found


def resolve_location(model_name: str, location: str) -> str | None:
    """The subject name of ``location`` next to the subject ``model_name`` (POSIX names), or
    ``None`` when the location is absolute or climbs out of the model's folder (onnxruntime
    refuses those too; the verifier refuses them as unbindable)."""
    if not location or "\\" in location or location.startswith("/") or "\x00" in location:
        return None
    folder = posixpath.dirname(model_name)
    joined = posixpath.normpath(posixpath.join(folder, location))
    if joined.startswith("../") or joined in ("..", ".") or joined.startswith("/"):
        return None
    if folder and not joined.startswith(folder + "/"):
        return None
    return joined
