"""Inference rules of the ``tf`` definitions on their own (no TensorFlow): unknown shapes degrade, real
contradictions are InferenceErrors naming the node, value-dependent inputs are declared, shape ops fold
from static shapes, reshape-like ops forward memory, and StridedSlice agrees with numpy's slicing."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scopefusion import dtypes as D
from scopefusion.dialects.tf import definitions
from scopefusion.dialects.tf.slicing import plan_strided_slice
from scopefusion.errors import InferenceError
from scopefusion.ir.attrs import AttrValue
from scopefusion.ir.opdef import InferContext, InputInfo, OpRegistry

REG = OpRegistry(definitions())
F32, I32, I64 = D.FLOAT32, D.INT32, D.INT64


def infer(op: str, inputs: list[InputInfo], num_outputs: int = 1, subgraphs=None, **attrs):
    opdef = REG.get(f"tf.{op}")
    values = {k: AttrValue(opdef.attrs[k].type_id, v) for k, v in attrs.items()}
    ctx = InferContext(opdef, f"{op.lower()}_node", inputs, opdef.check_attrs(values, op), num_outputs, subgraphs)
    opdef.infer(ctx)
    return [(ctx.output_shape(i), ctx.output_dtype(i)) for i in range(num_outputs)]


def t(shape, dtype=F32, data=None) -> InputInfo:
    return InputInfo(shape, dtype, "ND", None if data is None else np.asarray(data))


def const(values, dtype=np.int32) -> InputInfo:
    data = np.asarray(values, dtype)
    return InputInfo(data.shape, D.from_numpy(data.dtype), "ND", data)


# ------------------------------------------------------------------------------------------ contradictions
@pytest.mark.parametrize(
    "op, inputs, attrs, message",
    [
        ("MatMul", [t((2, 3)), t((4, 5))], {}, "MatMul inner dims disagree: 3 vs 4"),
        ("AddV2", [t((2, 3)), t((4,))], {}, "cannot broadcast"),
        ("Reshape", [t((2, 3)), const([4, 2])], {}, "6 elements"),
        ("Reshape", [t((2, 3)), const([-1, -1])], {}, "more than one -1"),
        ("ConcatV2", [t((2, 3)), t((3, 3)), const(1)], {}, "dim 0"),
        ("Conv2D", [t((1, 8, 8, 3)), t((3, 3, 4, 8))], {"strides": (1, 1, 1, 1), "padding": "SAME"}, "multiple"),
        ("Squeeze", [t((2, 3))], {"squeeze_dims": (1,)}, "size 3"),
        ("StridedSlice", [t((4,)), const([5]), const([6]), const([1])], {"shrink_axis_mask": 1}, "out of bounds"),
        ("Range", [const(0), const(5), const(0)], {}, "must not be 0"),
        ("Transpose", [t((2, 3)), const([0, 0])], {}, "not a permutation"),
        ("Pack", [t((2, 3)), t((2, 4))], {}, "Pack inputs"),
    ],
)
def test_contradictions_are_inference_errors_naming_the_node(op, inputs, attrs, message):
    with pytest.raises(InferenceError, match=rf"node '{op.lower()}_node' \(tf\.{op}\).*{message}"):
        infer(op, inputs, **attrs)


# ------------------------------------------------------------------------------------------ unknowns
def test_unknown_inputs_degrade_instead_of_failing():
    assert infer("MatMul", [t(None), t((4, 5))]) == [((-1, 5), F32)]
    assert infer("AddV2", [t((-1, 3)), t((4, 1))]) == [((4, 3), F32)]
    assert infer("AddV2", [t((-1, 3)), t((1, 3))]) == [((-1, 3), F32)]
    assert infer("AddV2", [t(None), t((3,))]) == [(None, F32)]
    assert infer("Reshape", [t((2, 3)), t((3,), I32)]) == [((-1, -1, -1), F32)]
    assert infer("Reshape", [t((2, 3)), t((1,), I32)]) == [((6,), F32)]  # one dim: all the elements
    assert infer("Reshape", [t((-1, 3)), const([-1, 3, 1])]) == [((-1, 3, 1), F32)]
    assert infer("Mean", [t((2, 3, 4)), t((2,), I32)], keep_dims=True) == [((-1, -1, -1), F32)]
    assert infer("Mean", [t((2, 3, 4)), t((2,), I32)]) == [(None, F32)]
    assert infer("ArgMax", [t((2, 3, 4)), t((), I32)]) == [((-1, -1), I64)]
    assert infer("ConcatV2", [t(None), t((2, 3)), t((), I32)]) == [((-1, -1), F32)]
    assert infer("ConcatV2", [t((2, -1)), t((-1, 3)), const(1)]) == [((2, -1), F32)]
    assert infer("StridedSlice", [t(None), const([0]), const([1]), const([1])]) == [(None, F32)]
    assert infer("StridedSlice", [t((-1, 5)), t((2,), I32), t((2,), I32), const([1, 1])], begin_mask=2, end_mask=2) == [
        ((-1, 5), F32)
    ]
    assert infer("Squeeze", [t((1, -1))]) == [(None, F32)]
    assert infer("Fill", [t((3,), I32), t((), F32)]) == [((-1, -1, -1), F32)]
    assert infer("ClipByValue", [t((-1, 3)), t(()), t((4, 3))]) == [((4, 3), F32)]
    assert infer("BiasAdd", [t((2, -1)), t((5,))]) == [((2, 5), F32)]
    assert infer("Conv2D", [t(None), t((3, 3, 3, 8))], strides=(1, 2, 2, 1), padding="SAME") == [((-1, -1, -1, 8), F32)]
    assert infer("Merge", [t((2, 3)), InputInfo(None, None)], 2) == [(None, F32), ((), I32)]
    assert infer("Merge", [t((2, 3)), t((2, 4))], 2) == [((2, -1), F32), ((), I32)]


def test_data_dependent_ops_are_dynamic():
    assert infer("Where", [t((3, 4), D.BOOL)]) == [((-1, 2), I64)]
    assert infer("Unique", [t((6,), I32)], 2) == [((-1,), I32), ((6,), I32)]
    nms = [t((10, 4)), t((10,)), const(5), t(()), t(())]
    assert infer("NonMaxSuppressionV3", nms) == [((-1,), I32)]
    assert infer("NonMaxSuppressionV4", nms, 2, pad_to_max_output_size=True) == [((5,), I32), ((), I32)]


def test_functional_loops_take_declared_invariants_else_their_inputs():
    loop = [t((2, 8)), t((), D.VARIANT), t((), I32)]
    assert infer("While", loop, 3) == [((2, 8), F32), ((), D.VARIANT), ((), I32)]
    assert infer("StatelessWhile", loop, 3, output_shapes=((-1, 8), (), ())) == [((-1, 8), F32), ((), D.VARIANT), ((), I32)]
    assert infer("If", [t((), D.BOOL), t((3,))], 1, Tout=(F32,)) == [(None, F32)]
    assert infer("StatelessIf", [t((), D.BOOL), t((3,))], 1, Tout=(F32,), output_shapes=((3,),)) == [((3,), F32)]


def _body(*shapes):
    """An inferred body graph whose outputs have ``shapes`` (float32)."""
    from scopefusion.ir.core_ops import core_ops as builtin_ops
    from scopefusion.ir.graph import Graph
    from scopefusion.ir.types import IRContext

    graph = Graph("body", IRContext(), OpRegistry(builtin_ops()))
    graph.set_outputs([graph.add_input(f"out{i}", graph.context.tensor(F32, s)) for i, s in enumerate(shapes)])
    return graph


def test_conditionals_and_calls_read_their_inferred_bodies():
    branches = {"then_branch": _body((2, 3)), "else_branch": _body((2, 5))}
    args = [t((), D.BOOL), t((2,))]
    assert infer("If", args, 1, branches, Tout=(F32,)) == [((2, -1), F32)]
    assert infer("If", [const(True, np.bool_), t((2,))], 1, branches, Tout=(F32,)) == [((2, 3), F32)]
    assert infer("StatelessIf", args, 1, branches, Tout=(F32,), output_shapes=((-1, 7),)) == [((2, 7), F32)]
    cases = {"branches:0": _body((4,)), "branches:1": _body((4,)), "branches:2": _body((1,))}
    assert infer("Case", [t((), I32), t((4,))], 1, cases, Tout=(F32,)) == [((-1,), F32)]
    assert infer("StatelessCase", [const(1), t((4,))], 1, cases, Tout=(F32,)) == [((4,), F32)]
    assert infer("StatelessCase", [const(9), t((4,))], 1, cases, Tout=(F32,)) == [((1,), F32)]  # runs the last
    assert infer("PartitionedCall", [t((4,))], 1, {"f": _body((4, 2))}, Tout=(F32,)) == [((4, 2), F32)]
    assert infer("StatefulPartitionedCall", [t((4,))], 1, None, Tout=(F32,)) == [(None, F32)]
    assert infer("If", args, 1, branches) == [((2, -1), F32)]  # no Tout (dropped by the frontend): bodies' dtypes
    with pytest.raises(InferenceError, match="no Tout attribute and no inferred body"):
        infer("PartitionedCall", [t((4,))], 1)
    with pytest.raises(InferenceError, match="Tout says i32"):
        infer("PartitionedCall", [t((4,))], 1, {"f": _body((4,))}, Tout=(I32,))
    with pytest.raises(InferenceError, match="output_shapes"):
        infer("If", args, 1, branches, Tout=(F32,), output_shapes=((3, -1),))


# ------------------------------------------------------------------------------------------ declarations
VALUE_DEPENDENT = {
    "Reshape": ["shape"], "Fill": ["dims"], "Tile": ["multiples"], "Pad": ["paddings"], "PadV2": ["paddings"],
    "MirrorPad": ["paddings"], "Slice": ["begin", "size"], "StridedSlice": ["begin", "end", "strides"],
    "ConcatV2": ["axis"], "Concat": ["concat_dim"], "Mean": ["reduction_indices"], "Sum": ["reduction_indices"],
    "Max": ["reduction_indices"], "Min": ["reduction_indices"], "Prod": ["reduction_indices"],
    "All": ["reduction_indices"], "Any": ["reduction_indices"], "ArgMax": ["dimension"], "ArgMin": ["dimension"],
    "Transpose": ["perm"], "ExpandDims": ["dim"], "Range": ["start", "limit", "delta"], "Split": ["split_dim"],
    "SplitV": ["size_splits", "split_dim"], "OneHot": ["depth"], "TopKV2": ["k"], "BroadcastTo": ["shape"],
    "ResizeBilinear": ["size"], "ResizeNearestNeighbor": ["size"], "GatherV2": ["axis"], "Cumsum": ["axis"],
    "TensorListReserve": ["element_shape", "num_elements"], "TensorListGetItem": ["element_shape"],
    "TensorListStack": ["element_shape"], "Conv2DBackpropInput": ["input_sizes"], "ScatterNd": ["shape"],
}  # fmt: skip


def test_value_dependent_inputs_are_declared():
    for op, names in VALUE_DEPENDENT.items():
        specs = {s.name: s for s in REG.get(f"tf.{op}").inputs}
        assert {n for n, s in specs.items() if s.value_depend} == set(names), op


def test_reshape_like_ops_forward_their_input_memory():
    forwarding = {d.name for d in REG if d.memory_forward == 0}
    assert {"Reshape", "Squeeze", "ExpandDims", "Identity", "Snapshot", "StopGradient", "EnsureShape"} <= forwarding
    assert "Transpose" not in forwarding and "Tile" not in forwarding


def test_shape_ops_fold_from_static_shapes_only():
    shape, size, rank, shape_n = (REG.get(f"tf.{n}") for n in ("Shape", "Size", "Rank", "ShapeN"))
    out_int64 = {"out_type": AttrValue(shape.attrs["out_type"].type_id, I64)}
    (value,) = shape.try_fold([t((2, 8, 32))], shape.check_attrs({}, "s"))
    assert value.dtype == np.int32 and value.tolist() == [2, 8, 32]
    assert shape.try_fold([t((2, 8, 32))], shape.check_attrs(out_int64, "s"))[0].dtype == np.int64
    assert shape.try_fold([t((-1, 8))], shape.check_attrs({}, "s")) is None
    assert size.try_fold([t((2, 3))], size.check_attrs({}, "s"))[0].tolist() == 6
    assert size.try_fold([t(None)], size.check_attrs({}, "s")) is None
    assert rank.try_fold([t((-1, 3))], {})[0].tolist() == 2
    assert rank.try_fold([t(None)], {}) is None
    assert [v.tolist() for v in shape_n.try_fold([t((2,)), t((3, 1))], shape_n.check_attrs({}, "s"))] == [[2], [3, 1]]


def test_reference_kernels_are_set_on_shape_computation_ops():
    chain = [
        "Shape", "ShapeN", "Size", "Rank", "StridedSlice", "Slice", "Pack", "Unpack", "ConcatV2", "GatherV2", "Cast",
        "Add", "AddV2", "Sub", "Mul", "RealDiv", "FloorDiv", "FloorMod", "Maximum", "Minimum", "Neg", "Prod", "Sum",
        "Range", "Fill", "Reshape", "ExpandDims", "Squeeze", "Transpose", "Tile", "BroadcastArgs", "Equal", "Less",
        "Greater", "LogicalAnd", "Select", "SelectV2", "Identity", "ZerosLike", "OnesLike", "Floor", "Ceil", "Sqrt",
    ]  # fmt: skip
    assert [op for op in chain if REG.get(f"tf.{op}").reference is None] == []


def test_handle_dtypes_stay_out_of_the_element_tables():
    assert D.by_name("variant") is D.VARIANT and D.by_name("resource") is D.RESOURCE
    assert pickle.loads(pickle.dumps(D.VARIANT)) is D.VARIANT
    assert D.VARIANT not in set(D.all_dtypes()) and D.from_ge(26) is None and D.from_tf(21) is None
    assert (D.RESOURCE.ge, D.RESOURCE.tf, D.VARIANT.ge, D.VARIANT.tf) == (23, 20, 26, 21)


# ------------------------------------------------------------------------------------------ strided slice
@st.composite
def slice_specs(draw):
    """A numpy index (ints, slices, at most one Ellipsis, None) and the TF begin/end/strides/masks it encodes."""
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=4)))
    kinds = draw(st.lists(st.sampled_from(["slice", "index", "newaxis"]), max_size=5))
    if draw(st.booleans()):
        kinds.insert(draw(st.integers(0, len(kinds))), "ellipsis")
    consumed = [k for k in kinds if k in ("slice", "index")]
    assume(len(consumed) <= len(shape))
    cut = kinds.index("ellipsis") if "ellipsis" in kinds else len(kinds)
    before = sum(k in ("slice", "index") for k in kinds[:cut])
    axes, lead, trail = [], 0, len(shape) - (len(consumed) - before)
    for pos, kind in enumerate(kinds):
        if kind in ("slice", "index"):
            axes.append(lead if pos < cut else trail)
            lead, trail = (lead + 1, trail) if pos < cut else (lead, trail + 1)
        else:
            axes.append(None)
    items, begin, end, strides = [], [], [], []
    masks = dict.fromkeys(("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"), 0)
    for i, (kind, axis) in enumerate(zip(kinds, axes)):
        bit = 1 << i
        if kind == "ellipsis":
            masks["ellipsis_mask"] |= bit
            items.append(Ellipsis)
            b, e, s = 0, 0, 1
        elif kind == "newaxis":
            masks["new_axis_mask"] |= bit
            items.append(None)
            b, e, s = 0, 0, 1
        elif kind == "index" and shape[axis] > 0:
            b = draw(st.integers(-shape[axis], shape[axis] - 1))
            masks["shrink_axis_mask"] |= bit
            items.append(b)
            e, s = b + 1, 1
        else:
            lo, hi = draw(st.one_of(st.none(), st.integers(-7, 7))), draw(st.one_of(st.none(), st.integers(-7, 7)))
            s = draw(st.sampled_from([1, 2, 3, -1, -2]))
            masks["begin_mask"] |= bit if lo is None else 0
            masks["end_mask"] |= bit if hi is None else 0
            items.append(slice(lo, hi, s))
            b, e = lo or 0, hi or 0
        begin, end, strides = begin + [b], end + [e], strides + [s]
    return shape, tuple(items), (begin, end, strides), masks


@settings(max_examples=300, deadline=None)
@given(slice_specs())
def test_strided_slice_agrees_with_numpy_slicing(spec):
    shape, index, (begin, end, strides), masks = spec
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    expected = x[index]
    plan = plan_strided_slice(shape, begin, end, strides, masks)
    assert plan is not None and plan.final == expected.shape
    kernel = REG.get("tf.StridedSlice").reference
    (got,) = kernel([x, np.array(begin, np.int32), np.array(end, np.int32), np.array(strides, np.int32)], masks)
    np.testing.assert_array_equal(got, expected)
    # Unknown begin/end values keep the rank: dims not fully masked or shrunk become -1.
    partial = plan_strided_slice(shape, None, None, strides, masks)
    assert partial is not None and len(partial.final) == expected.ndim
    assert all(p in (-1, e) for p, e in zip(partial.final, expected.shape))
