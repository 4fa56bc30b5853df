"""The shape functions of ``native`` give exactly ONNX's own answer (``onnx.shape_inference``), on every node
of real models they answer for and on generated inputs; where ONNX rejects a node they give no answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import defs

from scopefusion import dtypes
from scopefusion.convert import convert
from scopefusion.dialects import default_op_registry
from scopefusion.dialects.onnx import infer, native
from scopefusion.dialects.onnx.schemas import onnx_op
from scopefusion.ir.attrs import LIST_INT, AttrValue
from scopefusion.ir.opdef import InferContext, InputInfo
from scopefusion.ir.printer import format_graph
from scopefusion.ir_builder import shape_inference

TESTDATA = Path(__file__).resolve().parents[3] / "testdata"
MODELS = [
    ("torch_encoder_opset14.onnx", {"input_ids": [2, 16]}),
    ("torch_encoder_opset17.onnx", {"input_ids": [2, 16]}),
    ("torch_encoder_padding_opset17.onnx", None),
    ("torch_rnn_opset14.onnx", {"sequence": [2, 6, 5]}),
    ("tf2onnx_bert.onnx", None),
    ("tf2onnx_keras_cnn.onnx", None),
    ("tf2onnx_keras_encoder.onnx", None),
]
OPSET = 17
F32, I64, I32 = dtypes.by_name("float32"), dtypes.by_name("int64"), dtypes.by_name("int32")


@pytest.fixture(scope="module")
def compared():
    """(op type, native answer, ONNX's answer) of every node the native path answered while converting."""
    seen = []
    answer = native.native_answer

    def checked(ctx, op):
        found = answer(ctx, op)
        if found is not None:
            seen.append((op.op_type, found, infer._run_onnx(ctx, op)))
        return found

    mp = pytest.MonkeyPatch()
    mp.setattr(infer, "native_answer", checked)
    mp.setattr(shape_inference, "_node_key", lambda node, known: None)  # every node asked, repeated or not
    try:
        for name, shapes in MODELS:
            convert(TESTDATA / name, input_shapes=shapes)
    finally:
        mp.undo()
    return seen


def test_native_answers_equal_onnx_on_real_models(compared):
    assert len(compared) > 500
    assert {op for op, _, _ in compared} >= {"Add", "Concat", "Gather", "MatMul", "Reshape", "Shape", "Unsqueeze"}
    for op, found, expected in compared:
        assert found == expected, op


def test_unknown_dims_are_answered_too(compared):
    assert any(any(s is not None and -1 in s for s, _ in found) for _, found, _ in compared)


def _answers(op_type: str, infos: list[InputInfo | None], attrs: dict, num_outputs: int = 1):
    """(native answer, ONNX's answer or None where ONNX rejects the node)."""
    op = onnx_op(defs.get_schema(op_type, OPSET, ""), OPSET)
    opdef = default_op_registry().get(f"onnx.{op_type}")
    ctx = InferContext(
        opdef,
        "n",
        infos,
        {k: AttrValue(LIST_INT, ()) if v == [] else AttrValue.of(v) for k, v in attrs.items()},
        num_outputs,
    )
    found = native.native_answer(ctx, op)
    try:
        expected = infer._run_onnx(ctx, op)
    except Exception:  # InferenceError, or onnx's ValidationError on mismatched dtypes
        expected = None
    return found, expected


def _check(found, expected) -> None:
    if found is not None:
        assert found == expected


dims = st.sampled_from([-1, 0, 1, 1, 2, 3, 5])
shapes = st.lists(dims, min_size=0, max_size=4).map(tuple)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _t(shape, dtype=F32, data=None) -> InputInfo:
    return InputInfo(tuple(shape), dtype, "ND", None if data is None else np.asarray(data, np.int64))


@SETTINGS
@given(st.sampled_from(["Add", "Mul", "Sub", "Div", "Mod", "Pow", "Equal", "Where"]), shapes, shapes, shapes)
def test_broadcasting_ops(op, a, b, c):
    if op == "Where":
        infos = [_t(a, dtypes.by_name("bool")), _t(b), _t(c)]
    else:
        infos = [_t(a), _t(b)]
    _check(*_answers(op, infos, {}))


@SETTINGS
@given(shapes, shapes)
def test_mat_mul(a, b):
    _check(*_answers("MatMul", [_t(a), _t(b)], {}))


@SETTINGS
@given(st.lists(st.lists(dims, min_size=1, max_size=3).map(tuple), min_size=1, max_size=3), st.integers(-4, 3))
def test_concat(inputs, axis):
    _check(*_answers("Concat", [_t(s) for s in inputs], {"axis": axis}))


@SETTINGS
@given(shapes, st.lists(st.integers(-2, 6), min_size=0, max_size=4), st.sampled_from([0, 1]))
def test_reshape(shape, target, allow_zero):
    _check(*_answers("Reshape", [_t(shape), _t((len(target),), I64, target)], {"allowzero": allow_zero}))
    _check(*_answers("Reshape", [_t(shape), _t((len(target),), I64)], {"allowzero": allow_zero}))


@SETTINGS
@given(shapes, shapes, shapes, st.integers(0, 1), st.integers(0, 1))
def test_gemm(a, b, c, trans_a, trans_b):
    attrs = {"transA": trans_a, "transB": trans_b}
    _check(*_answers("Gemm", [_t(a), _t(b), _t(c)], attrs))
    _check(*_answers("Gemm", [_t(a), _t(b)], attrs))


@SETTINGS
@given(shapes, st.lists(st.integers(-6, 5), min_size=1, max_size=3))
def test_unsqueeze_and_squeeze(shape, axes):
    _check(*_answers("Unsqueeze", [_t(shape), _t((len(axes),), I64, axes)], {}))
    _check(*_answers("Squeeze", [_t(shape), _t((len(axes),), I64, axes)], {}))
    _check(*_answers("Squeeze", [_t(shape)], {}))


@SETTINGS
@given(
    st.lists(st.sampled_from([-1, 1, 3, 7]), min_size=1, max_size=3).map(tuple),
    st.lists(st.tuples(st.integers(-9, 9), st.integers(-9, 9), st.sampled_from([-3, -1, 1, 2]), st.integers(-4, 3)),
             min_size=1, max_size=2),
    st.booleans(),
    st.sampled_from([I32, I64]),
)  # fmt: skip
def test_slice(shape, slices, with_axes_and_steps, index_dtype):
    starts, ends, steps, axes = (list(x) for x in zip(*slices))
    infos = [_t(shape), _t((len(starts),), index_dtype, starts), _t((len(ends),), index_dtype, ends)]
    if with_axes_and_steps:
        infos += [_t((len(axes),), index_dtype, axes), _t((len(steps),), index_dtype, steps)]
    _check(*_answers("Slice", infos, {}))


@SETTINGS
@given(shapes, shapes, st.integers(-4, 3))
def test_gather(data, indices, axis):
    _check(*_answers("Gather", [_t(data), _t(indices, I64)], {"axis": axis}))


@SETTINGS
@given(shapes, st.permutations([0, 1, 2, 3]), st.integers(-5, 5), st.integers(-5, 5))
def test_transpose_and_shape(shape, perm, start, end):
    _check(*_answers("Transpose", [_t(shape)], {"perm": [p for p in perm if p < len(shape)]}))
    _check(*_answers("Transpose", [_t(shape)], {}))
    _check(*_answers("Shape", [_t(shape)], {"start": start, "end": end}))
    _check(*_answers("Cast", [_t(shape)], {"to": 7}))


def test_mismatched_inputs_are_left_to_onnx():
    found, expected = _answers("Add", [_t((2, 3)), _t((4, 3))], {})
    assert found is None and expected is None
    found, _ = _answers("Add", [_t((2, 3)), _t((2, 3), I64)], {})
    assert found is None
    found, expected = _answers("Reshape", [_t((2, 3)), _t((2,), I64, [-1, -1])], {})
    assert found is None and expected is None


@pytest.mark.parametrize(
    ("op", "infos", "attrs"),
    [
        ("Add", [_t((-1, 1, 3)), _t((4, 1))], {}),
        ("MatMul", [_t((3,)), _t((2, 3, 4))], {}),
        ("MatMul", [_t((-1, 2, 3)), _t((3,))], {}),
        ("Concat", [_t((2, -1)), _t((2, 3))], {"axis": 0}),
        ("Reshape", [_t((2, 3, 4)), _t((3,), I64, [0, -1, 2])], {}),
        ("Reshape", [_t((-1, 3, 4)), _t((3,), I64, [0, 6, 2])], {}),
        ("Unsqueeze", [_t((2, -1)), _t((2,), I64, [-1, 0])], {}),
        ("Squeeze", [_t((1, -1, 1)), _t((1,), I64, [2])], {}),
        ("Slice", [_t((7, -1)), _t((1,), I64, [-2]), _t((1,), I64, [-9]), _t((1,), I64, [0]), _t((1,), I64, [-2])], {}),
        ("Gather", [_t((5, -1, 3)), _t((2, 2), I64)], {"axis": -2}),
        ("Shape", [_t((5, -1, 3))], {"start": -2}),
        ("Reshape", [_t((5, -1, 3)), _t((2,), I64)], {}),
        ("Gemm", [_t((-1, 3)), _t((4, 3)), _t((4,))], {"transB": 1}),
        ("Mod", [_t((2, 3), I64), _t((1,), I64)], {}),
    ],
)
def test_common_nodes_are_answered_natively(op, infos, attrs):
    found, expected = _answers(op, infos, attrs)
    assert found is not None and found == expected


@pytest.mark.parametrize(("name", "shapes"), MODELS[:2] + MODELS[3:4])
def test_converted_models_equal_the_onnx_only_path(name, shapes, monkeypatch):
    with_native = convert(TESTDATA / name, input_shapes=shapes)
    monkeypatch.setattr(infer, "native_answer", lambda ctx, op: None)
    onnx_only = convert(TESTDATA / name, input_shapes=shapes)
    assert format_graph(with_native.graph) == format_graph(onnx_only.graph)
    for fmt in ("ge", "onnx"):
        assert with_native.to_bytes(fmt) == onnx_only.to_bytes(fmt)
