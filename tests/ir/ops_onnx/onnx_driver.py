"""A small builder for tests: an ONNX ``ModelProto`` into an IR graph of ``onnx`` dialect ops, inferred
node by node with constant folding, as the real builder does.

Graph inputs become ``ge.Data`` (shapes from the model or from ``input_shapes``), initializers ``ge.Const``.
Each node is added, inferred through its op definition, then offered to its fold hook / reference kernel
when its inputs are known (folded values live in a side table by value, never rewriting the graph). Control
flow bodies are built first, recursively, into ``node.subgraphs``; a body's reads of enclosing values become
``ge.Data`` inputs of the body after its formal inputs (``ge.Const`` when the enclosing value is known).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from scopefusion import dtypes
from scopefusion.dialects.onnx import definitions
from scopefusion.dialects.onnx.protos import attr_payload
from scopefusion.ir.graph import Value
from scopefusion.ir.opdef import InferContext, InputInfo
from scopefusion.ir.types import TensorType
from scopefusion.ir_builder import Graph, IRContext, OpRegistry, builtin_ops

__all__ = ["Built", "build", "onnx_types", "opset_of"]

MAX_FOLD_ELEMENTS = 1 << 16


@dataclass
class Built:
    graph: Graph
    values: dict[str, Value] = field(default_factory=dict)  # ONNX tensor name -> IR value (main graph)
    known: dict[int, np.ndarray] = field(default_factory=dict)  # id(value) -> folded value
    folded: int = 0

    def type_of(self, name: str) -> tuple[tuple[int, ...] | None, Any]:
        t = self.values[name].type
        assert isinstance(t, TensorType), f"{name}: {t!r}"
        return (None if t.rank is None else tuple(t.shape)), t.dtype

    def known_value(self, name: str) -> np.ndarray | None:
        return self.known.get(id(self.values[name]))


def opset_of(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _tensor_type(context: IRContext, t: onnx.TypeProto, override: tuple[int, ...] | None = None) -> TensorType | None:
    if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.elem_type:
        return None
    dtype = dtypes.from_onnx(t.tensor_type.elem_type)
    if override is not None:
        return context.tensor(dtype, override)
    if not t.tensor_type.HasField("shape"):
        return context.tensor(dtype, None)
    return context.tensor(dtype, [d.dim_value if d.HasField("dim_value") else -1 for d in t.tensor_type.shape.dim])


def build(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]] | None = None, registry: OpRegistry | None = None) -> Built:
    registry = registry or OpRegistry(builtin_ops() + definitions(opset_of(model)))
    graph = Graph("main", IRContext(), registry)
    built = Built(graph)
    _build_into(built, graph, model.graph, dict(input_shapes or {}), outer={}, record=True)
    return built


def _info(built: Built, value: Value | None) -> InputInfo | None:
    if value is None:
        return None
    t = value.type
    data = built.known.get(id(value))
    if isinstance(t, TensorType):
        return InputInfo(None if t.rank is None else t.shape, t.dtype, t.format, data)
    return InputInfo(None, None, "ND", data)


def _build_into(
    built: Built,
    graph: Graph,
    proto: onnx.GraphProto,
    input_shapes: dict[str, tuple[int, ...]],
    outer: dict[str, Value],
    record: bool,
    formal_types: list[Any] | None = None,
) -> None:
    context = graph.context
    scope: dict[str, Value] = {}
    inits = {t.name for t in proto.initializer}
    for t in proto.initializer:
        v = graph.add_const(onnx.numpy_helper.to_array(t), t.name)
        built.known[id(v)] = v.const_value
        scope[t.name] = v
    for i, vi in enumerate(i for i in proto.input if i.name not in inits):
        t = _tensor_type(context, vi.type, input_shapes.get(vi.name))
        if t is None and formal_types is not None and i < len(formal_types):
            t = formal_types[i]
        scope[vi.name] = graph.add_input(vi.name, t)

    def lookup(name: str) -> Value | None:
        if not name:
            return None
        if name in scope:
            return scope[name]
        if name not in outer:
            raise KeyError(f"{proto.name}: tensor {name!r} has no producer")
        source = outer[name]  # an enclosing value read by a body
        known = built.known.get(id(source))
        if known is not None:
            v = graph.add_const(known, name)
            built.known[id(v)] = v.const_value
        else:
            v = graph.add_input(name, source.type)
        scope[name] = v
        return v

    for n in proto.node:
        inputs = [lookup(name) for name in n.input]
        op = f"onnx.{n.op_type}" if n.domain in ("", "ai.onnx") else f"onnx:{n.domain}.{n.op_type}"
        opdef = registry_lookup(graph, op)
        attrs: dict[str, Any] = {}
        bodies: dict[str, Graph] = {}
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                bodies[a.name] = _body(built, graph, n, a.name, a.g, {**outer, **scope}, inputs)
            else:
                attrs[a.name] = attr_payload(a)
        node = graph.add_node(op, inputs, name=n.name or n.op_type, attrs=attrs, num_outputs=len(n.output), subgraphs=bodies, unique=True)
        infos = [_info(built, v) for v in node.inputs]
        node_attrs = dict(node.attrs.items())
        ctx = InferContext(opdef, node.name, infos, node_attrs, len(node.outputs), node.subgraphs)
        opdef.infer(ctx)
        for value, (shape, dtype, fmt) in zip(node.outputs, ctx.results()):
            value.type = context.tensor(dtype, shape, fmt)
        folded = _fold(opdef, infos, node_attrs)
        if folded is not None:
            built.folded += 1
            for value, array in zip(node.outputs, folded):
                array = np.asarray(array)
                built.known[id(value)] = array
                t = value.type
                if t.rank is None or t.shape != array.shape:
                    value.type = context.tensor(t.dtype, array.shape, t.format)
        for name, value in zip(n.output, node.outputs):
            if name:
                scope[name] = value
                if record:
                    built.values[name] = value
    graph.set_outputs([scope[o.name] for o in proto.output])
    if record:
        for vi in proto.input:
            built.values.setdefault(vi.name, scope[vi.name])


def registry_lookup(graph: Graph, op: str):
    opdef = graph.registry.lookup(op)
    assert opdef is not None, f"no op definition for {op}"
    return opdef


def _fold(opdef, infos: list[InputInfo | None], attrs) -> list[np.ndarray] | None:
    if opdef.fold is None:
        if opdef.reference is None or not infos:
            return None
        if any(i is None or i.data is None or i.data.size > MAX_FOLD_ELEMENTS for i in infos):
            return None
    return opdef.try_fold(infos, attrs)


def _body(built: Built, graph: Graph, node: onnx.NodeProto, key: str, proto: onnx.GraphProto, outer: dict[str, Value], inputs) -> Graph:
    body = Graph(f"{node.name or node.op_type}/{key}", graph.context, graph.registry)
    formal: list[Any] = []
    if node.op_type == "Loop":  # iteration number, condition, then the carried values' types
        formal = [graph.context.tensor(dtypes.INT64, ()), graph.context.tensor(dtypes.BOOL, ())]
        formal += [v.type if v is not None else None for v in inputs[2:]]
    _build_into(built, body, proto, {}, outer, record=False, formal_types=formal)
    return body


def onnx_types(model: onnx.ModelProto) -> dict[str, tuple[tuple[int, ...] | None, Any]]:
    """ONNX's own inference (``data_prop=True``): tensor name -> (shape with -1 for unknown, dtype)."""
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    out = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type
        if t.WhichOneof("value") != "tensor_type":
            continue
        dtype = dtypes.from_onnx(t.tensor_type.elem_type) if t.tensor_type.elem_type else None
        shape = None
        if t.tensor_type.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in t.tensor_type.shape.dim)
        out[vi.name] = (shape, dtype)
    return out
