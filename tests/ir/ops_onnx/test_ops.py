"""Single ``onnx`` dialect ops: inference through ONNX, value dependence, folds, kernels, control flow."""

from __future__ import annotations

import numpy as np
import pytest

from scopefusion import dtypes
from scopefusion.dialects.onnx import definitions
from scopefusion.errors import InferenceError
from scopefusion.ir import attrs as A
from scopefusion.ir.inference import input_info
from scopefusion.ir.opdef import InputInfo, OpDef
from scopefusion.ir_builder import Graph, IRContext, OpRegistry, builtin_ops, infer_node

F32, I64, BOOL = dtypes.FLOAT32, dtypes.INT64, dtypes.BOOL
_REGISTRIES: dict[int, OpRegistry] = {}


def graph(opset: int = 17) -> Graph:
    if opset not in _REGISTRIES:  # definitions are read-only once built; share them across tests
        _REGISTRIES[opset] = OpRegistry(builtin_ops() + definitions(opset))
    return Graph("g", IRContext(), _REGISTRIES[opset])


def run(g: Graph, op: str, inputs, **kw):
    node = g.add_node(f"onnx.{op}", inputs, unique=True, **kw)
    infer_node(node)
    return node


def types(node) -> list[str]:
    return [str(v.type) for v in node.outputs]


def fold(node):
    return node.opdef.try_fold([input_info(v, None if v is None else v.const_value) for v in node.inputs], dict(node.attrs.items()))


# ----------------------------------------------------------------------------- inference
def test_unknown_dims_and_ranks_degrade():
    g = graph()
    x = g.add_input("x", g.context.tensor(F32, (2, -1, 3)))
    y = g.add_input("y", g.context.tensor(F32, (3,)))
    r = g.add_input("r", g.context.tensor(F32, None))
    assert types(run(g, "Add", [x, y])) == ["f32[2,?,3]"]
    assert types(run(g, "Relu", [r])) == ["f32[*]"]
    assert types(run(g, "Transpose", [x], attrs={"perm": [2, 0, 1]})) == ["f32[3,2,?]"]
    assert types(run(g, "Shape", [r])) == ["i64[?]"]


VALUE_DEPENDENT_CASES = [
    # op, opset, (data input shape, other inputs as (array or shape)), attrs, static type, type without data
    ("Reshape", 17, [(2, 3, 4), np.array([0, -1], np.int64)], {}, "f32[2,12]", "f32[?,?]"),
    ("Expand", 17, [(3, 1), np.array([2, 3, 4], np.int64)], {}, "f32[2,3,4]", "f32[?,3,?]"),
    ("Tile", 17, [(2, 3), np.array([2, 2], np.int64)], {}, "f32[4,6]", "f32[?,?]"),
    ("Slice", 17, [(6, 8), np.array([1], np.int64), np.array([5], np.int64), np.array([1], np.int64)], {}, "f32[6,4]", "f32[?,?]"),
    ("Pad", 17, [(2, 3), np.array([1, 0, 1, 2], np.int64)], {}, "f32[4,5]", "f32[?,?]"),
    ("Unsqueeze", 17, [(2, 3), np.array([0, 3], np.int64)], {}, "f32[1,2,3,1]", "f32[*]"),
    ("Squeeze", 17, [(1, 3, 1), np.array([0], np.int64)], {}, "f32[3,1]", None),
    ("ReduceMean", 18, [(2, 3, 4), np.array([1], np.int64)], {"keepdims": 0}, "f32[2,4]", None),
    ("TopK", 17, [(4, 9), np.array([3], np.int64)], {}, "f32[4,3]", "f32[?,?]"),
    ("ConstantOfShape", 17, [np.array([2, 5], np.int64)], {}, "f32[2,5]", "f32[?,?]"),
    ("Resize", 17, [(1, 2, 4, 4), None, np.array([1, 1, 2, 2], np.float32)], {}, "f32[1,2,8,8]", "f32[?,?,?,?]"),
    ("Range", 17, [np.array(0, np.int64), np.array(7, np.int64), np.array(2, np.int64)], {}, "i64[4]", "i64[?]"),
    ("OneHot", 17, [(3,), np.array(5, np.int64), np.array([0, 1], np.float32)], {}, "f32[3,5]", "f32[3,?]"),
]


