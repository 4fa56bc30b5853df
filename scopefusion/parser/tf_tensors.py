"""TensorFlow ``TensorProto`` to numpy, for every dtype, without TensorFlow.

A tensor is stored either as ``tensor_content`` (raw host-order bytes) or in the typed repeated field of
its dtype (``float_val``, ``half_val``...), where fewer values than elements means the last value is
repeated to fill the shape (a single value is splatted). ``tensor_content`` cut out of an mmap'd file by
:mod:`.wire` becomes a read-only zero-copy view of the file's bytes. Every returned array is read-only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import DType, from_tf
from .values import ForeignDType

__all__ = ["TensorDecodeError", "numpy_dtype_of_tf", "tf_dtype", "tensor_to_numpy", "shape_of"]


class TensorDecodeError(ValueError):
    """A TensorProto is inconsistent (its values do not fit its dtype and shape)."""


# TF DataType enum -> (numpy dtype, typed field holding its values, enum name); a str names a type of
# ml_dtypes, imported when a tensor of that type is read.
_TF_TYPES: dict[int, tuple[np.dtype | str, str, str]] = {
    1: (np.dtype(np.float32), "float_val", "DT_FLOAT"),
    2: (np.dtype(np.float64), "double_val", "DT_DOUBLE"),
    3: (np.dtype(np.int32), "int_val", "DT_INT32"),
    4: (np.dtype(np.uint8), "int_val", "DT_UINT8"),
    5: (np.dtype(np.int16), "int_val", "DT_INT16"),
    6: (np.dtype(np.int8), "int_val", "DT_INT8"),
    7: (np.dtype(object), "string_val", "DT_STRING"),
    8: (np.dtype(np.complex64), "scomplex_val", "DT_COMPLEX64"),
    9: (np.dtype(np.int64), "int64_val", "DT_INT64"),
    10: (np.dtype(np.bool_), "bool_val", "DT_BOOL"),
    11: (np.dtype(np.int8), "int_val", "DT_QINT8"),
    12: (np.dtype(np.uint8), "int_val", "DT_QUINT8"),
    13: (np.dtype(np.int32), "int_val", "DT_QINT32"),
    14: ("bfloat16", "half_val", "DT_BFLOAT16"),
    15: (np.dtype(np.int16), "int_val", "DT_QINT16"),
    16: (np.dtype(np.uint16), "int_val", "DT_QUINT16"),
    17: (np.dtype(np.uint16), "int_val", "DT_UINT16"),
    18: (np.dtype(np.complex128), "dcomplex_val", "DT_COMPLEX128"),
    19: (np.dtype(np.float16), "half_val", "DT_HALF"),
    20: (np.dtype(object), "resource_handle_val", "DT_RESOURCE"),
    21: (np.dtype(object), "variant_val", "DT_VARIANT"),
    22: (np.dtype(np.uint32), "uint32_val", "DT_UINT32"),
    23: (np.dtype(np.uint64), "uint64_val", "DT_UINT64"),
    24: ("float8_e5m2", "float8_val", "DT_FLOAT8_E5M2"),
    25: ("float8_e4m3fn", "float8_val", "DT_FLOAT8_E4M3FN"),
    26: ("float8_e4m3fnuz", "float8_val", "DT_FLOAT8_E4M3FNUZ"),
    27: ("float8_e4m3b11fnuz", "float8_val", "DT_FLOAT8_E4M3B11FNUZ"),
    28: ("float8_e5m2fnuz", "float8_val", "DT_FLOAT8_E5M2FNUZ"),
    29: ("int4", "int_val", "DT_INT4"),
    30: ("uint4", "int_val", "DT_UINT4"),
    31: ("int2", "int_val", "DT_INT2"),
    32: ("uint2", "int_val", "DT_UINT2"),
    33: ("float4_e2m1fn", "float8_val", "DT_FLOAT4_E2M1FN"),
}
_REF_OFFSET = 100
_MAX_FILLED = 1 << 28


_OBJECT = np.dtype(object)


def _base(code: int) -> int:
    return code - _REF_OFFSET if code > _REF_OFFSET else code


def tf_dtype(code: int) -> DType | ForeignDType:
    """The :class:`DType` of a TF ``DataType`` enum value, or a :class:`ForeignDType` when there is none."""
    dtype = from_tf(code)
    if dtype is not None:
        return dtype
    entry = _TF_TYPES.get(_base(code))
    name = entry[2] if entry else f"DT_{code}"
    if code > _REF_OFFSET and entry:
        name += "_REF"
    return ForeignDType("tensorflow", code, name)


def numpy_dtype_of_tf(code: int) -> np.dtype | None:
    entry = _TF_TYPES.get(_base(code))
    return _numpy_dtype(entry[0]) if entry else None


def _numpy_dtype(dtype: np.dtype | str) -> np.dtype:
    if isinstance(dtype, str):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, dtype))
    return dtype


def shape_of(shape_proto) -> tuple[int, ...] | None:
    """A ``TensorShapeProto`` as a tuple (``-1`` for unknown dims) or None for unknown rank."""
    if shape_proto.unknown_rank:
        return None
    return tuple(d.size if d.size >= 0 else -1 for d in shape_proto.dim)


def _decode_string_content(content, count: int) -> np.ndarray:
    """TF's string tensor encoding: ``count`` varint lengths, then the bytes one after the other."""
    data = bytes(content)
    lengths = []
    pos = 0
    for _ in range(count):
        value = shift = 0
        while True:
            if pos >= len(data):
                raise TensorDecodeError("string tensor_content ends inside its length table")
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        lengths.append(value)
    out = np.empty(count, dtype=object)
    for i, length in enumerate(lengths):
        if pos + length > len(data):
            raise TensorDecodeError("string tensor_content is shorter than its length table says")
        out[i] = data[pos:pos + length]
        pos += length
    return out


