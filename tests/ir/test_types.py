from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from scopefusion import dtypes
from scopefusion.ir.types import ElementType, IRContext, ListType, TensorType, TupleType, Type


@pytest.fixture
def ctx():
    return IRContext()


def test_equal_parameters_give_the_same_object(ctx):
    a = ctx.tensor(dtypes.FLOAT32, (1, -1, 3))
    b = ctx.tensor(ctx.element(dtypes.FLOAT32), [1, -1, 3], "ND")
    assert a is b
    assert a == b and hash(a) == hash(b)
    assert ctx.tensor(dtypes.FLOAT32, (1, -1, 3), "NCHW") is not a
    assert ctx.tensor(dtypes.FLOAT16, (1, -1, 3)) is not a


def test_numpy_int_dims_intern_to_the_same_type(ctx):
    a = ctx.tensor(dtypes.INT64, (np.int64(2), np.int32(3)))
    assert a is ctx.tensor(dtypes.INT64, (2, 3))
    assert all(type(d) is int for d in a.shape)


def test_contexts_do_not_share_types():
    a, b = IRContext(), IRContext()
    assert a.tensor(dtypes.FLOAT32, (2,)) is not b.tensor(dtypes.FLOAT32, (2,))
    assert a.tensor(dtypes.FLOAT32, (2,)) != b.tensor(dtypes.FLOAT32, (2,))


def test_unknown_dim_and_rank(ctx):
    t = ctx.tensor(dtypes.FLOAT32, (-1, 4))
    assert t.rank == 2 and not t.is_static and t.num_elements is None
    u = ctx.tensor(dtypes.FLOAT32, None)
    assert u.rank is None and u.shape == (-2,) and u is ctx.tensor(dtypes.FLOAT32, (-2,))
    s = ctx.tensor(dtypes.FLOAT32, (2, 3))
    assert s.is_static and s.num_elements == 6 and s.nbytes == 24
    assert ctx.tensor(dtypes.FLOAT32, ()).num_elements == 1
    assert str(t) == "f32[?,4]" and str(u) == "f32[*]" and str(ctx.tensor(dtypes.BFLOAT16, (2,), "NHWC")) == "bf16[2] NHWC"


@pytest.mark.parametrize("shape", [(-3,), (2, -2), (-2, -2)])
def test_bad_shapes_are_refused(ctx, shape):
    with pytest.raises(ValueError, match="dims must be|must be the only dim"):
        ctx.tensor(dtypes.FLOAT32, shape)


def test_bad_format_and_element_are_refused(ctx):
    with pytest.raises(ValueError, match="unknown tensor format 'XYZ'"):
        ctx.tensor(dtypes.FLOAT32, (1,), "XYZ")
    with pytest.raises(TypeError, match="needs an ElementType"):
        ctx.get(TensorType, "float32", (1,))


def test_types_are_immutable(ctx):
    t = ctx.tensor(dtypes.FLOAT32, (1,))
    with pytest.raises(AttributeError, match="immutable"):
        t.shape = (2,)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ctx.element(dtypes.INT8).dtype = dtypes.INT16  # type: ignore[misc]
    import copy

    assert copy.deepcopy(t) is t


def test_list_and_tuple_types_nest(ctx):
    f = ctx.tensor(dtypes.FLOAT32, (2,))
    i = ctx.tensor(dtypes.INT32, ())
    tup = ctx.tuple_of([f, ctx.list_of(i)])
    nested = ctx.list_of(tup)
    assert nested is ctx.list_of(ctx.tuple_of((f, ctx.list_of(i))))
    assert isinstance(nested, ListType) and isinstance(nested.element, TupleType)
    assert str(nested) == "list<tuple<f32[2], list<i32[]>>>"
    assert nested.isa(ListType) and not nested.isa(TensorType)


def test_register_type_class_refuses_duplicates(ctx):
    class Opaque(Type):
        __slots__ = ("tag",)
        type_name = "opaque"

        def __init__(self, context, tag):
            super().__init__(context)
            object.__setattr__(self, "tag", tag)

        @classmethod
        def _key(cls, tag):
            return (str(tag),)

    with pytest.raises(ValueError, match="not registered"):
        ctx.get(Opaque, "x")
    ctx.register_type_class(Opaque)
    assert ctx.get(Opaque, "x") is ctx.get(Opaque, "x")
    assert ctx.get(Opaque, "x") is not ctx.get(Opaque, "y")

    class Other(Opaque):
        type_name = "opaque"

    with pytest.raises(ValueError, match="already registered"):
        ctx.register_type_class(Other)
    with pytest.raises(ValueError, match="already registered"):
        ctx.register_type_class(TensorType)


