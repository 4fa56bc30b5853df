"""Tensor data and descriptors in GE's wire form."""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings

from scopefusion import dtypes as D
from scopefusion.errors import SerdeError
from scopefusion.ir.attrs import values_equal
from scopefusion.ir_builder import IRContext
from scopefusion.serde import ge_ir_pb2 as pb
from scopefusion.serde.tensors import (
    IR_TYPE_ATTR,
    array_from_tensor_def,
    array_to_tensor_def,
    tensor_type_from_desc,
    value_type_from_desc,
    value_type_to_desc,
)

from ._strategies import arrays, value_types


def _roundtrip(array: np.ndarray) -> tuple[pb.TensorDef, np.ndarray]:
    t = pb.TensorDef()
    array_to_tensor_def(array, t, "test")
    back = array_from_tensor_def(pb.TensorDef.FromString(t.SerializeToString()), "test")
    return t, back


def test_float_tensor_is_little_endian_c_order_with_its_descriptor():
    a = np.array([[1.0, 2.0], [3.0, -0.5]], dtype=np.float32)
    t, back = _roundtrip(a)
    assert t.desc.dtype == pb.DT_FLOAT and list(t.desc.shape.dim) == [2, 2] and t.desc.layout == "ND"
    assert t.data == struct.pack("<4f", 1.0, 2.0, 3.0, -0.5)
    assert values_equal(back, a) and not back.flags.writeable


def test_scalar_tensor_has_no_dims():
    t, back = _roundtrip(np.array(7, dtype=np.int64))
    assert list(t.desc.shape.dim) == [] and t.data == struct.pack("<q", 7)
    assert back.shape == () and back.dtype == np.int64 and int(back) == 7


def test_string_tensor_uses_ge_string_heads():
    a = np.array([b"ab", b"", "xyz"], dtype=object)
    t, back = _roundtrip(a)
    heads = struct.pack("<6q", 48, 2, 51, 0, 52, 3)
    assert t.data == heads + b"ab\0" + b"\0" + b"xyz\0"
    assert t.desc.dtype == pb.DT_STRING
    assert back.dtype == object and back.tolist() == [b"ab", b"", b"xyz"]


def test_int4_packs_two_per_byte_low_nibble_first():
    a = np.array([1, -1, 7], dtype=ml_dtypes.int4)
    t, back = _roundtrip(a)
    assert t.data == bytes([0xF1, 0x07])
    assert back.dtype == ml_dtypes.int4 and back.tolist() == [1, -1, 7]


def test_uint1_and_int2_pack_eight_and_four_per_byte():
    bits = np.array([1, 0, 1, 1, 0, 0, 0, 0, 1], dtype=ml_dtypes.uint1)
    t, back = _roundtrip(bits)
    assert t.data == bytes([0b00001101, 0b1])
    assert back.tolist() == bits.tolist()
    two = np.array([1, -1, -2, 0, 1], dtype=ml_dtypes.int2)
    t, back = _roundtrip(two)
    assert t.data == bytes([0b00101101, 0b01])
    assert back.tolist() == [1, -1, -2, 0, 1]


def test_bool_is_one_byte_and_any_nonzero_byte_reads_true():
    t, back = _roundtrip(np.array([True, False, True]))
    assert t.data == b"\x01\x00\x01"
    t.data = b"\x00\x02"
    del t.desc.shape.dim[:]
    t.desc.shape.dim.append(2)
    assert array_from_tensor_def(t, "test").tolist() == [False, True]


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e8m0", "complex32", "float6_e3m2"])
def test_ml_dtypes_keep_their_ge_enum_and_bits(dtype):
    d = D.by_name(dtype)
    a = np.arange(6).astype(d.numpy).reshape(2, 3)
    t, back = _roundtrip(a)
    assert t.desc.dtype == d.ge and back.dtype == d.numpy
    assert back.tobytes() == a.tobytes()


@settings(max_examples=200, deadline=None)
@given(arrays())
def test_every_dtype_round_trips_bit_exactly(array):
    _, back = _roundtrip(array)
    assert values_equal(back, array)


def test_wrong_data_size_is_a_serde_error():
    t = pb.TensorDef()
    array_to_tensor_def(np.zeros(3, np.float32), t, "test")
    t.data = t.data[:-1]
    with pytest.raises(SerdeError, match="has 11 bytes, expected 12 for float32"):
        array_from_tensor_def(t, "op 'w'")


def test_string_heads_pointing_outside_the_data_are_a_serde_error():
    t = pb.TensorDef()
    t.desc.dtype = pb.DT_STRING
    t.desc.shape.dim.append(1)
    t.data = struct.pack("<2q", 16, 99) + b"x\0"
    with pytest.raises(SerdeError, match="outside its 18-byte data"):
        array_from_tensor_def(t, "test")
    t.data = b"\0" * 8
    with pytest.raises(SerdeError, match="too few for 1 string heads"):
        array_from_tensor_def(t, "test")


