"""The numpy kernels of ``native_kernels`` give exactly what ``onnx.reference`` gives (values, dtype, shape),
on every node of real models they fold and on generated inputs; where the reference fails they give nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import defs

from scopefusion.convert import convert
from scopefusion.dialects.onnx import kernels, native_kernels
from scopefusion.dialects.onnx.schemas import onnx_op
from scopefusion.ir_builder import shape_inference

TESTDATA = Path(__file__).resolve().parents[3] / "testdata"
MODELS = [
    ("torch_encoder_opset14.onnx", {"input_ids": [2, 16]}),
    ("torch_encoder_opset17.onnx", {"input_ids": [2, 16]}),
    ("torch_encoder_padding_opset17.onnx", None),
    ("tf2onnx_bert.onnx", None),
    ("tf2onnx_keras_encoder.onnx", None),
]
OPSET = 17


def _reference(op_type: str, arrays, attrs, opset: int = OPSET):
    """What the onnx.reference implementation gives, or None where it fails."""
    op = onnx_op(defs.get_schema(op_type, opset, ""), opset)
    saved = kernels.native_outputs
    kernels.native_outputs = lambda *args: None
    try:
        return kernels.run_reference(op, arrays, attrs)
    except Exception:
        return None
    finally:
        kernels.native_outputs = saved


def _same(found, expected) -> None:
    assert expected is not None
    assert len(found) == len(expected)
    for f, e in zip(found, expected):
        assert f.dtype == e.dtype and f.shape == e.shape and f.tobytes() == e.tobytes()


@pytest.fixture(scope="module")
def compared():
    """(op type, native outputs, arrays, attrs, opset) of every kernel run answered natively while converting."""
    seen = []
    native = native_kernels.native_outputs

    def recorded(op_type, domain, opset, arrays, attrs):
        found = native(op_type, domain, opset, arrays, attrs)
        if found is not None:
            seen.append((op_type, found, [a.copy() for a in arrays], dict(attrs), opset))
        return found

    mp = pytest.MonkeyPatch()
    mp.setattr(kernels, "native_outputs", recorded)
    mp.setattr(shape_inference, "_node_key", lambda node, known: None)  # every node folded, repeated or not
    try:
        for name, shapes in MODELS:
            convert(TESTDATA / name, input_shapes=shapes)
    finally:
        mp.undo()
    return seen


def test_native_kernels_equal_the_reference_on_real_models(compared):
    assert len(compared) > 200
    assert {op for op, *_ in compared} >= {"Concat", "Gather", "Reshape", "Unsqueeze"}
    for op_type, found, arrays, attrs, opset in compared:
        _same(found, _reference(op_type, arrays, attrs, opset))


def _check(op_type, arrays, attrs) -> None:
    found = native_kernels.native_outputs(op_type, "", OPSET, arrays, attrs)
    if found is not None:
        _same(found, _reference(op_type, arrays, attrs))


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
shapes = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)
dtypes = st.sampled_from([np.int64, np.int32, np.float32, np.float64])


def _array(shape, dtype, seed=0):
    return (np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) * 3 - 4 + seed).astype(dtype)


@SETTINGS
@given(shapes, st.lists(st.integers(-4, 3), min_size=0, max_size=3), dtypes)
def test_axes_ops(shape, axes, dtype):
    data = _array(shape, dtype)
    _check("Unsqueeze", [data, np.array(axes, np.int64)], {})
    _check("Squeeze", [data, np.array(axes, np.int64)], {})
    _check("Squeeze", [data], {})


@SETTINGS
@given(shapes, shapes, st.integers(-3, 2), dtypes)
def test_concat_and_gather(a, b, axis, dtype):
    _check("Concat", [_array(a, dtype), _array(b, dtype, 1)], {"axis": axis})
    _check("Gather", [_array(a, dtype), _array(b, np.int64) % 5 - 2], {"axis": axis})


@SETTINGS
@given(shapes, st.lists(st.integers(-1, 4), min_size=0, max_size=3), st.sampled_from([None, 0, 1]))
def test_reshape(shape, target, allow_zero):
    _check("Reshape", [_array(shape, np.float32), np.array(target, np.int64)], {"allowzero": allow_zero})


@SETTINGS
@given(st.sampled_from(["Add", "Sub", "Mul", "Div"]), shapes, shapes, dtypes, dtypes)
def test_binary(op_type, a, b, dtype_a, dtype_b):
    _check(op_type, [_array(a, dtype_a), _array(b, dtype_b, 7)], {})
    _check("Identity", [_array(a, dtype_a)], {})


small_ints = st.lists(st.integers(-7, 7), min_size=1, max_size=6)


@SETTINGS
@given(small_ints, small_ints, st.sampled_from([np.int64, np.int32, np.float32]), st.sampled_from([None, 0, 1]))
def test_division_and_modulo_of_signed_values(a, b, dtype, fmod):
    n = min(len(a), len(b))
    x, y = np.array(a[:n], dtype), np.array(b[:n], dtype)
    y[y == 0] = 3
    _check("Div", [x, y], {})
    _check("Mod", [x, y], {"fmod": fmod})


@SETTINGS
@given(shapes, dtypes, st.sampled_from([1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 13, 16]))
def test_cast(shape, dtype, to):
    _check("Cast", [_array(shape, dtype)], {"to": to})


bounds = st.lists(st.integers(-5, 5) | st.sampled_from([2**63 - 1, -(2**63)]), min_size=0, max_size=3)


@SETTINGS
@given(shapes, bounds, bounds, st.lists(st.integers(-3, 2), max_size=3), st.lists(st.integers(-2, 2), max_size=3))
def test_slice(shape, starts, ends, axes, steps):
    data = _array(shape, np.float32)
    n = len(starts)
    arrays = [data, np.array(starts, np.int64), np.array(ends[:n] + [0] * (n - len(ends)), np.int64)]
    _check("Slice", arrays, {})
    _check("Slice", [*arrays, np.array(axes[:n], np.int64)], {})
    _check("Slice", [*arrays, np.array(axes[:n], np.int64), np.array(steps[:n], np.int64)], {})


def test_common_inputs_are_answered_natively():
    data = _array((2, 3), np.float32)
    cases = [
        ("Unsqueeze", [data, np.array([0, -1], np.int64)], {}),
        ("Concat", [data, data], {"axis": -1}),
        ("Gather", [data, np.array(-1, np.int64)], {"axis": 1}),
        ("Reshape", [data, np.array([0, -1, 1], np.int64)], {"allowzero": 0}),
        ("Div", [data, np.full((2, 3), 2, np.float32)], {}),
        ("Mul", [np.array([3], np.int64), np.array(2, np.int64)], {}),
        ("Div", [np.array([-7, 7], np.int64), np.array(2, np.int64)], {}),
        ("Mod", [np.array([-7, 7], np.int64), np.array([3], np.int64)], {"fmod": 0}),
        ("Cast", [np.array(4, np.int64)], {"to": 7}),
        ("Slice", [np.arange(6, dtype=np.int64), np.array([-2], np.int64), np.array([2**63 - 1], np.int64)], {}),
        ("Slice", [data, np.array([2, 0], np.int64), np.array([0, 9], np.int64), np.array([1, 0], np.int64),
                   np.array([-1, 2], np.int64)], {}),
    ]
    for op_type, arrays, attrs in cases:
        found = native_kernels.native_outputs(op_type, "", OPSET, arrays, attrs)
        assert found is not None, op_type
        _same(found, _reference(op_type, arrays, attrs))
