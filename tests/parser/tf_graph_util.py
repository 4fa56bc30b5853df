"""Test helpers: hand-written GraphDefs (our protos, no TensorFlow) and running a SourceGraph in TensorFlow."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import numpy as np

from scopefusion import dtypes
from scopefusion.parser import SourceGraph
from scopefusion.parser.proto import tf_framework_pb2 as tfpb


def node(name: str, op: str, inputs: Iterable[str] = (), **attrs: Any) -> tfpb.NodeDef:
    out = tfpb.NodeDef(name=name, op=op, input=list(inputs))
    for key, value in attrs.items():
        out.attr[key].CopyFrom(value)
    return out


def type_attr(code: int = tfpb.DT_FLOAT) -> tfpb.AttrValue:
    return tfpb.AttrValue(type=code)


def placeholder_attr(name: str) -> tfpb.AttrValue:
    return tfpb.AttrValue(placeholder=name)


def const(name: str, value: float = 1.0) -> tfpb.NodeDef:
    tensor = tfpb.TensorProto(dtype=tfpb.DT_FLOAT, float_val=[value])
    return node(name, "Const", dtype=type_attr(), value=tfpb.AttrValue(tensor=tensor))


def func_attr(name: str, **attrs: tfpb.AttrValue) -> tfpb.AttrValue:
    value = tfpb.AttrValue()
    value.func.name = name
    for key, attr in attrs.items():
        value.func.attr[key].CopyFrom(attr)
    return value


def function(name: str, inputs: list[str], outputs: dict[str, str], body: list[tfpb.NodeDef], **attrs) -> tfpb.FunctionDef:
    fdef = tfpb.FunctionDef()
    fdef.signature.name = name
    for arg in inputs:
        fdef.signature.input_arg.add(name=arg, type=tfpb.DT_FLOAT)
    for arg, tensor in outputs.items():
        fdef.signature.output_arg.add(name=arg, type=tfpb.DT_FLOAT)
        fdef.ret[arg] = tensor
    fdef.node_def.extend(body)
    for key, value in attrs.items():
        fdef.attr[key].CopyFrom(value)
    return fdef


def write(path: Path, nodes: list[tfpb.NodeDef], functions: Iterable[tfpb.FunctionDef] = ()) -> Path:
    graph = tfpb.GraphDef(node=nodes)
    graph.library.function.extend(functions)
    path.write_bytes(graph.SerializeToString())
    return path


# ------------------------------------------------------------------------------------------- run in TF
def _encode(value: Any, attr_type: str):
    import tensorflow as tf

    AttrValue = tf.compat.v1.AttrValue
    if attr_type.startswith("list("):
        inner = attr_type[5:-1]
        out = AttrValue()
        for item in value:
            encoded = _encode(item, inner)
            field = encoded.WhichOneof("value")
            getattr(out.list, field).append(getattr(encoded, field)) if field not in ("shape", "tensor", "func") else (
                getattr(out.list, field).add().CopyFrom(getattr(encoded, field))
            )
        return out
    if attr_type == "type":
        code = value.tf if isinstance(value, dtypes.DType) else value.code
        return AttrValue(type=code)
    if attr_type == "shape":
        shape = tf.TensorShape(None if value is None else [None if d < 0 else d for d in value])
        return AttrValue(shape=shape.as_proto())
    if attr_type == "tensor":
        return AttrValue(tensor=tf.make_tensor_proto(np.asarray(value)))
    if attr_type == "func":
        return AttrValue(func=tf.compat.v1.NameAttrList(name=value.name))
    if attr_type == "string":
        return AttrValue(s=value.encode() if isinstance(value, str) else value)
    if attr_type == "int":
        return AttrValue(i=value)
    if attr_type == "float":
        return AttrValue(f=value)
    if attr_type == "bool":
        return AttrValue(b=value)
    raise AssertionError(f"cannot encode attribute type {attr_type}")


def to_tf_graph_def(graph: SourceGraph):
    """Rebuilds a TensorFlow GraphDef from a SourceGraph (attributes re-encoded from their decoded values)."""
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry

    out = tf.compat.v1.GraphDef()
    for source in graph:
        op_def = op_def_registry.get(source.op_type)
        assert op_def is not None, source.op_type
        types = {a.name: a.type for a in op_def.attr}
        nd = out.node.add(name=source.name, op=source.op_type)
        nd.input.extend(f"{p}:{i}" for p, i in source.inputs)
        nd.input.extend(f"^{c}" for c in source.control_inputs)
        for key, value in source.attrs.items():
            if key in types:
                nd.attr[key].CopyFrom(_encode(value, types[key]))
    return out


def run_tf(graph_def, feeds: dict[str, np.ndarray], fetches: list[str]) -> list[np.ndarray]:
    import tensorflow as tf

    with tf.Graph().as_default() as g:
        tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=g) as session:
            return session.run(fetches, {f"{k}:0": v for k, v in feeds.items()})