def test_unknown_and_unsupported_data_types_are_serde_errors():
    t = pb.TensorDef()
    t.desc.dtype = 999
    with pytest.raises(SerdeError, match="GE data type unknown value 999 has no IR element type"):
        array_from_tensor_def(t, "test")
    t.desc.dtype = pb.DT_DUAL
    with pytest.raises(SerdeError, match="DT_DUAL has no IR element type"):
        array_from_tensor_def(t, "test")


def test_constant_with_unknown_dims_is_a_serde_error():
    t = pb.TensorDef()
    t.desc.dtype = pb.DT_FLOAT
    t.desc.shape.dim.extend([2, -1])
    with pytest.raises(SerdeError, match="expected static dims"):
        array_from_tensor_def(t, "test")


def test_descriptor_of_unknown_rank_and_dims():
    ctx = IRContext()
    for shape, dims in [((2, -1), [2, -1]), (None, [-2]), ((), [])]:
        d = pb.TensorDescriptor()
        t = ctx.tensor(D.FLOAT16, shape, "NCHW")
        value_type_to_desc(t, d, "test")
        assert d.dtype == pb.DT_FLOAT16 and list(d.shape.dim) == dims and d.layout == "NCHW"
        assert value_type_from_desc(d, ctx, "test") is t


def test_descriptor_without_layout_reads_as_nd_and_bad_layout_is_a_serde_error():
    ctx = IRContext()
    d = pb.TensorDescriptor(dtype=pb.DT_INT32)
    assert tensor_type_from_desc(d, ctx, "test") is ctx.tensor(D.INT32, (), "ND")
    d.layout = "WEIRD"
    with pytest.raises(SerdeError, match="invalid tensor descriptor"):
        tensor_type_from_desc(d, ctx, "test")
    d.layout = "ND"
    d.shape.dim.extend([3, -2])
    with pytest.raises(SerdeError, match="invalid tensor descriptor"):
        tensor_type_from_desc(d, ctx, "test")


def test_unknown_and_structured_value_types():
    ctx = IRContext()
    d = pb.TensorDescriptor()
    value_type_to_desc(None, d, "test")
    assert d.dtype == pb.DT_UNDEFINED and value_type_from_desc(d, ctx, "test") is None
    nested = ctx.tuple_of([ctx.list_of(ctx.tensor(D.INT8, None)), ctx.element(D.BOOL), ctx.tuple_of([])])
    d = pb.TensorDescriptor()
    value_type_to_desc(nested, d, "test")
    assert d.dtype == pb.DT_UNDEFINED and d.attr[IR_TYPE_ATTR].func.name == "tuple"
    assert value_type_from_desc(d, ctx, "test") is nested


def test_malformed_structured_type_is_a_serde_error():
    ctx = IRContext()
    d = pb.TensorDescriptor()
    d.attr[IR_TYPE_ATTR].func.name = "list"
    with pytest.raises(SerdeError, match="structured type 'list' needs attribute 'element'"):
        value_type_from_desc(d, ctx, "test")
    d.attr[IR_TYPE_ATTR].func.name = "map"
    with pytest.raises(SerdeError, match="unknown structured type kind 'map'"):
        value_type_from_desc(d, ctx, "test")
    d.attr[IR_TYPE_ATTR].i = 3
    with pytest.raises(SerdeError, match="must hold named attributes"):
        value_type_from_desc(d, ctx, "test")


@settings(max_examples=200, deadline=None)
@given(value_types())
def test_value_types_round_trip_into_another_context(t):
    from scopefusion.ir.compare import types_equal

    d = pb.TensorDescriptor()
    value_type_to_desc(t, d, "test")
    back = value_type_from_desc(pb.TensorDescriptor.FromString(d.SerializeToString()), IRContext(), "test")
    assert types_equal(back, t)


def test_handle_dtypes_travel_in_descriptors_but_not_as_constant_data(monkeypatch):
    from scopefusion.dtypes import DType
    from scopefusion.serde import tensors

    handle = DType("resource", 23, np.object_, 20, None, "resource")
    monkeypatch.setattr(tensors, "_HANDLE_DTYPES", {23: handle})
    ctx = IRContext()
    t = ctx.tensor(handle, ())
    d = pb.TensorDescriptor()
    value_type_to_desc(t, d, "test")
    assert d.dtype == pb.DT_RESOURCE
    assert value_type_from_desc(d, ctx, "test") is t
    data = pb.TensorDef()
    data.desc.dtype = pb.DT_RESOURCE
    with pytest.raises(SerdeError, match="a constant tensor of handle type resource has no data the IR can hold"):
        array_from_tensor_def(data, "test")
