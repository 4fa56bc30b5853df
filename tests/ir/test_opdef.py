from __future__ import annotations

import numpy as np
import pytest

from scopefusion import dtypes
from scopefusion.errors import InferenceError
from scopefusion.ir import attrs as A
from scopefusion.ir.core_ops import core_ops as builtin_ops
from scopefusion.ir.graph import Graph, GraphError
from scopefusion.ir.inference import infer_node
from scopefusion.ir.opdef import FollowType, InferContext, InputInfo, OpDef, OpRegistry, ParamType
from scopefusion.ir.types import IRContext

F32, I32, I64 = dtypes.FLOAT32, dtypes.INT32, dtypes.INT64


def reshape_shape(ctx: InferContext) -> None:
    x = ctx.param("tensor")
    shape_input = ctx.param("shape")
    target = shape_input.data
    if target is None:  # rank from the shape input's length, dims unknown
        ctx.set_output_shape(0, None if shape_input.shape is None else [-1] * shape_input.shape[0])
        return
    dims = [int(d) for d in target]
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        dims[dims.index(-1)] = int(np.prod(x.shape)) // known
    ctx.set_output_shape(0, dims)


def make_registry() -> OpRegistry:
    reg = OpRegistry(builtin_ops())
    reg.define("Add", "t").input("x", dtypes=(F32, I32)).input("y", dtypes=(F32, I32)).output("z", follow="x")
    (
        reg.define("Reshape", "t")
        .input("tensor")
        .input("shape", dtypes=(I32, I64), value_depend=True)
        .output("output", follow=("tensor", FollowType.DTYPE))
        .set_infer_shape(reshape_shape)
    )
    reg.define("Shape", "t").input("x").output("y", dtypes=(I32,)).set_infer_shape(
        lambda ctx: ctx.set_output_shape(0, [len(ctx.input_shape(0))])
    )
    (
        reg.define("Concat", "t")
        .input("values", ParamType.DYNAMIC)
        .input("axis", dtypes=(I32,), value_depend=True)
        .output("y", follow=("values", FollowType.DTYPE))
        .attr("N", A.INT, default=2)
        .set_infer_shape(_concat_shape)
    )
    return reg


def _concat_shape(ctx: InferContext) -> None:
    values = ctx.params("values")
    axis = int(ctx.param("axis").data)
    shape = list(values[0].shape)
    shape[axis] = sum(v.shape[axis] for v in values)
    ctx.set_output_shape(0, shape)


@pytest.fixture
def graph():
    return Graph("g", IRContext(), make_registry())


def test_follow_copies_shape_dtype_and_format(graph):
    ctx = graph.context
    x = graph.add_input("x", ctx.tensor(F32, (2, 3), "NHWC"))
    y = graph.add_input("y", ctx.tensor(F32, (2, 3)))
    add = graph.add_node("t.Add", [x, y])
    infer_node(add)
    assert add.outputs[0].type is ctx.tensor(F32, (2, 3), "NHWC")


def test_value_dependent_input_sees_constant_data(graph):
    ctx = graph.context
    x = graph.add_input("x", ctx.tensor(F32, (2, 3, 4)))
    shape = graph.add_const(np.array([6, -1], np.int64), "shape")
    r = graph.add_node("t.Reshape", [x, shape])
    infer_node(r)
    assert r.outputs[0].type is ctx.tensor(F32, (6, 4))


def test_value_dependent_input_without_constant_producer_gets_no_data(graph):
    ctx = graph.context
    x = graph.add_input("x", ctx.tensor(F32, (2, 3)))
    s = graph.add_input("s", ctx.tensor(I64, (2,)))
    r = graph.add_node("t.Reshape", [x, s])
    infer_node(r)
    assert r.outputs[0].type is ctx.tensor(F32, (-1, -1))


def test_non_value_dependent_inputs_never_expose_data():
    seen = []
    opdef = OpDef("Peek", "t").input("x").output("y", follow="x")
    opdef.set_infer_shape(lambda ctx: (seen.append(ctx.input(0)), ctx.set_output_shape(0, ctx.input_shape(0))))
    data = np.ones(3, np.float32)
    ctx = InferContext(opdef, "peek", [InputInfo((3,), F32, "ND", data)], {}, 1)
    opdef.infer(ctx)
    assert seen[0].data is None and seen[0].shape == (3,) and seen[0].dtype is F32 and seen[0].format == "ND"


