"""An ONNX-born model's local functions, back to ``FunctionProto`` (for :mod:`.onnx_export`).

The IR calls a model-local function as an op of its domain (``onnx:custom.ScaledRelu``) and holds no body
for it; the body is the source's (``SourceGraph.functions["domain::name"]``). Each function is written back
from there: its nodes with their tensor names, their attributes through the op's schema (or by value kind
for custom ops), a caller-supplied attribute (``AttrPlaceholder``) as an ``AttributeProto`` with
``ref_attr_name``, attribute defaults as ``attribute_proto``.
"""

from __future__ import annotations

from typing import Any, Mapping, cast

import numpy as np

from ..errors import SerdeError
from ..parser.source_graph import ABSENT_INPUT, INPUT_OP, SourceGraph, SourceNode
from ..parser.values import AttrPlaceholder
from .onnx_attrs import tensor_proto, type_proto
from .onnx_proto import AttributeProto, FunctionProto, NodeProto, TypeProto, get_schema, make_node, make_opsetid

__all__ = ["function_protos"]

_K = AttributeProto


def function_protos(functions: Mapping[str, SourceGraph]) -> list[FunctionProto]:
    """One ``FunctionProto`` per source function, in the source's order."""
    return [_function(key, graph) for key, graph in functions.items()]


def _function(key: str, graph: SourceGraph) -> FunctionProto:
    parts = key.split("::")
    domain = graph.metadata.get("domain", parts[0])
    where = f"function {key!r}"
    if len(parts) < 2:
        raise SerdeError(f"{where}: a function key is 'domain::name' or 'domain::name::overload'; the source is malformed")
    defaults: dict[str, Any] = dict(graph.metadata.get("attribute_defaults", {}))
    opsets = dict(graph.opset_imports)
    proto = FunctionProto(name=parts[1], domain=domain)
    if len(parts) > 2:
        proto.overload = parts[2]
    proto.input.extend(i.name for i in graph.inputs)
    proto.output.extend(o.name for o in graph.outputs)
    for name in graph.metadata.get("attributes", ()):
        if name not in defaults:
            proto.attribute.append(name)
    for name, value in defaults.items():
        proto.attribute_proto.append(_attribute(name, value, None, where, {}))
    for node in graph.nodes:
        if node.op_type == INPUT_OP and node.synthetic:
            continue
        proto.node.append(_node(node, graph, opsets, defaults, where))
    proto.opset_import.extend(make_opsetid(d, v) for d, v in sorted(opsets.items()))
    return proto


def _node(node: SourceNode, graph: SourceGraph, opsets: dict[str, int], defaults: dict[str, Any], where: str) -> NodeProto:
    inputs = []
    for producer, index in node.inputs:
        if (producer, index) == ABSENT_INPUT:
            inputs.append("")
            continue
        names = graph.node(producer).output_names
        inputs.append(names[index] if index < len(names) else producer)
    proto = make_node(node.op_type, inputs, list(node.output_names), name=node.name, domain=node.domain or None)
    schema = get_schema(node.op_type, opsets.get(node.domain, 1), node.domain)
    node_where = f"{where} node {node.name!r} ({node.op_type})"
    for name, value in sorted(node.attrs.items()):
        spec = schema.attributes.get(name) if schema is not None else None
        kind = AttributeProto.AttributeType.Value(spec.kind) if spec is not None else None
        proto.attribute.append(_attribute(name, value, kind, node_where, defaults))
    return proto


def _attribute(name: str, value: Any, kind: int | None, where: str, defaults: dict[str, Any]) -> AttributeProto:
    if isinstance(value, AttrPlaceholder):
        if kind is None and value.name in defaults:
            kind = _kind_of(defaults[value.name])
        if kind is None:
            raise SerdeError(
                f"{where}: attribute {name!r} refers to the caller's {value.name!r}, whose kind is unknown "
                "(no schema, no default); the function cannot be written back to ONNX"
            )
        return AttributeProto(name=name, ref_attr_name=value.name, type=cast("AttributeProto.AttributeType", kind))
    kind = kind if kind is not None else _kind_of(value)
    if kind is None or type(value).__name__ == "SourceGraph" or (isinstance(value, tuple) and value and type(value[0]).__name__ == "SourceGraph"):
        raise SerdeError(f"{where}: attribute {name!r} ({type(value).__name__}) cannot be written back into an ONNX function")
    out = AttributeProto(name=name, type=cast("AttributeProto.AttributeType", kind))
    if kind == _K.INT:
        out.i = int(value)
    elif kind == _K.FLOAT:
        out.f = float(value)
    elif kind == _K.STRING:
        out.s = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
    elif kind == _K.INTS:
        out.ints.extend(int(v) for v in value)
    elif kind == _K.FLOATS:
        out.floats.extend(float(v) for v in value)
    elif kind == _K.STRINGS:
        out.strings.extend(v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v) for v in value)
    elif kind in (_K.TENSOR, _K.SPARSE_TENSOR):
        out.type = _K.TENSOR
        out.t.CopyFrom(tensor_proto(np.asarray(value), ""))
    elif kind in (_K.TENSORS, _K.SPARSE_TENSORS):
        out.type = _K.TENSORS
        out.tensors.extend(tensor_proto(np.asarray(v), "") for v in value)
    elif kind == _K.TYPE_PROTO:
        out.tp.CopyFrom(_type(value))
    elif kind == _K.TYPE_PROTOS:
        out.type_protos.extend(_type(v) for v in value)
    else:
        raise SerdeError(f"{where}: attribute {name!r} of ONNX kind {_K.AttributeType.Name(kind)} cannot be written back")
    return out


def _kind_of(value: Any) -> int | None:
    if isinstance(value, (bool, int, np.integer)):
        return _K.INT
    if isinstance(value, (float, np.floating)):
        return _K.FLOAT
    if isinstance(value, (str, bytes)):
        return _K.STRING
    if isinstance(value, np.ndarray):
        return _K.TENSOR
    if isinstance(value, tuple):
        if not value:
            return _K.INTS
        if all(isinstance(v, (bool, int, np.integer)) for v in value):
            return _K.INTS
        if all(isinstance(v, (int, float, np.integer, np.floating)) for v in value):
            return _K.FLOATS
        if all(isinstance(v, (str, bytes)) for v in value):
            return _K.STRINGS
        if all(isinstance(v, np.ndarray) for v in value):
            return _K.TENSORS
    return None


def _type(value: Any) -> TypeProto:
    """A frontend's decoded type proto, ``(dtype, shape)``, back to a ``TypeProto``."""
    from ..ir.types import IRContext

    dtype, shape = value
    if dtype is None:
        return TypeProto()
    return type_proto(IRContext().tensor(dtype, shape))