@pytest.mark.parametrize("case", VALUE_DEPENDENT_CASES, ids=[c[0] for c in VALUE_DEPENDENT_CASES])
def test_value_dependent_inputs_give_static_shapes_only_with_data(case):
    op, opset, inputs, attrs, static, without = case
    for known in (True, False):
        g = graph(opset)
        values = []
        for i, spec in enumerate(inputs):
            if spec is None:
                values.append(None)
            elif isinstance(spec, tuple):
                values.append(g.add_input(f"x{i}", g.context.tensor(F32, spec)))
            elif known:
                values.append(g.add_const(spec, f"c{i}"))
            else:
                values.append(g.add_input(f"d{i}", g.context.tensor(dtypes.from_numpy(spec.dtype), spec.shape)))
        node = run(g, op, values, attrs=attrs, num_outputs=2 if op == "TopK" else None)
        got = types(node)[0]
        if known:
            assert got == static
        elif without is not None:
            assert got == without


def test_onnx_rejection_is_an_inference_error_naming_the_node():
    g = graph()
    x = g.add_input("x", g.context.tensor(F32, (2, 3)))
    y = g.add_input("y", g.context.tensor(F32, (4,)))
    node = g.add_node("onnx.Add", [x, y], name="bad_add")
    with pytest.raises(InferenceError, match=r"node 'bad_add' \(onnx.Add\) with inputs \(f32\[2,3\], f32\[4\]\): ONNX opset 17 inference rejects"):
        infer_node(node)
    u = g.add_input("u", None)
    with pytest.raises(InferenceError, match="input 0 has no dtype"):
        infer_node(g.add_node("onnx.Relu", [u]))


def test_data_dependent_output_dims_are_unknown():
    g = graph()
    x = g.add_input("x", g.context.tensor(F32, (4, 5)))
    assert types(run(g, "NonZero", [x])) == ["i64[2,?]"]
    boxes = g.add_input("b", g.context.tensor(F32, (1, 10, 4)))
    scores = g.add_input("s", g.context.tensor(F32, (1, 1, 10)))
    assert types(run(g, "NonMaxSuppression", [boxes, scores])) == ["i64[?,3]"]


def test_ops_inferred_through_their_function_body():
    g = graph(12)
    a = g.add_input("a", g.context.tensor(I64, (1, 4)))
    b = g.add_input("b", g.context.tensor(I64, (4, 1)))
    assert types(run(g, "LessOrEqual", [a, b])) == ["bool[4,4]"]
    g = graph(21)
    x = g.add_input("x", g.context.tensor(F32, (2, 4, 5)))
    s = g.add_const(np.ones(4, np.float32), "s")
    assert types(run(g, "GroupNormalization", [x, s, s], attrs={"num_groups": 2})) == ["f32[2,4,5]"]
    m = g.add_input("m", g.context.tensor(F32, (1, 3, 4, 4)))
    assert types(run(g, "MeanVarianceNormalization", [m])) == ["f32[1,3,4,4]"]


def test_sequences_travel_as_their_element_dtype():
    g = graph()
    x = g.add_input("x", g.context.tensor(F32, (6, 2)))
    seq = run(g, "SplitToSequence", [x], attrs={"axis": 0})
    assert types(seq) == ["f32[*]"]
    at = run(g, "SequenceAt", [seq.outputs[0], g.add_const(np.array(0, np.int64), "i")])
    assert at.outputs[0].type.dtype is F32
    assert types(run(g, "SequenceLength", [seq.outputs[0]])) == ["i64[]"]


def test_constant_infers_and_folds_from_whichever_attribute_is_set():
    g = graph()
    for attrs, expect, value in [
        ({"value_float": 2.5}, "f32[]", np.float32(2.5)),
        ({"value_ints": [1, 2, 3]}, "i64[3]", np.array([1, 2, 3])),
        ({"value": np.arange(6, dtype=np.int32).reshape(2, 3)}, "i32[2,3]", np.arange(6).reshape(2, 3)),
        ({"value_strings": ["a", "b"]}, "str[2]", np.array(["a", "b"], object)),
    ]:
        node = run(g, "Constant", [], attrs=attrs)
        assert types(node) == [expect]
        assert np.array_equal(fold(node)[0], value)
    with pytest.raises(InferenceError, match="Constant needs exactly one of"):
        infer_node(g.add_node("onnx.Constant", [], attrs={"value_int": 1, "value_float": 1.0}, unique=True))