def test_explicit_infer_shape_wins_over_follow():
    opdef = OpDef("Double", "t").input("x").output("y", follow="x")
    opdef.set_infer_shape(lambda ctx: ctx.set_output_shape(0, [2 * d for d in ctx.input_shape(0)]))
    ctx = InferContext(opdef, "d", [InputInfo((3,), F32)], {}, 1)
    opdef.infer(ctx)
    assert ctx.output_shape(0) == (6,) and ctx.output_dtype(0) is F32


def test_incomplete_inference_names_the_op_inputs_and_reason():
    opdef = OpDef("Split2", "t").input("x").output("a", follow="x").output("b", follow="x")
    opdef.set_infer_shape(lambda ctx: ctx.set_output_shape(0, ctx.input_shape(0)))  # forgets output 1
    ctx = InferContext(opdef, "split", [InputInfo((4, 2), F32)], {}, 2)
    with pytest.raises(InferenceError, match=r"node 'split' \(t.Split2\) with inputs \(f32\[4,2\]\): output 1 has no shape"):
        opdef.infer(ctx)


def test_failing_inference_function_becomes_inference_error():
    opdef = OpDef("Bad", "t").input("x").output("y", follow="x")
    opdef.set_infer_shape(lambda ctx: 1 / 0)
    ctx = InferContext(opdef, "bad", [InputInfo(None, F32)], {}, 1)
    with pytest.raises(InferenceError, match=r"node 'bad' \(t.Bad\) with inputs \(f32\*\): inference failed: ZeroDivisionError"):
        opdef.infer(ctx)


def test_output_dtype_from_a_single_allowed_dtype(graph):
    x = graph.add_input("x", graph.context.tensor(F32, (2, 5)))
    s = graph.add_node("t.Shape", [x])
    infer_node(s)
    assert s.outputs[0].type is graph.context.tensor(I32, (2,))


def test_dynamic_inputs_bind_and_infer(graph):
    ctx = graph.context
    a = graph.add_input("a", ctx.tensor(F32, (2, 3)))
    b = graph.add_input("b", ctx.tensor(F32, (2, 4)))
    c = graph.add_input("c", ctx.tensor(F32, (2, 1)))
    axis = graph.add_const(np.array(1, np.int32), "axis")
    cat = graph.add_node("t.Concat", [a, b, c, axis], attrs={"N": 3})
    infer_node(cat)
    assert cat.outputs[0].type is ctx.tensor(F32, (2, 8))
    assert [(s.name, lo, hi) for s, lo, hi in cat.opdef.bind_inputs(4)] == [("values", 0, 3), ("axis", 3, 4)]


def test_attribute_defaults_and_required_attributes(graph):
    axis = graph.add_const(np.array(0, np.int32), "axis")
    x = graph.add_input("x", graph.context.tensor(F32, (1,)))
    cat = graph.add_node("t.Concat", [x, x, axis])
    assert cat.attrs.as_int("N") == 2
    reg = OpRegistry(builtin_ops())
    reg.define("Cast", "t").input("x").output("y").attr("to", A.DTYPE)
    g = Graph("g2", IRContext(), reg)
    x2 = g.add_input("x", None)
    with pytest.raises(GraphError, match="needs attribute 'to'"):
        g.add_node("t.Cast", [x2])


# --------------------------------------------------------------------------- definition-time errors
def test_follow_and_value_depend_must_name_declared_inputs():
    with pytest.raises(ValueError, match="follow names input 'x1', which is not declared"):
        OpDef("A", "t").input("x").output("y", follow="x1")
    with pytest.raises(ValueError, match="value_depend names input 'shp'"):
        OpDef("R", "t").input("x").input("shape").value_depend("shp")
    with pytest.raises(ValueError, match="follow names output 'z'"):
        OpDef("A", "t").input("x").output("y").follow("z", "x")


