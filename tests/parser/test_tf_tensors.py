"""TensorProto to numpy without TensorFlow, checked against TensorFlow's own ``make_ndarray``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from scopefusion import dtypes
from scopefusion.parser.proto import tf_framework_pb2 as tfpb
from scopefusion.parser.tf_tensors import TensorDecodeError, shape_of, tensor_to_numpy, tf_dtype
from scopefusion.parser.values import ForeignDType

SAMPLES = {
    "float32": np.array([[1.5, -2.0, 3.25], [0.0, 7.0, -1e-3]], np.float32),
    "float64": np.array([1.0, 2.5, -3.0], np.float64),
    "float16": np.array([0.5, -1.25, 65504.0], np.float16),
    "bfloat16": np.array([1.0, -2.0, 3.5, 0.125], ml_dtypes.bfloat16),
    "int8": np.array([-128, 0, 127], np.int8),
    "uint8": np.array([0, 128, 255], np.uint8),
    "int16": np.array([-32768, 1, 32767], np.int16),
    "uint16": np.array([0, 40000, 65535], np.uint16),
    "int32": np.array([[-(2**31), 0], [5, 2**31 - 1]], np.int32),
    "uint32": np.array([0, 2**32 - 1], np.uint32),
    "int64": np.array([-(2**63), 0, 2**63 - 1], np.int64),
    "uint64": np.array([0, 2**64 - 1], np.uint64),
    "bool": np.array([True, False, True]),
    "complex64": np.array([1 + 2j, -3.5j], np.complex64),
    "complex128": np.array([1 - 1j, 2.5 + 0j], np.complex128),
    "string": np.array([b"a", b"", b"hello \xff"], object),
    "float8_e5m2": np.array([1.0, -2.0, 0.5], ml_dtypes.float8_e5m2),
    "float8_e4m3fn": np.array([1.0, -2.0, 0.5], ml_dtypes.float8_e4m3fn),
    "int4": np.array([-8, 0, 7], ml_dtypes.int4),
}


def _ours(tf_proto) -> tfpb.TensorProto:
    return tfpb.TensorProto.FromString(tf_proto.SerializeToString())


def _check(ours: np.ndarray, expected: np.ndarray) -> None:
    assert ours.shape == expected.shape
    assert ours.dtype == expected.dtype, (ours.dtype, expected.dtype)
    assert not ours.flags.writeable
    if expected.dtype == object:
        assert list(ours.ravel()) == list(expected.ravel())
    else:
        np.testing.assert_array_equal(ours.astype(np.float64) if expected.dtype.kind == "V" else ours, expected)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_decodes_every_dtype_as_tensorflow_writes_it(name):
    import tensorflow as tf

    array = SAMPLES[name]
    proto = tf.make_tensor_proto(array)
    expected = tf.make_ndarray(proto)
    _check(tensor_to_numpy(_ours(proto)), expected)


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "int8", "uint16", "int64", "bool", "complex64", "string", "int4"])
def test_a_single_value_fills_the_shape_as_in_tensorflow(name):
    import tensorflow as tf

    value = SAMPLES[name].ravel()[:1]
    proto = tf.make_tensor_proto(value, shape=[2, 3])
    expected = tf.make_ndarray(proto)
    ours = tensor_to_numpy(_ours(proto))
    _check(ours, expected)
    assert ours.strides == (0, 0)  # a view of the one value: no memory per element


def test_fewer_values_than_elements_repeat_the_last_value():
    proto = tfpb.TensorProto(dtype=tfpb.DT_INT32, int_val=[1, 2])
    proto.tensor_shape.dim.add().size = 5
    np.testing.assert_array_equal(tensor_to_numpy(proto), [1, 2, 2, 2, 2])


def test_no_values_mean_zeros():
    proto = tfpb.TensorProto(dtype=tfpb.DT_FLOAT)
    proto.tensor_shape.dim.add().size = 4
    zeros = tensor_to_numpy(proto)
    np.testing.assert_array_equal(zeros, np.zeros(4, np.float32))
    assert zeros.dtype == np.float32 and zeros.strides == (0,) and not zeros.flags.writeable


def test_half_and_bfloat16_typed_fields_hold_raw_bits():
    import tensorflow as tf

    for dtype in (np.float16, ml_dtypes.bfloat16):
        proto = tf.make_tensor_proto(np.array([1.0, -2.0, 3.5], dtype), shape=[3])
        proto.ClearField("tensor_content")
        bits = np.array([1.0, -2.0, 3.5], dtype).view(np.uint16)
        proto.half_val.extend(int(b) for b in bits)
        np.testing.assert_array_equal(tensor_to_numpy(_ours(proto)).astype(np.float32), [1.0, -2.0, 3.5])


def test_tensor_content_view_is_zero_copy_and_read_only():
    buffer = bytearray(b"\x00" * 8 + np.arange(6, dtype=np.float32).tobytes())
    proto = tfpb.TensorProto(dtype=tfpb.DT_FLOAT)
    proto.tensor_shape.dim.add().size = 2
    proto.tensor_shape.dim.add().size = 3
    view = tensor_to_numpy(proto, (buffer, 8, 24))
    np.testing.assert_array_equal(view, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert np.shares_memory(view, np.frombuffer(buffer, np.uint8))
    assert not view.flags.writeable


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda t: (t.tensor_shape.dim.add(), setattr(t, "tensor_content", b"123")), "needs"),
        (lambda t: setattr(t.tensor_shape, "unknown_rank", True), "unknown rank"),
        (lambda t: setattr(t.tensor_shape.dim.add(), "size", -1), "unknown dimensions"),
        (lambda t: (setattr(t.tensor_shape.dim.add(), "size", 1), t.float_val.extend([1, 2])), "more than"),
        (lambda t: setattr(t, "dtype", 99), "unknown TensorFlow dtype"),
    ],
)
def test_inconsistent_tensors_raise_tensor_decode_error(build, message):
    proto = tfpb.TensorProto(dtype=tfpb.DT_FLOAT)
    build(proto)
    with pytest.raises(TensorDecodeError, match=message):
        tensor_to_numpy(proto)


def test_dtype_attributes_map_to_dtypes_or_foreign_dtypes():
    assert tf_dtype(tfpb.DT_FLOAT) is dtypes.FLOAT32
    assert tf_dtype(tfpb.DT_FLOAT_REF) is dtypes.FLOAT32
    assert tf_dtype(tfpb.DT_BFLOAT16) is dtypes.BFLOAT16
    assert tf_dtype(tfpb.DT_RESOURCE) == ForeignDType("tensorflow", 20, "DT_RESOURCE")
    assert tf_dtype(tfpb.DT_VARIANT_REF) == ForeignDType("tensorflow", 121, "DT_VARIANT_REF")
    assert str(tf_dtype(77)) == "DT_77"


def test_shapes_use_minus_one_and_none():
    shape = tfpb.TensorShapeProto()
    for size in (-1, 3):
        shape.dim.add().size = size
    assert shape_of(shape) == (-1, 3)
    assert shape_of(tfpb.TensorShapeProto()) == ()
    assert shape_of(tfpb.TensorShapeProto(unknown_rank=True)) is None
