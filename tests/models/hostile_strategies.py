"""Hypothesis strategies for hostile models: huge and odd dims, splats, folding bombs, doubling and deep
function libraries, contradicting shapes, deep scopes and odd names. Each draws a model's bytes plus the
file suffix; :func:`convert_hostile` converts one and lets only our own errors through.

Used by ``tests/test_fuzz_hostile.py`` (a few hundred examples per test) and ``bench/fuzz_hostile.py``
(tens of thousands under a memory limit).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from scopefusion.parser.proto import tf_framework_pb2 as tfpb

from . import hostile_models as hm

__all__ = ["FUZZ_BUDGETS", "convert_hostile", "function_libraries", "onnx_models", "tf_graphs"]

# Budgets small enough that every example is quick, large enough to exercise both sides of each limit.
FUZZ_BUDGETS = {"max_inlined_nodes": 500, "max_folded_bytes": 1 << 20}

DIMS = st.sampled_from([0, 1, 2, 3, 7, -1, 1 << 20, 1 << 31, 1 << 40, 1 << 62, (1 << 63) - 1])
SMALL_SHAPES = st.lists(DIMS, min_size=0, max_size=4).map(tuple)
_NAME_CHARS = st.sampled_from(list("ab_/[]\\:.-é😀 0") + ["[/x]", "[bold]", "//"])
NAMES = st.lists(_NAME_CHARS, min_size=1, max_size=12).map("".join)
FLOATS = st.sampled_from([0.0, 1.0, -1.0, 0.5, 1e-30, -1e-30, 1e30, float("inf"), float("nan"), 3.0])


def _attr_type(code: int = tfpb.DT_FLOAT) -> tfpb.AttrValue:
    return tfpb.AttrValue(type=code)


def _tensor(values, dtype: int, shape) -> tfpb.TensorProto:
    tensor = tfpb.TensorProto(dtype=dtype)
    if dtype == tfpb.DT_FLOAT:
        tensor.float_val.extend(values)
    elif dtype == tfpb.DT_INT64:
        tensor.int64_val.extend(values)
    else:
        tensor.int_val.extend(values)
    for d in shape:
        tensor.tensor_shape.dim.add().size = d
    return tensor


def _const(name: str, values, dtype: int, shape) -> tfpb.NodeDef:
    return hm._tf_node(name, "Const", dtype=_attr_type(dtype), value=tfpb.AttrValue(tensor=_tensor(values, dtype, shape)))


@st.composite
def tf_graphs(draw) -> tuple[bytes, str]:
    """A small TF GraphDef: placeholders of odd dims, then ops over earlier tensors with hostile constants."""
    nodes: list[tfpb.NodeDef] = []
    names: set[str] = set()

    def fresh(base: str) -> str:
        name = base if draw(st.booleans()) else draw(NAMES).strip("/") or base
        if draw(st.integers(0, 20)) == 0:
            name = "/".join(f"s{i}" for i in range(draw(st.integers(50, 1500)))) + "/" + base
        while not name or name in names or name.startswith("^"):
            name = f"{name}_{len(names)}"
        names.add(name)
        return name

    tensors: list[str] = []
    for _ in range(draw(st.integers(1, 2))):
        name = fresh("x")
        nodes.append(hm.placeholder(name, draw(st.one_of(st.none(), SMALL_SHAPES))))
        tensors.append(name)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["relu", "add", "reshape", "fill", "splat", "range", "tile", "addn"]))
        src = draw(st.sampled_from(tensors))
        name = fresh(kind)
        if kind == "relu":
            nodes.append(hm._tf_node(name, "Relu", [src], T=_attr_type()))
        elif kind == "add":
            nodes.append(hm._tf_node(name, "AddV2", [src, draw(st.sampled_from(tensors))], T=_attr_type()))
        elif kind == "reshape":
            target = draw(st.lists(DIMS, min_size=0, max_size=3))
            nodes.append(_const(f"{name}/shape", target, tfpb.DT_INT64, (len(target),)))
            nodes.append(hm._tf_node(name, "Reshape", [src, f"{name}/shape"], T=_attr_type(), Tshape=_attr_type(tfpb.DT_INT64)))
        elif kind == "fill":
            dims = draw(st.lists(DIMS, min_size=0, max_size=3))
            nodes.append(_const(f"{name}/dims", dims, tfpb.DT_INT64, (len(dims),)))
            nodes.append(_const(f"{name}/value", [draw(FLOATS)], tfpb.DT_FLOAT, ()))
            nodes.append(hm._tf_node(name, "Fill", [f"{name}/dims", f"{name}/value"], T=_attr_type(),
                                     index_type=_attr_type(tfpb.DT_INT64)))
        elif kind == "splat":
            shape = draw(st.lists(st.sampled_from([1, 3, 1000, 1 << 20, 1 << 31]), min_size=0, max_size=3))
            values = [draw(FLOATS) for _ in range(draw(st.integers(0, 2)))]
            nodes.append(_const(name, values, tfpb.DT_FLOAT, shape))
        elif kind == "range":
            for part in ("start", "limit", "delta"):
                nodes.append(_const(f"{name}/{part}", [draw(FLOATS)], tfpb.DT_FLOAT, ()))
            nodes.append(hm._tf_node(name, "Range", [f"{name}/start", f"{name}/limit", f"{name}/delta"],
                                     Tidx=_attr_type()))
        elif kind == "tile":
            multiples = draw(st.lists(DIMS, min_size=0, max_size=3))
            nodes.append(_const(f"{name}/multiples", multiples, tfpb.DT_INT64, (len(multiples),)))
            nodes.append(hm._tf_node(name, "Tile", [src, f"{name}/multiples"], T=_attr_type(),
                                     Tmultiples=_attr_type(tfpb.DT_INT64)))
        else:
            inputs = [draw(st.sampled_from(tensors)) for _ in range(draw(st.integers(1, 3)))]
            nodes.append(hm._tf_node(name, "AddN", inputs, T=_attr_type(), N=tfpb.AttrValue(i=draw(st.integers(0, 4)))))
        tensors.append(name)
    return hm.tf_graph(nodes), ".pb"


@st.composite
def function_libraries(draw) -> tuple[bytes, str]:
    """A library of up to 12 functions, each calling lower ones (doubling, chains, diamonds), maybe itself."""
    count = draw(st.integers(1, 12))
    functions = []
    for level in range(count):
        fdef = tfpb.FunctionDef()
        fdef.signature.name = f"f{level}"
        fdef.signature.input_arg.add(name="a", type=tfpb.DT_FLOAT)
        fdef.signature.output_arg.add(name="out", type=tfpb.DT_FLOAT)
        previous = "a"
        calls = draw(st.lists(st.integers(0, level), min_size=0, max_size=4)) if level else []
        for i, callee in enumerate(calls):
            if callee == level and not draw(st.integers(0, 10)) == 0:
                callee = max(level - 1, 0)  # now and then a recursive call
            target = f"f{callee}"
            if draw(st.booleans()):
                fdef.node_def.append(hm._tf_node(f"c{i}", target, [previous]))
            else:
                func = tfpb.AttrValue()
                func.func.name = target
                fdef.node_def.append(hm._tf_node(f"c{i}", "PartitionedCall", [previous], f=func,
                                                 Tin=tfpb.AttrValue(list=tfpb.AttrValue.ListValue(type=[tfpb.DT_FLOAT])),
                                                 Tout=tfpb.AttrValue(list=tfpb.AttrValue.ListValue(type=[tfpb.DT_FLOAT]))))
            previous = f"c{i}:{'out' if fdef.node_def[-1].op == target else 'output'}:0"
        fdef.node_def.append(hm._tf_node("id", "Identity", [previous], T=_attr_type()))
        fdef.ret["out"] = "id:output:0"
        functions.append(fdef)
    top = draw(st.integers(0, count - 1))
    nodes = [hm.placeholder("x", (2,)), hm._tf_node("call", f"f{top}", ["x"]),
             hm._tf_node("y", "Identity", ["call"], T=_attr_type())]
    return hm.tf_graph(nodes, functions), ".pb"


@st.composite
def onnx_models(draw) -> tuple[bytes, str]:
    """ONNX folding bombs and contradictions: ConstantOfShape / Expand / Tile / Range / Reshape over drawn sizes."""
    op = draw(st.sampled_from(["ConstantOfShape", "Expand", "Tile", "Range", "Reshape"]))
    dims = draw(st.lists(DIMS.filter(lambda d: d >= 0), min_size=1, max_size=3))
    inits = [numpy_helper.from_array(np.array(dims, np.int64), "dims"),
             numpy_helper.from_array(np.array([1.0], np.float32), "one")]
    if op == "ConstantOfShape":
        node = helper.make_node(op, ["dims"], ["big"], value=numpy_helper.from_array(np.array([2.0], np.float32)))
    elif op == "Range":
        for part in ("start", "limit", "delta"):
            inits.append(numpy_helper.from_array(np.array(draw(FLOATS), np.float32), part))
        node = helper.make_node(op, ["start", "limit", "delta"], ["big"])
    elif op == "Tile":
        inits[0] = numpy_helper.from_array(np.array(dims[:1], np.int64), "dims")
        node = helper.make_node(op, ["one", "dims"], ["big"])
    else:
        node = helper.make_node(op, ["one", "dims"], ["big"])
    nodes = [node, helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0), helper.make_node("Add", ["x", "s"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [draw(DIMS.filter(lambda d: d >= 0))])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    opset = draw(st.sampled_from([hm.ONNX_OPSET, hm.ONNX_OPSET, 0, 99]))
    return hm.onnx_graph(nodes, [x], [y], inits, opset=opset), ".onnx"


def convert_hostile(data: bytes, suffix: str, directory: Path, **options) -> object:
    """Writes and converts one model, then serializes it; returns the Model, or the ScopeFusionError raised.

    Anything other than our own errors propagates (the fuzz test's failure)."""
    from scopefusion.convert import convert
    from scopefusion.errors import ScopeFusionError

    path = directory / f"model{suffix}"
    path.write_bytes(data)
    try:
        model = convert(path, **{**FUZZ_BUDGETS, **options})
        model.to_bytes("ge")
        return model
    except ScopeFusionError as e:
        return e
