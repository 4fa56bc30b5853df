"""Hostile model builders: tiny files that ask for huge expansions, odd names, malformed attributes.

Each returns the model's bytes (a frozen GraphDef from our own protos, or an ONNX model from ``onnx.helper``),
so tests and the fuzz bench write them wherever they like. No TensorFlow.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from scopefusion.parser.proto import tf_framework_pb2 as tfpb

__all__ = [
    "deep_scope_graph",
    "doubling_functions",
    "onnx_folding_bomb",
    "onnx_graph",
    "splat_const",
    "tf_graph",
]

ONNX_OPSET = 17


def _tf_node(name: str, op: str, inputs=(), **attrs) -> tfpb.NodeDef:
    out = tfpb.NodeDef(name=name, op=op, input=list(inputs))
    for key, value in attrs.items():
        out.attr[key].CopyFrom(value)
    return out


def _float_type() -> tfpb.AttrValue:
    return tfpb.AttrValue(type=tfpb.DT_FLOAT)


def tf_graph(nodes: list[tfpb.NodeDef], functions=()) -> bytes:
    graph = tfpb.GraphDef(node=nodes)
    graph.library.function.extend(functions)
    return graph.SerializeToString()


def placeholder(name: str = "x", shape: tuple[int, ...] | None = (2,)) -> tfpb.NodeDef:
    attrs = {"dtype": _float_type()}
    if shape is not None:
        proto = tfpb.TensorShapeProto()
        for d in shape:
            proto.dim.add().size = d
        attrs["shape"] = tfpb.AttrValue(shape=proto)
    return _tf_node(name, "Placeholder", **attrs)


def doubling_functions(depth: int) -> bytes:
    """``f{depth}`` calls ``f{depth-1}`` twice, down to ``f0`` (one Identity): 2**depth nodes once inlined."""
    functions = []
    for level in range(depth + 1):
        fdef = tfpb.FunctionDef()
        fdef.signature.name = f"f{level}"
        fdef.signature.input_arg.add(name="a", type=tfpb.DT_FLOAT)
        fdef.signature.output_arg.add(name="out", type=tfpb.DT_FLOAT)
        if level == 0:
            fdef.node_def.append(_tf_node("id", "Identity", ["a"], T=_float_type()))
            fdef.ret["out"] = "id:output:0"
        else:
            fdef.node_def.append(_tf_node("c1", f"f{level - 1}", ["a"]))
            fdef.node_def.append(_tf_node("c2", f"f{level - 1}", ["c1:out:0"]))
            fdef.ret["out"] = "c2:out:0"
        functions.append(fdef)
    nodes = [placeholder(), _tf_node("call", f"f{depth}", ["x"]), _tf_node("y", "Identity", ["call"], T=_float_type())]
    return tf_graph(nodes, functions)


def splat_const(shape: tuple[int, ...], value: float = 1.5, input_shape: tuple[int, ...] | None = None) -> bytes:
    """A TF ``Const`` holding one float for ``shape`` (a splat), added to a placeholder of ``input_shape``
    (default: the same shape)."""
    tensor = tfpb.TensorProto(dtype=tfpb.DT_FLOAT, float_val=[value])
    for d in shape:
        tensor.tensor_shape.dim.add().size = d
    nodes = [
        placeholder("x", shape if input_shape is None else input_shape),
        _tf_node("big", "Const", dtype=_float_type(), value=tfpb.AttrValue(tensor=tensor)),
        _tf_node("y", "AddV2", ["x", "big"], T=_float_type()),
    ]
    return tf_graph(nodes)


def deep_scope_graph(levels: int) -> bytes:
    """One Identity whose name has ``levels`` nested scopes."""
    name = "/".join(f"s{i}" for i in range(levels)) + "/y"
    return tf_graph([placeholder(), _tf_node(name, "Identity", ["x"], T=_float_type())])


def onnx_graph(nodes, inputs, outputs, initializers=(), opset: int = ONNX_OPSET) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="scopefusion-tests")
    model.ir_version = 8
    return model.SerializeToString()


def onnx_folding_bomb(op: str, elements: int = 250_000_000) -> bytes:
    """A ~100-byte ONNX model whose constant subgraph folds to ``elements`` floats, reduced to one number."""
    shape = numpy_helper.from_array(np.array([elements], np.int64), "shape")
    one = numpy_helper.from_array(np.array([1.0], np.float32), "one")
    nodes: list[onnx.NodeProto] = []
    inits = [shape, one]
    if op == "ConstantOfShape":
        nodes.append(helper.make_node("ConstantOfShape", ["shape"], ["big"],
                                      value=numpy_helper.from_array(np.array([1.0], np.float32))))
    elif op == "Expand":
        nodes.append(helper.make_node("Expand", ["one", "shape"], ["big"]))
    elif op == "Tile":
        nodes.append(helper.make_node("Tile", ["one", "shape"], ["big"]))
    elif op == "Range":
        inits += [numpy_helper.from_array(np.array(0.0, np.float32), "start"),
                  numpy_helper.from_array(np.array(float(elements), np.float32), "limit"),
                  numpy_helper.from_array(np.array(1.0, np.float32), "delta")]
        nodes.append(helper.make_node("Range", ["start", "limit", "delta"], ["big"]))
    else:
        raise ValueError(op)
    nodes.append(helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0))
    nodes.append(helper.make_node("Add", ["x", "s"], ["y"]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    return onnx_graph(nodes, [x], [y], inits)


def tf_fill_bomb(elements: int = 250_000_000) -> bytes:
    """A TF ``Fill`` of ``elements`` floats from two tiny constants, summed to one number."""
    dims = tfpb.TensorProto(dtype=tfpb.DT_INT32, int_val=[elements])
    dims.tensor_shape.dim.add().size = 1
    value = tfpb.TensorProto(dtype=tfpb.DT_FLOAT, float_val=[2.0])
    axis = tfpb.TensorProto(dtype=tfpb.DT_INT32, int_val=[0])
    axis.tensor_shape.dim.add().size = 1
    nodes = [
        placeholder("x", (1,)),
        _tf_node("dims", "Const", dtype=tfpb.AttrValue(type=tfpb.DT_INT32), value=tfpb.AttrValue(tensor=dims)),
        _tf_node("value", "Const", dtype=_float_type(), value=tfpb.AttrValue(tensor=value)),
        _tf_node("axis", "Const", dtype=tfpb.AttrValue(type=tfpb.DT_INT32), value=tfpb.AttrValue(tensor=axis)),
        _tf_node("fill", "Fill", ["dims", "value"], T=_float_type(), index_type=tfpb.AttrValue(type=tfpb.DT_INT32)),
        _tf_node("sum", "Sum", ["fill", "axis"], T=_float_type(), Tidx=tfpb.AttrValue(type=tfpb.DT_INT32),
                 keep_dims=tfpb.AttrValue(b=True)),
        _tf_node("y", "AddV2", ["x", "sum"], T=_float_type()),
    ]
    return tf_graph(nodes)


def huge_dim_graph(dim: int = 1 << 62) -> bytes:
    """A placeholder with a dim of ``dim`` feeding a Relu."""
    return tf_graph([placeholder("x", (dim, 4)), _tf_node("y", "Relu", ["x"], T=_float_type())])


def named_graph(name: str) -> bytes:
    """A Relu whose node name is ``name`` (markup-looking text, odd characters)."""
    return tf_graph([placeholder("x", (2,)), _tf_node(name, "Relu", ["x"], T=_float_type())])


def const_without_value() -> bytes:
    """A TF ``Const`` with a dtype and no ``value`` attribute."""
    return tf_graph([placeholder("x", (2,)), _tf_node("c", "Const", dtype=_float_type()),
                     _tf_node("y", "AddV2", ["x", "c"], T=_float_type())])


def onnx_reshape_contradiction() -> bytes:
    """``Reshape`` of 4 elements to ``[3]``."""
    shape = numpy_helper.from_array(np.array([3], np.int64), "shape")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return onnx_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], [x], [y], [shape])


def tf_reshape_contradiction() -> bytes:
    shape = tfpb.TensorProto(dtype=tfpb.DT_INT32, int_val=[3])
    shape.tensor_shape.dim.add().size = 1
    return tf_graph([placeholder("x", (4,)),
                     _tf_node("shape", "Const", dtype=tfpb.AttrValue(type=tfpb.DT_INT32), value=tfpb.AttrValue(tensor=shape)),
                     _tf_node("reshape", "Reshape", ["x", "shape"], T=_float_type(),
                              Tshape=tfpb.AttrValue(type=tfpb.DT_INT32))])


def onnx_range(delta: float) -> bytes:
    """``Range(0, 10, delta)`` added to an input of one element."""
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("start", 0.0), ("limit", 10.0), ("delta", delta))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
             helper.make_node("Add", ["x", "r"], ["y"], name="add")]
    return onnx_graph(nodes, [x], [y], inits)


def onnx_no_inputs() -> bytes:
    """An ONNX model with no graph inputs: a constant through Relu."""
    c = numpy_helper.from_array(np.ones(3, np.float32), "c")
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    return onnx_graph([helper.make_node("Relu", ["c"], ["y"])], [], [y], [c])


def onnx_relu(opset: int = ONNX_OPSET) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    return onnx_graph([helper.make_node("Relu", ["x"], ["y"])], [x], [y], opset=opset)


def malformed_attr_graph(case: str) -> bytes:
    """A TF node whose attribute has the wrong kind (``wrong_type``) or an ``N`` that does not match its inputs."""
    if case == "wrong_type":
        return tf_graph([placeholder("x", (1, 2, 2, 1)),
                         _tf_node("pool", "MaxPool", ["x"], T=_float_type(), ksize=tfpb.AttrValue(s=b"oops"),
                                  strides=tfpb.AttrValue(list=tfpb.AttrValue.ListValue(i=[1, 1, 1, 1])),
                                  padding=tfpb.AttrValue(s=b"VALID"))])
    return tf_graph([placeholder("x", (2,)), placeholder("z", (2,)),
                     _tf_node("sum", "AddN", ["x", "z"], T=_float_type(), N=tfpb.AttrValue(i=5))])