def test_duplicate_names_and_bad_defaults_fail_at_definition():
    with pytest.raises(ValueError, match="already declared"):
        OpDef("A", "t").input("x").input("x")
    with pytest.raises(ValueError, match="default of attribute 'k'"):
        OpDef("A", "t").attr("k", A.INT, default="one")
    reg = OpRegistry()
    reg.define("A", "t")
    with pytest.raises(ValueError, match="already registered"):
        reg.define("A", "t")


def test_unknown_op_and_attribute_names_are_errors_when_nodes_are_made(graph):
    x = graph.add_input("x", None)
    with pytest.raises(GraphError, match="op 't.Ad' is not registered"):
        graph.add_node("t.Ad", [x, x])
    with pytest.raises(GraphError, match="has no attribute 'alpha'"):
        graph.add_node("t.Add", [x, x], attrs={"alpha": 1})
    add = graph.add_node("t.Add", [x, x])
    with pytest.raises(GraphError, match="has no attribute 'beta'"):
        add.set_attr("beta", 2)
    add.set_attr("_origin", "rule")  # private annotations are always allowed
    with pytest.raises(GraphError, match=r"takes inputs \[x\(required\), y\(required\)\], found 1"):
        graph.add_node("t.Add", [x], name="one_input")


def test_infer_context_refuses_undeclared_attribute_and_input_names():
    opdef = OpDef("A", "t").input("x").output("y", follow="x").attr("k", A.INT, default=1)
    opdef.set_infer_shape(lambda ctx: ctx.attr("kk"))
    with pytest.raises(InferenceError, match="asked for attribute 'kk'"):
        opdef.infer(InferContext(opdef, "a", [InputInfo((1,), F32)], {}, 1))


def test_optional_inputs_bind_left_to_right():
    opdef = OpDef("Clip", "t").input("x").input("lo", ParamType.OPTIONAL).input("hi", ParamType.OPTIONAL).output("y")
    assert [(s.name, b - a) for s, a, b in opdef.bind_inputs(2)] == [("x", 1), ("lo", 1), ("hi", 0)]
    with pytest.raises(ValueError, match="found 4"):
        opdef.bind_inputs(4)


def test_open_attrs_keep_undeclared_attributes_but_check_declared_ones():
    reg = OpRegistry(builtin_ops())
    reg.register(OpDef("Conv2D", "tf", open_attrs=True).input("x").input("w").output("y").attr("strides", A.LIST_INT))
    g = Graph("g", IRContext(), reg)
    x = g.add_input("x", None)
    conv = g.add_node("tf.Conv2D", [x, x], attrs={"strides": [1, 1, 1, 1], "use_cudnn_on_gpu": True})
    assert conv.attrs.as_bool("use_cudnn_on_gpu") is True
    with pytest.raises(GraphError, match="attribute 'strides': expected a list or tuple, found str"):
        g.add_node("tf.Conv2D", [x, x], name="c2", attrs={"strides": "1"})


def test_bindings_follow_later_declarations():
    op = OpDef("Grow", "test").input("x").output("y")
    assert [(s.name, a, b) for s, a, b in op.bind_inputs(1)] == [("x", 0, 1)]
    op.input("rest", ParamType.DYNAMIC)
    assert [(s.name, a, b) for s, a, b in op.bind_inputs(3)] == [("x", 0, 1), ("rest", 1, 3)]
    assert [(s.name, a, b) for s, a, b in op.bind_inputs(1)] == [("x", 0, 1), ("rest", 1, 1)]
    op.value_depend("x")
    assert op.bind_inputs(1)[0][0].value_depend
    op.output("z", ParamType.OPTIONAL)
    assert [(s.name, a, b) for s, a, b in op.bind_outputs(2)] == [("y", 0, 1), ("z", 1, 2)]
    with pytest.raises(ValueError, match="found 4"):
        op.bind_outputs(4)