# ----------------------------------------------------------------------------- folds and kernels
def test_shape_and_size_fold_from_static_shapes_only():
    g = graph()
    x = g.add_input("x", g.context.tensor(F32, (2, 3, 5, 7)))
    assert fold(run(g, "Shape", [x]))[0].tolist() == [2, 3, 5, 7]
    assert fold(run(g, "Shape", [x], attrs={"start": 1, "end": -1}))[0].tolist() == [3, 5]
    assert types(run(g, "Shape", [x], attrs={"start": -2})) == ["i64[2]"]
    assert fold(run(g, "Size", [x]))[0] == 210
    dyn = g.add_input("d", g.context.tensor(F32, (-1, 3)))
    assert fold(run(g, "Shape", [dyn])) is None and fold(run(g, "Size", [dyn])) is None


def test_reference_kernels_run_onnx_reference():
    g = graph()
    kernel = g.registry.get("onnx.Gemm").reference
    a, b, c = np.ones((2, 3), np.float32), np.full((4, 3), 2, np.float32), np.ones(4, np.float32)
    (y,) = kernel([a, b, c], {"transB": 1, "alpha": 1.0, "beta": 1.0, "transA": 0})
    assert y.shape == (2, 4) and np.all(y == 7)
    # an omitted optional input in the middle (Resize's roi), and a function-only op (Gelu)
    (up,) = graph().registry.get("onnx.Resize").reference([np.ones((1, 1, 2, 2), np.float32), None, np.array([1, 1, 2, 2], np.float32)], {"mode": "nearest"})
    assert up.shape == (1, 1, 4, 4)
    x = np.linspace(-3, 3, 7).astype(np.float32)
    (gelu,) = graph(20).registry.get("onnx.Gelu").reference([x], {"approximate": "none"})
    from math import erf

    assert np.allclose(gelu, [0.5 * v * (1 + erf(v / np.sqrt(2))) for v in x], atol=1e-6)


def test_split_kernel_needs_its_output_count():
    data = np.arange(12, dtype=np.float32).reshape(6, 2)
    split18 = graph(18).registry.get("onnx.Split").reference
    assert [p.shape for p in split18([data], {"axis": 0, "num_outputs": 3})] == [(2, 2)] * 3
    split13 = graph(13).registry.get("onnx.Split").reference
    assert [p.shape for p in split13([data, np.array([1, 5])], {"axis": 0})] == [(1, 2), (5, 2)]
    with pytest.raises(ValueError, match="_num_outputs"):
        split13([data], {"axis": 0})
    assert len(split13([data], {"axis": 0, "_num_outputs": 2})) == 2


def test_random_ops_never_fold_and_dropout_folds_as_identity():
    g = graph()
    x = g.add_const(np.ones((2, 2), np.float32), "x")
    assert fold(run(g, "RandomNormalLike", [x])) is None
    out, mask = fold(run(g, "Dropout", [x], num_outputs=2))
    assert np.array_equal(out, np.ones((2, 2))) and mask.all()
    training = g.add_const(np.array(True), "t")
    ratio = g.add_const(np.array(0.5, np.float32), "r")
    assert fold(run(g, "Dropout", [x, ratio, training], num_outputs=2)) is None


# ----------------------------------------------------------------------------- control flow
def _branch(g: Graph, name: str, shape, dtype=F32) -> Graph:
    body = Graph(name, g.context, g.registry)
    v = body.add_input("v", g.context.tensor(dtype, shape))
    body.set_outputs([v])
    return body


def test_if_takes_the_branch_a_constant_condition_selects():
    g = graph()
    bodies = {"then_branch": _branch(g, "t", (2, 6)), "else_branch": _branch(g, "e", (2, 3))}
    cond = g.add_input("c", g.context.tensor(BOOL, ()))
    assert types(run(g, "If", [cond], subgraphs=bodies, num_outputs=1)) == ["f32[2,?]"]
    true = g.add_const(np.array(True), "true")
    assert types(run(g, "If", [true], subgraphs=bodies, num_outputs=1)) == ["f32[2,6]"]
    other_rank = {"then_branch": _branch(g, "t2", (2, 6, 1)), "else_branch": _branch(g, "e2", (2, 3))}
    assert types(run(g, "If", [cond], subgraphs=other_rank, num_outputs=1)) == ["f32[*]"]
    with pytest.raises(InferenceError, match="has no body 'then_branch'"):
        run(g, "If", [cond], num_outputs=1)