# --------------------------------------------------------------------------- element types
# GE DataType values from reference/ge_ir.md that numpy (with ml_dtypes) can hold.
GE_EXPECTED = {
    1: np.float32, 2: np.float16, 3: np.int8, 4: np.uint8, 5: np.int16, 6: np.uint16, 7: np.int32, 8: np.int64,
    9: np.uint32, 10: np.uint64, 11: np.bool_, 12: np.float64, 13: np.object_, 16: np.complex64, 17: np.complex128,
    18: np.int8, 19: np.int16, 20: np.int32, 21: np.uint8, 22: np.uint16, 27: ml_dtypes.bfloat16, 28: ml_dtypes.int4,
    29: ml_dtypes.uint1, 30: ml_dtypes.int2, 31: ml_dtypes.uint2, 32: ml_dtypes.complex32, 34: ml_dtypes.float8_e5m2,
    35: ml_dtypes.float8_e4m3fn, 36: ml_dtypes.float8_e8m0fnu, 37: ml_dtypes.float6_e3m2fn,
    38: ml_dtypes.float6_e2m3fn, 39: ml_dtypes.float4_e2m1fn,
}  # fmt: skip


def test_every_holdable_ge_datatype_has_an_element_type(ctx):
    assert {d.ge for d in dtypes.all_dtypes()} == set(GE_EXPECTED)
    for code, np_type in GE_EXPECTED.items():
        dt = dtypes.from_ge(code)
        assert dt.numpy == np.dtype(np_type), code
        el = ctx.element(dt)
        assert isinstance(el, ElementType) and el.ge_enum == code and el is ctx.element(dt)
    for code in (0, 14, 15, 23, 24, 25, 26, 33, 40, 41):
        assert dtypes.from_ge(code) is None


def test_dtype_enums_agree_with_onnx():
    from onnx import TensorProto, helper

    for dt in dtypes.all_dtypes():
        if dt.onnx is None:
            continue
        np_type = helper.tensor_dtype_to_np_dtype(dt.onnx)
        assert np.dtype(np_type) == dt.numpy or dt.name == "string", dt
    assert dtypes.from_onnx(TensorProto.BFLOAT16) is dtypes.BFLOAT16
    assert dtypes.from_numpy(np.dtype("S3")) is dtypes.STRING
    assert dtypes.from_numpy(np.int8) is dtypes.INT8  # the canonical one, not qint8


def test_dtype_constants_are_immutable_and_pickle_to_themselves():
    import pickle

    with pytest.raises(AttributeError):
        dtypes.FLOAT32.ge = 5  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(dtypes.BFLOAT16)) is dtypes.BFLOAT16


def test_dtype_enums_agree_with_tensorflow():
    from tensorflow.core.framework import types_pb2

    for dt in dtypes.all_dtypes():
        if dt.tf is None:
            continue
        tf_name = types_pb2.DataType.Name(dt.tf)
        expected = {"half": "float16", "float": "float32", "double": "float64", "float8_e8m0fnu": "float8_e8m0"}
        name = tf_name[3:].lower()
        assert expected.get(name, name) == dt.name, (tf_name, dt)
        assert dtypes.from_tf(dt.tf + 100) is dt  # *_REF types read as their value type


def test_shapes_are_ints():
    ctx = IRContext()
    for bad, word in (((2.5, 3), "float"), ((2.0, 3), "float"), ((True, 3), "bool"), (("2", 3), "str")):
        with pytest.raises(TypeError, match=rf"dim .* is a {word}; dims are integers"):
            ctx.tensor(dtypes.FLOAT32, bad)
    ctx.tensor(dtypes.FLOAT32, (2, 3))  # interned first, then the fast path must still refuse floats
    with pytest.raises(TypeError, match="dim 2.5 is a float"):
        ctx.tensor(dtypes.FLOAT32, (2.5, 3))
    with pytest.raises(TypeError, match="dim 2.0 is a float"):
        ctx.tensor(dtypes.FLOAT32, (2.0, 3))
    assert ctx.tensor(dtypes.FLOAT32, (np.int64(2), np.int32(3))) is ctx.tensor(dtypes.FLOAT32, (2, 3))


@pytest.mark.parametrize("shape", [(), (3,), (2, -1, 5), (0, 4)])
def test_a_new_type_of_plain_dims_is_the_canonical_one(shape):
    fresh, canonical = IRContext(), IRContext()
    made = fresh.tensor(dtypes.FLOAT32, shape)
    want = canonical.get(TensorType, canonical.element(dtypes.FLOAT32), list(shape), "ND")
    assert (made.shape, made.rank, made.is_static, made.num_elements, made.nbytes) == (
        want.shape, want.rank, want.is_static, want.num_elements, want.nbytes
    )
    assert made is fresh.get(TensorType, fresh.element(dtypes.FLOAT32), list(shape), "ND")
    assert len(fresh) == len(canonical)


def test_array_type_is_the_tensor_type_of_its_dtype_and_shape(ctx):
    for array in (np.zeros((2, 3), np.float32), np.array(5, np.int64), np.array([b"a"]), np.zeros(0, np.bool_)):
        assert ctx.array_type(array) is ctx.tensor(dtypes.from_numpy(array.dtype), array.shape)
    assert ctx.array_type(np.zeros(2, np.dtype("V4"))) is None