def _broadcast_scalar(scalar: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``np.broadcast_to(scalar, shape)`` of a 0-d array: a read-only view of its one value with every stride 0
    (the same array: shape, dtype, strides, flags), made directly, at a third of broadcast_to's cost (a model's
    filled constants are many). An object array has no buffer to view: broadcast_to makes it."""
    if scalar.dtype == _OBJECT:
        return np.broadcast_to(scalar, shape)
    array = np.ndarray(shape, scalar.dtype, scalar, 0, (0,) * len(shape))
    array.flags.writeable = False
    return array


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _shape_and_count(tensor_shape, name: str) -> tuple[tuple[int, ...], int]:
    """A constant's shape and element count.

    Raises:
        TensorDecodeError: the shape is not fully known, or holds more than 2**40 elements.
    """
    if tensor_shape.unknown_rank:
        raise TensorDecodeError(f"a {name} constant has an unknown rank")
    shape = tuple([d.size for d in tensor_shape.dim])
    count = 1
    for s in shape:
        if s < 0:
            raise TensorDecodeError(f"a {name} constant has unknown dimensions {shape}")
        count *= s
    if count > (1 << 40):
        raise TensorDecodeError(f"a {name} constant claims {count} elements")
    return shape, count


# Constants' shapes and element counts by their encoding (a model's constants share a few dozen shapes).
_SHAPES: dict[bytes, tuple[tuple[int, ...], int]] = {}
_MAX_SHAPES = 4096


def tensor_to_numpy(tensor, content_view: tuple[Any, int, int] | None = None) -> np.ndarray:
    """Decodes a TensorProto (ours or TensorFlow's class: only field names are used).

    Args:
        tensor: the ``TensorProto`` message.
        content_view: ``(buffer, offset, length)`` of a ``tensor_content`` that :mod:`.wire` cut out of
            ``buffer``; the result is then a view of ``buffer``.

    Raises:
        TensorDecodeError: unknown dtype, unknown or negative shape, or values that do not fit the shape.
    """
    code = tensor.dtype
    entry = _TF_TYPES.get(code - _REF_OFFSET if code > _REF_OFFSET else code)
    if entry is None:
        raise TensorDecodeError(f"unknown TensorFlow dtype enum {code}")
    stored, field, name = entry
    np_dtype = _numpy_dtype(stored) if isinstance(stored, str) else stored
    tensor_shape = tensor.tensor_shape
    encoded = tensor_shape.SerializeToString()
    known = _SHAPES.get(encoded)
    if known is None:
        known = _shape_and_count(tensor_shape, name)
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        _SHAPES[encoded] = known
    shape, count = known

    if content_view is not None:
        buffer, offset, length = content_view
    else:
        buffer = tensor.tensor_content
        offset, length = 0, len(buffer)
    if length or content_view is not None:
        if np_dtype == _OBJECT:
            if field != "string_val":
                raise TensorDecodeError(f"a {name} constant cannot be read from tensor_content")
            return _read_only(_decode_string_content(memoryview(buffer)[offset:offset + length], count).reshape(shape))
        if length != count * np_dtype.itemsize:
            raise TensorDecodeError(
                f"a {name} constant of shape {list(shape)} needs {count * np_dtype.itemsize} bytes of "
                f"tensor_content, found {length}"
            )
        # Positional arguments: numpy parses keyword ones at twice the cost of the whole call.
        array = np.frombuffer(buffer, np_dtype, count, offset)
        if len(shape) != 1:  # frombuffer's array is one-dimensional already
            array = array.reshape(shape)
        if buffer.__class__ is not bytes:  # a view of bytes is read-only already
            array.flags.writeable = False
        return array

    values = getattr(tensor, field)
    if field == "float8_val":
        flat = np.frombuffer(values, dtype=np_dtype)
    elif field in ("resource_handle_val", "variant_val"):
        flat = np.empty(len(values), dtype=object)
        for i, item in enumerate(values):
            flat[i] = item.SerializeToString()
    elif field == "string_val":
        flat = np.empty(len(values), dtype=object)
        flat[:] = list(values)
    # The repeated fields are read through a list: numpy reads a list faster than protobuf's container.
    elif field == "half_val":
        flat = np.asarray(list(values), dtype=np.int64).astype(np.uint16).view(np_dtype)
    elif field in ("scomplex_val", "dcomplex_val"):
        parts = np.asarray(list(values), dtype=np.float32 if field == "scomplex_val" else np.float64)
        if parts.size % 2:
            raise TensorDecodeError(f"a {name} constant has an odd number ({parts.size}) of real/imaginary parts")
        flat = parts.view(np_dtype)
    elif field == "int_val" and np_dtype.itemsize < 4:
        flat = np.asarray(list(values), dtype=np.int64).astype(np_dtype)
    else:
        flat = np.asarray(list(values), dtype=np_dtype)
    n = flat.shape[0]
    if n == count:
        array = flat.reshape(shape)
    elif n > count:
        raise TensorDecodeError(f"a {name} constant of shape {list(shape)} holds {n} values, more than {count}")
    elif n <= 1:
        # A single value (or none: zero) fills the whole shape; a broadcast view costs no memory.
        if n == 1:
            scalar = flat[:1].reshape(())
        elif np_dtype == _OBJECT:
            scalar = np.array(b"", dtype=object)
        else:
            scalar = np.zeros((), dtype=np_dtype)
        return _broadcast_scalar(scalar, shape)
    elif count > _MAX_FILLED:
        raise TensorDecodeError(f"a {name} constant of shape {list(shape)} would repeat its last value {count - n} times")
    else:
        # Fewer values than elements: TensorFlow repeats the last value.
        array = np.empty(count, dtype=np_dtype)
        array[:n] = flat
        array[n:] = flat[n - 1]
        array = array.reshape(shape)
    return _read_only(array)