def test_loop_scan_outputs_need_a_fixed_trip_count():
    g = graph()
    body = Graph("body", g.context, g.registry)
    body.add_input("i", g.context.tensor(I64, ()))
    keep = body.add_input("cond", g.context.tensor(BOOL, ()))
    acc = body.add_input("acc", g.context.tensor(F32, (3,)))
    body.set_outputs([keep, acc, acc])
    init = g.add_const(np.zeros(3, np.float32), "init")
    m = g.add_const(np.array(4, np.int64), "m")
    unknown = g.add_input("n", g.context.tensor(I64, ()))
    assert types(run(g, "Loop", [m, None, init], subgraphs={"body": body}, num_outputs=2)) == ["f32[3]", "f32[4,3]"]
    assert types(run(g, "Loop", [unknown, None, init], subgraphs={"body": body}, num_outputs=2)) == ["f32[3]", "f32[?,3]"]
    cond = g.add_input("keep", g.context.tensor(BOOL, ()))
    assert types(run(g, "Loop", [m, cond, init], subgraphs={"body": body}, num_outputs=2)) == ["f32[3]", "f32[?,3]"]


def test_optional_attribute_without_default_is_left_unset():
    opdef = OpDef("Op", "t").input("x").output("y").attr("strides", A.LIST_INT, optional=True).attr("k", A.INT, default=1)
    assert opdef.check_attrs({}, "n") == {"k": A.AttrValue(A.INT, 1)}
    assert not opdef.attrs["strides"].required
    from scopefusion.ir.opdef import InferContext

    ctx = InferContext(opdef, "n", [InputInfo((1,), F32)], {}, 1, {"body": "a graph"})
    assert ctx.attr("strides") is None and ctx.subgraphs == {"body": "a graph"}


# ----------------------------------------------------------------------------- onnxruntime's ops
def ms(g: Graph, op: str, inputs, **kw):
    node = g.add_node(f"onnx:com.microsoft.{op}", inputs, unique=True, **kw)
    infer_node(node)
    return node


def test_contrib_ops_are_inferred_by_onnxruntime():
    g = graph()
    x = g.add_input("x", g.context.tensor(F32, (2, -1, 32)))
    gamma = g.add_const(np.ones(32, np.float32), "gamma")
    skip = ms(g, "SkipLayerNormalization", [x, x, gamma], num_outputs=4)
    assert types(skip) == ["f32[2,?,32]", "f32[2,?,1]", "f32[2,?,1]", "f32[2,?,32]"]
    r = g.add_input("r", g.context.tensor(F32, None))
    assert types(ms(g, "Gelu", [r])) == ["f32[*]"]  # an unknown rank, not a scalar
    s = g.add_input("s", g.context.tensor(F32, ()))
    assert types(ms(g, "Gelu", [s])) == ["f32[]"]
    w, b = g.add_const(np.ones((32, 96), np.float32), "w"), g.add_const(np.ones(96, np.float32), "b")
    assert types(ms(g, "Attention", [x, w, b], attrs={"num_heads": 4}, num_outputs=1)) == ["f32[2,?,32]"]
    limit = g.add_const(np.array(7, np.int64), "limit")
    one = g.add_const(np.array(1, np.int64), "one")
    assert types(ms(g, "Range", [one, limit, one])) == ["i64[6]"]  # value-dependent inputs as initializers
    half = g.add_input("h", g.context.tensor(dtypes.FLOAT16, (32,)))
    bad = g.add_node("onnx:com.microsoft.BiasGelu", [x, half], name="bad_gelu")  # T binds two dtypes
    with pytest.raises(InferenceError, match=r"node 'bad_gelu' \(onnx:com.microsoft.BiasGelu\).*onnxruntime rejects the node"):
        infer_node(bad)


def test_contrib_kernels_run_in_onnxruntime():
    g = graph()
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    bias = np.full(4, 0.5, np.float32)
    (y,) = g.registry.get("onnx:com.microsoft.BiasGelu").reference([x, bias], {})
    from math import erf

    v = x + bias
    assert np.allclose(y, 0.5 * v * (1 + np.vectorize(erf)(v / np.sqrt(2))), atol=1e-5)
    mha = g.registry.get("onnx:com.microsoft.MultiHeadAttention").reference
    q = np.ones((1, 2, 8), np.float32)
    assert len(mha([q, q, q], {"num_heads": 2})) == 1  # the optional outputs need more inputs: required ones only
    assert len(mha([q, q, q], {"num_heads": 2, "_num_outputs": 1})) == 1
    rms = g.registry.get("onnx.SimplifiedLayerNormalization").reference
    (out,) = rms([x, np.ones(4, np.float32)], {"epsilon": 0.0, "axis": -1})[:1]
    assert np.allclose(out, x / np.sqrt((x**2).mean(-1, keepdims=True)), atol=1e-5)