def test_typed_attribute_values_are_checked_and_completed_like_plain_ones():
    reg = OpRegistry(builtin_ops())
    reg.define("Conv", "t").input("x").output("y").attr("k", A.INT).attr("pad", A.STR, default="SAME").attr(
        "dil", A.LIST_INT, default=(1, 1)
    )
    reg.define("Open", "t", open_attrs=True).input("x").output("y").attr("k", A.INT, default=0)
    g = Graph("g3", IRContext(), reg)
    x = g.add_input("x", None)
    given = {"_note": A.AttrValue(A.STR, "n"), "dil": A.AttrValue(A.LIST_INT, (2, 2)), "k": A.AttrValue(A.INT, 3)}
    conv = g.add_node("t.Conv", [x], attrs=given)
    assert list(conv.get_all_attrs()) == ["_note", "dil", "k", "pad"], "given attributes first, then defaults"
    assert conv.attrs.get("pad") == "SAME" and conv.attrs.as_ints("dil") == (2, 2)
    with pytest.raises(GraphError, match="attribute 'k' is float, expected int"):
        g.add_node("t.Conv", [x], attrs={"k": A.AttrValue(A.FLOAT, 3.0)}, name="wrong_kind")
    with pytest.raises(GraphError, match="has no attribute 'alpha'"):
        g.add_node("t.Conv", [x], attrs={"k": A.AttrValue(A.INT, 1), "alpha": A.AttrValue(A.INT, 1)}, name="extra")
    with pytest.raises(GraphError, match="needs attribute 'k'"):
        g.add_node("t.Conv", [x], attrs={"pad": A.AttrValue(A.STR, "VALID")}, name="missing")
    with pytest.raises(GraphError, match="has no attribute ''"):
        g.add_node("t.Conv", [x], attrs={"": A.AttrValue(A.INT, 1)}, name="empty_name")
    opened = g.add_node("t.Open", [x], attrs={"anything": A.AttrValue(A.FLOAT, 1.5)})
    assert list(opened.get_all_attrs()) == ["anything", "k"]
    with pytest.raises(GraphError, match="attribute 'k' is str, expected int"):
        g.add_node("t.Open", [x], attrs={"k": A.AttrValue(A.STR, "1")}, name="open_wrong_kind")


def test_defaults_and_required_attributes_follow_declarations_made_after_first_use():
    op = OpDef("Scale", "t").input("x").output("y", follow="x").attr("a", A.INT, default=1)
    complete = {"a": A.AttrValue(A.INT, 2)}
    op.complete_attrs(complete, "n0")
    assert complete == {"a": A.AttrValue(A.INT, 2)}
    op.attr("b", A.INT, default=3)
    given = {"a": A.AttrValue(A.INT, 2)}
    op.complete_attrs(given, "n1")
    assert given["b"] == A.AttrValue(A.INT, 3)
    copy = op.copy().attr("c", A.INT)
    with pytest.raises(ValueError, match="needs attribute 'c'"):
        copy.complete_attrs({"a": A.AttrValue(A.INT, 2), "b": A.AttrValue(A.INT, 3)}, "n2")
    done = {"a": A.AttrValue(A.INT, 2), "b": A.AttrValue(A.INT, 3)}
    op.complete_attrs(done, "n3")  # the original has no 'c'
    assert list(done) == ["a", "b"]


def test_converted_nodes_get_defaults_declared_after_first_use():
    reg = OpRegistry(builtin_ops())
    op = reg.define("Scale", "t").input("x").output("y", follow="x").attr("a", A.INT, default=1)
    g = Graph("g4", IRContext(), reg)
    x = g.add_input("x", None)
    g.add_node("t.Scale", [x], attrs={"a": A.AttrValue(A.INT, 2)}, name="first")
    fast = g._add_converted("t.Scale", "t", "Scale", op, [x], "second", {"a": A.AttrValue(A.INT, 2)}, 1)
    assert fast is not None and list(fast.get_all_attrs()) == ["a"]
    op.attr("b", A.INT, default=3)  # a later declaration: what was remembered of complete maps no longer holds
    g.add_node("t.Scale", [x], attrs={"a": A.AttrValue(A.INT, 2)}, name="third")
    late = g._add_converted("t.Scale", "t", "Scale", op, [x], "fourth", {"a": A.AttrValue(A.INT, 2)}, 1)
    assert late is not None and late.attrs.get("b") == 3
